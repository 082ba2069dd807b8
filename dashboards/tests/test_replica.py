"""The Database I/O dashboard's log panels show a synchronous replica's waits as their own series,
one panel per engine that keeps waits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lunlat.engines.registry import ENGINES

REPO = Path(__file__).resolve().parents[2]


def _log_panels() -> list[dict[str, Any]]:
    board = json.loads((REPO / "dashboards" / "lunlat-database-io.json").read_text(encoding="utf-8"))
    return [x for x in board["panels"] if str(x.get("title", "")).startswith("Log writes")]


def test_each_engines_log_panel_shows_its_replica_waits_as_their_own_series() -> None:
    panels = _log_panels()
    engines = [engine for engine in ENGINES if engine.waits is not None]
    assert len(panels) == len(engines)
    for engine in engines:
        assert engine.waits is not None
        time_metric, replica_wait = engine.waits.time.name, engine.waits.replica
        (panel,) = [x for x in panels if any(time_metric in t["expr"] for t in x["targets"])]
        replica = [t for t in panel["targets"] if 'role="replica"' in t["expr"]]
        assert replica and all(t["legendFormat"].startswith("replica ") for t in replica), engine.key
        # The LUN series never sum the replica in: they select their own waits by name.
        for target in panel["targets"]:
            if target not in replica:
                assert replica_wait not in target["expr"], (engine.key, target["expr"])
        assert "replica" in panel["description"]
