"""tests/support/hang_guard.py: a command asleep for good fails the guard; one that runs (or waits
for a CPU, the same state R to the kernel) past the same limit does not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import hang_guard
from tests.support.hostile_files import make_fifo, release


def test_a_command_asleep_on_a_fifo_fails_once_asleep_for_the_limit(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "fifo")
    argv = [sys.executable, "-c", f"open({str(fifo)!r}).read()"]
    try:
        with pytest.raises(AssertionError, match=r"asleep for 1\.\d s in all"):
            hang_guard.run(argv, blocked_limit=1.0)
    finally:
        release(fifo)


def test_a_command_running_longer_than_the_limit_is_let_finish() -> None:
    # Three seconds on a CPU against a one-second limit: running is no hang.
    busy = "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end: pass\nprint('done')"
    done = hang_guard.run([sys.executable, "-c", busy], blocked_limit=1.0)
    assert (done.returncode, done.stdout) == (0, b"done\n")


def test_output_and_exit_code_come_back() -> None:
    code = "import sys; sys.stdout.write('out'); sys.stderr.write('err'); sys.exit(3)"
    done = hang_guard.run([sys.executable, "-c", code])
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out", b"err")


def test_a_process_gone_is_not_asleep() -> None:
    # Above PID_MAX_LIMIT (4,194,304 on 64-bit: include/linux/threads.h): no such process.
    assert hang_guard.asleep(2**22 + 1) is False
