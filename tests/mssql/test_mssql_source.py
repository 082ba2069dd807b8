"""The SQL Server source through the real driver path: pyodbc → FreeTDS ODBC → the TDS test server.

The connection string is the source's own (connect_pyodbc), the SQL its own; faults come from the
server. Each fault is checked with the diskstats source in the same scraper, still served.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql import sql
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from lunlat.exposition import render
from lunlat.model import Family
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.diskstats import DiskstatsSource
from tests.mssql.targets import freetds_target
from tests.mssql.tds_server import DmvState, Load, Stream, TdsServer
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

try:
    import pyodbc

    NO_DRIVER = "" if "FreeTDS" in pyodbc.drivers() else "no FreeTDS driver in odbcinst (apt install tdsodbc)"
except ImportError as exc:
    NO_DRIVER = f"pyodbc cannot be imported ({exc}): pip install 'lunlat[mssql]'"

pytestmark = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)

PASSWORD = "pw;with=odd chars"  # noqa: S105 - a test value; braces keep ';' and '=' inside it
LOAD: Load = {
    ("sales", "data", "read"): Stream(200, 425),
    ("sales", "data", "write"): Stream(50, 900),
    ("sales", "log", "write"): Stream(100, 300, io_bytes=61440),
}
FILES = mssql_metrics.MSSQL_FILE_LABELS


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """SQL Server data on LUN sql1_data, its log on sql1_log (each a one-path multipath map)."""
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.add_partition("sda", 1)
    for name, alias, path, tail in (("dm-3", "sql1_data", "sdb", "1"), ("dm-4", "sql1_log", "sdc", "2")):
        wwid = "3600a09803830363472" + tail.rjust(13, "0")
        h.add_scsi_disk(path, wwid="naa." + wwid[1:])
        h.add_multipath(name, alias=alias, wwid=wwid, paths=[path])
    h.mount("/", "sda1")
    h.mount("/var/opt/mssql/data", "dm-3")
    h.mount("/var/opt/mssql/log", "dm-4")
    h.write()
    return h


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[TdsServer]:
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", PASSWORD)
    with TdsServer(DmvState()) as srv:
        yield srv


def source_for(
    server: TdsServer,
    host: FakeHost | None = None,
    labels: DbLunLabels | None = None,
    clock: Any = time.monotonic,
    timeout: float = 2,
    **settings: Any,
) -> MssqlSource:
    target = freetds_target(server.port, workload="oltp", timeout_seconds=timeout, **settings)
    locator = FileLocator(host.procfs, host.sysfs) if host is not None else None
    return MssqlSource(target, connect_pyodbc(target), locator, labels, clock)


def values(result: SourceResult, spec: contract.MetricSpec) -> dict[tuple[str, ...], float]:
    return next(f for f in result.families if f.spec is spec).by_labels()


def delta(
    before: SourceResult, after: SourceResult, spec: contract.MetricSpec
) -> dict[tuple[str, ...], float]:
    old, new = values(before, spec), values(after, spec)
    return {k: new[k] - old.get(k, 0.0) for k in new}


def key_of(keys: Any, **want: str) -> tuple[str, ...]:
    (found,) = [k for k in keys if all(k[FILES.index(n)] == v for n, v in want.items())]
    return found  # type: ignore[no-any-return]


def test_per_file_stalls_roles_luns_and_waits_through_the_real_driver(
    server: TdsServer, host: FakeHost
) -> None:
    registry = DbLunLabels()
    source = source_for(server, host, registry)
    server.state.advance(60, LOAD)
    first = source.collect()
    server.state.advance(60, LOAD)
    second = source.collect()
    assert not first.errors and not second.errors
    assert server.logins and server.last_password == PASSWORD  # the braced password arrived whole
    reads = delta(first, second, mssql_metrics.MSSQL_FILE_READS)
    stalls = delta(first, second, mssql_metrics.MSSQL_FILE_READ_STALL)
    data = key_of(reads, db="sales", role="data")
    assert (data[FILES.index("file")], data[FILES.index("lun")]) == (
        "/var/opt/mssql/data/sales.mdf",
        "sql1_data",
    )
    assert (
        data[FILES.index("database")],
        data[FILES.index("db_instance")],
        data[FILES.index("workload")],
    ) == (
        "SQL Server 1",
        "SQL1",
        "oltp",
    )
    assert reads[data] == 200 * 60
    assert stalls[data] / reads[data] == pytest.approx(425e-6, abs=1e-3 / reads[data])  # ms counters
    writes = delta(first, second, mssql_metrics.MSSQL_FILE_WRITES)
    log = key_of(writes, db="sales", role="log")
    assert log[FILES.index("lun")] == "sql1_log"
    assert delta(first, second, mssql_metrics.MSSQL_FILE_WRITE_STALL)[log] / writes[log] == pytest.approx(
        300e-6, rel=1e-3
    )
    assert delta(first, second, mssql_metrics.MSSQL_FILE_WRITE_BYTES)[log] == 100 * 60 * 61440
    assert {k[FILES.index("role")] for k in reads if k[FILES.index("db")] == "tempdb"} == {"temp"}
    waits = delta(first, second, mssql_metrics.MSSQL_WAITS)
    (writelog,) = [k for k in waits if k[2] == "WRITELOG"]
    assert writelog[3] == "log" and waits[writelog] == 100 * 60
    _, labels = registry.merged()
    assert (labels["dm-3"].database, labels["dm-3"].role) == ("SQL Server 1", "data")
    assert labels["dm-4"].role == "log"


def test_offline_files_are_left_out_and_an_attached_database_appears(server: TdsServer) -> None:
    source = source_for(server)
    server.state.set_offline("sales_snap")
    dbs = {k[FILES.index("db")] for k in values(source.collect(), mssql_metrics.MSSQL_FILE_READS)}
    assert "sales_snap" not in dbs and "sales" in dbs
    server.state.attach("reporting", [(0, "/var/opt/mssql/data/reporting.mdf")])
    dbs = {k[FILES.index("db")] for k in values(source.collect(), mssql_metrics.MSSQL_FILE_READS)}
    assert "reporting" in dbs


def test_a_path_with_an_unpaired_surrogate_keeps_its_series_escaped_and_drops_nothing(
    server: TdsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """NVARCHAR holds any 16-bit code units, a lone surrogate too (a Windows file name may have
    one); pyodbc decodes wide text strictly and raises on it, which failed the whole file query."""
    odd = "/var/opt/mssql/data/sales\udc80.mdf"
    server.state.detach("sales")
    server.state.attach("sales", [(0, odd), (1, "/var/opt/mssql/log/sales_log.ldf")])
    server.state.advance(60, LOAD)
    source = source_for(server)
    result = source.collect()
    assert not result.errors
    reads = values(result, mssql_metrics.MSSQL_FILE_READS)
    files = {(k[FILES.index("db")], k[FILES.index("file")]) for k in reads}
    # The code unit escaped as Python writes it: valid UTF-8, and the admin can find the file.
    assert ("sales", "/var/opt/mssql/data/sales\\udc80.mdf") in files
    assert ("sales", "/var/opt/mssql/log/sales_log.ldf") in files
    assert ("sales_snap", "/var/opt/mssql/data/sales_snap.mdf") in files
    assert ("master", "/var/opt/mssql/data/master.mdf") in files
    render(result.families).encode("utf-8")  # the page the scrape serves encodes
    said = [r for r in caplog.records if "unpaired UTF-16 surrogate" in r.getMessage()]
    assert len(said) == 1, said
    # A supplementary character (a valid surrogate pair) is text like any other: no escape.
    server.state.attach("emoji", [(0, "/var/opt/mssql/data/\U0001f600.mdf")])
    paths = {k[FILES.index("file")] for k in values(source.collect(), mssql_metrics.MSSQL_FILE_READS)}
    assert "/var/opt/mssql/data/\U0001f600.mdf" in paths
    assert len([r for r in caplog.records if "unpaired UTF-16 surrogate" in r.getMessage()]) == 1


def test_files_with_the_same_labels_are_summed_into_one_series_counted_and_said_once(
    server: TdsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Two files of one database that the labels cannot tell apart (the same physical_name) would
    be two samples of one series: Prometheus refuses the whole page for that."""
    twice = "/var/opt/mssql/data/twice.ndf"
    server.state.attach("sales", [(0, twice), (0, twice)])
    server.state.advance(60, LOAD)
    source = source_for(server)
    for _ in range(2):
        result = source.collect()
        assert result.errors == Counter({"duplicate_row": 1})
        for family in result.families:
            keys = [labels.text for _, labels, _ in family.all_samples()]
            assert len(keys) == len(set(keys)), family.spec.name
        reads = values(result, mssql_metrics.MSSQL_FILE_READS)
        key = key_of(reads, db="sales", file=twice)
        files = [f for f in server.state.files if f.physical_name == twice]
        assert len(files) == 2 and reads[key] == sum(f.reads for f in files)
    assert len([r for r in caplog.records if "same labels" in r.getMessage()]) == 1


def scrape_both(host: FakeHost, source: MssqlSource) -> tuple[dict[str, bool], dict[tuple[str, str], float]]:
    scraper = Scraper([DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig()), source])
    try:
        outcomes = scraper.collect(10)
        up = {s.name: o.up for s, o in outcomes}
        assert any(f.spec is contract.DEVICE_READS for f in outcomes[0][1].families), "host layer served"
        (errors,) = [f for f in scraper.health_families(outcomes) if f.spec is contract.SOURCE_ERRORS]
    finally:
        scraper.close()
    return up, {(k[0], k[1]): v for k, v in Family.by_labels(errors).items()}


NAME = "mssql:SQL Server 1"


def test_a_query_past_the_timeout_fails_this_scrape_and_the_next_reconnects(
    server: TdsServer, host: FakeHost
) -> None:
    source = source_for(server, host, timeout=1)
    source.collect()
    server.slow[sql.WAIT_STATS.name] = 3
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, NAME: False}
    assert errors[(NAME, "query_timeout")] == 1
    del server.slow[sql.WAIT_STATS.name]
    logins = len(server.logins)
    up, _ = scrape_both(host, source)
    assert up[NAME] is True and len(server.logins) == logins + 1  # a fresh session after a timeout


def test_a_statement_blocked_behind_a_lock_gives_up_at_the_lock_timeout_and_keeps_the_session(
    server: TdsServer, host: FakeHost
) -> None:
    """Every session lunlat opens first lowers its deadlock priority to the lowest (-10, as Telegraf's
    statements do) and sets a lock timeout of half the query timeout, so a statement waiting behind DDL
    or a RESTORE's locks gives up (error 1222) before the driver's timeout: the scrape keeps the other
    statement's series and the session, where a plain wait would cost both."""
    source = source_for(server, host, timeout=2)
    source.collect()
    logins = len(server.logins)
    settings = [b for b in server.batches if b.startswith("SET ")]
    assert settings == ["SET DEADLOCK_PRIORITY -10; SET LOCK_TIMEOUT 1000;"]
    server.blocked[sql.FILE_STATS.name] = 10.0  # a lock held for longer than the query timeout
    up, errors = scrape_both(host, source)
    assert up[NAME] is True
    assert errors[(NAME, "query_failed")] == 1 and errors[(NAME, "query_timeout")] == 0
    assert len(server.logins) == logins  # the session was kept
    del server.blocked[sql.FILE_STATS.name]
    result = source.collect()
    assert not result.errors and values(result, mssql_metrics.MSSQL_FILE_READS)


def test_a_dropped_connection_is_reopened_after_the_backoff(server: TdsServer, host: FakeHost) -> None:
    clock = FakeClock()
    source = source_for(server, host, clock=clock)
    source.collect()
    server.drop_next_query = True
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, NAME: False}
    assert errors[(NAME, "connection_lost")] == 1
    clock.now += 1
    up, _ = scrape_both(host, source)
    assert up[NAME] is True


def test_a_refused_login_is_counted_and_retried_with_backoff(server: TdsServer, host: FakeHost) -> None:
    clock = FakeClock()
    server.refuse_logins = True
    source = source_for(server, host, clock=clock)
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, NAME: False}
    assert errors[(NAME, "connect_failed")] == 1
    with pytest.raises(SourceError, match="18456"):
        clock.now += 1
        source.collect()
    assert PASSWORD not in str(errors)
    server.refuse_logins = False
    clock.now += 2
    assert source.collect().families


def test_a_denied_dmv_disables_that_query_only(server: TdsServer, host: FakeHost) -> None:
    server.state.advance(10, LOAD)
    server.deny[sql.FILE_STATS.name] = (
        300,
        "VIEW SERVER STATE permission was denied on object 'server', database 'master'.",
    )
    source = source_for(server, host)
    result = source.collect()
    assert result.errors == Counter({"no_grant": 1})
    assert values(result, mssql_metrics.MSSQL_FILE_READS) == {}
    assert values(result, mssql_metrics.MSSQL_WAITS)
    up, _ = scrape_both(host, source)
    assert up[NAME] is True


# --- the file map through a missing grant and a lost session (issue 43) ------------------------

DENIED = (300, "VIEW SERVER STATE permission was denied on object 'server', database 'master'.")


def map_age(result: SourceResult) -> float | None:
    """lunlat_database_file_map_age_seconds of the source, None when it has no map."""
    found = values(result, contract.DB_FILE_MAP_AGE)
    assert set(found) <= {(NAME,)}, found
    return found.get((NAME,))


def claimed(registry: DbLunLabels) -> dict[str, tuple[str, str]]:
    return {device: (found.database, found.role) for device, found in registry.merged()[1].items()}


def reconnect(server: TdsServer, source: MssqlSource, clock: FakeClock) -> SourceResult:
    """The session ended (the server drops the next statement's connection), then a new one."""
    server.drop_next_query = True
    with pytest.raises(SourceError) as lost:
        source.collect()
    assert lost.value.reason == "connection_lost"
    clock.now += 1  # past the reconnect backoff
    return source.collect()


def test_a_denied_file_statement_and_a_lost_session_keep_the_luns_roles_and_a_restored_grant_is_read_at_once(
    server: TdsServer, host: FakeHost
) -> None:
    clock = FakeClock()
    registry = DbLunLabels()
    source = source_for(server, host, registry, clock=clock)
    server.state.advance(10, LOAD)
    first = source.collect()
    roles = claimed(registry)
    assert roles["dm-3"] == ("SQL Server 1", "data") and roles["dm-4"] == ("SQL Server 1", "log")
    server.deny[sql.FILE_STATS.name] = DENIED
    denied = reconnect(server, source, clock)
    assert denied.errors == Counter({"no_grant": 1})
    clock.now += 45
    later = source.collect()
    assert not later.errors  # not asked again before its backoff
    assert claimed(registry) == roles  # the LUNs keep their roles
    assert (map_age(first), map_age(denied), map_age(later)) == (0.0, 1.0, 46.0)
    del server.deny[sql.FILE_STATS.name]
    fresh = reconnect(server, source, clock)  # at the next session, not ten minutes later
    assert not fresh.errors
    reads = values(fresh, mssql_metrics.MSSQL_FILE_READS)
    assert key_of(reads, db="sales", role="data")[FILES.index("lun")] == "sql1_data"
    assert map_age(fresh) == 0.0


def test_a_file_map_past_its_age_limit_drops_the_luns_roles(server: TdsServer, host: FakeHost) -> None:
    clock = FakeClock()
    registry = DbLunLabels()
    source = source_for(server, host, registry, clock=clock, file_map_max_age_seconds=600)
    source.collect()
    server.deny[sql.FILE_STATS.name] = DENIED
    reconnect(server, source, clock)
    clock.now += 599
    at_limit = source.collect()
    assert map_age(at_limit) == 600.0 and claimed(registry)["dm-3"] == ("SQL Server 1", "data")
    clock.now += 1
    past = source.collect()
    assert map_age(past) is None and values(past, contract.DB_FILE_MAP_MAX_AGE) == {(NAME,): 600.0}
    assert all(database == "" for database, _ in claimed(registry).values())


def test_a_denied_volume_lookup_and_a_lost_session_keep_the_volumes_as_luns(server: TdsServer) -> None:
    # A Windows instance, whose `lun` is the volume SQL Server reports (sys.dm_os_volume_stats).
    server.state.host_platform = "Windows"
    server.state.attach("erp", [(0, "D:\\Data\\erp.mdf"), (1, "L:\\Logs\\erp_log.ldf")])
    server.state.volumes = {"D:\\": ("D:\\", "SQLData"), "L:\\": ("L:\\", "SQLLogs")}
    clock = FakeClock()
    source = source_for(server, clock=clock)
    assert not source.collect().errors
    server.deny[sql.VOLUMES.name] = DENIED
    denied = reconnect(server, source, clock)
    assert denied.errors == Counter({"no_grant": 1})
    reads = values(denied, mssql_metrics.MSSQL_FILE_READS)
    assert key_of(reads, db="erp", role="data")[FILES.index("lun")] == "D:\\"
    assert key_of(reads, db="erp", role="log")[FILES.index("lun")] == "L:\\"
    assert map_age(denied) == 1.0


def test_a_service_restart_is_a_lost_session_then_lower_counters(
    server: TdsServer, host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lunlat")
    clock = FakeClock()
    source = source_for(server, host, clock=clock)
    server.state.advance(60, LOAD)
    before = source.collect()
    server.restart()
    server.state.advance(10, LOAD)
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, NAME: False}
    assert errors[(NAME, "connection_lost")] == 1
    clock.now += 1
    after = source.collect()
    old, new = values(before, mssql_metrics.MSSQL_FILE_READS), values(after, mssql_metrics.MSSQL_FILE_READS)
    assert all(new[k] < old[k] for k in old if old[k] > 0)
    assert any("restarted" in r.getMessage() for r in caplog.records)


def test_without_a_mount_table_the_lun_is_the_volume_sql_server_reports(server: TdsServer) -> None:
    # A Windows instance: paths are drive letters and mount point folders, no mount table to follow.
    server.state.host_platform = "Windows"
    server.state.attach("erp", [(0, "D:\\Data\\erp.mdf"), (1, "L:\\Logs\\erp_log.ldf")])
    server.state.volumes = {"D:\\": ("D:\\", "SQLData"), "L:\\": ("L:\\", "SQLLogs")}
    result = source_for(server).collect()
    assert not result.errors
    reads = values(result, mssql_metrics.MSSQL_FILE_READS)
    assert key_of(reads, db="erp", role="data")[FILES.index("lun")] == "D:\\"
    assert key_of(reads, db="erp", role="log")[FILES.index("lun")] == "L:\\"
    assert key_of(reads, db="sales", role="data")[FILES.index("lun")] == ""  # on no volume the server knows


# --- what differs between SQL Server versions (docs/emulated-facts.md, "SQL Server") -------------


@pytest.mark.parametrize("major", [11, 12, 13, 16])
def test_every_version_from_2012_names_the_instance_and_publishes_its_files(
    major: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # 2012 (11) and 2014 (12) have no DATEDIFF_BIG (error 195); 2012 has no io_stall_queued_* (207).
    caplog.set_level(logging.INFO, logger="lunlat")
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", PASSWORD)
    with TdsServer(DmvState(major_version=major)) as server:
        clock = FakeClock()
        source = source_for(server, clock=clock)
        server.state.advance(60, {("sales", "data", "read"): Stream(100, 425, queued_us=100)})
        first = source.collect()
        server.drop_next_query = True  # a reconnect identifies the server again
        with pytest.raises(SourceError):
            source.collect()
        clock.now += 1  # past the reconnect backoff
        server.state.advance(60, {("sales", "data", "read"): Stream(100, 425, queued_us=100)})
        second = source.collect()
    assert not first.errors and not second.errors
    reads = values(second, mssql_metrics.MSSQL_FILE_READS)
    assert reads and {k[FILES.index("db_instance")] for k in reads} == {"SQL1"}
    data = key_of(reads, db="sales", role="data")
    stall = delta(first, second, mssql_metrics.MSSQL_FILE_READ_STALL)[data]
    assert stall == pytest.approx(100 * 60 * 525e-6)  # the stall as SQL Server reports it, queue included
    said = [r for r in caplog.records if "io_stall_queued" in r.getMessage()]
    if major == 11:
        queued_specs = (
            mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL,
            mssql_metrics.MSSQL_FILE_WRITE_QUEUED_STALL,
        )
        assert not [f for f in second.families if f.spec in queued_specs]  # no series, not zeros
        assert len(said) == 1  # said once, not at every connect
    else:
        assert delta(first, second, mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL)[data] == pytest.approx(
            100 * 60 * 100e-6
        )
        assert not said


def test_the_queued_stall_is_published_apart_so_the_device_share_is_stall_minus_queued(
    server: TdsServer,
) -> None:
    load: Load = {
        ("sales", "data", "read"): Stream(200, 425, queued_us=1500),  # governed: 1.5 ms in the queue
        ("sales", "log", "write"): Stream(100, 300, io_bytes=61440),
    }
    source = source_for(server)
    server.state.advance(60, load)
    first = source.collect()
    server.state.advance(60, load)
    second = source.collect()
    reads = delta(first, second, mssql_metrics.MSSQL_FILE_READS)
    data = key_of(reads, db="sales", role="data")
    stall = delta(first, second, mssql_metrics.MSSQL_FILE_READ_STALL)[data]
    queued = delta(first, second, mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL)[data]
    assert stall / reads[data] == pytest.approx(1925e-6)
    assert queued / reads[data] == pytest.approx(1500e-6)
    assert (stall - queued) / reads[data] == pytest.approx(425e-6)  # what the LUN took
    log = key_of(delta(first, second, mssql_metrics.MSSQL_FILE_WRITES), db="sales", role="log")
    assert delta(first, second, mssql_metrics.MSSQL_FILE_WRITE_QUEUED_STALL)[log] == 0


def test_the_wait_time_is_the_resource_wait_and_the_signal_wait_is_its_own_series(server: TdsServer) -> None:
    # CPU pressure: 2 ms from each page read's completion to a CPU running the query again.
    load: Load = {("sales", "data", "read"): Stream(200, 425, signal_us=2000)}
    source = source_for(server)
    server.state.advance(60, load)
    first = source.collect()
    server.state.advance(60, load)
    second = source.collect()
    waits = delta(first, second, mssql_metrics.MSSQL_WAITS)
    (page,) = [k for k in waits if k[2] == "PAGEIOLATCH_SH"]
    resource = delta(first, second, mssql_metrics.MSSQL_WAIT_TIME)[page]
    signal = delta(first, second, mssql_metrics.MSSQL_WAIT_SIGNAL_TIME)[page]
    assert waits[page] == 200 * 60
    assert resource / waits[page] == pytest.approx(425e-6)  # the I/O, not the CPU queue
    assert signal / waits[page] == pytest.approx(2e-3)


def test_a_slow_synchronous_replica_is_published_as_replica_waits_not_as_log_latency(
    server: TdsServer,
) -> None:
    # The log file writes in 300 µs; the synchronous replica hardens the log in 20 ms.
    load: Load = {("sales", "log", "write"): Stream(100, 300, replica_us=20_000)}
    source = source_for(server)
    server.state.advance(10, load)
    result = source.collect()
    assert not result.errors
    waits = values(result, mssql_metrics.MSSQL_WAITS)
    waited = values(result, mssql_metrics.MSSQL_WAIT_TIME)
    by_type = {k[2]: k for k in waits}
    replica, log = by_type["HADR_SYNC_COMMIT"], by_type["WRITELOG"]
    assert (replica[3], log[3]) == ("replica", "log")
    assert waits[replica] == 1000 and waited[replica] / waits[replica] == pytest.approx(20e-3)
    assert waited[log] / waits[log] < 1e-3  # the log LUN's commit wait stays sub-millisecond


def test_each_wait_is_published_with_what_one_wait_is_and_replica_commits_off_the_log_lun(
    server: TdsServer,
) -> None:
    # What one wait is, from each type's description on Microsoft's sys.dm_os_wait_stats page
    # (engines/mssql/waits.py): WRITELOG waits for a log flush (commits, checkpoints) and
    # HADR_SYNC_COMMIT for a replica to harden the log: a commit's waits, not one I/O. PAGEIOLATCH_*
    # is one task's wait on a page's latch. None is one I/O: SQL Server has no per_io wait.
    measure = {w: m for w, (_, m) in sql.IO_WAITS.items()}
    assert (measure["WRITELOG"], measure["HADR_SYNC_COMMIT"]) == ("per_commit", "per_commit")
    assert {measure[f"PAGEIOLATCH_{c}"] for c in ("SH", "EX", "UP", "DT", "KP")} == {"per_latch"}
    # One ASYNC_IO_COMPLETION or BACKUPIO wait can be a whole backup; IO_COMPLETION waits for "I/O
    # operations", WRITE_COMPLETION while "a write operation is in progress": time spent only.
    assert {
        measure[w]
        for w in (
            "ASYNC_IO_COMPLETION",
            "BACKUPIO",
            "LOGBUFFER",
            "IO_RETRY",
            "IO_QUEUE_LIMIT",
            "IO_COMPLETION",
        )
    } | {measure["WRITE_COMPLETION"]} == {"time_spent"}
    assert "per_io" not in measure.values()
    load: Load = {
        ("sales", "log", "write"): Stream(100, 300, wait="HADR_SYNC_COMMIT"),  # a synchronous replica
        ("sales", "data", "read"): Stream(50, 600, wait="PAGEIOLATCH_KP"),
        ("sales_snap", "log", "write"): Stream(10, 900, wait="LOGBUFFER"),
        ("sales_snap", "data", "write"): Stream(20, 700, wait="WRITE_COMPLETION"),
    }
    source = source_for(server)
    server.state.advance(10, load)
    result = source.collect()
    assert not result.errors
    role = {k[2]: k[3] for k in values(result, mssql_metrics.MSSQL_WAITS)}
    assert set(role) == set(sql.IO_WAITS)
    # Every series says its measure, so no rule or panel adds a per-commit wait to another kind.
    published = {
        k[2]: k[mssql_metrics.MSSQL_WAIT_LABELS.index("measure")]
        for k in values(result, mssql_metrics.MSSQL_WAITS)
    }
    assert published == measure
    # A synchronous replica's wait is its own role: never summed into the log LUN's waits.
    assert (role["HADR_SYNC_COMMIT"], role["LOGBUFFER"], role["PAGEIOLATCH_KP"]) == ("replica", "log", "data")
    counts = {k[2]: v for k, v in values(result, mssql_metrics.MSSQL_WAITS).items()}
    assert (counts["HADR_SYNC_COMMIT"], counts["PAGEIOLATCH_KP"], counts["LOGBUFFER"]) == (1000, 500, 100)
    assert counts["WRITE_COMPLETION"] == 200


def test_log_rate_governance_waits_are_their_own_role_never_the_log_luns(server: TdsServer) -> None:
    # Azure SQL's transaction log rate governance shows as these waits ("Resource limits", transaction
    # log rate governance): a throttled database must never read as a slow log LUN.
    governed = {
        "LOG_RATE_GOVERNOR",
        "POOL_LOG_RATE_GOVERNOR",
        "INSTANCE_LOG_RATE_GOVERNOR",
        "HADR_THROTTLE_LOG_RATE_SEND_RECV_QUEUE_SIZE",
        "HADR_THROTTLE_LOG_RATE_LOG_SIZE",
        "HADR_THROTTLE_LOG_RATE_MISMATCHED_SLO",
    }
    assert governed <= set(sql.IO_WAITS) and {sql.IO_WAITS[w][1] for w in governed} == {"time_spent"}
    load: Load = {("sales", "log", "write"): Stream(100, 40_000, wait="LOG_RATE_GOVERNOR")}
    source = source_for(server)
    server.state.advance(10, load)
    result = source.collect()
    assert not result.errors
    role = {k[2]: k[3] for k in values(result, mssql_metrics.MSSQL_WAITS)}
    assert {role[w] for w in governed} == {"throttle"}
    counts = {k[2]: v for k, v in values(result, mssql_metrics.MSSQL_WAITS).items()}
    assert counts["LOG_RATE_GOVERNOR"] == 1000


def test_hyperscale_log_rate_throttling_waits_are_throttle_never_the_log_luns(server: TdsServer) -> None:
    # Azure SQL Database Hyperscale throttles the primary's log generation with these waits when a
    # page server, the log service, long-term storage or a (geo-)secondary falls behind ("Hyperscale
    # performance diagnostics", log rate throttling waits; MicrosoftDocs/sql-docs
    # azure-sql/database/hyperscale-performance-diagnostics.md): a held-back database, not a slow LUN.
    throttled = {
        "RBIO_RG_STORAGE",
        "RBIO_RG_DESTAGE",
        "RBIO_RG_REPLICA",
        "RBIO_RG_GEOREPLICA",
        "RBIO_RG_LOCALDESTAGE",
    }
    assert {sql.IO_WAITS[w] for w in throttled} == {("throttle", "time_spent")}
    load: Load = {("sales", "log", "write"): Stream(100, 40_000, wait="RBIO_RG_STORAGE")}
    source = source_for(server)
    server.state.advance(10, load)
    result = source.collect()
    assert not result.errors
    role = {k[2]: k[3] for k in values(result, mssql_metrics.MSSQL_WAITS)}
    assert {role[w] for w in throttled} == {"throttle"}
    counts = {k[2]: v for k, v in values(result, mssql_metrics.MSSQL_WAITS).items()}
    assert counts["RBIO_RG_STORAGE"] == 1000
