"""`lunlat top`'s arithmetic: rates and averages between two samples, p99 from histogram buckets,
goals per LUN, sorting and filtering, and the samples read from an exporter's text."""

from __future__ import annotations

import math
import re

import pytest

from lunlat.goals import parse_goals
from lunlat.top.frames import (
    Counters,
    Snapshot,
    exposition_samples,
    frame,
    ordered,
    quantile,
    snapshot,
    text_frame,
)

GOALS = parse_goals("overrides:\n  - match: {role: log}\n    goal_ms: 0.4\n")
INF = math.inf


def test_quantile_interpolates_inside_the_bucket_holding_the_rank() -> None:
    before = {0.001: 10.0, 0.002: 10.0, INF: 10.0}
    after = {0.001: 60.0, 0.002: 110.0, INF: 110.0}  # +50 below 1 ms, +50 in 1-2 ms
    # rank 99 of 100: 49 of the 50 in (1 ms, 2 ms]
    assert quantile(0.99, before, after) == pytest.approx(0.001 + 0.001 * 49 / 50)
    assert quantile(0.5, before, after) == pytest.approx(0.001)


def test_quantile_edge_cases_follow_prometheus() -> None:
    # Past the highest finite bound: that bound, as histogram_quantile does.
    assert quantile(0.99, {0.001: 0, INF: 0}, {0.001: 0, INF: 5}) == 0.001
    assert quantile(0.99, {0.001: 3, INF: 3}, {0.001: 3, INF: 3}) is None  # no I/O
    assert quantile(0.99, {0.001: 3, INF: 9}, {0.001: 1, INF: 2}) is None  # reset
    assert quantile(0.99, {}, {}) is None  # no histogram


def _snapshot(at: float, counters: dict[tuple[str, str], Counters]) -> Snapshot:
    labels = {("ora_data", "dm-0"): ("ORCL", "data", "oltp"), ("redo", "sda"): ("ORCL", "log", "oltp")}
    return Snapshot(at, counters, labels)


def test_frame_rates_averages_and_goals() -> None:
    before = _snapshot(
        100.0,
        {
            ("ora_data", "dm-0"): Counters(reads=10, read_seconds=1.0, writes=5, write_seconds=0.5),
            ("redo", "sda"): Counters(writes=100, write_seconds=0.02),
        },
    )
    after = _snapshot(
        102.0,
        {
            ("ora_data", "dm-0"): Counters(
                reads=2010,
                read_seconds=6.0,  # 5 s over 2000 reads: 2.5 ms
                writes=5,
                write_seconds=0.5,
                read_bytes=4 * 1024 * 1024,
                weighted_seconds=2.0,
            ),
            ("redo", "sda"): Counters(writes=900, write_seconds=0.42),  # 0.4 s / 800: 0.5 ms
            ("new", "sdz"): Counters(reads=5),  # appeared: shown from the next frame
        },
    )
    view = frame(7, before, after, GOALS)
    rows = {r.lun: r for r in view.rows}
    assert set(rows) == {"ora_data", "redo"}
    data, redo = rows["ora_data"], rows["redo"]
    assert data.values["r/s"] == 1000.0
    assert data.values["r_await"] == pytest.approx(2.5)
    assert data.values["w_await"] is None  # no writes: no average, never 0/0
    assert data.values["rMB/s"] == 2.0
    assert data.values["aqu-sz"] == pytest.approx(1.0)
    assert (data.goal_ms, redo.goal_ms) == (1.0, 0.4)  # the default and the role: log override
    # No histogram: every I/O is judged, so the judged reads are the average, above the goal.
    assert data.values["r_judged"] == pytest.approx(2.5)
    assert data.mark("r_judged") == "above"
    assert data.mark("r_await") is None  # the breach is the judged column's to show, not flagged
    assert redo.values["w/s"] == 400.0
    assert redo.values["w_await"] == pytest.approx(0.5)
    assert redo.mark("w_judged") == "above"  # 0.5 ms is above the log LUN's 0.4 ms
    assert data.values["w_judged"] is None and data.mark("w_judged") is None  # no writes
    assert redo.values["r_judged"] is None  # no reads: below the idle guard
    text = text_frame(view, "test", "LUN", None)
    lines = text.splitlines()
    assert lines[0].startswith("lunlat top #7 ") and " interval 2.000s " in lines[0]
    assert lines[1].split()[:8] == ["LUN", "database", "role", "workload", "r/s", "w/s", "r_await", "w_await"]
    assert lines[2].split() == [
        "ora_data", "ORCL", "data", "oltp", "1000.0", "0.0", "2.50", "-", "2.50", "-", "2.00", "0.00", "1.00",
        "n/a", "n/a",
    ]  # fmt: skip
    assert "\x1b" not in text


def test_a_counter_reset_shows_no_value_rather_than_a_negative_rate() -> None:
    before = _snapshot(0.0, {("redo", "sda"): Counters(writes=900, write_seconds=4.0)})
    after = _snapshot(1.0, {("redo", "sda"): Counters(writes=3, write_seconds=0.001)})
    (row,) = frame(1, before, after, GOALS).rows
    assert row.values["w/s"] is None and row.values["w_await"] is None


def test_sort_and_filter() -> None:
    before = _snapshot(0.0, {("a", "sdx"): Counters(), ("b", "sdb"): Counters(), ("redo", "sda"): Counters()})
    after = _snapshot(
        1.0,
        {
            ("a", "sdx"): Counters(writes=10, write_seconds=0.01),  # 1 ms
            ("b", "sdb"): Counters(writes=10, write_seconds=0.05),  # 5 ms
            ("redo", "sda"): Counters(),  # idle: no average, sorted last
        },
    )
    rows = frame(1, before, after, GOALS).rows
    assert [r.lun for r in ordered(rows, "w_await", None)] == ["b", "a", "redo"]
    assert [r.lun for r in ordered(rows, "LUN", None)] == ["a", "b", "redo"]
    # The filter looks at LUN, database, role and workload: `redo` is the log LUN.
    assert [r.lun for r in ordered(rows, "LUN", re.compile("log"))] == ["redo"]
    assert [r.lun for r in ordered(rows, "LUN", re.compile("^[ab]$"))] == ["a", "b"]


EXPOSITION = """\
# TYPE lunlat_device_reads_completed_total counter
lunlat_device_reads_completed_total{lun="ora_data",device="dm-0"} 12
# TYPE lunlat_device_read_time_seconds_total counter
lunlat_device_read_time_seconds_total{lun="ora_data",device="dm-0"} 0.036
# TYPE lunlat_lun_info gauge
lunlat_lun_info{lun="ora_data",device="dm-0",wwid="",naa="",vendor="",model="",paths="",database="ORCL",\
role="data",workload="oltp",mountpoint="",kind="lun"} 1
# TYPE lunlat_device_io_latency_seconds histogram
lunlat_device_io_latency_seconds_bucket{lun="ora_data",device="dm-0",op="read",size="small",le="0.001"} 7
lunlat_device_io_latency_seconds_bucket{lun="ora_data",device="dm-0",op="read",size="small",le="+Inf"} 10
lunlat_device_io_latency_seconds_sum{lun="ora_data",device="dm-0",op="read",size="small"} 0.01
lunlat_device_io_latency_seconds_count{lun="ora_data",device="dm-0",op="read",size="small"} 10
lunlat_device_io_latency_seconds_bucket{lun="ora_data",device="dm-0",op="read",size="large",le="0.001"} 0
lunlat_device_io_latency_seconds_bucket{lun="ora_data",device="dm-0",op="read",size="large",le="+Inf"} 2
lunlat_device_io_latency_seconds_sum{lun="ora_data",device="dm-0",op="read",size="large"} 0.02
lunlat_device_io_latency_seconds_count{lun="ora_data",device="dm-0",op="read",size="large"} 2
"""


def test_snapshot_from_an_exporters_text() -> None:
    taken = snapshot(exposition_samples(EXPOSITION), 5.0)
    key = ("ora_data", "dm-0")
    assert taken.labels == {key: ("ORCL", "data", "oltp")}
    counters = taken.counters[key]
    assert (counters.reads, counters.read_seconds) == (12.0, 0.036)
    assert counters.buckets == {"read": {0.001: 7.0, INF: 12.0}}  # the size classes added up


@pytest.mark.parametrize(
    ("goals_text", "goal", "red"),
    [
        ("", None, None),  # the shipped default: a LUN no database uses is not judged
        ("unowned:\n  severity: ticket\n  goal_ms: 20\n", 20.0, False),
        ("unowned:\n  severity: warning\n", 1.0, True),  # its own severity, the default's goal
    ],
)
def test_a_lun_no_database_uses_is_judged_as_the_rules_judge_it(
    goals_text: str, goal: float | None, red: bool | None
) -> None:
    """The root disk under a backup: no role, so the goals' `unowned` section, not the database goal."""
    before = Snapshot(
        0.0, {("root", "vda"): Counters(writes=0, write_seconds=0.0)}, {("root", "vda"): ("", "", "")}
    )
    after = Snapshot(
        1.0, {("root", "vda"): Counters(writes=100, write_seconds=0.4)}, {("root", "vda"): ("", "", "")}
    )
    (row,) = frame(1, before, after, parse_goals(goals_text)).rows
    assert row.values["w_await"] == pytest.approx(4.0)
    assert row.goal_ms == goal
    assert row.mark("w_judged") == (None if red is None else "above" if red else "within")


def _read_counters(small: tuple[float, float], large: tuple[float, float]) -> Counters:
    """Reads of two size classes: (count, seconds) each, as a histogram and as diskstats count them."""
    return Counters(
        reads=small[0] + large[0],
        read_seconds=small[1] + large[1],
        buckets={"read": {INF: small[0] + large[0]}},
        small={"read": (small[1], small[0])},
    )


@pytest.mark.parametrize(
    ("goals_text", "judged", "marks"),
    [
        # The default judges reads on their small I/Os: 0.4 ms judged, the 2.8 ms average flagged.
        ("", 0.4, ("within", "flagged")),
        # An override judging every read: the average (1.79 ms) is what is judged, and it breaches.
        (
            "overrides:\n  - match: {workload: oltp}\n    judge: {read: all}\n",
            0.34 / 190 * 1000,
            ("above", None),
        ),
        # An idle guard above the small reads' rate: nothing judged, the average still flagged.
        ("default:\n  min_iops: 200\n", None, (None, "flagged")),
    ],
)
def test_reads_are_judged_on_their_small_ios_as_the_rules_judge_them(
    goals_text: str, judged: float | None, marks: tuple[str | None, str | None]
) -> None:
    """8 KiB OLTP reads at 0.4 ms beside 1 MiB scans at 7 ms, over 1 s: 150 small reads, 40 large."""
    key = ("ora_data", "dm-0")
    before = _snapshot(0.0, {key: _read_counters((0, 0.0), (0, 0.0))})
    after = _snapshot(1.0, {key: _read_counters((150, 150 * 0.0004), (40, 40 * 0.007))})
    (row,) = frame(1, before, after, parse_goals(goals_text)).rows
    assert row.values["r_await"] == pytest.approx((0.06 + 0.28) / 190 * 1000)  # 1.79 ms
    assert row.values["r_judged"] == (None if judged is None else pytest.approx(judged))
    assert (row.mark("r_judged"), row.mark("r_await")) == marks


def test_the_small_class_is_read_from_an_exporters_histogram() -> None:
    taken = snapshot(exposition_samples(EXPOSITION), 5.0)
    assert taken.counters[("ora_data", "dm-0")].small == {"read": (0.01, 10.0)}  # the large class left out
