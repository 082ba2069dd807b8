"""The overview's why row (lunlat_dashboards/why.py): the breach alerts' neighbours and cause over
time, each ratio panel's red line at the threshold the alerts' verdict uses (lunlat_rules/cause.py)."""

from __future__ import annotations

import json
from typing import Any

from dashboards.tests import boards
from lunlat import contract
from lunlat.goals import parse_goals
from lunlat.promql import recorded
from lunlat_dashboards import render_all
from lunlat_dashboards.why import WHY_ROW
from lunlat_rules import cause

NAME = "lunlat-overview.json"


def _red_line(panel: dict[str, Any]) -> float:
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    (red,) = [step["value"] for step in steps if step["color"] == "red"]
    return float(red)


def test_the_why_row_follows_the_breaches_and_draws_the_verdicts_thresholds() -> None:
    board = json.loads(render_all(parse_goals(""))[NAME])
    rows = [panel["title"] for panel in board["panels"] if panel.get("type") == "row"]
    assert rows[:2] == ["Now", WHY_ROW]
    panels = {panel["title"]: panel for panel in boards.row_panels(board, WHY_ROW)}
    assert list(panels) == [
        "Throughput on the shown LUNs' arrays",
        "Time in the host's queue",
        "In flight against the queue limit",
        "The array's share of the host's latency",
    ]
    load = panels["Throughput on the shown LUNs' arrays"]["targets"][0]["expr"]
    assert recorded.THROUGHPUT.format(window=recorded.BREACH_WINDOW) in load
    assert f'array!="{contract.ARRAY_UNKNOWN}"' in load and "and on (array)" in load
    for title, metric, threshold in (
        ("Time in the host's queue", contract.DEVICE_IO_QUEUE_TIME.name, cause.QUEUE_SHARE),
        ("In flight against the queue limit", contract.DEVICE_NR_REQUESTS.name, cause.IN_FLIGHT_OF_LIMIT),
        (
            "The array's share of the host's latency",
            recorded.HOST_MINUS_ARRAY.format(window="1m"),
            cause.ARRAY_SHARE,
        ),
    ):
        panel = panels[title]
        assert panel["fieldConfig"]["defaults"]["unit"] == "percentunit"
        assert any(metric in target["expr"] for target in panel["targets"]), title
        assert _red_line(panel) == threshold, title
    limit = panels["In flight against the queue limit"]["targets"][0]["expr"]
    assert contract.DEVICE_QUEUE_DEPTH.name in limit and '"limit", "queue_depth"' in limit
