"""SQL Server's rows of the Database I/O dashboard (data: `spec.DashboardRow`; `database_io` draws them)."""

from __future__ import annotations

from lunlat.engines.mssql import metrics
from lunlat.ground import MetricSpec
from lunlat_dashboards.engine_rows.spec import DashboardRow, Panel, PanelQuery, PerFile, PerWait

BY_WAIT = "job, instance, database, wait_type, measure"
LOG_WAIT = "WRITELOG"
DATA_WAITS = "PAGEIOLATCH_.*"
# Each panel's waits are of one measure (engines/mssql/waits.py): a per-commit wait is never averaged
# with a per-latch or per-I/O one.
PER_COMMIT = "per_commit"
PER_LATCH = "per_latch"


def _stall(op: str, time: MetricSpec, operations: MetricSpec) -> Panel:
    return Panel(
        f"SQL Server {op} stall per file",
        f"Average {op} stall of each database file: Δ io_stall_{op}_ms / Δ num_of_{op}s from "
        "sys.dm_io_virtual_file_stats. A single red file on a green LUN is that file's access "
        "pattern; every file of a LUN red together is the LUN (compare the host layer above).",
        (PanelQuery(PerFile(time, operations), "{{database}} {{db}} {{file}}"),),
    )


ROWS: tuple[DashboardRow, ...] = (
    DashboardRow(
        "SQL Server files and waits",
        (
            _stall("read", metrics.MSSQL_FILE_READ_STALL, metrics.MSSQL_FILE_READS),
            _stall("write", metrics.MSSQL_FILE_WRITE_STALL, metrics.MSSQL_FILE_WRITES),
            Panel(
                "SQL Server Resource Governor queue per file (throttling)",
                "Average time each I/O of a file waited in Resource Governor's queue before SQL Server issued "
                "it: Δ io_stall_queued_read_ms (write_ms) / Δ I/Os, SQL Server 2014 and later (none on 2012). "
                "It is throttling (a resource pool's IOPS limit, Azure SQL's governance), not the LUN. No "
                "Microsoft page says whether the stall above includes it, so the rules judge that stall as "
                "SQL Server reports it and never subtract this (docs/mssql.md). Red here with the LUN green: "
                "raise the pool's limit or the service tier, not the storage.",
                (
                    PanelQuery(
                        PerFile(metrics.MSSQL_FILE_READ_QUEUED_STALL, metrics.MSSQL_FILE_READS),
                        "read {{database}} {{db}} {{file}}",
                    ),
                    PanelQuery(
                        PerFile(metrics.MSSQL_FILE_WRITE_QUEUED_STALL, metrics.MSSQL_FILE_WRITES),
                        "write {{database}} {{db}} {{file}}",
                    ),
                ),
                span=24,
                height=8,
            ),
            Panel(
                "Log writes: WRITELOG and the replica",
                "What a commit waits for: the average WRITELOG wait, a commit's wait for its log flush "
                "(measure per_commit, Microsoft's sys.dm_os_wait_stats), not "
                "one log write: the log file's write stall above is the per-I/O side. WRITELOG well above "
                "that stall: the log writer is queueing (too many small commits, a log on a shared LUN); "
                "both red: the log LUN. The 'replica' series (HADR_SYNC_COMMIT, per commit too) are a "
                "synchronous replica's network and remote log write: high there with WRITELOG green, the "
                "time goes to the replica, not the log LUN.",
                (
                    PanelQuery(
                        PerWait(
                            metrics.MSSQL_WAIT_TIME,
                            metrics.MSSQL_WAITS,
                            BY_WAIT,
                            (("wait_type", LOG_WAIT), ("measure", PER_COMMIT)),
                        ),
                        "{{wait_type}} {{database}}",
                    ),
                    PanelQuery(
                        PerWait(
                            metrics.MSSQL_WAIT_TIME,
                            metrics.MSSQL_WAITS,
                            BY_WAIT,
                            (("measure", PER_COMMIT),),
                            replica=True,
                        ),
                        "replica {{wait_type}} {{database}}",
                    ),
                ),
            ),
            Panel(
                "SQL Server data page waits (PAGEIOLATCH)",
                "Average wait of sessions for a data page being read from disk (PAGEIOLATCH_SH/EX/UP/DT/KP, "
                "resource wait: the signal wait for a CPU afterwards is left out). Measure per_latch: one "
                "task's wait on the latch of a buffer in an I/O request (Microsoft, sys.dm_os_wait_stats), "
                "so tasks waiting on the same page each count and a wait starts when the task asks, not "
                "when the read was issued: what queries feel of the data LUN's reads, not one read's "
                "latency (the read stall above is). Red with the data LUN green: the reads queue in "
                "SQL Server (too many at once: missing indexes, scans); red with the LUN red: storage.",
                (
                    PanelQuery(
                        PerWait(
                            metrics.MSSQL_WAIT_TIME,
                            metrics.MSSQL_WAITS,
                            BY_WAIT,
                            (("wait_type", f'=~"{DATA_WAITS}"'), ("measure", PER_LATCH)),
                        ),
                        "{{wait_type}} {{database}}",
                    ),
                ),
            ),
        ),
    ),
)
