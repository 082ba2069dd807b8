"""The server's connection threads (workers.py): reused, never queued behind a busy one, ended when idle."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest

from lunlat.web.threads import Workers

WAIT = 10.0  # seconds any of these waits may take before the test fails


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT} s: {what}")
        time.sleep(0.005)


def test_an_idle_thread_takes_the_next_item() -> None:
    ran: list[tuple[int, int]] = []
    pool: Workers[int] = Workers(lambda item: ran.append((item, threading.get_ident())), "t")
    pool.submit(1)
    until(lambda: len(ran) == 1, "the first item ran")
    until(lambda: pool.waiting == 1, "its thread waits for the next")
    pool.submit(2)
    until(lambda: len(ran) == 2, "the second item ran")
    assert ran[0][1] == ran[1][1]
    assert pool.threads == 1


def test_items_never_wait_for_a_busy_thread() -> None:
    """Each of 20 items blocks until all 20 run at once: a pool that queued one behind another
    (ThreadPoolExecutor past max_workers) would never get there."""
    together = threading.Barrier(20, timeout=WAIT)
    passed: list[int] = []

    def work(item: int) -> None:
        together.wait()
        passed.append(item)

    pool: Workers[int] = Workers(work, "t")
    for item in range(20):
        pool.submit(item)
    until(lambda: len(passed) == 20, "all 20 items passed the barrier together")
    assert sorted(passed) == list(range(20))
    assert pool.threads == 20


def test_idle_threads_end() -> None:
    pool: Workers[int] = Workers(lambda item: time.sleep(0.01), "idle", idle_seconds=0.05)
    for item in range(10):
        pool.submit(item)
    until(lambda: pool.threads == 0, "every idle thread ended")
    until(lambda: not [t for t in threading.enumerate() if t.name == "idle"], "their threads are gone")


def test_no_item_is_lost_when_submissions_race_idle_timeouts() -> None:
    """Submissions timed around the threads' idle timeout: every item runs exactly once."""
    done: list[int] = []
    lock = threading.Lock()

    def work(item: int) -> None:
        with lock:
            done.append(item)

    pool: Workers[int] = Workers(work, "t", idle_seconds=0.002)
    rng = random.Random(29)
    for item in range(2000):
        pool.submit(item)
        if rng.random() < 0.05:
            time.sleep(rng.uniform(0.0, 0.004))
    until(lambda: len(done) == 2000, "every submitted item ran")
    assert sorted(done) == list(range(2000))
    # None waits on past its idle time (queue.SimpleQueue's timed get did: workers.py).
    until(lambda: pool.threads == 0, "every thread ended once idle")


def test_a_thread_whose_work_raises_is_counted_out(monkeypatch: pytest.MonkeyPatch) -> None:
    raised: list[type[BaseException]] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_type))

    def work(item: int) -> None:
        if item == 0:
            raise SystemExit  # not an Exception: the server's handler catches those itself

    pool: Workers[int] = Workers(work, "t")
    pool.submit(0)
    until(lambda: pool.threads == 0, "the thread that raised is counted out")
    assert raised == [SystemExit]
    pool.submit(1)  # no idle thread is counted, so a new one starts for it
    until(lambda: pool.waiting == 1 and pool.threads == 1, "the next item ran on a new thread")


def test_close_ends_the_waiting_threads_at_once() -> None:
    pool: Workers[int] = Workers(lambda item: None, "closed")  # idle time: the default 90 s
    for item in range(5):
        pool.submit(item)
    until(lambda: pool.waiting == pool.threads, "every thread waits")
    pool.close()
    until(lambda: pool.threads == 0, "the waiting threads ended")
    pool.submit(5)  # a submission after close still runs, on a new thread
    until(lambda: pool.waiting == 1, "it ran")
