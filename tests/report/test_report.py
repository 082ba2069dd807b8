"""`lunlat report` against the real Debian Prometheus holding synthetic lunlat series with known
latencies (tests/report/synthetic.py, backfilled with promtool): every CSV cell against a direct
PromQL computation and against the injected latency, the page opened in headless Chromium."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.goals import load_goals
from lunlat.promql import averages
from lunlat.report import Progress
from lunlat.report.api import Prometheus
from lunlat.report.collect import Collector, parse_phases
from tests.report import synthetic
from tests.report.backfill import backfilled
from tests.report.browser import chromium, open_page
from tests.support import prometheus_server

REPO = Path(__file__).resolve().parents[2]
GOALS = REPO / "alerts" / "goals.yaml"


@dataclass(frozen=True, slots=True)
class Stack:
    url: str
    api: prometheus_server.PromApi
    start: int
    end: int


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    now = int(time.time())
    start = now - 2 * 3600 - now % 60  # whole minutes, well inside the default retention
    with backfilled(synthetic.openmetrics(start)) as api:
        end = start + len(synthetic.PHASES) * synthetic.PHASE_SECONDS
        # The backfilled blocks are loaded at start-up: the data is there at once, an hour ago.
        assert api.query(f"count({contract.DEVICE_READS.name})", at=end), "backfill not loaded"
        yield Stack(api.base, api, start, end)


def _phases(stack: Stack) -> list[str]:
    return [f"--phase={name}={begin}..{end}" for name, begin, end in synthetic.bounds(stack.start)]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lunlat", "report", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def report(stack: Stack) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="lunlat-report-out-") as out:
        output = Path(out) / "report"
        done = _run(
            f"--prometheus.url={stack.url}",
            f"--from={stack.start}",
            f"--to={stack.end}",
            *_phases(stack),
            f"--goals={GOALS}",
            f"--output={output}",
        )
        assert done.returncode == 0, done.stderr
        assert "querying Prometheus" not in done.stderr  # no progress bar off a terminal
        yield output


def _rows(report: Path) -> list[dict[str, str]]:
    with (report / "tables.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_every_host_row_is_the_injected_latency_and_a_direct_promql_average(
    stack: Stack, report: Path
) -> None:
    rows = [r for r in _rows(report) if r["layer"] == "host"]
    luns = {lun.lun: lun for lun in synthetic.LUNS}
    bounds = {name: (begin, end) for name, begin, end in synthetic.bounds(stack.start)}
    # Every LUN with I/O in a phase, each op: the snapshot LUN only in its phase; never the path device.
    expected = synthetic.cells_with_io()
    assert {(r["phase"], r["lun"], r["op"]) for r in rows if r["avg_latency_seconds"]} == expected
    assert all(r["device"] != "sdb" for r in rows)
    goals = load_goals(GOALS)
    for row in rows:
        lun = luns[row["lun"]]
        iops, latency = synthetic.load_at(lun, row["phase"], row["op"])
        assert (row["database"], row["role"], row["workload"], row["device"]) == (
            lun.database,
            lun.role,
            lun.workload,
            lun.device,
        )
        assert float(row["iops"]) == pytest.approx(iops, rel=1e-9, abs=1e-9)
        assert float(row["throughput_bytes"]) == pytest.approx(iops * synthetic.IO_BYTES, rel=1e-9, abs=1e-9)
        if not iops:
            assert row["avg_latency_seconds"] == "" and row["breach"] == ""
            continue
        avg = float(row["avg_latency_seconds"])
        assert avg == pytest.approx(latency, rel=1e-9)
        begin, end = bounds[row["phase"]]
        selector = f'{{job="lunlat", lun="{lun.lun}", device="{lun.device}"}}'
        direct = stack.api.query(
            f"increase({averages.time_counter(row['op']).name}{selector}[{end - begin}s])"
            f" / increase({averages.ops_counter(row['op']).name}{selector}[{end - begin}s])",
            at=end,
        )
        assert float(direct[0]["value"][1]) == pytest.approx(avg, rel=1e-12)
        # As the rules judge it: a LUN no database uses by the goals' `unowned` section (not at all here).
        found = goals.judged({"workload": lun.workload, "database": lun.database, "role": lun.role})
        if found is None:
            assert not lun.role and row["goal_seconds"] == "" and row["breach"] == ""
            assert row["judged_io"] == row["judged_latency_seconds"] == row["average_above_goal"] == ""
            continue
        goal_ms, min_iops = found
        assert float(row["goal_seconds"]) == goal_ms / 1000
        judged = iops >= min_iops
        above = "" if not judged else "yes" if latency > goal_ms / 1000 else "no"
        # Every read of the histogram's LUN is 8 KiB, small, so its judged reads are all its reads;
        # every other LUN has no histogram: judged on every I/O, the average, whatever the goals ask.
        wanted = goals.tier({"workload": lun.workload, "database": lun.database, "role": lun.role})
        with_histogram = lun.lun == synthetic.HISTOGRAM_LUN.lun
        kind = wanted.judged_io(row["op"]) if with_histogram else "all"
        assert row["judged_io"] == kind
        assert float(row["judged_latency_seconds"]) == pytest.approx(latency, rel=1e-9)
        assert float(row["judged_iops"]) == pytest.approx(iops, rel=1e-9)
        assert row["breach"] == row["average_above_goal"] == above
        if kind == "small":  # the histogram's small class over the phase, read directly
            small = f'{selector[:-1]}, op="{row["op"]}", size="small"}}'
            name = contract.DEVICE_IO_LATENCY.name
            direct = stack.api.query(
                f"increase({name}_sum{small}[{end - begin}s]) / increase({name}_count{small}[{end - begin}s])",
                at=end,
            )
            assert float(direct[0]["value"][1]) == pytest.approx(
                float(row["judged_latency_seconds"]), rel=1e-12
            )


def test_database_layer_rows(stack: Stack, report: Path) -> None:
    rows = [r for r in _rows(report) if r["layer"] != "host"]
    with_files = [lun for lun in synthetic.LUNS if lun.engine]
    assert {(r["phase"], r["lun"], r["op"]) for r in rows} == {
        (phase, lun.lun, op) for phase in synthetic.PHASES for lun in with_files for op in ("read", "write")
    }
    luns = {lun.lun: lun for lun in with_files}
    for row in rows:
        lun = luns[row["lun"]]
        iops, latency = synthetic.load_at(lun, row["phase"], row["op"])
        assert row["layer"] == "db" and row["device"] == lun.device
        assert float(row["avg_latency_seconds"]) == pytest.approx(
            latency + synthetic.DB_EXTRA_SECONDS, rel=1e-9
        )
        assert float(row["iops"]) == pytest.approx(iops, rel=1e-9)
        # A database layer judges its own average (its engine's judged files), as the rules do.
        assert row["judged_io"] == "database" and row["judged_latency_seconds"] == row["avg_latency_seconds"]
        # Oracle's V$IOSTAT_FILE megabytes are too coarse: no throughput; SQL Server's bytes are there.
        assert (row["throughput_bytes"] == "") == (lun.engine == "oracle")


def test_page_tables_match_the_reference_query(stack: Stack, report: Path) -> None:
    """Each cell of the page's tables is the reference dashboard's query (Δ time / Δ operations of the
    LUNs of that workload x database x role), and the injected latency."""
    page = open_page(report / "index.html")
    info = 'lunlat_lun_info{job="lunlat", kind="lun", role=~"data|log"}'
    for (name, begin, end), section, judged_section in zip(
        synthetic.bounds(stack.start), page.phase_sections, page.judged_sections, strict=True
    ):
        for op in ("read", "write"):
            promql = averages.average_latency(
                op, lambda m: f'{m}{{job="lunlat"}}', info, f"{end - begin}s", averages.ROLE_LABELS
            )
            expected = {
                (r["metric"]["workload"], r["metric"]["database"], r["metric"]["role"]): float(r["value"][1])
                for r in stack.api.query(promql, at=end)
            }
            shown, judged = section[op], judged_section[op]
            assert set(shown) == set(expected) == set(judged), name
            for key, value in expected.items():
                assert shown[key] == f"{value * 1000:.2f}", (name, op, key)
                # No LUN of these mixes sizes: the judged I/Os' average is the average.
                assert judged[key] == shown[key], (name, op, key)
    # The verdict names the breaching cell: SQL Server 1 data reads at 1.5 ms with DSS and snapshots.
    assert "within its goal: no" in page.verdict
    assert "oltp+dss+snapshot · oltp · SQL Server 1 · data LUNs · read: 1.50 ms" in page.verdict


def test_page_opens_offline_with_plots_and_no_console_error(report: Path) -> None:
    page = open_page(report / "index.html")
    assert page.console_errors == []
    html = (report / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing fetched from elsewhere
    assert "<script" not in html
    # One card per LUN: a timeline (curves, goal line, three shaded phases) and a scatter.
    assert page.count("svg.plot") >= 2 * len(synthetic.LUNS) + 1
    assert page.count("polyline.curve") >= 2 * (len(synthetic.LUNS) - 1)
    assert page.count("rect.phase") == len(synthetic.PHASES) * len(synthetic.LUNS)
    # A goal line in both plots of every LUN the goals judge; none for a LUN no database uses.
    judged = [lun for lun in synthetic.LUNS if lun.role]
    assert page.count("line.goal") == 2 * len(judged) and len(judged) < len(synthetic.LUNS)
    # ora_data's per-I/O read histogram and Oracle's 'db file sequential read', each bucket and +Inf.
    assert page.count("rect.bar") == len(synthetic.HISTOGRAM_SHARES) + len(synthetic.ORACLE_WAIT_SHARES) + 2
    titles = [n.all_text() for n in page.root.find("h3")]
    assert (
        "ora_data read (db-host-1:10431), per I/O" in titles and "Oracle: db file sequential read" in titles
    )
    assert page.count("table.raised") == 2 * (len(synthetic.PHASES) - 1)
    # Worst first: the LUN above its goal heads the LUN table.
    assert page.first_lun in {"scratch", "sqlserver1_data"}


def test_screenshot(report: Path, tmp_path: Path) -> None:
    if chromium() is None:
        pytest.skip("missing chromium (Debian: chromium)")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            chromium() or "",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1280,2200",
            (report / "index.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 20_000  # a page drawn, not a blank one


def test_progress_bar_counts_every_query(stack: Stack) -> None:
    terminal = _Terminal()
    collector = Collector(Prometheus(stack.url), load_goals(GOALS), lambda _q: None)
    phases = parse_phases([p.removeprefix("--phase=") for p in _phases(stack)], stack.start, stack.end)
    progress = Progress(collector.queries(phases), terminal)
    collector.progress = progress.step
    collector.collect(stack.start, stack.end, phases)
    progress.close()
    assert progress.done == progress.total == collector.queries(phases)
    assert terminal.getvalue().endswith(f"] {progress.total}/{progress.total}\n")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from=yesterday", "--to=0"], "not an RFC 3339 time or Unix seconds: 'yesterday'"),
        (["--from=100", "--to=200", "--phase=x=50..150"], "phase 'x' is outside the report's range"),
        (["--from=2001-01-01T00:00:00Z", "--to=2001-01-02T00:00:00Z"], "no lunlat series"),
    ],
)
def test_bad_input_exits_2_with_one_line(stack: Stack, tmp_path: Path, args: list[str], message: str) -> None:
    output = tmp_path / "out"
    done = _run(f"--prometheus.url={stack.url}", *args, f"--output={output}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_unreachable_prometheus_leaves_the_old_report_whole(tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()
    (output / "index.html").write_text("old", encoding="utf-8")
    done = _run("--prometheus.url=http://127.0.0.1:9", "--from=0", "--to=60", f"--output={output}")
    assert done.returncode == 2
    assert done.stderr.startswith("lunlat report: error: cannot reach Prometheus at http://127.0.0.1:9")
    assert done.stderr.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and (output / "index.html").read_text() == "old"
