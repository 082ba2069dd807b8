"""The native engine's daemon (labd.c): built by the lab itself, fed its settings as lines.

`build()` compiles labd.c with the host's C compiler against libfuse 3 (pkg-config's `fuse3`,
linked by soname, so a host that also has libfuse2 still gets libfuse 3) into a cache directory,
named by a hash of the source and the build command: a fresh machine builds once, an edited source
builds again, and nothing is rebuilt otherwise. What it needs, checked by `missing_packages()`:
the Debian packages gcc, pkg-config and libfuse3-dev.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

if TYPE_CHECKING:  # lab.settings imports lab.system, which checks the host with this module
    from lunlat.lab.settings import Settings

SOURCE = Path(__file__).with_name("labd.c")
BINARY_PREFIX = "lunlat-labd-"  # also how `lab down` finds the daemon by its command line
BUILD_PACKAGES = ("gcc", "libfuse3-dev", "pkg-config")  # Debian and Ubuntu
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")
_FUSE_HEADER = Path("/usr/include/fuse3/fuse_lowlevel.h")


class BuildError(Exception):
    """The native daemon cannot be built here; one line saying what to install."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lunlat"


def missing_packages() -> list[str]:
    """The Debian packages missing to build the daemon (empty when it can be built)."""
    missing = []
    if shutil.which("cc") is None:
        missing.append("gcc")
    pkg_config = shutil.which("pkg-config")
    if pkg_config is None:
        missing.append("pkg-config")
        if not _FUSE_HEADER.exists():
            missing.append("libfuse3-dev")
    elif subprocess.run([pkg_config, "--exists", "fuse3"], check=False).returncode != 0:
        missing.append("libfuse3-dev")
    return missing


def _fuse_flags() -> list[str]:
    result = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise BuildError(f"pkg-config fuse3 failed: {result.stderr.strip() or result.returncode}")
    return result.stdout.split()


def binary_path(fuse_flags: list[str]) -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join([*CFLAGS, *fuse_flags]).encode())
    return cache_dir() / f"{BINARY_PREFIX}{digest.hexdigest()[:16]}"


def require_buildable() -> None:
    """BuildError in one line naming the Debian packages to install, when the daemon cannot be built."""
    missing = missing_packages()
    if missing:
        raise BuildError(
            "the native lab daemon needs a C compiler and libfuse 3's headers: install the Debian "
            f"packages {' '.join(BUILD_PACKAGES)} (missing: {', '.join(missing)}), or use --engine python"
        )


def build() -> Path:
    """The daemon's binary for this source, compiled now unless already in the cache."""
    require_buildable()
    flags = _fuse_flags()
    target = binary_path(flags)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    os.close(fd)
    try:
        result = subprocess.run(
            ["cc", *CFLAGS, "-o", tmp, str(SOURCE), *flags, "-lm"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BuildError(f"cc {SOURCE.name} failed: {result.stderr.strip()[-2000:]}")
        Path(tmp).chmod(0o755)
        Path(tmp).replace(target)  # atomic: two builds at once both end with a whole binary
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


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
