"""Database I/O: what Oracle and SQL Server see, beside what the host sees for the same LUN.

The database layer (Oracle V$IOSTAT_FILE and wait events, SQL Server dm_io_virtual_file_stats and
wait stats) measures from the database's side of the I/O stack; the host layer (diskstats) from the
block device. Their difference is time spent above the array: the host's queues, the HBA, the
fabric. A DBA and a storage admin look at the same LUN here and see whose side the time is on.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import heatmap

from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.goals import Goals
from lunlat_dashboards import panels as p

UID = "lunlat-database-io"
# Series of the database layer carry these labels (Oracle's and SQL Server's wait series only
# database and role: they are per instance, not per file).
WAIT_FILTERS: tuple[p.Var, ...] = (p.DATABASE, p.ROLE)
ORACLE_EVENTS = {
    "db file sequential read": "single-block data reads (index lookups): OLTP's read latency",
    "log file parallel write": "LGWR's redo writes: the log LUN's write latency as Oracle sees it",
}
COMMIT_EVENTS = ("log file parallel write", "log file sync")
# Time / waits is a latency only where one wait is one I/O (or one commit): engines/oracle/events.py.
PER_WAIT_MEASURES = '=~"per_io|per_commit"'

MSSQL_LOG_WAIT = "WRITELOG"
# A synchronous replica's or standby's waits (Data Guard 'SYNC Remote Write', SQL Server
# HADR_SYNC_COMMIT) carry role="replica" (engines/oracle/events.py, mssql_sql.py): the log panel
# shows them as their own series, so a slow replica reads as "replica", never as the log LUN.
REPLICA_ROLE = "replica"
MSSQL_DATA_WAITS = "PAGEIOLATCH_.*"
GAP_DESCRIPTION = (
    "Database layer minus host layer for the same LUN, database and role: the database's average I/O "
    "time minus the block device's. The gap is time spent above the array: the database's own I/O "
    "queue, the host's block layer and multipath queues, the HBA and the fabric. Near zero: the host "
    "adds nothing, the time is the array's. Growing while the host layer stays green: look at the host "
    "and the path (queue depth, multipath path failures, HBA errors, fabric congestion), not the "
    "array. Negative values are rounding of the databases' millisecond counters at low IOPS."
)


def _layers(op: str, role: str) -> str:
    return p.selector(p.latency(op), p.LUN_FILTERS, layer='=~"db|host"', role=role)


def _gap(op: str) -> str:
    db = p.selector(p.latency(op), p.LUN_FILTERS, layer="db")
    host = p.selector(p.latency(op), p.LUN_FILTERS, layer="host")
    # The db layer's series carry the rules' `engine` label, the host layer's do not.
    return f"{db}\n- ignoring (layer, engine)\n{host}"


def _per_wait(time_metric: str, waits_metric: str, by: str, **fixed: str) -> str:
    """Average wait = Δ time waited / Δ waits, exact from the two counters (never the histogram)."""
    time_rate = p.rate(time_metric, WAIT_FILTERS, **fixed)
    waits_rate = p.rate(waits_metric, WAIT_FILTERS, **fixed)
    return f"sum by ({by}) ({time_rate})\n/\n(sum by ({by}) ({waits_rate}) > 0)"


def _replica_wait(time_metric: str, waits_metric: str, by: str, **fixed: str) -> str:
    """Average replica wait. Filtered by database only: the role variable lists LUN roles, and a
    replica wait has none of them (its role is fixed here)."""
    time_rate = p.rate(time_metric, (p.DATABASE,), role=REPLICA_ROLE, **fixed)
    waits_rate = p.rate(waits_metric, (p.DATABASE,), role=REPLICA_ROLE, **fixed)
    return f"sum by ({by}) ({time_rate})\n/\n(sum by ({by}) ({waits_rate}) > 0)"


def _per_file(time_metric: str, ops_metric: str) -> str:
    by = "job, instance, database, db, file, role, lun"
    time_rate = p.rate(time_metric, p.LUN_FILTERS)
    ops_rate = p.rate(ops_metric, p.LUN_FILTERS)
    return f"sum by ({by}) ({time_rate})\n/\n(sum by ({by}) ({ops_rate}) > 0)"


def _heatmap(event: str, meaning: str) -> heatmap.Panel:
    buckets = p.rate(oracle_metrics.ORACLE_WAIT_DURATION.name + "_bucket", WAIT_FILTERS, event=event)
    return (
        p.latency_heatmap(
            f"Oracle '{event}' latency distribution",
            f"How long each '{event}' wait took ({meaning}), from V$EVENT_HISTOGRAM_MICRO: each column "
            "is a time step, each cell a power-of-two latency bucket, its colour how many waits per second "
            "fell in it. Averages hide tails: a band creeping above the 1 ms line (the 512 µs-1 ms and "
            "1-2 ms buckets) while the average stays green is the first sign of trouble. Mass above 1 ms: "
            "compare with the host layer's latency of the same LUN (above) to place the time.",
            f"sum by (le) ({buckets})",
        )
        .span(12)
        .height(9)
    )


def build(goals: Goals) -> dash.Dashboard:
    hist = oracle_metrics.ORACLE_WAIT_DURATION.name + "_bucket"
    event_sel = '=~"' + "|".join([*ORACLE_EVENTS, "log file sync"]) + '"'
    quantile_source = f"sum by (database, event, le) ({p.rate(hist, WAIT_FILTERS, event=event_sel)})"
    board = (
        p.dashboard(
            UID,
            "lunlat / Database I/O",
            "Oracle and SQL Server I/O latency as the databases see it, beside the host layer of the same LUNs.",
        )
        .variables(p.standard_variables(p.IOPS_RECORDED, 'layer="db"'))
        .annotation(p.alerts_annotation())
        .with_row(dash.Row("Database layer beside host layer"))
    )
    layer_legend = "{{database}} {{role}} {{layer}} · {{lun}}"
    for role, op, what in (
        ("data", "read", "data file reads"),
        ("data", "write", "data file writes (checkpoints, DBWR, lazy writer)"),
        ("log", "write", "log writes (every commit waits for them)"),
    ):
        board = board.with_panel(
            p.latency_timeseries(
                f"{role.capitalize()} {op} latency: database vs host",
                f"1-minute average latency of {what}: `layer=db` is the database's own counter (Oracle "
                "V$IOSTAT_FILE, SQL Server dm_io_virtual_file_stats), `layer=host` the LUN's block device. "
                "The database's value includes everything the host's does plus the queueing above the "
                "array (host, HBA, fabric): when both are red, the array is slow; when only the database "
                "layer is, see the gap panel. Red line: the goal.",
                goals,
                [p.query(_layers(op, role), layer_legend)],
            )
            .span(8)
            .height(9)
        )
    board = board.with_panel(
        p.latency_timeseries(
            "Gap: database minus host",
            GAP_DESCRIPTION,
            goals,
            [
                p.query(_gap("read"), "read {{database}} {{role}} · {{lun}}", "A"),
                p.query(_gap("write"), "write {{database}} {{role}} · {{lun}}", "B"),
            ],
        )
        .min(-0.001)
        .span(24)
        .height(8)
    )

    board = board.with_row(dash.Row("Oracle wait events (µs precision)"))
    for event, meaning in ORACLE_EVENTS.items():
        board = board.with_panel(_heatmap(event, meaning))
    board = (
        board.with_panel(
            p.latency_timeseries(
                "Oracle wait percentiles",
                "p50 and p99 of the I/O wait events from their histograms. The buckets are powers of two "
                "(…, 512 µs, 1.02 ms, 2.05 ms, …) and a percentile is interpolated inside one, so read a p99 "
                "of 800 µs as 'between 512 µs and 1 ms'. p99 above the goal with a green average: a tail a "
                "few sessions feel (a busy path, a slow disk in the group); find the LUN in the overview.",
                goals,
                [
                    p.query(f"histogram_quantile(0.5, {quantile_source})", "p50 {{event}} {{database}}", "A"),
                    p.query(
                        f"histogram_quantile(0.99, {quantile_source})", "p99 {{event}} {{database}}", "B"
                    ),
                ],
            )
            .span(12)
            .height(9)
        )
        .with_panel(
            p.latency_timeseries(
                "Oracle average wait per I/O event",
                'Average wait of each event whose wait is one I/O (`measure="per_io"`), and of \'log file '
                "sync' (one commit): Δ TIME_WAITED_MICRO / Δ TOTAL_WAITS (exact to the µs; Oracle's rounded "
                "ms and cs columns are never read). 'db file sequential read' is the data read latency OLTP "
                "feels, 'log file parallel write' the redo write, 'log file sync' the commit (redo write plus "
                "LGWR's post: when it is far above the redo write, the time is CPU or scheduling, not "
                "storage). Batched and asynchronous events (direct path, db file parallel read/write) are not "
                "here: their time per wait is no I/O's latency; see the time spent panel.",
                goals,
                [
                    p.query(
                        _per_wait(
                            oracle_metrics.ORACLE_WAIT_TIME.name,
                            oracle_metrics.ORACLE_WAITS.name,
                            "job, instance, database, event",
                            measure=PER_WAIT_MEASURES,
                        ),
                        "{{event}} {{database}}",
                    )
                ],
            )
            .span(12)
            .height(9)
        )
        .with_panel(
            p.rate_timeseries(
                "Oracle time spent in batched and asynchronous I/O waits",
                "Seconds waited per second (Δ TIME_WAITED_MICRO) for the events whose one wait covers part "
                'of a batch of I/Os (`measure="time_spent"`): direct path reads and writes wait only for '
                "the outstanding asynchronous I/Os, DBWR's 'db file parallel write' for some of its writes, "
                "'db file parallel read' for a whole batch. Time / waits of these is no I/O's latency, so "
                "only the time is shown: a rise is more time lost to that I/O (more of it, or slower), to be "
                "placed with the file and host layers above. Seconds per second is the number of processes "
                "waiting on average: 2 means two at any time.",
                p.COUNT,
                [
                    p.query(
                        "sum by (job, instance, database, event) ("
                        + p.rate(oracle_metrics.ORACLE_WAIT_TIME.name, WAIT_FILTERS, measure="time_spent")
                        + ")",
                        "{{event}} {{database}}",
                    )
                ],
            )
            .span(12)
            .height(9)
        )
    )

    board = board.with_row(dash.Row("SQL Server files and waits"))
    for op, spec_time, spec_ops in (
        ("read", mssql_metrics.MSSQL_FILE_READ_STALL, mssql_metrics.MSSQL_FILE_READS),
        ("write", mssql_metrics.MSSQL_FILE_WRITE_STALL, mssql_metrics.MSSQL_FILE_WRITES),
    ):
        board = board.with_panel(
            p.latency_timeseries(
                f"SQL Server {op} stall per file",
                f"Average {op} stall of each database file: Δ io_stall_{op}_ms / Δ num_of_{op}s from "
                "sys.dm_io_virtual_file_stats. A single red file on a green LUN is that file's access "
                "pattern; every file of a LUN red together is the LUN (compare the host layer above).",
                goals,
                [p.query(_per_file(spec_time.name, spec_ops.name), "{{database}} {{db}} {{file}}")],
            )
            .span(12)
            .height(9)
        )
    board = board.with_panel(
        p.latency_timeseries(
            "SQL Server Resource Governor queue per file (throttling)",
            "Average time each I/O of a file waited in Resource Governor's queue before SQL Server issued "
            "it: Δ io_stall_queued_read_ms (write_ms) / Δ I/Os, SQL Server 2014 and later (none on 2012). "
            "It is inside the stall above but is throttling (a resource pool's IOPS limit, Azure SQL's "
            "governance), not the LUN: the database layer of the rules leaves it out. Red here with the "
            "LUN green: raise the pool's limit or the service tier, not the storage.",
            goals,
            [
                p.query(
                    _per_file(queued.name, ops.name),
                    f"{op} {{{{database}}}} {{{{db}}}} {{{{file}}}}",
                    ref,
                )
                for op, queued, ops, ref in (
                    ("read", mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL, mssql_metrics.MSSQL_FILE_READS, "A"),
                    (
                        "write",
                        mssql_metrics.MSSQL_FILE_WRITE_QUEUED_STALL,
                        mssql_metrics.MSSQL_FILE_WRITES,
                        "B",
                    ),
                )
            ],
        )
        .span(24)
        .height(8)
    )
    wait_time, wait_count = mssql_metrics.MSSQL_WAIT_TIME.name, mssql_metrics.MSSQL_WAITS.name
    board = board.with_panel(
        p.latency_timeseries(
            "Log writes: WRITELOG and log file parallel write, and the replica",
            "What a commit waits for on each engine: SQL Server's average WRITELOG wait and Oracle's 'log "
            "file parallel write' and 'log file sync'. These follow the log LUN's write latency; above it, "
            "the log writer is queueing (too many small commits, a log on a shared LUN). Red: move the log "
            "to a LUN of its own or batch commits; check the log LUN in the overview. The 'replica' series "
            "(SQL Server HADR_SYNC_COMMIT, Oracle Data Guard 'SYNC Remote Write') are a synchronous "
            "replica's network and remote log write: high there with WRITELOG and 'log file parallel "
            "write' green, the time goes to the replica, not the log LUN.",
            goals,
            [
                p.query(
                    _per_wait(
                        wait_time, wait_count, "job, instance, database, wait_type", wait_type=MSSQL_LOG_WAIT
                    ),
                    "{{wait_type}} {{database}}",
                    "A",
                ),
                p.query(
                    _per_wait(
                        oracle_metrics.ORACLE_WAIT_TIME.name,
                        oracle_metrics.ORACLE_WAITS.name,
                        "job, instance, database, event",
                        event='=~"' + "|".join(COMMIT_EVENTS) + '"',
                        measure=PER_WAIT_MEASURES,
                    ),
                    "{{event}} {{database}}",
                    "B",
                ),
                p.query(
                    _replica_wait(wait_time, wait_count, "job, instance, database, wait_type"),
                    "replica {{wait_type}} {{database}}",
                    "C",
                ),
                p.query(
                    _replica_wait(
                        oracle_metrics.ORACLE_WAIT_TIME.name,
                        oracle_metrics.ORACLE_WAITS.name,
                        "job, instance, database, event",
                        measure=PER_WAIT_MEASURES,
                    ),
                    "replica {{event}} {{database}}",
                    "D",
                ),
            ],
        )
        .span(12)
        .height(9)
    ).with_panel(
        p.latency_timeseries(
            "SQL Server data page waits (PAGEIOLATCH)",
            "Average wait of sessions for a data page being read from disk (PAGEIOLATCH_SH/EX/UP/DT/KP, "
            "resource wait: the signal wait for a CPU afterwards is left out): what "
            "queries feel of the data LUN's read latency. Red with the data LUN green: the reads queue in "
            "SQL Server (too many at once: missing indexes, scans); red with the LUN red: storage.",
            goals,
            [
                p.query(
                    _per_wait(
                        wait_time,
                        wait_count,
                        "job, instance, database, wait_type",
                        wait_type=f'=~"{MSSQL_DATA_WAITS}"',
                    ),
                    "{{wait_type}} {{database}}",
                )
            ],
        )
        .span(12)
        .height(9)
    )
    return board.with_panel(
        p.rate_timeseries(
            "Database I/O per second",
            "Operations per second each database issues per LUN and direction (database layer). Read "
            "beside the latency: a latency rise with a jump here is the database's own load.",
            p.IOPS,
            [
                p.query(
                    p.selector(p.IOPS_RECORDED, p.LUN_FILTERS, layer="db"),
                    "{{database}} {{role}} {{op}} · {{lun}}",
                )
            ],
        )
        .span(24)
        .height(8)
    )
