"""The hypervisor's steal time (the vCPUs taken away from this VM), as the latency tests record it.

On this project's VMs a burst of steal stalls the lab's I/O path (traced with a 4 ms sampler of
/proc/stat: docs/lab.md, "Limits"): a LUN's measured latency then rises for reasons no code here
controls. A latency test records the steal over what it judges and prints it with a miss, or, where
it says so, judges only windows whose steal stays under its bound.

The figure is psutil's `cpu_times().steal`: the eighth value of /proc/stat's `cpu` line, summed over
the CPUs, in seconds (proc_stat(5), https://man7.org/linux/man-pages/man5/proc_stat.5.html: `steal`,
since Linux 2.6.11, the time spent in other operating systems when running virtualized).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise

import psutil

from tests.support.background import in_background

# Fine enough that a burst shows as the most in one second.
POLL_S = 0.1


def steal_seconds() -> float:
    """Steal time of all CPUs so far, in seconds."""
    return float(psutil.cpu_times().steal)


@dataclass
class StealRecord:
    """(wall-clock time, steal seconds so far) every POLL_S while `sampled()` is open."""

    samples: list[tuple[float, float]] = field(default_factory=list)

    def over(self, begin: float, until: float) -> Steal | None:
        """The steal between two wall-clock times; None when fewer than two samples fall there."""
        inside = [(t, s) for t, s in self.samples if begin <= t <= until]
        if len(inside) < 2:
            return None
        most = max(
            (later[1] - s for t, s in inside for later in inside if t < later[0] <= t + 1.0), default=0.0
        )
        burst = max((b[1] - a[1] for a, b in pairwise(inside)), default=0.0)
        seconds = inside[-1][0] - inside[0][0]
        return Steal(inside[-1][1] - inside[0][1], most, burst, seconds, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Steal:
    """The steal over one window: its total, its worst second and its worst sample (POLL_S), all
    summed over the CPUs."""

    total: float
    most_in_a_second: float
    most_in_a_sample: float
    window: float  # seconds sampled
    cpus: int

    @property
    def fraction(self) -> float:
        """The share of the window's CPU time (its seconds times the CPUs) the hypervisor took."""
        return self.total / (self.window * self.cpus) if self.window > 0 else 0.0

    def __str__(self) -> str:
        return (
            f"{1000 * self.total:.0f} ms, {self.fraction:.1%} of {self.cpus} CPUs over {self.window:.0f} s "
            f"(the most in one second {1000 * self.most_in_a_second:.0f} ms, "
            f"in {1000 * POLL_S:.0f} ms {1000 * self.most_in_a_sample:.0f} ms)"
        )


@contextmanager
def sampled() -> Iterator[StealRecord]:
    """A StealRecord filled from a thread while the block runs."""
    record = StealRecord()
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(POLL_S):
            record.samples.append((time.time(), steal_seconds()))

    record.samples.append((time.time(), steal_seconds()))
    with in_background(sample, stop, "steal-sampler"):
        yield record
