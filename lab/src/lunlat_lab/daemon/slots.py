"""An array's service slots: a FIFO counting semaphore that can be resized while threads wait."""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class SlotQueue:
    """A FIFO counting semaphore whose size can change while threads wait on it.

    A released slot is handed straight to the oldest waiter (no barging), so queueing is fair and
    the wait each I/O sees depends only on what is ahead of it. Shrinking never preempts: slots in
    use above the new size are simply not handed on when released. Growing wakes waiters at once.
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self._lock = threading.Lock()
        self._size = slots
        self._busy = 0
        self._waiters: deque[threading.Lock] = deque()

    @property
    def size(self) -> int:
        return self._size

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def acquire(self) -> None:
        with self._lock:
            if self._busy < self._size and not self._waiters:
                self._busy += 1
                return
            # Each waiter sleeps on its own locked lock, which the releaser unlocks to hand it a slot.
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        waiter.acquire()

    def release(self) -> None:
        with self._lock:
            if self._busy <= 0:
                raise RuntimeError("release of a slot that is not held")
            if self._waiters and self._busy <= self._size:
                self._waiters.popleft().release()  # the slot changes hands: busy stays the same
            else:
                self._busy -= 1

    def resize(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        with self._lock:
            self._size = slots
            while self._waiters and self._busy < self._size:
                self._busy += 1
                self._waiters.popleft().release()

    def __enter__(self) -> SlotQueue:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
