"""The end-to-end tests' ground truth judges a window as the rules would, from counters alone: a
1-minute window above the LUN's goal at its idle guard or more is a breach; below the guard, or
within the goal, it is not; a window shorter than a minute is not judged."""

from __future__ import annotations

from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
from lunlat_lab.measure import Counters  # noqa: E402
from tests.alerting.groundtruth import Breach, Judged, Sampler  # noqa: E402

LUN = Judged("data", "loop0", goal=0.001, min_iops=10)


def _sampler(*steps: tuple[float, float, float]) -> Sampler:
    """Samples 5 s apart from t=1000: each step adds (reads, read seconds, writes) to the counters."""
    sampler = Sampler([LUN])
    reads = seconds = writes = 0.0
    for n, (r, s, w) in enumerate(steps):
        reads, seconds, writes = reads + r, seconds + s, writes + w
        sampler.samples.append((1000.0 + 5 * n, {"loop0": Counters(reads, seconds, writes, writes * 0.0002)}))
    return sampler


def test_a_minute_above_goal_at_the_idle_guard_is_a_breach() -> None:
    # 13 samples: 12 steps of 5 s, 100 reads at 2 ms each (20 reads/s), 50 writes at 0.2 ms.
    sampler = _sampler((0, 0, 0), *[(100, 0.2, 50)] * 12)
    assert sampler.breaches(0, 2000) == [Breach("data", "loop0", "read", 2.0, 20.0, 1060.0)]


def test_within_goal_below_the_guard_or_shorter_than_a_minute_is_none() -> None:
    within = _sampler((0, 0, 0), *[(100, 0.05, 50)] * 12)  # 0.5 ms
    idle = _sampler((0, 0, 0), *[(40, 0.08, 0)] * 12)  # 2 ms at 8 reads/s, under the guard of 10
    short = _sampler((0, 0, 0), *[(100, 0.2, 0)] * 11)  # 55 s of samples: no window of a minute
    assert within.breaches(0, 2000) == idle.breaches(0, 2000) == short.breaches(0, 2000) == []
    # and only windows ending inside the range asked
    slow = _sampler((0, 0, 0), *[(100, 0.2, 50)] * 12)
    assert slow.breaches(0, 1059) == []
