"""What one wait is, per engine: the `measure` of each wait type and event, and the rules that never add
waits of different measures (a SQL Server commit's WRITELOG to Oracle's per-I/O 'log file parallel write')."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lunlat.engines.engine import WaitLayer
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql import waits as mssql_waits
from lunlat.engines.oracle import events as oracle_events
from lunlat.engines.registry import ENGINES
from lunlat_rules import breach

REPO = Path(__file__).resolve().parents[2]


def test_writelog_is_a_commits_wait_like_log_file_sync_never_a_per_io_one() -> None:
    # Microsoft: WRITELOG "Occurs while waiting for a log flush to complete. Common operations that
    # cause log flushes are checkpoints and transaction commits." Oracle: 'log file sync' is the
    # committing session's wait for LGWR's write and post; 'log file parallel write' LGWR's per-I/O wait.
    assert mssql_waits.measure_of("WRITELOG") == oracle_events.measure_of("log file sync") == "per_commit"
    assert oracle_events.measure_of("log file parallel write") == "per_io"
    assert mssql_waits.measure_of("HADR_SYNC_COMMIT") == "per_commit"
    assert mssql_waits.measure_of("PAGEIOLATCH_SH") == "per_latch"
    assert mssql_waits.measure_of("IO_COMPLETION") == "time_spent"
    assert mssql_waits.measure_of("SOS_SCHEDULER_YIELD") == ""  # not read: no measure
    assert set(mssql_waits.MEASURES) >= {w.measure for w in mssql_waits.WAIT_TYPES}


def test_each_engines_log_wait_and_replica_wait_share_one_measure() -> None:
    layers = [engine.waits for engine in ENGINES if engine.waits is not None]
    assert {w.label: w.measure_of(w.log_write) for w in layers} == {
        "event": "per_io",
        "wait_type": "per_commit",
    }
    for layer in layers:
        assert layer.measure_of(layer.replica) == layer.measure_of(layer.log_write)


def test_a_wait_layer_refuses_a_replica_of_another_measure_than_its_log_wait() -> None:
    with pytest.raises(ValueError, match="one measure"):
        WaitLayer(
            mssql_metrics.MSSQL_WAITS,
            mssql_metrics.MSSQL_WAIT_TIME,
            label="wait_type",
            log_write="WRITELOG",
            replica="SYNC Remote Write",  # Oracle's per-I/O wait beside SQL Server's per-commit one
            data_read="PAGEIOLATCH_.*",
            measure_of=lambda name: mssql_waits.measure_of(name) or oracle_events.measure_of(name),
        )


def test_the_replica_share_is_summed_by_measure_for_the_alerts_own_target() -> None:
    hint = breach.ROLE_HINT["log"]["write"]
    share = re.search(r"printf `(.*?)`", hint)
    assert share is not None
    sums = re.findall(r"sum(?: by \(([^)]*)\))? \(rate\(\{([^}]*)\}", share.group(1))
    assert len(sums) == 2
    for by, selector in sums:
        assert by == "measure", "a sum over measures would add a per-commit wait to a per-I/O one"
        for label in ("job", "instance", "database"):
            assert f"{label}=%q" in selector
        assert 'measure=~"per_commit|per_io"' in selector


def test_the_docs_table_of_sql_server_wait_types_is_the_code_table() -> None:
    text = (REPO / "docs" / "mssql.md").read_text(encoding="utf-8")
    section = text.split("\n## Wait types: what one wait is\n", 1)[1].split("\n## ", 1)[0]
    header, _rule, *rows = [line for line in section.splitlines() if line.startswith("|")]
    assert header == "| wait type | role | measure | one wait is |"
    cells = [[cell.strip() for cell in row.split("|")[1:-1]] for row in rows]
    assert [(name, role, measure) for name, role, measure, _ in cells] == [
        (f"`{w.name}`", w.role, f"`{w.measure}`") for w in mssql_waits.WAIT_TYPES
    ]
    assert [why for *_, why in cells] == [
        f"{w.why} ([Microsoft]({w.reference}))" for w in mssql_waits.WAIT_TYPES
    ]
    assert "`throttle`" in section and "LOG_RATE_GOVERNOR" in section
