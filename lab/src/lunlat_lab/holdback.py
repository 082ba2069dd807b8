"""The host's other work held back behind the lab's I/O path: a cpu cgroup marked idle.

The lab stands for an array, whose service time does not wait for the host's CPUs; the lab's I/O
path does: an I/O's time in diskstats includes the loop device's worker, the daemon's thread and
`ksoftirqd` each getting a CPU (docs/lab.md, "Why other work shows as LUN latency"). Nice values
and SCHED_IDLE on the other work did not help there; a cpu cgroup with `cpu.idle` 1 did
(bench/lab_tail.py, docs/benchmarks.md "The lab's tail"): the kernel's commit 304000390f88
("sched: Cgroup SCHED_IDLE support", Linux 5.15, cgroup v1's cpu controller and v2) compares the
matching entities at each wake-up, so the whole group gives way to a woken task outside it, a kernel
thread included.

A process moved into the group takes with it all its threads, and what it starts later is born in
it (Documentation/admin-guide/cgroup-v2.rst, "Processes": "A newly created process ... belongs to
the cgroup that the parent process belongs to at the time of creation"; cgroup v1's cgroup.procs
alike, Documentation/admin-guide/cgroup-v1/cgroups.rst). Hence `held_back` is entered once the lab
daemon runs: the daemon stays outside, everything started after it is held back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

_CPU_V1 = Path("/sys/fs/cgroup/cpu")
_UNIFIED = Path("/sys/fs/cgroup")


def idle_cgroup(name: str) -> Path | None:
    """A cpu cgroup `name` marked idle, made where the cpu controller is (cgroup v1's
    /sys/fs/cgroup/cpu, or the v2 hierarchy with cpu in the root's subtree_control); None when
    neither has it (no cpu.idle before Linux 5.15, or not root)."""
    for base in (_CPU_V1, _UNIFIED):
        if base == _UNIFIED and "cpu" not in _words(base / "cgroup.subtree_control"):
            continue
        group = base / name
        try:
            group.mkdir(exist_ok=True)
        except OSError:
            continue
        try:
            (group / "cpu.idle").write_text("1\n", encoding="ascii")
        except OSError:  # no cpu.idle (before Linux 5.15): the group would hold nothing back
            with suppress(OSError):
                group.rmdir()
            continue
        return group
    return None


def own_group(base: Path) -> Path:
    """This process's cgroup in the hierarchy mounted at `base` (proc(5), /proc/pid/cgroup:
    "hierarchy-ID:controller-list:cgroup-path"; v2's line is "0::path")."""
    v1 = base != _UNIFIED
    for line in Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines():
        _, controllers, path = line.split(":", 2)
        if ("cpu" in controllers.split(",")) if v1 else controllers == "":
            return base / path.lstrip("/")
    return base


@contextmanager
def held_back(name: str) -> Iterator[Path | None]:
    """This process, and what it starts from now on, in the idle cgroup `name`; after, every process
    still in it moved back to this process's group of before, and the group removed. Yields the
    group, or None when none can be made here (nothing changed)."""
    group = idle_cgroup(name)
    if group is None:
        yield None
        return
    home = own_group(group.parent)
    try:
        (group / "cgroup.procs").write_text(f"{os.getpid()}\n", encoding="ascii")
        yield group
    finally:
        for pid in _words(group / "cgroup.procs"):
            with suppress(OSError):  # exited meanwhile
                (home / "cgroup.procs").write_text(f"{pid}\n", encoding="ascii")
        with suppress(OSError):  # a process that could not be moved keeps it; empty, it is harmless
            group.rmdir()


def _words(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").split()
    except OSError:
        return []
