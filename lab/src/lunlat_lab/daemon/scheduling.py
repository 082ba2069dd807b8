"""How the kernel schedules the daemon's threads: less timer slack, a higher priority.

Both are per-thread attributes that threads created later inherit, so the daemon sets them before
libfuse starts its workers. The priority is set twice: the threads' nice value, and the nice value
of the daemon's autogroup (below), without which the first counts only against the daemon's own
threads.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

PR_SET_TIMERSLACK = 29  # <linux/prctl.h>


def lower_timer_slack(nanoseconds: int = 1) -> bool:
    """Set this thread's timer slack (inherited by threads it creates later, i.e. libfuse's
    workers): the default 50 us lets the kernel defer each sleep's wake-up by that much, which
    would add to every injected latency. 0 would mean "reset to default", hence 1 ns."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        result = libc.prctl(
            ctypes.c_int(PR_SET_TIMERSLACK), ctypes.c_ulong(nanoseconds), ctypes.c_ulong(0),
            ctypes.c_ulong(0), ctypes.c_ulong(0),
        )  # fmt: skip
    except (OSError, AttributeError):
        return False
    return int(result) == 0


# The lab stands for an array: its service time must not depend on what else the host runs (the
# exporter, Prometheus, Alertmanager, fio). Python's FUSE path costs CPU per I/O, so a daemon that waits
# for a core behind them shows their load as LUN latency. As root, raise the daemon's priority.
DAEMON_NICE = -10


def raise_priority(nice: int = DAEMON_NICE) -> bool:
    """Set this thread's nice value (inherited by the threads it creates later, as with the timer
    slack); False when not allowed (not root)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except (OSError, AttributeError):
        return False
    return True


# sched(7), "The autogroup feature": with autogroups on (/proc/sys/kernel/sched_autogroup_enabled,
# 1 by default), every session (setsid(2)) is one task group, CPU is shared between the groups, and
# a process's nice value counts only against the other processes of its own group; the group's own
# nice value is set by writing it to /proc/[pid]/autogroup (lowering it needs CAP_SYS_NICE). So the
# daemon's nice -10 alone did nothing against Prometheus, fio or a test run in other sessions:
# traced on the lab's 2-core VM (perf, sched_switch/sched_wakeup beside block_rq_issue/complete,
# 2026-11-29), the daemon's threads waited behind another session's process for up to a 4 ms
# scheduler tick, and 1-6 % of a 0.65 ms log LUN's writes took over 1 ms.
AUTOGROUP = Path("/proc/self/autogroup")


def raise_session_priority(nice: int = DAEMON_NICE) -> bool:
    """Give this process's autogroup the nice value `nice`; only when the process leads its own
    session (`lunlat-lab up` starts the daemon in one), so no caller's session is raised with it.
    False where there is no autogroup file (a kernel without CONFIG_SCHED_AUTOGROUP), not allowed
    (not root), or not a session leader."""
    if os.getsid(0) != os.getpid():
        return False
    try:
        AUTOGROUP.write_text(f"{nice}\n", encoding="ascii")
    except OSError:
        return False
    return True
