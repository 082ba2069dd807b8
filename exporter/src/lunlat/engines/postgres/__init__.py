"""PostgreSQL 13-18: data and WAL I/O per cluster (pg_stat_io, pg_stat_wal, pg_stat_database)."""

from __future__ import annotations

from lunlat.engines.engine import Engine, FileLayer, Hints
from lunlat.engines.postgres import metrics
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import PostgresSource

ENGINE = Engine(
    key="postgres",
    title="PostgreSQL",
    target=PostgresTarget,
    source=PostgresSource,
    extra="postgres",
    driver_module="psycopg",
    driver_name="psycopg 3",
    metrics=metrics.POSTGRES_METRICS,
    capabilities=metrics.CAPABILITIES,
    # The write direction is the WAL's sync, its per-I/O write latency; the data files' writes are copies
    # into the page cache (metrics.py). No wait layer: PostgreSQL keeps no per-wait counters (pg_stat_activity
    # shows the wait of the moment only). The data reads judged are the sessions' own (kind client, 16+):
    # bulk reads, vacuum's and the workers' stay published beside them (metrics.JUDGED_KINDS).
    files=FileLayer(
        metrics.POSTGRES_FILE_READS,
        metrics.POSTGRES_FILE_SYNCS,
        metrics.POSTGRES_FILE_READ_TIME,
        metrics.POSTGRES_FILE_SYNC_TIME,
        metrics.POSTGRES_FILE_READ_BYTES,
        metrics.POSTGRES_FILE_WRITE_BYTES,
        judged=metrics.JUDGED_KINDS,
    ),
    waits=None,
    # What a commit waits for is the WAL's flush (pg_stat_io fsyncs of object wal; metrics.py).
    hints=Hints(data_read="PostgreSQL pg_stat_io reads", log_write="PostgreSQL's WAL sync"),
)
