"""The SQL Server source against the Azure variants, through the real driver path (pyodbc → FreeTDS →
the TDS test server), each variant modelled from the facts in docs/emulated-facts.md: Azure SQL
Database (EngineEdition 5: one database per connection, no sys.master_files) and Azure SQL Managed
Instance (EngineEdition 8: the SQL Server views, the files in the service)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql import sql
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from tests.mssql.targets import freetds_target
from tests.mssql.tds_server import (
    AZURE_MAJOR_VERSION,
    MANAGED_INSTANCE,
    SQL_DATABASE,
    DmvState,
    Load,
    Stream,
    TdsServer,
    statement_key,
)
from tests.mssql.test_mssql_source import FILES, NO_DRIVER, delta, host, values
from tests.support.fake_host import FakeHost

pytestmark = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)
__all__ = ["host"]  # the fixture, shared with test_mssql_source

LOAD: Load = {
    ("sales", "data", "read"): Stream(200, 425, queued_us=100),
    ("sales", "log", "write"): Stream(100, 300, io_bytes=61440),
}


def serve(edition: int, monkeypatch: pytest.MonkeyPatch) -> TdsServer:
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    state = DmvState(databases=("sales",), major_version=AZURE_MAJOR_VERSION, engine_edition=edition)
    return TdsServer(state)


@pytest.fixture
def sql_database(monkeypatch: pytest.MonkeyPatch) -> Iterator[TdsServer]:
    with serve(SQL_DATABASE, monkeypatch) as srv:
        yield srv


@pytest.fixture
def managed_instance(monkeypatch: pytest.MonkeyPatch) -> Iterator[TdsServer]:
    with serve(MANAGED_INSTANCE, monkeypatch) as srv:
        yield srv


def source_for(
    server: TdsServer, database: str | None, host: FakeHost | None = None, labels: DbLunLabels | None = None
) -> MssqlSource:
    target = freetds_target(server.port, "Azure 1", database=database, timeout_seconds=2)
    locator = FileLocator(host.procfs, host.sysfs) if host is not None else None
    return MssqlSource(target, connect_pyodbc(target), locator, labels)


def test_azure_sql_database_publishes_its_own_files_and_waits_without_sys_master_files(
    sql_database: TdsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lunlat")
    source = source_for(sql_database, "sales")
    sql_database.state.advance(60, LOAD)
    first = source.collect()
    sql_database.state.advance(60, LOAD)
    second = source.collect()
    assert not first.errors and not second.errors  # no failing query, no query_failed counted
    assert sql_database.logins[-1] == ("lunlat", "sales")  # the connection opens the target's database
    assert not any("sys.master_files" in b for b in sql_database.batches)

    reads = delta(first, second, mssql_metrics.MSSQL_FILE_READS)
    assert {(k[FILES.index("db")], k[FILES.index("role")]) for k in reads} == {
        ("sales", "data"),
        ("sales", "log"),
        ("tempdb", "temp"),  # read from the user database (item 13)
    }
    (data,) = [k for k in reads if k[FILES.index("role")] == "data"]
    assert reads[data] == 200 * 60 and data[FILES.index("lun")] == ""
    # Resource Governor's queueing (Azure's IOPS limits) is published apart: stall = (425 + 100) µs
    queued = delta(first, second, mssql_metrics.MSSQL_FILE_READ_QUEUED_STALL)[data]
    assert queued / reads[data] == pytest.approx(100e-6, abs=1e-3 / reads[data])
    writes = delta(first, second, mssql_metrics.MSSQL_FILE_WRITES)
    (log_file,) = [k for k in writes if k[FILES.index("role")] == "log"]
    assert writes[log_file] == 100 * 60

    waits = delta(first, second, mssql_metrics.MSSQL_WAITS)
    assert {k[2]: v for k, v in waits.items() if v} == {"PAGEIOLATCH_SH": 200 * 60, "WRITELOG": 100 * 60}
    assert any("sys.dm_db_wait_stats" in b for b in sql_database.batches)
    said = [r.getMessage() for r in caplog.records if "Azure SQL Database" in r.getMessage()]
    assert len(said) == 1  # once, not per scrape


def test_azure_sql_database_without_a_database_key_reads_the_login_default_and_still_answers(
    sql_database: TdsServer,
) -> None:
    result = source_for(sql_database, None).collect()
    assert not result.errors
    assert sql_database.logins[-1] == ("lunlat", "master")
    assert {k[FILES.index("db")] for k in values(result, mssql_metrics.MSSQL_FILE_READS)} == {
        "master",
        "tempdb",
    }


def test_managed_instance_reads_every_database_and_names_no_local_lun(
    managed_instance: TdsServer, host: FakeHost, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The instance's files carry SQL Server paths that happen to exist on this host's mounts (the
    fixture's /var/opt/mssql/data is LUN sql1_data): they are in the service, so no LUN is named and
    no device of this host is labelled with the database."""
    caplog.set_level(logging.INFO, logger="lunlat")
    registry = DbLunLabels()
    source = source_for(managed_instance, None, host, registry)
    managed_instance.state.advance(60, LOAD)
    first = source.collect()
    managed_instance.state.advance(60, LOAD)
    second = source.collect()
    assert not first.errors and not second.errors
    reads = delta(first, second, mssql_metrics.MSSQL_FILE_READS)
    assert {"master", "tempdb", "sales"} <= {k[FILES.index("db")] for k in reads}  # sys.master_files: all
    assert {k[FILES.index("lun")] for k in reads} == {""}
    assert not registry.merged()[1]
    assert any("sys.master_files" in b for b in managed_instance.batches)
    assert any("dm_os_wait_stats" in b for b in managed_instance.batches)
    assert not [r for r in caplog.records if "no known LUN" in r.getMessage()]
    assert sum("Managed Instance" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(
    ("edition", "named"),
    [(6, "Azure Synapse dedicated SQL pool"), (11, "Azure Synapse serverless SQL pool"), (12, "a value")],
)
def test_an_edition_the_source_does_not_know_gets_no_statement_and_capability_engine_edition_0(
    edition: int, named: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """SERVERPROPERTY('EngineEdition') values beyond those the source reads (SMO's Edition enum names 6
    and 11; 12 stands for any value newer than that list, e.g. SQL database in Fabric): no SQL Server
    statement is sent, the capability says so, and one warning names the value."""
    caplog.set_level(logging.INFO, logger="lunlat")
    with serve(edition, monkeypatch) as srv:
        source = source_for(srv, None)
        first = source.collect()
        second = source.collect()
        batches = list(srv.batches)
    assert not first.errors and not second.errors
    assert {b for b in batches if statement_key(b) is not None} == {sql.EDITION.sql}
    assert values(second, contract.SOURCE_CAPABILITY) == {("mssql:Azure 1", "engine_edition"): 0}
    assert [f.spec.name for f in second.families] == [contract.SOURCE_CAPABILITY.name]
    said = [r for r in caplog.records if "engine edition" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert f"engine edition {edition} ({named}" in said[0].getMessage()


@pytest.mark.parametrize("objective", ["Basic", "S0", "S1", "ElasticPool"])
def test_azure_sql_database_on_tiers_where_sys_dm_os_sys_info_needs_the_server_admin_is_read_whole(
    objective: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On Basic, S0, S1 and elastic pools sys.dm_os_sys_info needs the server admin or
    ##MS_ServerStateReader## (its page, "Permissions"): the edition is read first, with
    SERVERPROPERTY alone, and that view is never asked there; a grant missing later names the Azure
    script."""
    caplog.set_level(logging.INFO, logger="lunlat")
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    state = DmvState(
        databases=("sales",),
        major_version=AZURE_MAJOR_VERSION,
        engine_edition=SQL_DATABASE,
        service_objective=objective,
    )
    with TdsServer(state) as server:
        source = source_for(server, "sales")
        server.state.advance(60, LOAD)
        result = source.collect()
        server.deny[sql.DB_FILE_STATS.name] = (
            262,
            "VIEW DATABASE STATE permission denied in database 'sales'.",
        )
        server.state.advance(60, LOAD)
        denied = source.collect()
        batches = list(server.batches)
    assert not result.errors
    reads = values(result, mssql_metrics.MSSQL_FILE_READS)
    assert {(k[FILES.index("db")], k[FILES.index("role")]) for k in reads} == {
        ("sales", "data"),
        ("sales", "log"),
        ("tempdb", "temp"),
    }
    assert not any("dm_os_sys_info" in b for b in batches)
    assert not any("sys.master_files" in b for b in batches)  # the edition was known before any file query
    assert denied.errors["no_grant"] == 1
    (line,) = [r.getMessage() for r in caplog.records if "missing grant" in r.getMessage()]
    assert "deploy/mssql/grants-azure-sql-database.sql" in line


def test_the_emulated_basic_tier_denies_sys_dm_os_sys_info_to_a_database_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fact the test above rests on, as the emulation answers it: the statement that read the
    edition together with sys.dm_os_sys_info (the source until issue 28) is denied there."""
    import pyodbc  # noqa: PLC0415 - present: the module is skipped without it

    state = DmvState(
        databases=("sales",),
        major_version=AZURE_MAJOR_VERSION,
        engine_edition=SQL_DATABASE,
        service_objective="S0",
    )
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    with TdsServer(state) as server:
        conn = pyodbc.connect(server.connection_string(password="pw", database="sales"), autocommit=True)  # noqa: S106
        try:
            with pytest.raises(pyodbc.Error, match=r"\(300\)"):
                conn.cursor().execute(sql.SERVER.sql).fetchall()
            assert conn.cursor().execute(sql.EDITION.sql).fetchall()[0][0] == SQL_DATABASE
        finally:
            conn.close()
