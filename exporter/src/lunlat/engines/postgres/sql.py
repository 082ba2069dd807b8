"""The PostgreSQL source's SQL: static text only, no parameters.

Support matrix (docs/postgres.md), each boundary from PostgreSQL's documentation of that
release (https://www.postgresql.org/docs/<version>/monitoring-stats.html, "The Cumulative Statistics
System"; before 15 "The Statistics Collector") and the commit that changed it (github.com/postgres/postgres):

- pg_stat_io exists from 16 (commit a9c70b46d "Add pg_stat_io view"; absent from the 15 page), with
  reads/writes in blocks of `op_bytes` and read_time/write_time/fsync_time in milliseconds "if
  track_io_timing is enabled, otherwise zero".
- 18 replaced op_bytes with read_bytes/write_bytes ("Make pg_stat_io count IOs as bytes instead of
  blocks", commit f92c854: a read may now be several blocks, one I/O) and added object `wal` (its
  writes "via XLogWrite", fsyncs "via issue_xlog_fsync"), timed by track_wal_io_timing; the same
  release removed wal_write, wal_sync, wal_write_time and wal_sync_time from pg_stat_wal (commit
  2421e9a, whose message says it removed track_wal_io_timing too: 18.6 has the setting, and it alone
  times pg_stat_io's wal rows, measured). Every boundary here was checked on a real server of each
  release 13-18 by tests/postgres/test_matrix.py (the views' columns, the settings, and the
  statements below run against them).
- pg_stat_wal exists from 14 (absent from the 13 page), with wal_write, wal_sync ("if fsync is on and
  wal_sync_method is either fdatasync, fsync or fsync_writethrough, otherwise zero") and their times in
  milliseconds under track_wal_io_timing, itself new in 14; wal_write_time "includes the sync time when
  wal_sync_method is either open_datasync or open_sync" (the 14-17 pages). CloudNativePG's exporter
  reads the four columns from major 14 and below 18 only ("Only available on PG 14 to 17";
  cloudnative-pg/cloudnative-pg pkg/management/postgres/webserver/metricserver, PgStatWalMetrics).
- pg_stat_database.blks_read and blk_read_time (milliseconds, under track_io_timing) exist in every
  supported release (13 included): the data reads before 16, per database.

Sums are cast to bigint / float8: sum(bigint) is numeric, which the driver hands over as Decimal.
"""

from __future__ import annotations

from lunlat.engines.dbsource import Query

PG_STAT_IO_SINCE = 160000  # server_version_num
BYTES_AND_WAL_IO_SINCE = 180000
PG_STAT_WAL_SINCE = 140000

# pg_stat_io's objects and the role of the directory their I/O lands in ("relation": permanent
# relations, "temp relation": temporary ones, "wal": WAL; monitoring-stats.html, pg_stat_io, object).
ROLE_OF_OBJECT = {"relation": "data", "temp relation": "temp", "wal": "log"}

# The server, its settings and since when its counters run (pg_postmaster_start_time: a new value is a
# restart). current_setting(name, true) is NULL for a setting the release lacks (track_wal_io_timing
# before 14): "missing_ok" (functions-admin.html). data_directory is shown to superusers and members of
# pg_read_all_settings only ("must be superuser or have privileges of pg_read_all_settings to examine",
# measured on 13-18 by tests/postgres/test_matrix.py; pg_monitor includes pg_read_all_settings:
# predefined-roles.html).
SETTINGS = Query(
    "settings",
    """SELECT current_setting('server_version_num')::int,
       current_setting('track_io_timing'),
       current_setting('track_wal_io_timing', true),
       current_setting('temp_tablespaces'),
       current_setting('wal_sync_method'),
       current_setting('cluster_name'),
       extract(epoch FROM pg_postmaster_start_time())::float8""",
    per_scrape=True,
)

# Apart from SETTINGS, which every login may read: without the grant the counters are still published,
# only without their directory and LUN.
DATA_DIRECTORY = Query("data_directory", "SELECT current_setting('data_directory')", per_scrape=False)

# Every tablespace's directory: pg_tablespace_location "Returns the file system path that this
# tablespace is located in", empty for pg_default and pg_global, which live in the data directory
# (functions-info.html).
TABLESPACES = Query(
    "tablespaces",
    "SELECT spcname, pg_tablespace_location(oid) FROM pg_tablespace",
    per_scrape=False,
)

# The kinds of permanent-relation I/O (the `kind` label), from pg_stat_io's two columns that say whose
# and what I/O a row is (https://www.postgresql.org/docs/18/monitoring-stats.html, pg_stat_io,
# "context" and "backend_type"; the same values on the 16 and 17 pages):
# - context `bulkread` ("Certain large read I/O operations done outside of shared buffers, for example,
#   a sequential scan of a large table": a heap scan takes the bulk-read ring when the table has more
#   than a quarter of shared_buffers' blocks, postgres/postgres src/backend/access/heap/heapam.c
#   initscan), `bulkwrite` ("such as COPY") and `vacuum` ("while vacuuming and analyzing permanent
#   relations") are their own kinds, whichever backend did them: a client's big scan is a bulkread;
# - in the other contexts (`normal`, "The default or standard context for a type of I/O operation"),
#   the backend type: `client backend` and `standalone backend` (single-user mode) are the sessions'
#   own reads, kind `client`, what an OLTP query waits for, and the kind the rules judge
#   (metrics.JUDGED_KINDS); `autovacuum worker` and `autovacuum launcher` are vacuum's;
#   `checkpointer` and `background writer` write dirty buffers for everyone (kinds `checkpointer`,
#   `bgwriter`); `background worker` is every worker started through the background worker API, a
#   parallel query's workers included (measured on 18.6: a parallel sequential scan's workers are
#   counted as "background worker"), and logical replication's and extensions' workers with them
#   (kind `worker`); the rest (startup's recovery, walsender, an 18 io worker, and a session's I/O in
#   a context a later release may add) is `other`: `client` stays the sessions' `normal` I/O only.
# Every row lands in one kind, so a sum over `kind` is pg_stat_io's total for the object
# (tests/postgres/test_kinds.py). Temporary relations ("temp relation", local buffers of one session)
# and the WAL are not split: kind '' (no label for Prometheus).
KINDS: frozenset[str] = frozenset(
    {"client", "bulkread", "bulkwrite", "vacuum", "checkpointer", "bgwriter", "worker", "other", ""}
)
KIND_SQL = """CASE
         WHEN object <> 'relation' THEN ''
         WHEN context IN ('bulkread', 'bulkwrite', 'vacuum') THEN context
         WHEN backend_type IN ('client backend', 'standalone backend') AND context = 'normal' THEN 'client'
         WHEN backend_type IN ('autovacuum worker', 'autovacuum launcher') THEN 'vacuum'
         WHEN backend_type = 'checkpointer' THEN 'checkpointer'
         WHEN backend_type = 'background writer' THEN 'bgwriter'
         WHEN backend_type = 'background worker' THEN 'worker'
         ELSE 'other'
       END"""

# The WAL's `normal` context only: its `init` context is the zero-filling of new segments
# (monitoring-stats.html, PostgreSQL 18, pg_stat_io context), not a commit's write.
_IO_SQL = (
    """SELECT object, """
    + KIND_SQL
    + """ AS kind,
       coalesce(sum(reads), 0)::bigint, coalesce(sum(read_time), 0)::float8, {read_bytes},
       coalesce(sum(writes), 0)::bigint, coalesce(sum(write_time), 0)::float8, {write_bytes},
       coalesce(sum(fsyncs), 0)::bigint, coalesce(sum(fsync_time), 0)::float8
FROM pg_stat_io
WHERE object IN ('relation', 'temp relation') OR (object = 'wal' AND context = 'normal')
GROUP BY object, kind"""
)

IO = Query(
    "stat_io",
    _IO_SQL.format(
        read_bytes="coalesce(sum(read_bytes), 0)::bigint", write_bytes="coalesce(sum(write_bytes), 0)::bigint"
    ),
    per_scrape=True,
)
IO_OP_BYTES = Query(
    "stat_io_op_bytes",
    _IO_SQL.format(
        read_bytes="coalesce(sum(reads * op_bytes), 0)::bigint",
        write_bytes="coalesce(sum(writes * op_bytes), 0)::bigint",
    ),
    per_scrape=True,
)

WAL = Query(
    "stat_wal",
    "SELECT wal_write, wal_write_time::float8, wal_sync, wal_sync_time::float8 FROM pg_stat_wal",
    per_scrape=True,
)

DATABASES = Query(
    "stat_database",
    "SELECT coalesce(datname, ''), blks_read, blk_read_time::float8 FROM pg_stat_database",
    per_scrape=True,
)

ALL_QUERIES: tuple[Query, ...] = (SETTINGS, DATA_DIRECTORY, TABLESPACES, IO, IO_OP_BYTES, WAL, DATABASES)
