"""The SQL Server support matrix: the source against each variant the "Support matrix" table of
docs/mssql.md names, through the real driver path (pyodbc → FreeTDS → the TDS test server).

Each variant's differences are the cited facts the emulation models (docs/emulated-facts.md, "SQL
Server"): the major version (2012 has no io_stall_queued_* columns; sys.dm_os_host_info from 2017),
the engine edition (Azure SQL Database has no sys.master_files, sys.dm_db_wait_stats only on Azure),
the platform (sys.dm_os_volume_stats answers NULL strings on Linux) and Amazon RDS (a database
`rdsadmin`, the SID 0x01 login named `rdsa`). Paths and volumes are test input, in each platform's
form. A test keeps that table and VARIANTS equal.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql import sql
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from lunlat.sources.base import SourceError, SourceResult
from tests.mssql.targets import freetds_target
from tests.mssql.tds_server import (
    AZURE_MAJOR_VERSION,
    LOG,
    MANAGED_INSTANCE,
    RDS_ADMIN_DATABASE,
    RDS_SA_LOGIN,
    ROWS,
    SQL_DATABASE,
    SYSTEM_DATABASES,
    DmvState,
    Load,
    Platform,
    Stream,
    TdsServer,
)
from tests.mssql.test_mssql_source import FILES, NAME, NO_DRIVER, delta, host, scrape_both, values
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

pytestmark = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)
__all__ = ["host"]  # the fixture, shared with test_mssql_source

MSSQL_PAGE = Path(__file__).resolve().parents[2] / "docs" / "mssql.md"
STANDARD, ENTERPRISE, EXPRESS = 2, 3, 4  # SERVERPROPERTY('EngineEdition') (docs/emulated-facts.md)
LOAD: Load = {
    ("sales", "data", "read"): Stream(200, 425, queued_us=100),
    ("sales", "log", "write"): Stream(100, 300, io_bytes=61440),
}
# Test input: Windows paths in a default instance's form, the user database on D: and L:.
WINDOWS_VOLUMES = {"C:\\": ("C:\\", "OS"), "D:\\": ("D:\\", "SQLData"), "L:\\": ("L:\\", "SQLLogs")}
RDS_DATA = "D:\\rdsdbdata\\DATA\\"  # where RDS keeps every database's files (test input, in RDS's form)
# What the source says about a variant, once: the fragment of each log line.
MARKS = (
    "io_stall_queued",
    "Azure SQL Database",
    "Hyperscale",
    "Azure SQL Managed Instance",
    "Amazon RDS for SQL Server",
)


def _windows_files(directory: str) -> dict[str, tuple[tuple[int, str], ...]]:
    """The system databases of SYSTEM_DATABASES, their file names under a Windows directory."""
    return {
        name: tuple((kind, directory + path.rsplit("/", 1)[1]) for kind, path in files)
        for name, files in SYSTEM_DATABASES.items()
    }


@dataclass(frozen=True, slots=True)
class Variant:
    """One server variant: what the emulated server is, and what the source must publish and say."""

    major: int
    edition: int = ENTERPRISE
    platform: Platform = "Windows"
    rds: bool = False
    database: str | None = None  # the target's `database:` (Azure SQL Database: one per connection)
    said: tuple[str, ...] = ()  # the MARKS of what the source says once about this variant
    lun_data: str = ""  # the `lun` of sales' data file, and of its log file
    lun_log: str = ""
    databases: frozenset[str] = field(default=frozenset({"master", "tempdb", "model", "msdb", "sales"}))
    tier: str = "Standard"  # Azure SQL Database's service tier (DATABASEPROPERTYEX(…, 'Edition'))

    @property
    def service(self) -> bool:
        """Files in a service (Azure, Amazon RDS): never on this host."""
        return self.edition in (SQL_DATABASE, MANAGED_INSTANCE) or self.rds

    @property
    def reads_volumes(self) -> bool:
        return not self.service and self.platform == "Windows"

    @property
    def reads_host_info(self) -> bool:
        return not self.service and self.major >= sql.HOST_INFO_SINCE

    def state(self) -> DmvState:
        if self.rds:
            system = {**_windows_files(RDS_DATA), RDS_ADMIN_DATABASE: ((ROWS, RDS_DATA + "rdsadmin.mdf"),)}
            user = {"sales": [(ROWS, RDS_DATA + "sales.mdf"), (LOG, RDS_DATA + "sales_log.ldf")]}
        elif self.platform == "Windows" and not self.service:
            instance = (
                f"C:\\Program Files\\Microsoft SQL Server\\MSSQL{self.major}.MSSQLSERVER\\MSSQL\\DATA\\"
            )
            system = _windows_files(instance)
            user = {"sales": [(ROWS, "D:\\Data\\sales.mdf"), (LOG, "L:\\Logs\\sales_log.ldf")]}
        else:  # Linux, and the Azure variants (test input: their paths are never located)
            system, user = SYSTEM_DATABASES, {"sales": list(DmvState.default_files("sales"))}
        state = DmvState(
            databases=user,
            major_version=self.major,
            engine_edition=self.edition,
            host_platform=self.platform,
            system_databases=system,
            sa_login=RDS_SA_LOGIN if self.rds else "sa",
            service_tier=self.tier,
        )
        state.volumes = dict(WINDOWS_VOLUMES)  # what a Windows server would answer; Linux answers NULL
        return state


def _windows(major: int, edition: int = ENTERPRISE, said: tuple[str, ...] = ()) -> Variant:
    return Variant(major, edition, "Windows", said=said, lun_data="D:\\", lun_log="L:\\")


def _linux(major: int, edition: int = ENTERPRISE) -> Variant:
    return Variant(major, edition, "Linux", lun_data="sql1_data", lun_log="sql1_log")


VARIANTS: dict[str, Variant] = {
    "SQL Server 2012 on Windows": _windows(11, STANDARD, said=("io_stall_queued",)),
    "SQL Server 2014 on Windows": _windows(12, EXPRESS),
    "SQL Server 2016 on Windows": _windows(13),
    "SQL Server 2017 on Windows": _windows(14),
    "SQL Server 2017 on Linux": _linux(14),
    "SQL Server 2019 on Windows": _windows(15, STANDARD),
    "SQL Server 2019 on Linux": _linux(15, STANDARD),
    "SQL Server 2022 on Windows": _windows(16),
    "SQL Server 2022 on Linux": _linux(16),
    "Azure SQL Database": Variant(
        AZURE_MAJOR_VERSION,
        SQL_DATABASE,
        "Linux",
        database="sales",
        said=("Azure SQL Database",),
        # the connection's database, and tempdb's files read from it (database_id 2, as Telegraf reads them)
        databases=frozenset({"sales", "tempdb"}),
    ),
    "Azure SQL Database Hyperscale": Variant(
        AZURE_MAJOR_VERSION,
        SQL_DATABASE,
        "Linux",
        database="sales",
        said=("Azure SQL Database", "Hyperscale"),
        databases=frozenset({"sales", "tempdb"}),  # RBPEX's row is the connection's database's
        tier="Hyperscale",
    ),
    "Azure SQL Managed Instance": Variant(
        AZURE_MAJOR_VERSION, MANAGED_INSTANCE, "Linux", said=("Azure SQL Managed Instance",)
    ),
    "Amazon RDS for SQL Server": Variant(
        15,
        STANDARD,
        "Windows",
        rds=True,
        said=("Amazon RDS for SQL Server",),
        databases=frozenset({"master", "tempdb", "model", "msdb", "rdsadmin", "sales"}),
    ),
}


def _source(
    server: TdsServer, variant: Variant, host: FakeHost, labels: DbLunLabels, clock: FakeClock
) -> MssqlSource:
    target = freetds_target(server.port, database=variant.database, timeout_seconds=2)
    return MssqlSource(target, connect_pyodbc(target), FileLocator(host.procfs, host.sysfs), labels, clock)


def _collect_across_a_reconnect(
    server: TdsServer, source: MssqlSource, clock: FakeClock
) -> tuple[SourceResult, SourceResult]:
    """Two collections 60 s apart with a lost connection between: what is said at connect must be
    said once, not at every connect."""
    server.state.advance(60, LOAD)
    first = source.collect()
    server.drop_next_query = True
    with pytest.raises(SourceError):
        source.collect()
    clock.now += 1  # past the reconnect backoff
    server.state.advance(60, LOAD)
    second = source.collect()
    return first, second


@pytest.mark.parametrize("name", VARIANTS)
def test_each_variant_publishes_what_it_has_and_says_what_it_lacks_once(
    name: str, host: FakeHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    variant = VARIANTS[name]
    caplog.set_level(logging.INFO, logger="lunlat")
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    registry, clock = DbLunLabels(), FakeClock()
    with TdsServer(variant.state()) as server:
        source = _source(server, variant, host, registry, clock)
        first, second = _collect_across_a_reconnect(server, source, clock)
        batches = list(server.batches)
    assert not first.errors and not second.errors  # no statement the variant lacks was sent

    # Files, with their roles, of every database the variant shows
    reads = delta(first, second, mssql_metrics.MSSQL_FILE_READS)
    assert {k[FILES.index("db")] for k in reads} == variant.databases
    roles = {(k[FILES.index("db")], k[FILES.index("role")]) for k in reads}
    assert ("sales", "data") in roles and ("sales", "log") in roles
    assert variant.edition == SQL_DATABASE or {r for d, r in roles if d == "tempdb"} == {"temp"}
    (data,) = [k for k in reads if k[FILES.index("db")] == "sales" and k[FILES.index("role")] == "data"]
    (log_file,) = [k for k in reads if k[FILES.index("db")] == "sales" and k[FILES.index("role")] == "log"]
    assert reads[data] == 200 * 60
    assert delta(first, second, mssql_metrics.MSSQL_FILE_WRITES)[log_file] == 100 * 60
    # The stall as SQL Server reports it, Resource Governor's queue included: (425 + 100) µs per read
    stall = delta(first, second, mssql_metrics.MSSQL_FILE_READ_STALL)[data]
    assert stall == pytest.approx(200 * 60 * 525e-6)

    # The queued stall where the version has the columns (2014 and later), no series before
    queued_specs = (mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL, mssql_metrics.MSSQL_FILE_WRITE_QUEUED_STALL)
    if variant.major >= sql.QUEUED_STALL_SINCE:
        queued = delta(first, second, mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL)[data]
        assert queued == pytest.approx(200 * 60 * 100e-6)
    else:
        assert not [f for f in second.families if f.spec in queued_specs]

    # The lun: the mount table on Linux, the volume SQL Server reports on Windows, none for a service
    assert (data[FILES.index("lun")], log_file[FILES.index("lun")]) == (variant.lun_data, variant.lun_log)
    _, labels = registry.merged()
    if variant.platform == "Linux" and not variant.service:
        assert (labels["dm-3"].role, labels["dm-4"].role) == ("data", "log")
    else:
        assert not labels  # no device of this host is said to hold the database
    assert any(sql.VOLUMES.sql == b for b in batches) == variant.reads_volumes
    assert any(sql.HOST_INFO.sql == b for b in batches) == variant.reads_host_info

    # The I/O waits
    waits = delta(first, second, mssql_metrics.MSSQL_WAITS)
    assert {k[2]: v for k, v in waits.items() if v} == {"PAGEIOLATCH_SH": 200 * 60, "WRITELOG": 100 * 60}

    # Nothing lost: the capability metric says so, and no warning was logged
    assert values(second, contract.SOURCE_CAPABILITY) == {(NAME, "volumes"): 1, (NAME, "engine_edition"): 1}
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    messages = [r.getMessage() for r in caplog.records]
    assert {mark: sum(mark in m for m in messages) for mark in MARKS} == {
        mark: int(mark in variant.said) for mark in MARKS
    }


@pytest.mark.parametrize("how", ["rdsadmin", "rdsa"])
def test_amazon_rds_is_told_by_either_mark_and_its_files_name_no_lun(
    how: str, host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DB_ID('rdsadmin') is NULL for a login that cannot see the database, SUSER_SNAME(0x01) is not
    filtered (PerformanceMonitor issue 2575): either mark alone is RDS."""
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    variant = VARIANTS["Amazon RDS for SQL Server"]
    state = variant.state()
    if how == "rdsa":
        state.detach(RDS_ADMIN_DATABASE)  # not visible to this login
    else:
        state.sa_login = "sa"
    registry = DbLunLabels()
    with TdsServer(state) as server:
        source = _source(server, variant, host, registry, FakeClock())
        result = source.collect()
        batches = list(server.batches)
    assert not result.errors
    assert {k[FILES.index("lun")] for k in values(result, mssql_metrics.MSSQL_FILE_READS)} == {""}
    assert not registry.merged()[1]
    assert sql.VOLUMES.sql not in batches  # the RDS host's volumes are not this host's
    assert source.grants_hint == "deploy/mssql/grants-amazon-rds.sql"


def test_a_windows_volume_lookup_that_fails_is_capability_volumes_0_until_a_retry_reads_it(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lunlat")
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    variant = VARIANTS["SQL Server 2019 on Windows"]
    clock = FakeClock()
    with TdsServer(variant.state()) as server:
        server.deny[sql.VOLUMES.name] = (
            300,
            "VIEW SERVER STATE permission was denied on object 'server', database 'master'.",
        )
        source = _source(server, variant, host, DbLunLabels(), clock)
        server.state.advance(60, LOAD)
        denied = source.collect()
        again = source.collect()  # within the retry pause: not asked again
        del server.deny[sql.VOLUMES.name]
        clock.now += 600
        healed = source.collect()
        volume_batches = sum(b == sql.VOLUMES.sql for b in server.batches)
    assert denied.errors == Counter({"no_grant": 1}) and not again.errors and not healed.errors
    assert values(denied, contract.SOURCE_CAPABILITY) == {(NAME, "volumes"): 0, (NAME, "engine_edition"): 1}
    assert values(again, contract.SOURCE_CAPABILITY) == {(NAME, "volumes"): 0, (NAME, "engine_edition"): 1}
    reads = values(denied, mssql_metrics.MSSQL_FILE_READS)
    assert reads and {k[FILES.index("lun")] for k in reads} == {
        ""
    }  # published, lun unknown: never a wrong one
    assert values(healed, contract.SOURCE_CAPABILITY) == {(NAME, "volumes"): 1, (NAME, "engine_edition"): 1}
    lun = {
        k[FILES.index("db")] + "/" + k[FILES.index("role")]: k[FILES.index("lun")]
        for k in values(healed, mssql_metrics.MSSQL_FILE_READS)
    }
    assert (lun["sales/data"], lun["sales/log"]) == ("D:\\", "L:\\")
    assert volume_batches == 2  # at connect, then once after the pause
    assert len([r for r in caplog.records if "missing grant" in r.getMessage()]) == 1


def test_a_view_that_vanishes_mid_run_is_said_once_and_the_rest_is_published(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A statement that worked starts failing: error 208 (the object is gone) is counted as
    query_failed and said once; a permission taken away (300) is no_grant, said once per ten-minute
    pause. The other statement's series are published and the source stays up."""
    caplog.set_level(logging.INFO, logger="lunlat")
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    variant = VARIANTS["SQL Server 2022 on Linux"]
    with TdsServer(variant.state()) as server:
        source = _source(server, variant, host, DbLunLabels(), FakeClock())
        server.state.advance(60, LOAD)
        assert not source.collect().errors
        server.deny[sql.WAIT_STATS.name] = (208, "Invalid object name 'sys.dm_os_wait_stats'.")
        gone = source.collect()
        up, errors = scrape_both(host, source)
        assert up[NAME] is True and errors[(NAME, "query_failed")] == 1
        assert values(gone, mssql_metrics.MSSQL_FILE_READS) and not values(gone, mssql_metrics.MSSQL_WAITS)
        failed = [r for r in caplog.records if "query failed" in r.getMessage()]
        assert len(failed) == 1 and "Invalid object name" in getattr(failed[0], "kv", {})["err"]

        del server.deny[sql.WAIT_STATS.name]
        server.deny[sql.FILE_STATS.name] = (
            300,
            "VIEW SERVER PERFORMANCE STATE permission was denied on object 'server', database 'master'.",
        )
        denied = source.collect()
        up, errors = scrape_both(host, source)  # the query stays off: no second error, no second line
        assert up[NAME] is True and errors[(NAME, "no_grant")] == 0
    assert denied.errors == Counter({"no_grant": 1})
    assert values(denied, mssql_metrics.MSSQL_WAITS) and not values(denied, mssql_metrics.MSSQL_FILE_READS)
    assert len([r for r in caplog.records if "missing grant" in r.getMessage()]) == 1


def test_the_docs_matrix_rows_are_the_variants() -> None:
    text = MSSQL_PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Support matrix\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \|", section, re.MULTILINE)
    assert rows[0] == "variant" and set(rows[1]) <= {"-", " "}
    assert rows[2:] == list(VARIANTS)


def test_an_always_on_secondary_that_allows_no_reads_is_not_readable_said_once_with_the_fix(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Error 976 (severity 14: "is participating in an availability group and is currently not
    accessible for queries", Microsoft's sp_validate_replica_hosts_as_publishers page) is no missing
    grant: its own reason, its fix in the one log line, the other statement published."""
    caplog.set_level(logging.INFO, logger="lunlat")
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    variant = VARIANTS["SQL Server 2022 on Linux"]
    with TdsServer(variant.state()) as server:
        source = _source(server, variant, host, DbLunLabels(), FakeClock())
        server.deny[sql.FILE_STATS.name] = (
            976,
            "The target database, 'sales', is participating in an availability group and is currently not "
            "accessible for queries. Either data movement is suspended or the availability replica is not "
            "enabled for read access.",
        )
        server.state.advance(60, LOAD)
        first = source.collect()
        second = source.collect()
        up, errors = scrape_both(host, source)
    assert first.errors == Counter({"not_readable": 1}) == second.errors
    assert up[NAME] is True and errors[(NAME, "not_readable")] == 1
    assert values(second, mssql_metrics.MSSQL_WAITS)
    said = [r for r in caplog.records if "not readable" in r.getMessage()]
    assert len(said) == 1 and "ALLOW_CONNECTIONS" in getattr(said[0], "kv", {})["err"]
    assert not [r for r in caplog.records if "missing grant" in r.getMessage()]
