"""The Database I/O dashboard's Windows volumes row: drawn only when the goals read the host layer
from windows_exporter (docs/host-layer.md), from the series the rules record for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dashboards.tests import boards, lint
from lunlat.goals import load_goals, parse_goals
from lunlat_dashboards import render_all
from lunlat_dashboards.database_io import WINDOWS_DISK_ROW, WINDOWS_ROW
from lunlat_rules.rules import render

REPO = Path(__file__).resolve().parents[2]
WINDOWS_GOALS = REPO / "alerts" / "tests" / "host_layers" / "windows_exporter.goals.yaml"
NAME = "lunlat-database-io.json"


def _rows(board: dict[str, Any]) -> list[str]:
    return [panel["title"] for panel in board["panels"] if panel.get("type") == "row"]


def test_the_windows_row_is_drawn_for_a_windows_exporter_host_layer_only() -> None:
    goals = load_goals(WINDOWS_GOALS)
    board = json.loads(render_all(goals)[NAME])
    assert _rows(board)[-2:] == [WINDOWS_ROW, WINDOWS_DISK_ROW]
    panels = boards.row_panels(board, WINDOWS_ROW)
    assert [p["title"] for p in panels] == [
        "Volume latency on the Windows database host",
        "Volume I/O per second on the Windows database host",
    ]
    assert all('layer="host"' in t["expr"] for p in panels for t in p["targets"])
    # The physical disk under each volume, from the series the rules record for it (never judged).
    disks = boards.row_panels(board, WINDOWS_DISK_ROW)
    assert [p["title"] for p in disks] == [
        "Physical disk latency under each volume",
        "Physical disk I/O per second under each volume",
    ]
    assert all(t["expr"].startswith("lunlat:physical_disk_") for p in disks for t in p["targets"])
    for source in ("", "host_layer: {source: node_exporter, selector: 'job=\"node\"'}\n"):
        rows = _rows(json.loads(render_all(parse_goals(source))[NAME]))
        assert WINDOWS_ROW not in rows and WINDOWS_DISK_ROW not in rows


def test_the_windows_row_passes_the_lint_against_the_rules_of_the_same_goals() -> None:
    goals = load_goals(WINDOWS_GOALS)
    board = json.loads(render_all(goals)[NAME])
    problems = [
        *lint.panel_problems(NAME, board),
        *lint.query_problems(NAME, board, lint.known_metrics(render(goals))),
    ]
    assert not problems, "\n".join(problems)
