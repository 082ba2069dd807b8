"""PostgreSQL's row of the Database I/O dashboard (data: `spec.DashboardRow`; `database_io` draws them)."""

from __future__ import annotations

from lunlat.engines.postgres import metrics
from lunlat_dashboards.engine_rows.spec import DashboardRow, Panel, PanelQuery, PerFile, PerWait, SumRate

ROWS: tuple[DashboardRow, ...] = (
    DashboardRow(
        "PostgreSQL reads and WAL syncs",
        (
            Panel(
                "PostgreSQL read time per read",
                "Average time of each read PostgreSQL issued, per directory (data directory, temp "
                "tablespace): Δ read_time / Δ reads of pg_stat_io (blk_read_time / blks_read before 16). "
                "Reads the kernel's page cache served are in it, so this sits below the data LUN's read "
                "latency when the cache helps; above it, the time is spent in PostgreSQL or the host. "
                "Empty while track_io_timing is off (capability io_timing).",
                (
                    PanelQuery(
                        PerFile(metrics.POSTGRES_FILE_READ_TIME, metrics.POSTGRES_FILE_READS),
                        "{{database}} {{role}} {{file}}",
                    ),
                ),
            ),
            Panel(
                "PostgreSQL data read time per read, by kind (16+)",
                "The data directory's reads split by whose they are (the `kind` label, from pg_stat_io's "
                "context and backend_type): client (the sessions' own reads, what an OLTP query waits for, "
                "and the only kind the database layer judges), bulkread (sequential scans of tables larger "
                "than a quarter of shared_buffers, through a ring buffer), bulkwrite (COPY, CREATE TABLE AS), "
                "vacuum, worker (parallel query, logical replication and extensions' workers), other. "
                "Before 16 PostgreSQL does not split them: one series without a kind.",
                (
                    PanelQuery(
                        PerWait(
                            metrics.POSTGRES_FILE_READ_TIME,
                            metrics.POSTGRES_FILE_READS,
                            "database, kind",
                            (("role", "data"),),
                        ),
                        "{{database}} {{kind}}",
                    ),
                ),
                span=12,
            ),
            Panel(
                "PostgreSQL data reads per second, by kind (16+)",
                "The data directory's reads per second per kind (see the panel beside): how much of the "
                "read load is the sessions' own and how much bulk reads, vacuum and workers add.",
                (
                    PanelQuery(
                        SumRate(metrics.POSTGRES_FILE_READS, "database, kind", (("role", "data"),)),
                        "{{database}} {{kind}}",
                    ),
                ),
                kind="rate",
                span=12,
            ),
            Panel(
                "PostgreSQL WAL sync latency (what commits wait for)",
                "Average time of each WAL sync to the device (Δ fsync_time / Δ fsyncs of the WAL in "
                "pg_stat_io, 18+; wal_sync_time / wal_sync of pg_stat_wal, 14-17): what a commit waits for. "
                "It follows the WAL LUN's write (flush) latency; above it, the time goes to the host's "
                "queues. Empty while track_wal_io_timing is off (capability wal_io_timing). PostgreSQL's "
                "own writes are copies into the page cache and are not shown as a latency.",
                (
                    PanelQuery(
                        PerFile(metrics.POSTGRES_FILE_SYNC_TIME, metrics.POSTGRES_FILE_SYNCS),
                        "{{database}} {{file}}",
                    ),
                ),
            ),
        ),
    ),
)
