"""The SQL Server source against the Azure variants, through the real driver path (pyodbc → FreeTDS →
the TDS test server), each variant modelled from the facts in docs/emulated-facts.md: Azure SQL
Database (EngineEdition 5: one database per connection, no sys.master_files) and Azure SQL Managed
Instance (EngineEdition 8: the SQL Server views, the files in the service)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from tests.fakesys import FakeHost
from tests.mssql.targets import freetds_target
from tests.mssql.tds_server import (
    AZURE_MAJOR_VERSION,
    MANAGED_INSTANCE,
    SQL_DATABASE,
    DmvState,
    Load,
    Stream,
    TdsServer,
)
from tests.mssql.test_mssql_source import FILES, NO_DRIVER, delta, host, values

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
    assert {k[FILES.index("db")] for k in values(result, mssql_metrics.MSSQL_FILE_READS)} == {"master"}


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


def test_an_edition_the_source_does_not_know_is_read_as_sql_server_and_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lunlat")
    with serve(6, monkeypatch) as srv:  # 6: Azure Synapse dedicated SQL pool (SERVERPROPERTY's values)
        source = source_for(srv, None)
        source.collect()
        source.collect()
    said = [r for r in caplog.records if "engine edition not one" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
