"""The SQL Server database layer (lunlat.promql.layers, which the rules and the report share): what its latency rests on."""

from __future__ import annotations

import pytest

from lunlat.engines.mssql import metrics as m
from lunlat.engines.registry import engine
from lunlat.promql.layers import db_layer


@pytest.mark.parametrize("op", ["read", "write"])
def test_the_file_latency_is_the_stall_sql_server_reports_not_less_its_queued_part(op: str) -> None:
    """sys.dm_io_virtual_file_stats documents io_stall_*_ms as the time "users waited" for the file's
    I/Os and io_stall_queued_*_ms as the "IO latency introduced by IO resource governance"; no
    Microsoft page says the first includes the second, and no peer subtracts it (Telegraf publishes
    both as they are, influxdata/telegraf plugins/inputs/sqlserver/sqlserverqueries.go). So the layer
    divides the stall by the I/Os, and the queued stall stays its own series (issue 28, item 6)."""
    expr = db_layer(engine("mssql"), 'job="lunlat"').time(op, "5m")
    stall = m.MSSQL_FILE_READ_STALL if op == "read" else m.MSSQL_FILE_WRITE_STALL
    assert stall.name in expr
    assert (
        m.MSSQL_FILE_READ_QUEUED_STALL.name not in expr and m.MSSQL_FILE_WRITE_QUEUED_STALL.name not in expr
    )
