"""SQL Server's least-privilege login script and statements (Oracle's: tests/oracle/test_deploy.py)."""

from __future__ import annotations

import re
from pathlib import Path

import sqlglot

from lunlat.sources import mssql_sql

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


def test_mssql_statements_parse_as_tsql_and_read_only_system_views() -> None:
    for query in mssql_sql.ALL_QUERIES:
        tree = sqlglot.parse_one(query.sql, read="tsql")
        assert isinstance(tree, sqlglot.exp.Select), query.name
        assert "?" not in query.sql  # static batches: no sp_prepexec round trip
        for table in tree.find_all(sqlglot.exp.Table):
            assert table.db.lower() == "sys", f"{query.name} reads {table.sql()}"
