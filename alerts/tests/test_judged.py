"""What the goal judges (docs/alerting.md, "What is judged"): the throughput floor, whose promtool
tests (alerts/tests/judged/) run against rules generated from the goals file beside them; the
size-aware latency judgement runs on the shipped rules (alerts/tests/judged.test.yml, run with
every *.test.yml by test_rules.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lunlat.goals import load_goals, parse_goals
from lunlat_rules.rules import RuleSet, render

JUDGED = Path(__file__).resolve().parent / "judged"
TESTS = Path(__file__).resolve().parent


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian: prometheus)")
    return path


def _run(tmp_path: Path, goals_text: str, name: str = "dss") -> subprocess.CompletedProcess[str]:
    """promtool on judged/`name`.test.yml against the rules of `goals_text` (its `name`.rules.yml)."""
    goals = tmp_path / f"{name}.goals.yaml"
    goals.write_text(goals_text, encoding="utf-8")
    (tmp_path / f"{name}.rules.yml").write_text(render(load_goals(goals)), encoding="utf-8")
    shutil.copy(JUDGED / f"{name}.test.yml", tmp_path)
    return subprocess.run(
        [_promtool(), "test", "rules", f"{name}.test.yml"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def _shipped_test_on(tmp_path: Path, goals_text: str, test_file: str) -> str:
    """promtool's output for one of the shipped rule tests (alerts/tests/`test_file`, which reads
    ../lunlat.rules.yml) run against the rules of `goals_text`; asserts it failed."""
    goals = tmp_path / "goals.yaml"
    goals.write_text(goals_text, encoding="utf-8")
    (tmp_path / "lunlat.rules.yml").write_text(render(load_goals(goals)), encoding="utf-8")
    (tmp_path / "tests").mkdir()
    shutil.copy(TESTS / test_file, tmp_path / "tests")
    result = subprocess.run(
        [_promtool(), "test", "rules", test_file],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path / "tests",
    )
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_a_dss_lun_held_under_its_floor_opens_a_ticket(tmp_path: Path) -> None:
    result = _run(tmp_path, (JUDGED / "dss.goals.yaml").read_text(encoding="utf-8"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_a_floor_no_throughput_rule_and_the_test_fails(tmp_path: Path) -> None:
    """The test bites: the same series with no floor in the goals record no floor and open nothing."""
    result = _run(tmp_path, "selector: 'job=\"lunlat\"'\n")
    assert result.returncode != 0
    assert "LunLatencyThroughputLow" in result.stdout + result.stderr
    assert "LunLatencyThroughputLow" not in RuleSet(parse_goals("selector: 'job=\"lunlat\"'\n")).alert_names()


def test_judging_every_read_pages_on_healthy_large_reads(tmp_path: Path) -> None:
    """The size-aware test bites: the same scenario with reads judged on every I/O (the old blended
    average) pages on the OLTP LUN whose small reads are within goal, and judged.test.yml fails."""
    failures = _shipped_test_on(tmp_path, "default:\n  judge: {read: all}\n", "judged.test.yml")
    assert "alertname: LunLatencyDataReadHigh, time: 5m" in failures


def test_an_override_judges_its_own_way_and_keeps_the_default_for_the_other_op() -> None:
    goals = parse_goals(
        "default: {judge: {read: small, write: all}}\n"
        "overrides:\n  - match: {role: log}\n    judge: {write: small}\n"
    )
    log = goals.tier({"role": "log"})
    assert (log.judged_io("read"), log.judged_io("write")) == ("small", "small")
    data = goals.tier({"role": "data"})
    assert (data.judged_io("read"), data.judged_io("write")) == ("small", "all")


def test_the_log_writes_objective_is_what_pages_a_two_percent_burn(tmp_path: Path) -> None:
    """slo_io.test.yml bites: with the one default objective (99 %) for log writes too, 2 % of them
    over goal is a 2x burn, under every fast pair, and the test's page does not come."""
    shipped = (TESTS.parent / "goals.yaml").read_text(encoding="utf-8")
    goals_text = shipped.replace(
        "  objectives:\n    - {match: {role: log, op: write}, objective: 0.999}\n", "  objectives: []\n"
    )
    assert goals_text != shipped
    failures = _shipped_test_on(tmp_path, goals_text, "slo_io.test.yml")
    assert "alertname: LunLatencyBudgetBurnFast, time: 35m" in failures


def test_one_op_judged_two_ways_each_lun_judged_and_counted_its_own_way(tmp_path: Path) -> None:
    """Log LUNs judge their small writes, the others every write (judged/mixed.goals.yaml): the
    judged latency and the SLO's events per I/O keep both kinds' branches and pick each LUN's by its
    goal (the rules write a kind's branch only where some tier judges it: tiers.judged_kinds)."""
    result = _run(tmp_path, (JUDGED / "mixed.goals.yaml").read_text(encoding="utf-8"), "mixed")
    assert result.returncode == 0, result.stdout + result.stderr


def test_with_every_write_judged_the_mixed_test_fails(tmp_path: Path) -> None:
    """The mixed test bites: judging every write everywhere judges the log LUN on its large writes
    too (0.62 ms, its SLO counting 110 I/Os a second of which 16.7 over goal)."""
    result = _run(tmp_path, "selector: 'job=\"lunlat\"'\n", "mixed")
    assert result.returncode != 0
    assert '{judged="all", lun="log1"}' in result.stdout + result.stderr
