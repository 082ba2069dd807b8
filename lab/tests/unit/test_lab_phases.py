"""`lab scenario`'s record of its phases (phases.csv) and the `lunlat report` command line it prints:
the command parses back to exactly the recorded windows."""

from __future__ import annotations

import csv
import shlex
from pathlib import Path

from lunlat.cli import _parser
from lunlat.report.collect import parse_phases, parse_time
from lunlat_lab.commands import PhaseWindow, report_command, write_phases

WINDOWS = [
    PhaseWindow("oltp", 1795633248.55, 1795633268.557),
    PhaseWindow("oltp+dss", 1795633271.943, 1795633291.9),
]


def test_phases_csv_holds_each_window_in_unix_seconds_and_rfc3339(tmp_path: Path) -> None:
    write_phases(tmp_path / "phases.csv", WINDOWS)
    with (tmp_path / "phases.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["phase"] for r in rows] == ["oltp", "oltp+dss"]
    for row, window in zip(rows, WINDOWS, strict=True):
        assert float(row["start"]) == window.start and float(row["end"]) == window.end
        assert parse_time(row["start_rfc3339"]) == window.start
        assert parse_time(row["end_rfc3339"]) == window.end
        assert row["start_rfc3339"].endswith("Z")


def test_the_printed_command_is_a_report_of_exactly_those_phases() -> None:
    line = report_command(WINDOWS, "http://prometheus:9090", None, Path("out/report"))
    assert "--goals" not in line  # the report's own default: alerts/goals.yaml where it exists
    argv = shlex.split(line)
    assert argv[:2] == ["lunlat", "report"]
    args = _parser().parse_args(argv[1:])
    assert args.prometheus_url == "http://prometheus:9090"
    assert args.output == Path("out/report")
    start, end = parse_time(args.start), parse_time(args.end)
    assert (start, end) == (WINDOWS[0].start, WINDOWS[-1].end)
    phases = parse_phases(args.phases, start, end)
    assert [(p.name, p.start, p.end) for p in phases] == [(w.name, w.start, w.end) for w in WINDOWS]


def test_without_a_prometheus_the_command_names_where_it_goes() -> None:
    line = report_command(WINDOWS, None, Path("my/goals.yaml"), Path("out/report"))
    assert "--prometheus.url http://PROMETHEUS:9090" in line
    assert "--goals my/goals.yaml" in line
