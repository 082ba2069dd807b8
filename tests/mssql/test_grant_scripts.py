"""Each grant and revoke script of deploy/mssql/, run batch by batch as each SQL Server version (and
Azure SQL Database) would parse it (tests/mssql/grant_scripts.py: the per-version permission names
and the batch rules, cited there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mssql.grant_scripts import AZURE_SQL_DATABASE, SQL_SERVER, CheckerError, Target, run

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "mssql"
BEFORE_2022 = {"VIEW SERVER STATE", "VIEW ANY DEFINITION"}
FROM_2022 = {"VIEW SERVER PERFORMANCE STATE", "VIEW ANY DEFINITION"}
# Amazon RDS for SQL Server runs 2016 to 2022 (docs/emulated-facts.md, the RDS rows).
RDS_VERSIONS = ("SQL Server 2016", "SQL Server 2017", "SQL Server 2019", "SQL Server 2022")


@pytest.mark.parametrize("version", SQL_SERVER)
def test_grants_sql_grants_the_state_permission_each_version_knows_and_view_any_definition(
    version: str,
) -> None:
    target = SQL_SERVER[version]
    result = run((DEPLOY / "grants.sql").read_text(), target)
    assert not result.failed
    assert result.granted == (FROM_2022 if target.major >= 16 else BEFORE_2022)
    assert any(s.startswith("CREATE LOGIN [lunlat]") for s in result.ran)


@pytest.mark.parametrize("version", RDS_VERSIONS)
def test_amazon_rds_grants_run_whole_on_each_rds_version(version: str) -> None:
    result = run((DEPLOY / "grants-amazon-rds.sql").read_text(), SQL_SERVER[version])
    assert not result.failed
    assert result.granted == BEFORE_2022


def test_azure_sql_database_grants_run_whole_there() -> None:
    result = run((DEPLOY / "grants-azure-sql-database.sql").read_text(), AZURE_SQL_DATABASE)
    assert not result.failed
    assert result.granted == {"VIEW DATABASE STATE"}
    assert any(s.startswith("CREATE USER [lunlat]") for s in result.ran)


@pytest.mark.parametrize("version", SQL_SERVER)
def test_revoke_sql_drops_the_login_on_each_version(version: str) -> None:
    result = run((DEPLOY / "revoke.sql").read_text(), SQL_SERVER[version], principal_exists=True)
    assert not result.failed
    assert "DROP LOGIN [lunlat]" in result.ran


# The batch grants.sql had until the second audit (issue 28): one IF … ELSE naming the 2022 permission
# outside dynamic SQL.
ONE_BATCH_IF_ELSE = """IF CAST(PARSENAME(CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128)), 4) AS INT) >= 16
    GRANT VIEW SERVER PERFORMANCE STATE TO [lunlat];
ELSE
    GRANT VIEW SERVER STATE TO [lunlat];
GO
GRANT VIEW ANY DEFINITION TO [lunlat];
GO
"""


def test_the_checker_fails_a_batch_naming_a_permission_the_version_does_not_know() -> None:
    before = run(ONE_BATCH_IF_ELSE, SQL_SERVER["SQL Server 2019"])
    assert before.granted == {"VIEW ANY DEFINITION"}  # the ELSE branch never ran: the batch did not compile
    assert before.failed == [
        "batch 1: SQL Server 2019 does not know VIEW SERVER PERFORMANCE STATE: nothing in it ran"
    ]
    assert run(ONE_BATCH_IF_ELSE, SQL_SERVER["SQL Server 2022"]).granted == FROM_2022


def test_azure_sql_database_cannot_take_a_server_permission() -> None:
    result = run("GRANT VIEW SERVER STATE TO [lunlat];\nGO\n", AZURE_SQL_DATABASE)
    assert result.failed and not result.granted


def test_the_checker_refuses_what_it_does_not_model() -> None:
    with pytest.raises(CheckerError, match="PERMISSION_SINCE"):
        run("GRANT ALTER ANY LOGIN TO [lunlat];", Target("SQL Server 2019", 15))
    with pytest.raises(CheckerError, match="condition"):
        run("IF @@VERSION LIKE N'%2019%' GRANT VIEW SERVER STATE TO [lunlat];", Target("SQL Server 2019", 15))
