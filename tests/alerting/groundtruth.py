"""What the lab's LUNs really did, read by the test itself: the kernel's per-device counters
(/proc/diskstats, Documentation/admin-guide/iostats.rst fields 1, 4, 5, 8: reads, ms reading, writes,
ms writing), sampled every few seconds from a thread. The end-to-end tests judge the rules under test
against these, never against the rules' own recordings.

A page is justified when some 1-minute window of the LUN's own counters (the window the breach
alerts average over, recorded.BREACH_WINDOW), ending before the page, averaged above the LUN's goal
while the LUN did at least its idle guard of I/Os per second: what the rules judge, seen without them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lunlat.goals import duration_seconds, load_goals
from lunlat.promql.recorded import BREACH_WINDOW
from lunlat_lab import measure
from lunlat_lab.config import LabConfig
from lunlat_lab.state import LabState

GOALS_FILE = Path(__file__).resolve().parents[2] / "alerts" / "goals.yaml"
SAMPLE_SECONDS = 5.0
WINDOW_SECONDS = duration_seconds(BREACH_WINDOW)


@dataclass(frozen=True, slots=True)
class Judged:
    """A lab LUN as the goals judge it: its device, goal (s) and idle guard (I/Os per second)."""

    lun: str
    device: str
    goal: float
    min_iops: float


def judged_luns(lab: LabConfig, state: LabState) -> list[Judged]:
    """The lab's LUNs the goals judge (alerts/goals.yaml, as the rules do), with their devices."""
    goals = load_goals(GOALS_FILE)
    found = []
    for lun in lab.luns:
        tier = goals.judged({"database": lun.database, "role": lun.role, "workload": lun.workload})
        if tier is not None:
            found.append(Judged(lun.name, Path(state.loops[lun.name]).name, tier[0] / 1000, tier[1]))
    return found


@dataclass(frozen=True, slots=True)
class Breach:
    lun: str
    device: str
    op: str
    ms: float
    iops: float
    ended: float  # wall time of the window's end


@dataclass(slots=True)
class Sampler:
    """Every SAMPLE_SECONDS, the counters of the judged LUNs' devices, with the wall time."""

    luns: list[Judged]
    samples: list[tuple[float, dict[str, measure.Counters]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sample(self) -> None:
        counters = measure.from_diskstats()
        wanted = {j.device: counters[j.device] for j in self.luns if j.device in counters}
        with self.lock:
            self.samples.append((time.time(), wanted))

    def breaches(self, start: float, end: float) -> list[Breach]:
        """Every 1-minute window ending between `start` and `end` (wall times) in which a judged LUN
        averaged above its goal at its idle guard or more."""
        with self.lock:
            samples = list(self.samples)
        found = []
        for i, (t_end, after) in enumerate(samples):
            if not start <= t_end <= end:
                continue
            # The latest sample at least a window before this one: the window's start.
            earlier = [s for s in samples[:i] if s[0] <= t_end - WINDOW_SECONDS]
            if not earlier:
                continue
            t_start, before = earlier[-1]
            seconds = t_end - t_start
            for lun in self.luns:
                if lun.device not in before or lun.device not in after:
                    continue
                average = measure.average(before[lun.device], after[lun.device])
                for op, count, ms in (
                    ("read", average.reads, average.read_ms),
                    ("write", average.writes, average.write_ms),
                ):
                    iops = count / seconds
                    if ms is not None and iops >= lun.min_iops and ms / 1000 > lun.goal:
                        found.append(Breach(lun.lun, lun.device, op, round(ms, 3), round(iops, 1), t_end))
        return found


@contextmanager
def sampling(lab: LabConfig, state_dir: Path) -> Iterator[Sampler]:
    state = LabState.load(state_dir)
    assert state is not None, f"no lab in {state_dir}"
    sampler = Sampler(judged_luns(lab, state))
    stop = threading.Event()

    def run() -> None:
        while True:
            sampler.sample()
            if stop.wait(SAMPLE_SECONDS):
                return

    thread = threading.Thread(target=run, name="diskstats-sampler", daemon=True)
    thread.start()
    try:
        yield sampler
    finally:
        stop.set()
        thread.join(10)
