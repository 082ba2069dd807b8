"""SQL Server (and Azure SQL, Amazon RDS): files (sys.dm_io_virtual_file_stats) and I/O wait types."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from lunlat.engines.engine import Engine, FileLayer, Hints, TargetProblem, WaitLayer
from lunlat.engines.mssql import metrics
from lunlat.engines.mssql import waits as mssql_waits
from lunlat.engines.mssql.config import MssqlTarget
from lunlat.engines.mssql.source import MssqlSource


def _unregistered_drivers(found: Sequence[MssqlTarget]) -> list[TargetProblem]:
    """Targets naming an ODBC driver unixODBC does not know: the connect would fail with
    "Can't open lib"."""
    # The extra is present: check-config imports the driver before it asks (configfile.driver_problems).
    pyodbc = importlib.import_module("pyodbc")
    # pyodbc.drivers() lists what the driver manager's SQLDrivers returns (mkleehammer/pyodbc
    # src/pyodbcmodule.cpp mod_drivers), i.e. the names unixODBC has registered in odbcinst.ini:
    # the names a connection string's DRIVER= can take.
    known = list(pyodbc.drivers())
    problems: list[TargetProblem] = []
    for i, target in enumerate(found):
        if target.driver not in known:
            listed = ", ".join(repr(name) for name in known) or "none"
            problems.append(
                (
                    (i, "driver"),
                    f"{target.driver!r} is not registered with unixODBC (odbcinst -q -d lists: {listed}): "
                    "install that driver, or name one of these",
                )
            )
    return problems


ENGINE = Engine(
    key="mssql",
    title="SQL Server",
    target=MssqlTarget,
    source=MssqlSource,
    extra="mssql",
    driver_module="pyodbc",
    driver_name="pyodbc",
    metrics=metrics.MSSQL_METRICS,
    capabilities=metrics.CAPABILITIES,
    # The file stall as SQL Server reports it, with no queued part taken out: io_stall_*_ms is the time
    # "users waited" for the file's I/Os and io_stall_queued_*_ms the "IO latency introduced by IO
    # resource governance" (sys.dm_io_virtual_file_stats,
    # https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-io-virtual-file-stats-transact-sql);
    # no Microsoft page says the first includes the second and no peer subtracts it (Telegraf publishes
    # both as read, plugins/inputs/sqlserver/sqlserverqueries.go), so the queued stall is published
    # beside it (MSSQL_FILE_*_QUEUED_STALL, the dashboards' throttling panel) and left out of the layer.
    # The write stall of a Hyperscale page server's data file is simulated by the service: it is never in
    # MSSQL_FILE_WRITE_STALL (metrics.MSSQL_FILE_SIMULATED_WRITE_STALL), so the layer never averages it.
    files=FileLayer(
        metrics.MSSQL_FILE_READS,
        metrics.MSSQL_FILE_WRITES,
        metrics.MSSQL_FILE_READ_STALL,
        metrics.MSSQL_FILE_WRITE_STALL,
        metrics.MSSQL_FILE_READ_BYTES,
        metrics.MSSQL_FILE_WRITE_BYTES,
    ),
    # SQL Server keeps no per-I/O wait of the log write: WRITELOG is the commit's wait for its log
    # flush (per_commit, Oracle's 'log file sync' counterpart), HADR_SYNC_COMMIT the replica's share of
    # the same commit (waits.py, each with its Microsoft page); the log file's write stall is the
    # per-I/O side (the database layer of the rules).
    waits=WaitLayer(
        metrics.MSSQL_WAITS,
        metrics.MSSQL_WAIT_TIME,
        label="wait_type",
        log_write="WRITELOG",
        replica="HADR_SYNC_COMMIT",
        data_read="PAGEIOLATCH_.*",
        measure_of=mssql_waits.measure_of,
    ),
    hints=Hints(
        data_read="SQL Server PAGEIOLATCH_*",
        log_write="SQL Server WRITELOG, the commit's wait for its log flush, not one write",
        # Azure SQL's transaction log rate governance (engines/mssql/sql.py IO_WAITS, role throttle)
        log_throttle="Azure SQL LOG_RATE_GOVERNOR, POOL_LOG_RATE_GOVERNOR, INSTANCE_LOG_RATE_GOVERNOR, "
        "HADR_THROTTLE_LOG_RATE_*, Hyperscale RBIO_RG_*",
    ),
    host_problems=_unregistered_drivers,
    install_hint=" (and an ODBC driver)",
)
