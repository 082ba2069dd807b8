"""Grafana dashboards generated as code (grafana-foundation-sdk, pinned to one Grafana version).

`lunlat-dashboards generate` writes one JSON file per dashboard (into dashboards/ in the
repository); `--check` fails when a committed file differs (CI). Goal, metric and label names come from the goal definition
(`alerts/goals.yaml`), the metric contract and the recorded rule names, the same sources as the
rules, so a renamed metric or a changed goal cannot leave a dashboard behind.

The dashboards' mixin: the exporter does not need it (nor the SDK).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

from lunlat.goals import Goals
from lunlat_dashboards import database_io, interference, overview, reference

# The Grafana version the SDK's models are generated for; docker-compose.yml runs the same.
GRAFANA_VERSION = "11.6.0"

# File name (in dashboards/) → builder.
BOARDS: dict[str, Callable[[Goals], dash.Dashboard]] = {
    "lunlat-overview.json": overview.build,
    "lunlat-database-io.json": database_io.build,
    "lunlat-workload-interference.json": interference.build,
    "lunlat-reference-tables.json": reference.build,
}


def _number_panels(board: model.Dashboard) -> None:
    """Unique panel ids in reading order (Grafana keys panel state and links on them)."""
    next_id = 1
    for panel in board.panels or []:
        panel.id_val = next_id
        next_id += 1
        for inner in getattr(panel, "panels", None) or []:
            inner.id_val = next_id
            next_id += 1


def _drop_lone_repeat_direction(panels: list[dict[str, Any]]) -> None:
    """The SDK's panel builder sets `repeatDirection` ("h") on every panel; it only means something
    beside `repeat` (how the repeated copies are laid out), and Grafana's dashboard-linter reports it
    elsewhere (issue 42)."""
    for panel in panels:
        if not panel.get("repeat"):
            panel.pop("repeatDirection", None)
        _drop_lone_repeat_direction(panel.get("panels") or [])


def to_json(board: model.Dashboard) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (plain dicts), as the SDK encodes it, less a
    `repeatDirection` without `repeat`."""
    data: dict[str, Any] = json.loads(json.dumps(board, cls=JSONEncoder))
    _drop_lone_repeat_direction(data.get("panels") or [])
    return data


def render_all(goals: Goals) -> dict[str, str]:
    """File name → JSON text for every dashboard."""
    files: dict[str, str] = {}
    for name, build in BOARDS.items():
        board = build(goals).build()
        _number_panels(board)
        files[name] = json.dumps(to_json(board), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return files
