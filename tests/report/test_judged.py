"""`lunlat report`'s judged figure (issue 37), against the real Debian Prometheus holding LUNs of mixed
I/O sizes (tests/report/mixed_sizes.py, backfilled with promtool): each host row judged as the rules
judge it (the goals' `judge`, the per-I/O histogram's small class where the host has it, every I/O
where it has none), the breach and the idle guard on the judged I/Os, the LUN's average above its goal
flagged apart; the page's judged cells and legend in headless Chromium.

Every expectation is computed from the data set's injected I/O classes and the goals, none written
down as a number."""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.goals import Goals, load_goals
from tests.report import mixed_sizes
from tests.report.backfill import backfilled
from tests.report.browser import Page, open_page
from tests.support import prometheus_server

REPO = Path(__file__).resolve().parents[2]
GOALS = REPO / "alerts" / "goals.yaml"


@dataclass(frozen=True, slots=True)
class Report:
    api: prometheus_server.PromApi
    start: int
    end: int
    output: Path
    rows: list[dict[str, str]]


@pytest.fixture(scope="module")
def report() -> Iterator[Report]:
    now = int(time.time())
    start = now - 2 * 3600 - now % 60  # whole minutes, well inside the default retention
    end = start + len(mixed_sizes.PHASES) * mixed_sizes.PHASE_SECONDS
    with backfilled(mixed_sizes.openmetrics(start)) as api, tempfile.TemporaryDirectory() as out:
        assert api.query(f"count({contract.DEVICE_READS.name})", at=end), "backfill not loaded"
        output = Path(out) / "report"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "lunlat",
                "report",
                f"--prometheus.url={api.base}",
                f"--from={start}",
                f"--to={end}",
                *(f"--phase={name}={begin}..{finish}" for name, begin, finish in mixed_sizes.bounds(start)),
                f"--goals={GOALS}",
                f"--output={output}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with (output / "tables.csv").open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        yield Report(api, start, end, output, rows)


@dataclass(frozen=True, slots=True)
class Expected:
    """What a host row should say, from the injected I/O classes and the goals."""

    kind: str
    average: float
    iops: float
    judged: float | None  # None: no judged I/O in the phase
    judged_iops: float
    goal: float
    min_iops: float

    @property
    def breach(self) -> str:
        if self.judged is None or self.judged_iops < self.min_iops:
            return ""
        return "yes" if self.judged > self.goal else "no"

    @property
    def average_above_goal(self) -> str:
        return "" if self.iops < self.min_iops else "yes" if self.average > self.goal else "no"


def _mean(ios: list[mixed_sizes.Io]) -> tuple[float | None, float]:
    """(the latency averaged over every I/O, IOPS) of these classes."""
    iops = sum(io.iops for io in ios)
    return (sum(io.iops * io.latency for io in ios) / iops if iops else None), iops


def expected(goals: Goals, lun: mixed_sizes.Lun, phase: str, op: str) -> Expected:
    tier = goals.tier({"workload": lun.workload, "database": lun.database, "role": lun.role})
    # The rules' fallback: a LUN the goals judge on its small I/Os but without the histogram is judged
    # on every I/O.
    kind = tier.judged_io(op) if lun.histogram else "all"
    average, iops = _mean(lun.ios(phase, op))
    judged, judged_iops = _mean(lun.ios(phase, op, contract.BIO_SIZES[0] if kind == "small" else None))
    assert average is not None
    return Expected(kind, average, iops, judged, judged_iops, tier.goal_ms / 1000, tier.min_iops)


def _row(report: Report, phase: str, lun: str, op: str) -> dict[str, str]:
    found = [
        r for r in report.rows if (r["layer"], r["phase"], r["lun"], r["op"]) == ("host", phase, lun, op)
    ]
    assert len(found) == 1, (phase, lun, op)
    return found[0]


def test_every_host_row_is_judged_as_the_rules_judge_it(report: Report) -> None:
    goals = load_goals(GOALS)
    rows = [r for r in report.rows if r["layer"] == "host"]
    assert {r["lun"] for r in rows} == {lun.lun for lun in mixed_sizes.LUNS}
    luns = {lun.lun: lun for lun in mixed_sizes.LUNS}
    for row in rows:
        lun = luns[row["lun"]]
        if not lun.ios(row["phase"], row["op"]):  # no I/O of this op: nothing to average or judge
            assert row["avg_latency_seconds"] == row["judged_latency_seconds"] == row["breach"] == ""
            continue
        want = expected(goals, lun, row["phase"], row["op"])
        where = (row["phase"], row["lun"], row["op"])
        assert row["judged_io"] == want.kind, where
        assert float(row["avg_latency_seconds"]) == pytest.approx(want.average, rel=1e-9), where
        assert float(row["judged_iops"]) == pytest.approx(want.judged_iops, rel=1e-9), where
        if want.judged is None:
            assert row["judged_latency_seconds"] == "", where
        else:
            assert float(row["judged_latency_seconds"]) == pytest.approx(want.judged, rel=1e-9), where
        assert (row["breach"], row["average_above_goal"]) == (want.breach, want.average_above_goal), where


def test_small_reads_within_goal_beside_scans_judged_within_the_average_flagged(report: Report) -> None:
    goals, lun, phase = load_goals(GOALS), mixed_sizes.LUNS[0], mixed_sizes.PHASES[-1]
    want = expected(goals, lun, phase, "read")
    # The data set is the case it claims to be: small reads within goal, the blend above it.
    assert want.kind == "small" and want.judged is not None
    assert want.judged <= want.goal < want.average and want.judged_iops >= want.min_iops
    row = _row(report, phase, lun.lun, "read")
    assert (row["judged_io"], row["breach"], row["average_above_goal"]) == ("small", "no", "yes")
    assert (
        float(row["judged_latency_seconds"]) < float(row["goal_seconds"]) < float(row["avg_latency_seconds"])
    )
    # The judged figure is the histogram's small class over the phase: Δ _sum / Δ _count, read directly.
    begin, end = next((b, e) for name, b, e in mixed_sizes.bounds(report.start) if name == phase)
    small = f'{{job="lunlat", lun="{lun.lun}", op="read", size="{contract.BIO_SIZES[0]}"}}'
    name = contract.DEVICE_IO_LATENCY.name
    direct = report.api.query(
        f"increase({name}_sum{small}[{end - begin}s]) / increase({name}_count{small}[{end - begin}s])", at=end
    )
    assert float(direct[0]["value"][1]) == pytest.approx(float(row["judged_latency_seconds"]), rel=1e-12)
    # Without the scans the same LUN's average is its small reads' and nothing is flagged.
    before = _row(report, mixed_sizes.PHASES[0], lun.lun, "read")
    assert before["average_above_goal"] == before["breach"] == "no"


def test_the_idle_guard_counts_the_judged_ios(report: Report) -> None:
    """A LUN busy with scans but with fewer small reads per second than the guard: not judged (the
    rules' judged latency is absent), its average still flagged."""
    goals, lun = load_goals(GOALS), mixed_sizes.LUNS[1]
    for phase in mixed_sizes.PHASES:
        want = expected(goals, lun, phase, "read")
        assert want.kind == "small" and want.judged_iops < want.min_iops <= want.iops
        row = _row(report, phase, lun.lun, "read")
        assert float(row["iops"]) >= float(row["judged_iops"])
        assert (row["breach"], row["average_above_goal"]) == ("", want.average_above_goal)
        assert want.average_above_goal == "yes"  # flagged: the average above goal, nothing judged


def test_a_lun_without_histogram_is_judged_on_its_average(report: Report) -> None:
    goals, lun = load_goals(GOALS), mixed_sizes.LUNS[2]
    assert not lun.histogram and goals.tier({"role": lun.role}).judged_io("read") == "small"
    for phase in mixed_sizes.PHASES:
        for op in ("read", "write"):
            row = _row(report, phase, lun.lun, op)
            assert row["judged_io"] == "all"
            assert row["judged_latency_seconds"] == row["avg_latency_seconds"]
            assert row["judged_iops"] == row["iops"] and row["breach"] == row["average_above_goal"]
    # With the scans its average, the judged figure, breaches: no flag, a breach.
    assert _row(report, mixed_sizes.PHASES[-1], lun.lun, "read")["breach"] == "yes"


def _page(report: Report) -> Page:
    return open_page(report.output / "index.html")


def test_page_shows_the_judged_figure_beside_the_average(report: Report) -> None:
    goals, page = load_goals(GOALS), _page(report)
    assert page.console_errors == []
    averages, judged = page.phase_sections, page.judged_sections
    classes, judged_classes = page.cell_classes(judged=False), page.cell_classes(judged=True)
    assert len(averages) == len(judged) == len(mixed_sizes.PHASES)
    for i, phase in enumerate(mixed_sizes.PHASES):
        for lun in mixed_sizes.LUNS:
            for op in ("read", "write"):
                key = (lun.workload, lun.database, lun.role)
                if not lun.ios(phase, op):
                    assert key not in averages[i][op]
                    continue
                want = expected(goals, lun, phase, op)
                assert averages[i][op][key] == f"{want.average * 1000:.2f}", (phase, lun.lun, op)
                shown = "\u2013" if want.judged is None else f"{want.judged * 1000:.2f}"
                assert judged[i][op][key] == shown, (phase, lun.lun, op)
                verdict = {"yes": "above", "no": "within", "": "idle"}
                assert verdict[want.breach] in judged_classes[i][op][key], (phase, lun.lun, op)
                flagged = want.average_above_goal == "yes" and want.breach != "yes"
                assert ("flagged" in classes[i][op][key]) == flagged, (phase, lun.lun, op)
    # The flagged average is marked in words, not by colour alone.
    marks = [n for n in page.root.find("span", "flag") if n.all_text() == "flagged"]
    assert marks
    # A legend under each phase's tables says what the judged column judges, per op: how many LUNs
    # with I/O of that op on their small I/Os, how many on every I/O.
    assert len(page.legends) == len(mixed_sizes.PHASES)
    small_kib = contract.BIO_SMALL_MAX // 1024
    words = {
        "small": f"small {{op}}s (up to {small_kib} KiB, from the per-I/O histogram)",
        "all": "every {op} (the LUN's average)",
    }
    for phase, legend in zip(mixed_sizes.PHASES, page.legends, strict=True):
        for op in ("read", "write"):
            kinds = [expected(goals, lun, phase, op).kind for lun in mixed_sizes.LUNS if lun.ios(phase, op)]
            for kind in set(kinds):
                n = kinds.count(kind)
                phrase = f"{words[kind].format(op=op)} of {n} LUN{'s' if n != 1 else ''}"
                assert phrase in legend, (phase, op, legend)
        assert {"small", "all"} <= {
            expected(goals, lun, phase, "read").kind for lun in mixed_sizes.LUNS
        }  # the data set shows both kinds
    # The verdict: the LUN without histogram breaches; the scans' blend is flagged, not a breach.
    assert "within its goal: no" in page.verdict
    listed = next(n for n in page.root.walk() if n.attrs.get("id") == "flagged").all_text()
    assert "above their goal while the I/Os the goal judges are within it" in listed
    assert all(lun.lun in page.verdict for lun in mixed_sizes.LUNS)
