"""Sleeping to monotonic deadlines with late wake-ups corrected on average."""

from __future__ import annotations

import random
import time
from collections.abc import Callable


class DeadlineSleeper:
    """Sleeps to absolute monotonic deadlines, correcting on average for late wake-ups.

    A sleeping thread wakes late by the timer slack (lowered at start) plus, on an idle virtual CPU,
    the time the host takes to run it again: measured on the lab's 2-core VM, 0.15 ms typical and
    0.6 ms on average, as much as the lab's sub-millisecond targets. So the sleeper keeps a running
    mean of that lateness and wakes that much early. When less time is left than the lateness, it
    sleeps (briefly, so it wakes about `lateness` later) with probability left / lateness and
    otherwise not at all: either way the mean time to wake-up is what was left, which keeps the
    averages diskstats shows on target. Shared by all threads: they see the same CPUs.
    """

    # One wake-up counts at most this late: a host preemption of 10+ ms would otherwise swing the
    # estimate for hundreds of I/Os.
    MAX_LATENESS = 0.002
    WEIGHT = 0.02  # of the newest observation once the first 50 have set the mean
    NAP = 1e-6  # a sleep that just parks the thread (what a short sleep costs is its lateness)

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.lateness = 0.0
        self._observed = 0

    def until(self, deadline: float) -> None:
        now = self._clock()
        left = deadline - now
        if left <= 0:
            return
        lateness = self.lateness
        if left > lateness:
            wake = deadline - lateness
        elif self._rng.random() * lateness < left:
            wake = now + self.NAP
        else:
            return
        self._sleep(wake - now)
        self._observe(self._clock() - wake)

    def _observe(self, late: float) -> None:
        # Unlocked: threads racing here lose an update at worst; a float store is atomic.
        self._observed += 1
        weight = max(self.WEIGHT, 1 / self._observed)
        self.lateness += weight * (min(max(late, 0.0), self.MAX_LATENESS) - self.lateness)
