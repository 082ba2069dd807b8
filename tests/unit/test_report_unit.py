"""`lunlat report` without Prometheus: times and phases, the step, the progress bar, the atomic
output directory, and a page of a thousand LUNs (worst first, the rest collapsed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from lunlat.report import Progress, write_dir
from lunlat.report.api import ReportError
from lunlat.report.collect import Collected, Phase, Row, choose_step, parse_phases, parse_time
from lunlat.report.page import PLOTTED_COLLAPSED, PLOTTED_OPEN, raised, render


def test_times_rfc3339_and_unix_seconds() -> None:
    assert parse_time("2026-11-25T10:00:00Z") == 1795600800.0
    assert parse_time("2026-11-25T11:00:00+01:00") == 1795600800.0
    assert parse_time("1795600800") == 1795600800.0
    with pytest.raises(ReportError, match="without a zone"):
        parse_time("2026-11-25T10:00:00")
    with pytest.raises(ReportError, match="not an RFC 3339 time"):
        parse_time("noon")


def test_phases() -> None:
    assert parse_phases([], 0, 600) == [Phase("all", 0, 600)]
    assert parse_phases(["a=0..300", "b=300..600"], 0, 600) == [Phase("a", 0, 300), Phase("b", 300, 600)]
    for spec, message in (
        ("a=0..700", "outside the report's range"),
        ("a=300..100", "ends before it starts"),
        ("a:0..100", "NAME=FROM..TO"),
    ):
        with pytest.raises(ReportError, match=message):
            parse_phases([spec], 0, 600)
    with pytest.raises(ReportError, match="given twice"):
        parse_phases(["a=0..100", "a=100..200"], 0, 600)
    with pytest.raises(ReportError, match="--to must be after --from"):
        parse_phases([], 600, 600)


def test_step_grows_with_the_range() -> None:
    assert choose_step(3600) == 15
    assert choose_step(6 * 3600) == 120
    assert choose_step(30 * 86400) == 21600
    # About 300 points or fewer, whatever the range.
    assert all(days * 86400 / choose_step(days * 86400) <= 300 for days in (1, 7, 30, 90))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        progress = Progress(4, stream)
        for _ in range(4):
            progress.step()
        progress.close()
    assert pipe.getvalue() == ""
    assert terminal.getvalue().endswith(f"\rquerying Prometheus [{'#' * 30}] 4/4\n")


def test_output_directory_replaced_whole(tmp_path: Path) -> None:
    output = tmp_path / "out"
    write_dir(output, {"a.txt": "1"})
    write_dir(output, {"b.txt": "2"})
    assert sorted(p.name for p in output.iterdir()) == ["b.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary left beside it


def thousand_luns() -> Collected:
    phase = Phase("oltp", 0.0, 3600.0)
    rows, latency, iops = [], {}, {}
    for i in range(1000):
        labels = {
            "instance": "h:1",
            "lun": f"lun{i:04}",
            "device": f"dm-{i}",
            "database": f"db{i % 7}",
            "role": ("data", "log")[i % 2],
            "workload": "oltp",
            "job": "lunlat",
        }
        avg = 0.0002 + 0.000002 * i  # lun0999 is the worst, 2.2 ms
        for op in ("read", "write"):
            rows.append(Row(phase, "host", labels, op, avg * 360000, 360000.0, 2.9e9, 0.001, 10.0))
        points = [(float(t), avg) for t in range(0, 3600, 15)]
        latency[("h:1", labels["lun"])] = {"read": points, "write": points}
        iops[("h:1", labels["lun"])] = {"read": [(float(t), 100.0) for t in range(0, 3600, 15)]}
    return Collected([phase], rows, 15, 0.0, 3600.0, latency, iops, {})


def test_a_thousand_luns_worst_first_the_rest_collapsed() -> None:
    html = render(thousand_luns(), "t", "http://prometheus")
    # Plots: the worst first, a few more collapsed, the rest only in the tables.
    assert html.count('<svg class="plot"') == 2 * (PLOTTED_OPEN + PLOTTED_COLLAPSED)
    assert html.index("lun0999") < html.index("lun0998") < html.index("lun0000")
    assert "<details><summary>950 more LUNs</summary>" in html
    assert f"{1000 - PLOTTED_OPEN - PLOTTED_COLLAPSED} more LUNs are in the tables above" in html
    assert len(html) < 8_000_000


@pytest.mark.parametrize(
    ("old", "new", "shown"),
    [
        (0.0005, 0.0006, "+0.10 (+20%)"),
        (0.0006, 0.0005, "-0.10 (-17%)"),
        (0.0005, 0.0004999, "0.00 (0%)"),  # rounds to nothing: no "-0.00 (-0%)"
        (0.0, 0.0002, "+0.20"),  # no share of nothing
    ],
)
def test_a_change_between_phases_is_shown_in_ms_and_percent(old: float, new: float, shown: str) -> None:
    assert raised(old, new) == shown
