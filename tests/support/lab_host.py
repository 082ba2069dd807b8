"""Whether this host can run the lab (root, loop devices, FUSE, fio), for tests that need it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def lab_skip_reason() -> str | None:
    """Why the lab cannot run here, or None when it can."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs Linux and root (loop devices, a FUSE mount)"
    missing = [t for t in ("losetup", "fusermount3", "fio") if shutil.which(t) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (Debian: util-linux, fuse3, fio)"
    if not Path("/dev/fuse").exists() or not Path("/dev/loop-control").exists():
        return "no /dev/fuse or /dev/loop-control"
    return None


def memory_backed_dir(needed_bytes: int = 2 << 30) -> Path | None:
    """A tmpfs directory for lab state when there is one with room (the sparse LUN images fill as
    workloads write): on tmpfs the FUSE daemon's own I/O stays off the disk, whose writeback stalls
    would show up as LUN latency. None (the default temporary directory) otherwise."""
    for candidate in (Path("/dev/shm"), Path("/run")):  # noqa: S108 - callers use mkdtemp in it
        if (
            candidate.is_dir()
            and os.access(candidate, os.W_OK)
            and shutil.disk_usage(candidate).free >= needed_bytes
        ):
            return candidate
    return None
