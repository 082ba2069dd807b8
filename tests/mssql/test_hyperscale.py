"""Azure SQL Database: tempdb read from the user database (issue 28 item 13) and the Hyperscale tier
(item 4), through the real driver path (pyodbc → FreeTDS → the TDS test server), the facts modelled
as docs/emulated-facts.md lists them:

- tempdb's files are rows of database_id 2 of sys.dm_io_virtual_file_stats, named by
  tempdb.sys.database_files (Telegraf's sqlAzureDBDatabaseIO reads them so);
- Hyperscale's local RBPEX cache is a row with database_id 0 and file_id 0 that no catalog lists, and
  the write stall of its other data files (page servers) is simulated: it "does not reflect the actual
  latency of page server writes" (Azure SQL Database, "Hyperscale performance diagnostics").
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql import sql
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from lunlat.sources.base import SourceResult
from tests.mssql.targets import freetds_target
from tests.mssql.tds_server import (
    AZURE_MAJOR_VERSION,
    HYPERSCALE,
    LOG,
    ROWS,
    SQL_DATABASE,
    DmvState,
    Load,
    Stream,
    TdsServer,
)
from tests.mssql.test_mssql_source import FILES, NO_DRIVER, delta, key_of, values
from tests.support.skip_unless_installed import command

needs_driver = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)
RULES = Path(__file__).resolve().parents[2] / "alerts" / "lunlat.rules.yml"
# Hyperscale test input: the data files as their catalog names them (a path is whatever the service says)
SALES_FILES = ((ROWS, "sales_data_1.mdf"), (LOG, "sales_log.ldf"), (ROWS, "sales_data_2.ndf"))
TEMPDB_PATHS = {
    "/var/opt/mssql/data/tempdb.mdf",
    "/var/opt/mssql/data/templog.ldf",
    "/var/opt/mssql/data/tempdb2.ndf",
}
# The statement the source sent until issue 28: DB_ID()'s rows only, joined to sys.database_files on
# file_id alone (an inner join). Kept here to show what the emulation answers it.
BEFORE_ISSUE_28 = """SELECT vfs.database_id, vfs.file_id, DB_NAME() AS database_name, df.type,
       df.physical_name,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms,
       vfs.io_stall_queued_read_ms, vfs.io_stall_queued_write_ms
FROM sys.dm_io_virtual_file_stats(DB_ID(), NULL) AS vfs
JOIN sys.database_files AS df ON df.file_id = vfs.file_id
WHERE df.type IN (0, 1) AND df.state = 0"""


def azure_state(tier: str = "GeneralPurpose", updateability: str = "READ_WRITE") -> DmvState:
    return DmvState(
        databases={"sales": SALES_FILES},
        major_version=AZURE_MAJOR_VERSION,
        engine_edition=SQL_DATABASE,
        service_objective="HS_Gen5_2" if tier == HYPERSCALE else "GP_Gen5_2",
        service_tier=tier,
        updateability=updateability,
    )


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[TdsServer]]:
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    yield TdsServer


def source_for(server: TdsServer) -> MssqlSource:
    target = freetds_target(server.port, "Azure 1", database="sales", timeout_seconds=2)
    return MssqlSource(target, connect_pyodbc(target))


# --- the emulated facts themselves ------------------------------------------------------------------


def test_the_statement_before_issue_28_missed_tempdb_and_the_rbpex_row() -> None:
    """What the emulation answers the old statement (DB_ID()'s rows, inner join): the user database's
    files only; the new one adds tempdb's (named from tempdb.sys.database_files) and RBPEX's (no
    catalog row: NULL type and path)."""
    state = azure_state(HYPERSCALE)
    old = state.azure_file_rows(BEFORE_ISSUE_28, "sales")
    sales = state.database_id("sales")
    assert {(r[0], r[1]) for r in old} == {(sales, 1), (sales, 2), (sales, 3)}
    new = state.azure_file_rows(sql.DB_FILE_STATS.sql, "sales")
    by_id = {(r[0], r[1]): r for r in new}
    assert set(by_id) == {(0, 0), (sales, 1), (sales, 2), (sales, 3), (2, 1), (2, 2), (2, 3)}
    assert by_id[(0, 0)][3:5] == (None, None)  # RBPEX: in no catalog
    assert {by_id[(2, f)][4] for f in (1, 2, 3)} == TEMPDB_PATHS
    assert all(r[2] == "sales" for r in new)  # DB_NAME(): the connection's database on every row
    # Joined on file_id alone, a tempdb row takes the user database's file of that id: the bug Telegraf
    # fixed by joining on database_id too.
    by_file_only = sql.DB_FILE_STATS.sql.replace("df.database_id = vfs.database_id AND ", "")
    misjoined = {(r[0], r[1]): r[4] for r in state.azure_file_rows(by_file_only, "sales")}
    assert misjoined[(2, 1)] == "sales_data_1.mdf"


def test_only_a_hyperscale_database_has_the_rbpex_row() -> None:
    rows = azure_state().azure_file_rows(sql.DB_FILE_STATS.sql, "sales")
    assert 0 not in {r[0] for r in rows}
    with pytest.raises(ValueError, match="Hyperscale"):
        azure_state().advance(1, {("sales", "cache", "read"): Stream(10, 100)})


# --- the source ---------------------------------------------------------------------------------------


@needs_driver
def test_azure_sql_database_reads_tempdb_from_the_user_database_as_role_temp(
    serve: type[TdsServer],
) -> None:
    """Item 13: tempdb's files, database_id 2, read from the user database the target names, each under
    its own path, role temp, db tempdb; the user database's files keep theirs."""
    load: Load = {("tempdb", "data", "write"): Stream(40, 700), ("sales", "data", "read"): Stream(100, 500)}
    with serve(azure_state()) as server:
        source = source_for(server)
        server.state.advance(60, load)
        first = source.collect()
        server.state.advance(60, load)
        second = source.collect()
    assert not first.errors and not second.errors
    writes = delta(first, second, mssql_metrics.MSSQL_FILE_WRITES)
    temp = {k[FILES.index("file")]: v for k, v in writes.items() if k[FILES.index("role")] == "temp"}
    assert set(temp) == TEMPDB_PATHS
    # 40 writes/s spread over tempdb's two data files, none on its log
    assert sum(temp.values()) == 40 * 60 and temp["/var/opt/mssql/data/templog.ldf"] == 0
    assert {k[FILES.index("db")] for k in writes if k[FILES.index("role")] == "temp"} == {"tempdb"}
    stall = delta(first, second, mssql_metrics.MSSQL_FILE_WRITE_STALL)
    temp_stall = sum(v for k, v in stall.items() if k[FILES.index("role")] == "temp")
    assert temp_stall == pytest.approx(40 * 60 * 700e-6, abs=2e-3)
    data = key_of(writes, db="sales", file="sales_data_1.mdf")
    assert data[FILES.index("role")] == "data"
    assert mssql_metrics.MSSQL_FILE_SIMULATED_WRITE_STALL not in {f.spec for f in second.families}


HYPERSCALE_LOAD: Load = {
    ("sales", "cache", "read"): Stream(1000, 100),  # local RBPEX: fast
    ("sales", "cache", "write"): Stream(300, 60),
    ("sales", "data", "read"): Stream(100, 2000),  # page servers: 2 ms, above the 1 ms goal
    ("sales", "data", "write"): Stream(100, 40000),  # simulated: 40 ms that no device took
    ("sales", "log", "write"): Stream(100, 300),
}


def hyperscale_results(
    server: TdsServer, steps: int, seconds: float = 60, load: Load = HYPERSCALE_LOAD
) -> list[SourceResult]:
    """One source's collections, each after `seconds` more of `load`."""
    source = source_for(server)
    results = []
    for _ in range(steps):
        server.state.advance(seconds, load)
        results.append(source.collect())
    return results


@needs_driver
def test_hyperscale_publishes_the_rbpex_row_and_keeps_simulated_write_stalls_apart(
    serve: type[TdsServer],
) -> None:
    """Item 4: the RBPEX row is published (file RBPEX, role other, its reads and writes real); the page
    servers' data files keep their reads, read stall and writes, but their simulated write stall is
    its own series, not the write stall the database layer averages."""
    with serve(azure_state(HYPERSCALE)) as server:
        first, second = hyperscale_results(server, 2)
    assert not first.errors and not second.errors
    reads = delta(first, second, mssql_metrics.MSSQL_FILE_READS)
    rbpex = key_of(reads, file="RBPEX")
    assert (rbpex[FILES.index("db")], rbpex[FILES.index("role")], rbpex[FILES.index("lun")]) == (
        "sales",
        "other",
        "",
    )
    assert reads[rbpex] == 1000 * 60
    write_stall = delta(first, second, mssql_metrics.MSSQL_FILE_WRITE_STALL)
    assert write_stall[rbpex] == pytest.approx(300 * 60 * 60e-6, abs=1e-3)  # local writes: real
    log_file = key_of(reads, file="sales_log.ldf")
    assert log_file in write_stall  # the log's writes (the landing zone): real

    simulated = delta(first, second, mssql_metrics.MSSQL_FILE_SIMULATED_WRITE_STALL)
    page_servers = {k for k in reads if k[FILES.index("role")] == "data"}
    assert {k[FILES.index("file")] for k in page_servers} == {"sales_data_1.mdf", "sales_data_2.ndf"}
    assert set(simulated) == page_servers and not page_servers & set(write_stall)
    assert sum(simulated.values()) == pytest.approx(100 * 60 * 0.04, abs=2e-3)
    writes = delta(first, second, mssql_metrics.MSSQL_FILE_WRITES)
    assert sum(writes[k] for k in page_servers) == 100 * 60  # the writes themselves are still counted
    read_stall = delta(first, second, mssql_metrics.MSSQL_FILE_READ_STALL)
    assert sum(read_stall[k] for k in page_servers) == pytest.approx(100 * 60 * 2e-3, abs=2e-3)


def _promtool_series(results: list[SourceResult]) -> list[dict[str, str]]:
    """The results' counters as promtool input series, one sample per result, the labels of a scrape
    of job lunlat."""
    out = []
    specs = {f.spec for r in results for f in r.families if f.spec.name.startswith("lunlat_mssql_file_")}
    for spec in sorted(specs, key=lambda s: s.name):
        keys = sorted({k for r in results for k in values(r, spec)})
        for key in keys:
            labels = ",".join(
                f'{n}="{v}"'
                for n, v in (("job", "lunlat"), ("instance", "az:10431"), *zip(spec.labels, key, strict=True))
            )
            samples = " ".join(repr(values(r, spec).get(key, 0.0)) for r in results)
            out.append({"series": f"{spec.name}{{{labels}}}", "values": samples})
    return out


def _promtool_test(tmp_path: Path, results: list[SourceResult], cases: list[dict[str, object]]) -> None:
    """The committed rules (alerts/lunlat.rules.yml) on `results`, scraped every 15 s: promtool's verdict
    on `cases` (promql_expr_test entries)."""
    promtool = command("promtool", "prometheus")
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": _promtool_series(results), "promql_expr_test": cases}],
    }
    path = tmp_path / "hyperscale.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", str(path)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


FIRING = 'count by (alertname, role, database, lun) (ALERTS{alertstate="firing", layer="db"})'


@needs_driver
def test_a_hyperscale_page_servers_simulated_write_stall_never_pages_while_its_reads_do(
    serve: type[TdsServer], tmp_path: Path
) -> None:
    """What the source publishes for a Hyperscale database: the page servers' 2 ms reads page
    (LunLatencyDataReadHigh), their simulated 40 ms write stall does not (no LunLatencyDataWriteHigh),
    nor do the fast RBPEX and log."""
    with serve(azure_state(HYPERSCALE)) as server:
        results = hyperscale_results(server, 13, seconds=15)
    assert not any(r.errors for r in results)
    _promtool_test(
        tmp_path,
        results,
        [
            {
                "expr": FIRING,
                "eval_time": "3m",
                "exp_samples": [
                    {
                        # lun "": the files of a service are on no LUN of this host
                        "labels": '{alertname="LunLatencyDataReadHigh", role="data", database="Azure 1"}',
                        "value": 1,
                    }
                ],
            },
            {
                # RBPEX's writes (role other) are judged, at their real 60 µs
                "expr": 'round(1e6 * lunlat:write_latency_seconds:avg1m{layer="db", role="other"})',
                "eval_time": "3m",
                "exp_samples": [
                    {
                        "labels": '{job="lunlat", instance="az:10431", database="Azure 1", role="other",'
                        ' layer="db", engine="mssql"}',
                        "value": 60,
                    }
                ],
            },
        ],
    )


# A read-only replica of a Hyperscale database: no writes of its own (its log is applied by the log
# service), but the DMV still counts log I/O there "for tracking purposes only".
SECONDARY_LOAD: Load = {
    ("sales", "cache", "read"): Stream(1000, 100),
    ("sales", "data", "read"): Stream(100, 500),
    ("sales", "log", "write"): Stream(100, 40000),  # tracking only: 40 ms that no commit waited for
}


@needs_driver
def test_a_hyperscale_read_only_replicas_log_write_stall_is_kept_apart_and_never_pages(
    serve: type[TdsServer], tmp_path: Path
) -> None:
    """On a Hyperscale read-only replica (Updateability READ_ONLY) the log file's write stall is published
    as the simulated stall, not the write stall the database layer averages; its writes stay counted.
    Until then a replica's tracking-only 40 ms log stall paged LunLatencyLogWriteHigh."""
    with serve(azure_state(HYPERSCALE, updateability="READ_ONLY")) as server:
        results = hyperscale_results(server, 13, seconds=15, load=SECONDARY_LOAD)
    assert not any(r.errors for r in results)
    first, last = results[0], results[-1]
    log_file = key_of(delta(first, last, mssql_metrics.MSSQL_FILE_READS), file="sales_log.ldf")
    assert log_file[FILES.index("role")] == "log"
    simulated = delta(first, last, mssql_metrics.MSSQL_FILE_SIMULATED_WRITE_STALL)
    assert log_file in simulated and log_file not in delta(first, last, mssql_metrics.MSSQL_FILE_WRITE_STALL)
    assert simulated[log_file] == pytest.approx(100 * 180 * 0.04, abs=2e-3)
    assert delta(first, last, mssql_metrics.MSSQL_FILE_WRITES)[log_file] == 100 * 180
    _promtool_test(tmp_path, results, [{"expr": FIRING, "eval_time": "3m", "exp_samples": []}])


@needs_driver
def test_a_hyperscale_primarys_log_write_stall_stays_the_write_stall(serve: type[TdsServer]) -> None:
    """The same load on the primary (READ_WRITE): the log's writes are real (the landing zone)."""
    with serve(azure_state(HYPERSCALE)) as server:
        first, second = hyperscale_results(server, 2, load=SECONDARY_LOAD)
    stall = delta(first, second, mssql_metrics.MSSQL_FILE_WRITE_STALL)
    log_file = key_of(stall, file="sales_log.ldf")
    assert stall[log_file] == pytest.approx(100 * 60 * 0.04, abs=2e-3)
    assert log_file not in delta(first, second, mssql_metrics.MSSQL_FILE_SIMULATED_WRITE_STALL)
