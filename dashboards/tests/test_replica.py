"""The Database I/O dashboard's log panel shows a synchronous replica's waits as their own series."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.oracle import metrics as oracle_metrics

REPO = Path(__file__).resolve().parents[2]


def _log_panel() -> dict[str, Any]:
    board = json.loads((REPO / "dashboards" / "lunlat-database-io.json").read_text(encoding="utf-8"))
    (panel,) = [x for x in board["panels"] if str(x.get("title", "")).startswith("Log writes")]
    assert isinstance(panel, dict)
    return panel


def test_the_log_panel_shows_replica_waits_as_their_own_series_of_each_engine() -> None:
    panel = _log_panel()
    replica = [t for t in panel["targets"] if 'role="replica"' in t["expr"]]
    metrics = {m.name for m in (mssql_metrics.MSSQL_WAIT_TIME, oracle_metrics.ORACLE_WAIT_TIME)}
    assert {m for t in replica for m in metrics if m in t["expr"]} == metrics
    assert all(t["legendFormat"].startswith("replica ") for t in replica)
    # The LUN series never sum the replica in: they select their own wait types and events by name.
    for target in panel["targets"]:
        if target not in replica:
            assert "HADR_SYNC_COMMIT" not in target["expr"] and "SYNC Remote Write" not in target["expr"]
    assert "replica" in panel["description"]
