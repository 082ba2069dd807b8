"""The native engine's daemon (labd.c): found built next to this module, fed its settings as lines.

The daemon is compiled when lunlat-lab is built or installed (lab/hatch_build.py, with
lab/native/labd_build.py), never when the lab runs: `binary()` only finds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from lunlat import ground
from lunlat_lab.settings import Settings

BINARY_NAME = "lunlat-labd"  # also how `lab down` finds the daemon by its command line
BINARY = Path(__file__).with_name(BINARY_NAME)
BUILD_PACKAGES = ("gcc", "libfuse3-dev", "pkg-config")  # Debian and Ubuntu, as labd_build.py's


class BuildError(Exception):
    """The native daemon is not here; one line saying how to get it."""


def binary() -> Path:
    """The built daemon; BuildError naming what to do when this install has none."""
    if not BINARY.is_file():
        raise BuildError(
            f"the native lab daemon ({BINARY}) is not installed: reinstall lunlat-lab with the Debian "
            f"packages {' '.join(BUILD_PACKAGES)} installed (its build compiles labd.c), or use --engine python"
        )
    return BINARY


def encode(settings: Settings, arrays: dict[str, int]) -> str:
    """The settings as the daemon reads them on stdin (see labd.c), ending with `end`.

    `arrays` maps array names to the daemon's array indexes: an index must stay the array's for the
    daemon's life (its slot queue), so new names are added to it here and never reused."""
    over = settings.overhead_ms
    lines = [
        f"overhead {over.get('read', 0.0)!r} {over.get('write', 0.0)!r} "
        f"{over.get('read_per_mib', 0.0)!r} {over.get('write_per_mib', 0.0)!r}",
        # The size classes the daemon counts and calibrates by: the exporter's, so that its totals
        # per class meet the kernel's per class (the biolatency source's counters) one to one.
        f"sizes {ground.BIO_SMALL_MAX} {ground.BIO_LARGE_MIN}",
    ]
    for name, array in settings.arrays.items():
        index = arrays.setdefault(name, len(arrays))
        lines.append(f"array {index} {array.slots} {array.bandwidth_mib_s!r}")
    for name, lun in settings.luns.items():
        lines.append(
            f"lun {arrays[lun.array]} {lun.read_ms!r} {lun.write_ms!r} {lun.jitter!r} {quote(name, safe='')}"
        )
    lines.append("end")
    return "\n".join(lines) + "\n"


# --- live calibration (lab/daemon/calibration.py): the `stats` and `calib` lines -----------------

STATS_REQUEST = "stats\n"
# The daemon's order of the figures on a `stat` and a `calib` line: by op, then by size class.
STREAMS: tuple[tuple[str, str], ...] = tuple((op, size) for op in ground.BIO_OPS for size in ground.BIO_SIZES)
# What the live calibration measures: an op and a size class, or an op of every size (None) where
# the kernel's side has no classes (/proc/diskstats).
Stream = tuple[str, str | None]


@dataclass(frozen=True, slots=True)
class ServiceTotals:
    """What the daemon served of one LUN since it started, per (op, size class): I/Os and their
    summed modelled service time in ns (from its callback receiving each to its slot, plus the hold
    asked for)."""

    served: Mapping[tuple[str, str], tuple[int, int]]

    def of(self, op: str, size: str | None = None) -> tuple[int, int]:
        """(I/Os, ns) of `op` in size class `size`, or of every size class when it is None."""
        pairs = [v for (o, s), v in self.served.items() if o == op and size in (None, s)]
        return sum(ios for ios, _ in pairs), sum(ns for _, ns in pairs)


def encode_calibration(overheads: Mapping[str, Mapping[Stream, float]]) -> str:
    """`calib MS x 6 NAME` per LUN: its live overhead per op and size class (ms; below 0: none
    measured, the settings' overhead applies), in STREAMS' order. A figure measured over every size
    (stream (op, None)) stands for each class of the op without one of its own. Put in force at once,
    outside any settings block."""
    lines = []
    for name, streams in overheads.items():
        figures = (streams.get((op, size), streams.get((op, None), -1.0)) for op, size in STREAMS)
        lines.append(f"calib {' '.join(repr(f) for f in figures)} {quote(name, safe='')}\n")
    return "".join(lines)


def parse_stats_line(line: str) -> tuple[str, ServiceTotals] | None:
    """One `stat NAME (IOS NS) x 6` line of the daemon's answer to `stats`, in STREAMS' order; None
    for `end`. ValueError for anything else."""
    fields = line.split()
    if fields == ["end"]:
        return None
    if len(fields) != 2 + 2 * len(STREAMS) or fields[0] != "stat":
        raise ValueError(f"not a stats line: {line.strip()!r}")
    numbers = [int(f) for f in fields[2:]]
    served = {stream: (numbers[2 * i], numbers[2 * i + 1]) for i, stream in enumerate(STREAMS)}
    return unquote(fields[1]), ServiceTotals(served)
