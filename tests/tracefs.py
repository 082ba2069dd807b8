"""bpftrace where this host's tracefs is not mounted: a wrapper that mounts it in a private mount
namespace for bpftrace alone, so the tests never change the host's mounts.

The biolatency source checks for tracefs before it starts bpftrace (it names the fix when it is
missing); with the wrapper that check must look at a stand-in, since the real tracefs exists only
inside the wrapper's namespace. `private_tracefs` gives both, or None where tracefs is mounted.
"""

from __future__ import annotations

import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")


@dataclass(frozen=True, slots=True)
class PrivateTracefs:
    bpftrace: str  # the wrapper: bpftrace's command line, tracefs mounted in its own namespace
    stand_in: Path  # a directory shaped like tracefs's events/block, for the source's check


def missing() -> str | None:
    """Why bpftrace cannot reach tracefs here, or None."""
    if not (TRACEFS / "events/block").is_dir() and shutil.which("unshare") is None:
        return "tracefs is not mounted and unshare (util-linux) is missing to mount it privately"
    return None


def private_tracefs(directory: Path) -> PrivateTracefs | None:
    """None where tracefs is mounted (bpftrace runs as it is); else the wrapper and the stand-in,
    written under `directory`."""
    if (TRACEFS / "events/block").is_dir():
        return None
    wrapper = directory / "bpftrace"
    wrapper.write_text(
        "#!/bin/sh\n"
        'exec unshare -m sh -c \'mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace "$@"\' sh "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    stand_in = directory / "tracing"
    (stand_in / "events/block/block_rq_issue").mkdir(parents=True, exist_ok=True)
    return PrivateTracefs(str(wrapper), stand_in)
