"""tests/support/steal.py: a window's steal, its worst second and its worst sample."""

from __future__ import annotations

import pytest

from tests.support.steal import StealRecord


def test_a_window_s_total_worst_second_and_worst_sample() -> None:
    # (wall time, steal so far): 10 ms a sample, one sample of 40 ms at 1.3 s.
    times = [round(0.1 * n, 1) for n in range(31)]
    steal = 0.0
    samples = []
    for t in times:
        steal += 0.04 if t == 1.3 else 0.01 if t > 0 else 0.0
        samples.append((t, steal))
    got = StealRecord(samples).over(0.0, 3.0)
    assert got is not None
    assert got.total == pytest.approx(0.33)
    assert got.most_in_a_sample == pytest.approx(0.04)
    assert got.most_in_a_second == pytest.approx(0.13)  # the burst and nine samples of 10 ms
    assert got.window == pytest.approx(3.0)
    # Outside the window, or one sample only: nothing to say.
    assert StealRecord(samples).over(5.0, 6.0) is None
    assert StealRecord(samples).over(1.0, 1.0) is None
