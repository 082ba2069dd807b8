"""How the kernel schedules the daemon's threads: less timer slack, a higher priority.

Both are per-thread attributes that threads created later inherit, so the daemon sets them before
libfuse starts its workers.
"""

from __future__ import annotations

import ctypes
import os
import sys

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
