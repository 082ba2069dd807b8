"""The native engine's daemon (labd.c): found built next to this module, fed its settings as lines.

The daemon is compiled when lunlat-lab is built or installed (lab/hatch_build.py, with
lab/native/labd_build.py), never when the lab runs: `binary()` only finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

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
        f"{over.get('read_per_mib', 0.0)!r} {over.get('write_per_mib', 0.0)!r}"
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


@dataclass(frozen=True, slots=True)
class ServiceTotals:
    """What the daemon served of one LUN since it started: I/Os and their summed modelled service
    time (from its callback receiving each to its slot, plus the hold asked for), per op."""

    reads: int
    read_ns: int
    writes: int
    write_ns: int


def encode_calibration(overheads: dict[str, dict[str, float]]) -> str:
    """`calib READ_MS WRITE_MS NAME` per LUN: its live overhead per op (ms; below 0: none measured,
    the settings' overhead applies). Put in force at once, outside any settings block."""
    return "".join(
        f"calib {ops.get('read', -1.0)!r} {ops.get('write', -1.0)!r} {quote(name, safe='')}\n"
        for name, ops in overheads.items()
    )


def parse_stats_line(line: str) -> tuple[str, ServiceTotals] | None:
    """One `stat NAME READS READ_NS WRITES WRITE_NS` line of the daemon's answer to `stats`; None for
    `end`. ValueError for anything else."""
    fields = line.split()
    if fields == ["end"]:
        return None
    if len(fields) != 6 or fields[0] != "stat":
        raise ValueError(f"not a stats line: {line.strip()!r}")
    reads, read_ns, writes, write_ns = (int(f) for f in fields[2:])
    return unquote(fields[1]), ServiceTotals(reads, read_ns, writes, write_ns)
