"""Threads that answer connections, kept for the next one instead of started for each.

socketserver's ThreadingMixIn starts a thread per connection. With 100 scrapers arriving at once,
starting them was the accept loop's largest cost (each start waits for the new thread to take the
GIL and signal back: bench/concurrent_scrapes.py, profiled with py-spy). Here a connection goes to
a thread that is waiting for one, and only when none is waiting is a thread started. A thread idle
for IDLE_SECONDS ends, so a burst (or an attack) of hundreds of connections leaves no threads behind.

concurrent.futures.ThreadPoolExecutor reuses threads too, but its threads never end before
shutdown, and a submission past max_workers queues behind busy ones: a connection must never wait
for another to finish (one may be an idle kept-alive connection, waiting minutes). So this pool has
no maximum; the connections it serves are capped by the server (--web.max-connections).

Each waiting thread waits on a lock of its own, handed its item directly, the most recently idle
first (so threads past the working set are the ones that time out). Not queue.SimpleQueue with a
timeout: in CPython 3.11 (Modules/_queuemodule.c, _queue_SimpleQueue_get_impl) a waiter woken to
find the item taken by another recomputes its remaining time, and once the deadline has passed
that is negative, which the lock takes as "wait forever": threads stayed past their idle time
(tests/unit/test_workers.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

# Long enough that Prometheus' scrapes every 15 s (or 60 s, with some slack) keep finding a thread.
IDLE_SECONDS = 90.0


class _Waiter(Generic[T]):
    """A waiting thread's handoff: `ready` is released once `item` is set for it."""

    __slots__ = ("item", "ready")

    def __init__(self) -> None:
        self.ready = threading.Lock()
        self.ready.acquire()
        self.item: tuple[T] | None = None


class Workers(Generic[T]):
    """Runs `work(item)` for each submitted item on a thread of its own, reusing idle threads."""

    def __init__(self, work: Callable[[T], None], name: str, idle_seconds: float = IDLE_SECONDS) -> None:
        self._work = work
        self._name = name
        self._idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._waiting: dict[_Waiter[T], None] = {}  # insertion-ordered: the last is the latest idle
        self._threads = 0

    @property
    def threads(self) -> int:
        """Threads alive now, busy or waiting."""
        return self._threads

    @property
    def waiting(self) -> int:
        """Threads waiting for an item."""
        return len(self._waiting)

    def submit(self, item: T) -> None:
        with self._lock:
            waiter = self._waiting.popitem()[0] if self._waiting else None
            if waiter is None:
                self._threads += 1
        if waiter is not None:
            waiter.item = (item,)
            waiter.ready.release()
            return
        try:
            threading.Thread(target=self._run, args=(item,), name=self._name, daemon=True).start()
        except BaseException:
            with self._lock:
                self._threads -= 1
            raise

    def close(self) -> None:
        """End the waiting threads now (the server closed), not after their idle time."""
        with self._lock:
            waiters = list(self._waiting)
            self._waiting.clear()
        for waiter in waiters:
            waiter.ready.release()  # with no item: the thread ends

    def _run(self, item: T) -> None:
        waiter: _Waiter[T] = _Waiter()
        try:
            while True:
                self._work(item)
                del item  # the connection is not kept alive by a waiting thread
                with self._lock:
                    self._waiting[waiter] = None
                if not waiter.ready.acquire(timeout=self._idle_seconds):
                    with self._lock:
                        if waiter in self._waiting:  # no submission took it: it ends
                            del self._waiting[waiter]
                            return
                    waiter.ready.acquire()  # taken by a submission (or close) just now
                if waiter.item is None:  # close()
                    return
                (item,), waiter.item = waiter.item, None
        finally:
            with self._lock:
                self._threads -= 1
