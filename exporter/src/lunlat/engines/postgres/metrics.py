"""What the PostgreSQL source publishes: its metric names, help texts and labels (docs/reference/metrics.md).

PostgreSQL counts I/O per cluster, not per file: pg_stat_io (16+) has one row per backend type,
object and context ("The pg_stat_io view will contain one row for each combination of backend type,
target I/O object, and I/O context", https://www.postgresql.org/docs/18/monitoring-stats.html,
pg_stat_io), with no tablespace or file column. So each series is one directory of the cluster:
`file` is the data directory (role data), the WAL directory (role log) or the first temp
tablespace's directory (role temp), `lun` its LUN, `db` empty (the whole cluster). Before 16 the data
reads come from pg_stat_database, one row per database (`db` is the database).

`kind` (16+, role data only) says whose I/O it is, from pg_stat_io's context and backend_type
(sql.py, KINDS): `client` (the sessions' own reads and writes, context normal), `bulkread`,
`bulkwrite`, `vacuum`, `checkpointer`, `bgwriter`, `worker`, `other`. Each pg_stat_io row is in one
kind, so `sum without (kind)` is the old, unsplit series. Before 16 nothing tells the kinds apart,
and the WAL and temporary relations are not split: their `kind` is empty, which Prometheus stores
as no label at all. No series is a total of others (a `kind="all"` beside the split ones would count
every I/O twice in a `sum`).

Which number is a per-I/O latency (docs/postgres.md): PostgreSQL reads and writes its files
through the kernel's page cache, so a `write` is a copy into the kernel, not a device write, and a
read the page cache served counts as a read. The WAL reaches the device when it is synced: "fsyncs"
of object wal "is the number of times WAL files were synced to disk via issue_xlog_fsync()"
(monitoring-stats.html, pg_stat_io, PostgreSQL 18; pg_stat_wal.wal_sync in 14-17), and a commit waits
for that sync. The WAL's `sync` series are therefore its per-I/O write latency, and the database
layer's write direction (`Engine.files`) is that sync; the data files have no per-I/O write latency
PostgreSQL can see (the kernel writes them back, the checkpointer syncs whole files).
"""

from __future__ import annotations

from lunlat.ground import DB_FILE_LABELS, Capability, MetricSpec

POSTGRES_FILE_LABELS: tuple[str, ...] = (*DB_FILE_LABELS, "kind")
# The db layer the rules judge for PostgreSQL (engine.FileLayer.judged): the sessions' own data reads
# where pg_stat_io splits them, and every series it does not split (the WAL, temporary relations, the
# data reads before 16), which carry no `kind`: a matcher whose regex matches the empty value
# matches a series without the label (prometheus.io/docs/prometheus/latest/querying/basics/, "Label
# matchers that match empty label values also select all time series that do not have the specific
# label set at all").
JUDGED_KINDS = 'kind=~"client|"'

POSTGRES_FILE_READS = MetricSpec(
    "lunlat_postgres_file_reads_total",
    "counter",
    "Read operations (pg_stat_io.reads, 16+: relation data for role data, WAL for role log (18+), temporary "
    "relations for role temp; pg_stat_database.blks_read before 16). Reads the kernel's page cache "
    "served are counted too: PostgreSQL reads through it. From 16 role data is split by kind (client, "
    "bulkread, bulkwrite, vacuum, checkpointer, bgwriter, worker, other; every series of this family too); "
    "the database layer judges kind client.",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_READ_TIME = MetricSpec(
    "lunlat_postgres_file_read_time_seconds_total",
    "counter",
    "Time spent in those reads (pg_stat_io.read_time, blk_read_time before 16; milliseconds there). Published "
    "only while track_io_timing is on (capability io_timing): off, PostgreSQL counts 0, never a latency of 0.",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_READ_BYTES = MetricSpec(
    "lunlat_postgres_file_read_bytes_total",
    "counter",
    "Bytes read (pg_stat_io.read_bytes, 18+; reads times op_bytes in 16 and 17).",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_WRITES = MetricSpec(
    "lunlat_postgres_file_writes_total",
    "counter",
    "Write operations (pg_stat_io.writes; pg_stat_wal.wal_write for role log in 14-17): writes into the "
    "kernel's page cache, not device writes (see lunlat_postgres_file_syncs_total for the WAL's).",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_WRITE_TIME = MetricSpec(
    "lunlat_postgres_file_write_time_seconds_total",
    "counter",
    "Time spent in those writes (pg_stat_io.write_time; wal_write_time in 14-17): the copy into the kernel. "
    "Published only while its timing setting is on (capabilities io_timing, wal_io_timing).",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_WRITE_BYTES = MetricSpec(
    "lunlat_postgres_file_write_bytes_total",
    "counter",
    "Bytes written (pg_stat_io.write_bytes, 18+; writes times op_bytes in 16 and 17).",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_SYNCS = MetricSpec(
    "lunlat_postgres_file_syncs_total",
    "counter",
    "WAL syncs to the device, role log only: pg_stat_io.fsyncs of object wal (18+), pg_stat_wal.wal_sync "
    "(14-17); with wal_sync_method open_datasync or open_sync every WAL write is synchronous and counted here "
    "instead. The WAL's per-I/O write latency: a commit waits for it.",
    POSTGRES_FILE_LABELS,
)
POSTGRES_FILE_SYNC_TIME = MetricSpec(
    "lunlat_postgres_file_sync_time_seconds_total",
    "counter",
    "Time spent in those syncs (fsync_time; wal_sync_time in 14-17). Published only while "
    "track_wal_io_timing is on (capability wal_io_timing).",
    POSTGRES_FILE_LABELS,
)

POSTGRES_METRICS: tuple[MetricSpec, ...] = (
    POSTGRES_FILE_READS,
    POSTGRES_FILE_READ_TIME,
    POSTGRES_FILE_READ_BYTES,
    POSTGRES_FILE_WRITES,
    POSTGRES_FILE_WRITE_TIME,
    POSTGRES_FILE_WRITE_BYTES,
    POSTGRES_FILE_SYNCS,
    POSTGRES_FILE_SYNC_TIME,
)

CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "io_timing",
        "PostgreSQL: data read and write times (track_io_timing, off by default); fix: ALTER SYSTEM SET "
        "track_io_timing = on; SELECT pg_reload_conf();",
        fixable=True,
    ),
    Capability(
        "wal_io_timing",
        "PostgreSQL 14+: WAL write and sync times (track_wal_io_timing, off by default); fix: ALTER SYSTEM SET "
        "track_wal_io_timing = on; SELECT pg_reload_conf();",
        fixable=True,
    ),
    Capability(
        "wal_io",
        "PostgreSQL: WAL writes and syncs (pg_stat_wal, 14-17; pg_stat_io, 18+): PostgreSQL 13 counts none",
        fixable=False,
    ),
)
