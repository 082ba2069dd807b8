"""Oracle's rows of the Database I/O dashboard (data: `spec.DashboardRow`; `database_io` draws them)."""

from __future__ import annotations

from lunlat.engines.oracle import metrics
from lunlat_dashboards.engine_rows.spec import (
    Buckets,
    DashboardRow,
    Panel,
    PanelQuery,
    PerWait,
    Quantile,
    SumRate,
)

# Events whose latency distribution gets a heatmap, with what one wait of each is.
HEATMAP_EVENTS = {
    "db file sequential read": "single-block data reads (index lookups): OLTP's read latency",
    "log file parallel write": "LGWR's redo writes: the log LUN's write latency as Oracle sees it",
}
COMMIT_EVENTS = ("log file parallel write", "log file sync")
# Time / waits is a latency only where one wait is one I/O (or one commit): events.py.
PER_WAIT = ("measure", '=~"per_io|per_commit"')
BY_EVENT = "job, instance, database, event"
QUANTILE_EVENTS = ("event", '=~"' + "|".join([*HEATMAP_EVENTS, "log file sync"]) + '"')


def _heatmap(event: str, meaning: str) -> Panel:
    return Panel(
        f"Oracle '{event}' latency distribution",
        f"How long each '{event}' wait took ({meaning}), from V$EVENT_HISTOGRAM_MICRO: each column "
        "is a time step, each cell a power-of-two latency bucket, its colour how many waits per second "
        "fell in it. Averages hide tails: a band creeping above the 1 ms line (the 512 µs-1 ms and "
        "1-2 ms buckets) while the average stays green is the first sign of trouble. Mass above 1 ms: "
        "compare with the host layer's latency of the same LUN (above) to place the time.",
        (PanelQuery(Buckets(metrics.ORACLE_WAIT_DURATION, (("event", event),)), "__auto"),),
        kind="heatmap",
    )


ROWS: tuple[DashboardRow, ...] = (
    DashboardRow(
        "Oracle wait events (µs precision)",
        (
            *(_heatmap(event, meaning) for event, meaning in HEATMAP_EVENTS.items()),
            Panel(
                "Oracle wait percentiles",
                "p50 and p99 of the I/O wait events from their histograms. The buckets are powers of two "
                "(…, 512 µs, 1.02 ms, 2.05 ms, …) and a percentile is interpolated inside one, so read a p99 "
                "of 800 µs as 'between 512 µs and 1 ms'. p99 above the goal with a green average: a tail a "
                "few sessions feel (a busy path, a slow disk in the group); find the LUN in the overview.",
                (
                    PanelQuery(
                        Quantile(0.5, metrics.ORACLE_WAIT_DURATION, "database, event", (QUANTILE_EVENTS,)),
                        "p50 {{event}} {{database}}",
                    ),
                    PanelQuery(
                        Quantile(0.99, metrics.ORACLE_WAIT_DURATION, "database, event", (QUANTILE_EVENTS,)),
                        "p99 {{event}} {{database}}",
                    ),
                ),
            ),
            Panel(
                "Oracle average wait per I/O event",
                'Average wait of each event whose wait is one I/O (`measure="per_io"`), and of \'log file '
                "sync' (one commit): Δ TIME_WAITED_MICRO / Δ TOTAL_WAITS (exact to the µs; Oracle's rounded "
                "ms and cs columns are never read). 'db file sequential read' is the data read latency OLTP "
                "feels, 'log file parallel write' the redo write, 'log file sync' the commit (redo write plus "
                "LGWR's post: when it is far above the redo write, the time is CPU or scheduling, not "
                "storage). Batched and asynchronous events (direct path, db file parallel read/write) are not "
                "here: their time per wait is no I/O's latency; see the time spent panel.",
                (
                    PanelQuery(
                        PerWait(metrics.ORACLE_WAIT_TIME, metrics.ORACLE_WAITS, BY_EVENT, (PER_WAIT,)),
                        "{{event}} {{database}}",
                    ),
                ),
            ),
            Panel(
                "Oracle time spent in batched and asynchronous I/O waits",
                "Seconds waited per second (Δ TIME_WAITED_MICRO) for the events whose one wait covers part "
                'of a batch of I/Os (`measure="time_spent"`): direct path reads and writes wait only for '
                "the outstanding asynchronous I/Os, DBWR's 'db file parallel write' for some of its writes, "
                "'db file parallel read' for a whole batch. Time / waits of these is no I/O's latency, so "
                "only the time is shown: a rise is more time lost to that I/O (more of it, or slower), to be "
                "placed with the file and host layers above. Seconds per second is the number of processes "
                "waiting on average: 2 means two at any time.",
                (
                    PanelQuery(
                        SumRate(metrics.ORACLE_WAIT_TIME, BY_EVENT, (("measure", "time_spent"),)),
                        "{{event}} {{database}}",
                    ),
                ),
                kind="rate",
            ),
            Panel(
                "Log writes: log file parallel write, log file sync, and the replica",
                "What a commit waits for: 'log file parallel write' (LGWR's redo write) and 'log file "
                "sync' (the commit: the redo write plus LGWR's post). These follow the log LUN's write "
                "latency; above it, the log writer is queueing (too many small commits, a log on a shared "
                "LUN). Red: move the log to a LUN of its own or batch commits; check the log LUN in the "
                "overview. The 'replica' series (Data Guard 'SYNC Remote Write') are a synchronous "
                "standby's network and remote log write: high there with 'log file parallel write' green, "
                "the time goes to the replica, not the log LUN.",
                (
                    PanelQuery(
                        PerWait(
                            metrics.ORACLE_WAIT_TIME,
                            metrics.ORACLE_WAITS,
                            BY_EVENT,
                            (("event", '=~"' + "|".join(COMMIT_EVENTS) + '"'), PER_WAIT),
                        ),
                        "{{event}} {{database}}",
                    ),
                    PanelQuery(
                        PerWait(
                            metrics.ORACLE_WAIT_TIME,
                            metrics.ORACLE_WAITS,
                            BY_EVENT,
                            (PER_WAIT,),
                            replica=True,
                        ),
                        "replica {{event}} {{database}}",
                    ),
                ),
            ),
        ),
    ),
)
