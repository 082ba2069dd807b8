"""SQL Server's least-privilege login script and statements (Oracle's: tests/oracle/test_deploy.py)."""

from __future__ import annotations

import re
from pathlib import Path

import sqlglot

from lunlat.engines.mssql import sql as mssql_sql

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _statements(path: Path) -> list[str]:
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("--")]
    return [" ".join(s.split()) for s in " ".join(lines).split(";") if s.strip()]


def test_mssql_grants_are_the_performance_state_and_definition_permissions_only() -> None:
    text = " ".join(_statements(DEPLOY / "mssql" / "grants.sql"))
    granted = re.findall(r"GRANT ([A-Z ]+?) TO \[lunlat\]", text)
    assert sorted(granted) == ["VIEW ANY DEFINITION", "VIEW SERVER PERFORMANCE STATE", "VIEW SERVER STATE"]
    assert "sysadmin" not in text.lower() and "db_datareader" not in text.lower()
    assert "$(LUNLAT_PASSWORD)" in text  # from sqlcmd's -v, never written in the file


def test_amazon_rds_grants_are_view_server_state_and_definition_only() -> None:
    path = DEPLOY / "mssql" / "grants-amazon-rds.sql"
    text = " ".join(_statements(path))
    granted = re.findall(r"GRANT ([A-Z ]+?) TO \[lunlat\]", text)
    assert sorted(granted) == ["VIEW ANY DEFINITION", "VIEW SERVER STATE"]
    assert "sysadmin" not in text.lower() and "db_owner" not in text.lower()
    assert "CREATE LOGIN [lunlat] WITH PASSWORD = N'$(LUNLAT_PASSWORD)'" in text
    # Every view the source reads on RDS is one its header names; not the volume lookup.
    header = path.read_text().lower()
    for query in (mssql_sql.SERVER, mssql_sql.HOST_INFO, mssql_sql.FILE_STATS, mssql_sql.WAIT_STATS):
        for table in sqlglot.parse_one(query.sql, read="tsql").find_all(sqlglot.exp.Table):
            name = (table.name or table.this.sql()).split("(")[0]
            assert f"sys.{name.lower()}" in header, f"{query.name} reads sys.{name}"


# The statements each Azure SQL Database grant covers: the ones the source runs there.
AZURE_SQL_DATABASE_READS = (
    mssql_sql.EDITION,
    mssql_sql.SERVER_SQL_DATABASE,
    mssql_sql.DB_FILE_STATS,
    mssql_sql.DB_WAIT_STATS,
)


def test_azure_sql_database_grants_are_view_database_state_on_a_contained_user_only() -> None:
    path = DEPLOY / "mssql" / "grants-azure-sql-database.sql"
    text = " ".join(_statements(path))
    granted = re.findall(r"GRANT ([A-Z ]+?) TO \[lunlat\]", text)
    assert granted == ["VIEW DATABASE STATE"]
    assert "CREATE USER [lunlat] WITH PASSWORD" in text and "CREATE LOGIN" not in text
    assert "$(LUNLAT_PASSWORD)" in text
    # Every view the source reads on Azure SQL Database is one its header names (and so grants for).
    header = path.read_text()
    for query in AZURE_SQL_DATABASE_READS:
        for table in sqlglot.parse_one(query.sql, read="tsql").find_all(sqlglot.exp.Table):
            name = (table.name or table.this.sql()).split("(")[0]  # a table function: its name
            assert f"sys.{name.lower()}" in header.lower(), f"{query.name} reads sys.{name}"
    assert "master_files" not in " ".join(q.sql for q in AZURE_SQL_DATABASE_READS)
    # sys.dm_os_sys_info needs the server admin on Basic, S0, S1 and elastic pools: never read there
    assert "dm_os_sys_info" not in " ".join(q.sql for q in AZURE_SQL_DATABASE_READS)


def test_mssql_statements_parse_as_tsql_and_read_only_system_views() -> None:
    for query in mssql_sql.ALL_QUERIES:
        tree = sqlglot.parse_one(query.sql, read="tsql")
        assert isinstance(tree, sqlglot.exp.Select), query.name
        assert "?" not in query.sql  # static batches: no sp_prepexec round trip
        for table in tree.find_all(sqlglot.exp.Table):
            assert table.db.lower() == "sys", f"{query.name} reads {table.sql()}"
