"""tests/support/timed_reads.py: reads from a process of their own, each with its wait for a CPU."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.timed_reads import TimedReads

BLOCK = 4096
SIZE = 64 * BLOCK
# How long a test waits for its reads: only reached when the reader is stuck. CI's lanes run in an
# idle cpu group that can get no CPU for tens of seconds while the calm lane is busy.
STUCK_AFTER_S = 300


@pytest.fixture
def disk_file() -> Iterator[Path]:
    """A file on a disk file system (tmpfs refuses O_DIRECT)."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as directory:
        path = Path(directory) / "image"
        path.write_bytes(os.urandom(SIZE))
        yield path


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_each_read_is_timed_in_a_window_and_its_own_time_is_the_call_less_its_wait(disk_file: Path) -> None:
    began = time.monotonic()
    with TimedReads(str(disk_file), SIZE, 0.01, BLOCK) as reads:
        deadline = time.monotonic() + STUCK_AFTER_S
        while len(reads.reads) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
    ended = time.monotonic()
    got = reads.between(began, ended)
    assert len(got) >= 20
    assert all(began <= r.start < ended for r in got)
    assert all(0 <= r.waited <= r.took for r in got)  # so 0 <= own <= took
    assert reads.between(ended, ended + 10) == []


def test_a_wait_for_a_cpu_is_counted_apart(disk_file: Path) -> None:
    """Pinned to one CPU beside a busy process on it, the reads wait for that CPU, and say so."""
    cpu = min(os.sched_getaffinity(0))
    # Spins until terminated below (STUCK_AFTER_S at most).
    spinner = multiprocessing.get_context("fork").Process(target=_spin, args=(float(STUCK_AFTER_S),))
    spinner.start()
    assert spinner.pid is not None
    mine = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(spinner.pid, {cpu})
        os.sched_setaffinity(0, {cpu})  # inherited by the child started next
        with TimedReads(str(disk_file), SIZE, 0.01, BLOCK) as reads:
            os.sched_setaffinity(0, mine)
            deadline = time.monotonic() + STUCK_AFTER_S
            while len(reads.reads) < 50 and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        os.sched_setaffinity(0, mine)
        spinner.terminate()
        spinner.join()
    got = reads.between(0, time.monotonic())
    assert len(got) >= 50
    assert sum(r.waited for r in got) > 0, "no read waited for its CPU beside a busy process"


def test_a_device_it_cannot_read_fails_the_caller_with_the_reason(tmp_path: Path) -> None:
    with TimedReads(str(tmp_path / "missing"), SIZE, 0.01, BLOCK) as reads:
        pass
    with pytest.raises(AssertionError, match="FileNotFoundError"):
        reads.between(0, time.monotonic())
