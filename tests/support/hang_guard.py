"""A command run with a guard against hanging that no starved CPU can trip.

CI's four lanes run in a cpu cgroup marked idle (.ci/run), which gets almost no CPU while the calm
lane keeps both busy. A wall-clock timeout there fails a command that is only waiting for a CPU: a
fresh-clone run on 2026-11-30 saw `lunlat top` print its one-line refusal and then not exit within
30 s, and the project CI's run on 50b70ff had seven `lunlat check-config` refusals time out at 15 s in
a row, while the calls around them, allowed 60 s, passed. Reproduced here: in a cpu cgroup with
cpu.idle 1 beside two busy loops, a refusal that needs 0.7 s of CPU took 59 s (it ran when the loops
ended); through this guard the same refusal passed after 26.5 s. What such a test guards against is a
command blocked for good (on a FIFO nobody writes, say), and a blocked process sleeps: state S or D
in /proc/PID/task/TID/stat, where a running or runnable one, starved or not, is R (proc_pid_stat(5),
field 3, https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html). So the guard counts only the
time every thread of the command was seen asleep.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

# What a refusal may spend asleep (reading its files, writing its message): milliseconds; a hang
# never ends.
BLOCKED_LIMIT_S = 15.0
# Every this often the command's threads are looked at; each look that finds them all asleep counts
# this much (not the time since the last look, which a starved test stretches).
POLL_S = 0.05
# A command that neither ends nor sleeps (a busy loop) is stopped after this much wall time.
WALL_LIMIT_S = 1800.0


def asleep(pid: int) -> bool:
    """Every thread of `pid` sleeping (S or D); False once the process is gone or a zombie."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the thread ended meanwhile
            continue
        states.append(text[text.rindex(")") + 2])  # the name in parentheses may hold spaces
    return bool(states) and all(state in "SD" for state in states)


def run(
    argv: Sequence[str],
    *,
    blocked_limit: float = BLOCKED_LIMIT_S,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`argv` run to its end with its output captured, stdin /dev/null; a run asleep for
    `blocked_limit` seconds in all (or running for WALL_LIMIT_S) is killed and fails the test."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        started, blocked = time.monotonic(), 0.0
        while process.poll() is None:
            time.sleep(POLL_S)
            blocked += POLL_S if asleep(process.pid) else 0.0
            if blocked >= blocked_limit or time.monotonic() - started > WALL_LIMIT_S:
                process.kill()
                process.wait()
                raise AssertionError(
                    f"{' '.join(argv)}: asleep for {blocked:.1f} s in all "
                    f"({time.monotonic() - started:.1f} s since its start), still not done; "
                    f"its stderr: {_read(err)!r}"
                )
        return subprocess.CompletedProcess(list(argv), process.returncode, _read(out), _read(err))


def _read(file: IO[bytes]) -> bytes:
    file.seek(0)
    return file.read()
