"""The dashboards as files: generated and fresh, valid for the SDK's model, and clean by the lint
(dashboards/tests/lint.py: what grafana's dashboard-linter checks, plus lunlat's own rules). Each
lint is also run on a deliberately broken copy, so a lint that can never fail would show here.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import promql_parser as pp
import pytest
import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard

from dashboards.tests import boards, lint
from lunlat.engines.oracle import events as oracle_events
from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.goals import load_goals
from lunlat_dashboards import BOARDS, GRAFANA_VERSION, render_all, to_json
from lunlat_lab.defaults import DEFAULT_LAB_FILE

REPO = boards.REPO
GOALS = REPO / "alerts" / "goals.yaml"
RULES = REPO / "alerts" / "lunlat.rules.yml"
LAB = DEFAULT_LAB_FILE


def _boards() -> dict[str, dict[str, Any]]:
    return copy.deepcopy(boards.load())


def _metrics() -> set[str]:
    return lint.known_metrics(RULES.read_text(encoding="utf-8"))


# --- generated, fresh, SDK-valid ------------------------------------------------------------


def test_committed_dashboards_are_what_the_generator_writes() -> None:
    rendered = render_all(load_goals(GOALS))
    committed = {p.name for p in boards.DASHBOARDS.glob("*.json")}
    assert committed == set(BOARDS), "dashboards/ holds a JSON file no generator writes, or misses one"
    for name, text in rendered.items():
        assert (boards.DASHBOARDS / name).read_text(encoding="utf-8") == text, (
            f"dashboards/{name} is stale: run `bash .ci/generate`"
        )


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lunlat_dashboards", "generate", f"--goals={GOALS}", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_check_passes_on_fresh_files_and_fails_on_a_stale_or_missing_one(tmp_path: Path) -> None:
    assert _generate(f"--output-dir={tmp_path}").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(BOARDS)
    assert _generate(f"--output-dir={tmp_path}", "--check").returncode == 0
    first = tmp_path / next(iter(BOARDS))
    first.write_text(first.read_text(encoding="utf-8").replace("lunlat", "lunlatx", 1), encoding="utf-8")
    stale = _generate(f"--output-dir={tmp_path}", "--check")
    assert stale.returncode == 1 and f"{first} is stale" in stale.stderr
    first.unlink()
    missing = _generate(f"--output-dir={tmp_path}", "--check")
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_a_bad_goals_file_exits_2_naming_the_key(tmp_path: Path) -> None:
    goals = tmp_path / "goals.yaml"
    goals.write_text(
        GOALS.read_text(encoding="utf-8").replace("goal_ms: 1.0", "goal_ms: -1"), encoding="utf-8"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lunlat_dashboards",
            "generate",
            f"--goals={goals}",
            f"--output-dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and "goal_ms" in result.stderr
    assert not list(tmp_path.glob("*.json")), "wrote dashboards from a bad goals file"


def test_the_sdk_is_the_pinned_grafana_version() -> None:
    """The SDK's versions read EPOCH!GRAFANA_VERSION: the installed one generates for GRAFANA_VERSION."""
    assert version("grafana-foundation-sdk").endswith(f"!{GRAFANA_VERSION}")


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_round_trips_through_the_sdk_model(name: str) -> None:
    data = boards.load()[name]
    # to_json: as the SDK encodes it, less the `repeatDirection` its panel model puts back.
    again = to_json(Dashboard.from_json(data))
    assert again == data


def test_the_goal_comes_from_the_goals_file(tmp_path: Path) -> None:
    """Latency thresholds are the goal of alerts/goals.yaml: another goal, other thresholds."""
    goals = tmp_path / "goals.yaml"
    goals.write_text(
        GOALS.read_text(encoding="utf-8").replace("goal_ms: 1.0", "goal_ms: 2.5"), encoding="utf-8"
    )
    for name, text in render_all(load_goals(goals)).items():
        board = json.loads(text)
        for panel in boards.panels(board):
            if panel["fieldConfig"]["defaults"].get("unit") != "s":
                continue
            steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
            assert [s["value"] for s in steps] == [None, 0.0025], (name, panel["title"])
    default = load_goals(GOALS).default.goal_ms / 1000
    for board in boards.load().values():
        latency_steps = [
            p["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]
            for p in boards.panels(board)
            if p["fieldConfig"]["defaults"].get("unit") == "s"
        ]
        assert latency_steps and all(s == {"color": "red", "value": default} for s in latency_steps)


# --- the lint, on the committed dashboards and on broken copies -----------------------------


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboards_pass_the_lint(name: str) -> None:
    board = boards.load()[name]
    lun_names = {lun["name"] for lun in yaml.safe_load(LAB.read_text(encoding="utf-8"))["luns"]}
    problems = [
        *lint.variable_problems(name, board),
        *lint.panel_problems(name, board),
        *lint.query_problems(name, board, _metrics()),
        *lint.hard_coded_names(name, board, lun_names),
    ]
    assert not problems, "\n".join(problems)
    assert board["uid"].startswith("lunlat-") and len(board["uid"]) <= 40
    assert "lunlat" in board["tags"] and board["editable"] is False


def _first_target(board: dict[str, Any]) -> dict[str, Any]:
    panel = next(p for p in boards.panels(board) if p.get("targets"))
    target: dict[str, Any] = panel["targets"][0]
    return target


def test_the_lint_finds_what_grafanas_linter_would() -> None:
    name = "lunlat-overview.json"
    metrics = _metrics()

    def queries_of(mutate: Any) -> list[str]:
        board = _boards()[name]
        mutate(board)
        return lint.query_problems(name, board, metrics)

    def set_expr(expr: str) -> Any:
        return lambda board: _first_target(board).update(expr=expr)

    cases = {
        "not filtered by job": set_expr(
            'rate(lunlat_device_reads_completed_total{instance=~"$instance"}[$__rate_interval])'
        ),
        "not filtered by instance": set_expr(
            'rate(lunlat_device_reads_completed_total{job=~"$job"}[$__rate_interval])'
        ),
        "should be $__rate_interval": set_expr(
            'rate(lunlat_device_reads_completed_total{job=~"$job", instance=~"$instance"}[5m])'
        ),
        "without rate()": set_expr('lunlat_device_reads_completed_total{job=~"$job", instance=~"$instance"}'),
        "hard-coded lun": set_expr('lunlat:iops:rate1m{job=~"$job", instance=~"$instance", lun="ora_data"}'),
        "neither in the contract": set_expr('lunlat_made_up{job=~"$job", instance=~"$instance"}'),
        "not valid PromQL": set_expr(
            'sum(rate(lunlat_device_reads_completed_total{job=~"$job"}[$__rate_interval])'
        ),
        "names a device": set_expr('lunlat:iops:rate1m{job=~"$job", instance=~"$instance", device="sdb"}'),
    }
    for expected, mutate in cases.items():
        found = queries_of(mutate)
        assert any(expected in p for p in found), (expected, found)

    board = _boards()[name]
    panel = next(p for p in boards.panels(board) if p["type"] == "timeseries")
    panel["description"] = ""
    panel["fieldConfig"]["defaults"]["unit"] = "ms"
    panel["datasource"] = {"type": "prometheus", "uid": "prom-1"}
    found = lint.panel_problems(name, board)
    for expected in ("no description", "unit 'ms'", "datasource is not"):
        assert any(expected in p for p in found), (expected, found)

    board = _boards()[name]
    next(p for p in boards.panels(board) if p["type"] == "timeseries")["repeatDirection"] = "h"
    next(v for v in board["templating"]["list"] if v["name"] == "job")["label"] = "Scrape job"
    found = [*lint.panel_problems(name, board), *lint.variable_problems(name, board)]
    for expected in ("repeatDirection without repeat", "`job` is labelled 'Scrape job', not 'Job'"):
        assert any(expected in p for p in found), (expected, found)

    board = _boards()[name]
    board["templating"]["list"] = [v for v in board["templating"]["list"] if v["name"] != "instance"]
    board["templating"]["list"][1]["refresh"] = 1
    found = lint.variable_problems(name, board)
    assert any("`instance`" in p for p in found) and any("time range change" in p for p in found), found

    board = _boards()[name]
    _first_target(board)["legendFormat"] = "sqlserver1_data"
    assert lint.hard_coded_names(name, board, {"sqlserver1_data"})


# --- Oracle wait events: per-I/O latency only where one wait is one I/O ---------------------


def _measures_selected(selector: Any) -> set[str]:
    """The `measure` values a selector lets through (every one when it has no such matcher)."""
    matchers = {m.name: (m.op, m.value) for m in selector.matchers.matchers}
    if "measure" not in matchers:
        return set(oracle_events.MEASURES)
    op, value = matchers["measure"]
    if op == pp.MatchOp.Equal:
        return {value}
    assert op == pp.MatchOp.Re, f"measure matcher {op!r} is not = or =~"
    return {m for m in oracle_events.MEASURES if re.fullmatch(value, m)}


def _oracle_wait_selectors(name: str, board: dict[str, Any]) -> Iterator[tuple[boards.Query, bool, Any]]:
    """(query, is a division, selector) for every Oracle wait counter a board's query reads."""
    names = {oracle_metrics.ORACLE_WAIT_TIME.name, oracle_metrics.ORACLE_WAITS.name}
    for query in boards.queries(name, board):
        tree, error = lint.parse(board, query)
        assert tree is not None, error
        nodes = [node for node, _ in lint.walk(tree)]
        divides = any(isinstance(n, pp.BinaryExpr) and str(n.op) == "/" for n in nodes)
        for node in nodes:
            if isinstance(node, pp.VectorSelector) and node.name in names:
                yield query, divides, node


def test_oracle_time_per_wait_is_shown_only_for_per_io_and_commit_events() -> None:
    board = boards.load()["lunlat-database-io.json"]
    divisions = time_spent = 0
    for query, divides, selector in _oracle_wait_selectors("lunlat-database-io.json", board):
        selected = _measures_selected(selector)
        if divides:
            divisions += 1
            # A batched or asynchronous event's time / waits is no I/O's latency.
            assert "time_spent" not in selected, f"{query}: time / waits of time_spent events"
        elif selected == {"time_spent"}:
            time_spent += 1
    assert divisions >= 2  # the average wait per event and the commit panel
    assert time_spent >= 1  # the batched events are shown, as time spent


def test_the_docs_wait_event_table_is_the_code_table() -> None:
    text = (REPO / "docs" / "oracle.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Za-z ]+)` \| (\w+) \| (\w+) \| `(\w+)` \| (.+) \|$", text, re.MULTILINE)
    assert [(e, r, d, m) for e, r, d, m, _ in rows] == [
        (e.name, e.role, e.direction, e.measure) for e in oracle_events.EVENTS
    ]
    references = [e.reference for e in oracle_events.EVENTS]
    assert all(ref in why for ref, (*_, why) in zip(references, rows, strict=True))  # every row cited


def test_generate_runs_from_an_empty_directory_with_the_shipped_goals(tmp_path: Path) -> None:
    """No checkout needed: the goals default to the file lunlat-rules ships, the output to here."""
    result = subprocess.run(
        [sys.executable, "-m", "lunlat_dashboards", "generate"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(BOARDS)
    assert (tmp_path / "lunlat-overview.json").read_text(encoding="utf-8") == render_all(load_goals(GOALS))[
        "lunlat-overview.json"
    ]
