"""SQL Server: what each pyodbc error means for the collector, and the connection string per driver."""

from __future__ import annotations

import pytest

from lunlat.engines.dbsession import Kind
from lunlat.engines.mssql.config import MssqlTarget
from lunlat.engines.mssql.source import MssqlSource, classify, connect_pyodbc, connection_string
from lunlat.sources.base import SourceError

pyodbc = pytest.importorskip("pyodbc", reason="pyodbc is not installed (pip install 'lunlat[mssql]')")


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        # What pyodbc + FreeTDS raise, as measured against a TDS server (docs/contract.md §4).
        (
            pyodbc.OperationalError(
                "HYT00", "[HYT00] [FreeTDS][SQL Server]Query timeout expired (0) (SQLExecDirectW)"
            ),
            Kind.TIMEOUT,
        ),
        (
            pyodbc.Error(
                "01000",
                "[01000] [FreeTDS][SQL Server]Unexpected EOF from the server (20017) (SQLExecDirectW)",
            ),
            Kind.LOST,
        ),
        (pyodbc.Error("HY000", "[HY000] [FreeTDS][SQL Server]Unknown error (0) (SQLExecDirectW)"), Kind.LOST),
        (
            pyodbc.OperationalError("08S01", "[08S01] [FreeTDS][SQL Server]Communication link failure (0)"),
            Kind.LOST,
        ),
        (
            pyodbc.OperationalError(
                "08001", "[08001] [FreeTDS][SQL Server]Unable to connect to data source (0)"
            ),
            Kind.LOST,
        ),
        (
            pyodbc.ProgrammingError(
                "42000",
                "[42000] [FreeTDS][SQL Server]VIEW SERVER STATE permission was denied on object 'server', "
                "database 'master'. (300) (SQLExecDirectW)",
            ),
            Kind.NO_GRANT,
        ),
        (
            pyodbc.ProgrammingError(
                "42000",
                "[42000] [FreeTDS][SQL Server]The target database, 'sales', is participating in an availability "
                "group and is currently not accessible for queries. (976) (SQLExecDirectW)",
            ),
            Kind.NOT_READABLE,
        ),
        (
            pyodbc.ProgrammingError(
                "42000",
                "[42000] [FreeTDS][SQL Server]The SELECT permission was denied on the object 'x', database "
                "'sales', schema 'dbo'. (229) (SQLExecDirectW)",
            ),
            Kind.NO_GRANT,
        ),
        (
            pyodbc.ProgrammingError(
                "42S02", "[42S02] Invalid object name 'sys.dm_x'. (208) (SQLExecDirectW)"
            ),
            Kind.QUERY_FAILED,
        ),
    ],
)
def test_pyodbc_errors_are_classified_by_sqlstate_and_number(exc: Exception, kind: Kind) -> None:
    assert classify(exc).kind is kind


def target(**changes: object) -> MssqlTarget:
    values: dict[str, object] = {"name": "SQL Server 1", "server": "sql1.example.com,1433", "user": "lunlat",
                                 "password_env": "X"}  # fmt: skip
    values.update(changes)
    return MssqlTarget.model_validate(values)


def test_odbc_driver_18_gets_encrypt_and_trust_keywords_and_a_braced_password() -> None:
    text = connection_string(target(encrypt=True, trust_server_certificate=False), "p;a}ss")
    assert text == (
        "DRIVER={ODBC Driver 18 for SQL Server};SERVER=sql1.example.com,1433;Encrypt=yes;"
        "TrustServerCertificate=no;UID={lunlat};PWD={p;a}}ss};APP=lunlat"
    )


def test_freetds_gets_server_and_port_apart_and_its_own_encryption_keyword() -> None:
    text = connection_string(target(driver="FreeTDS", encrypt=False), "pw")
    assert "SERVER=sql1.example.com;PORT=1433;TDS_Version=7.4;Encryption=off" in text
    assert "Encrypt=" not in text
    assert "Encryption=require" in connection_string(target(driver="FreeTDS", encrypt=True), "pw")


def test_the_database_key_opens_that_database_and_is_checked_like_the_other_odbc_values() -> None:
    text = connection_string(target(database="sales"), "pw")
    assert ";DATABASE={sales};" in text and text.endswith(";APP=lunlat")  # APP stays last (FreeTDS)
    assert "DATABASE=" not in connection_string(target(), "pw")  # the login's default database
    for bad in ("sales;x", "sa{les", " "):
        with pytest.raises(ValueError, match="database"):
            target(database=bad)


AG_SECONDARY = (
    "[42000] [FreeTDS][SQL Server]The target database, 'sales', is participating in an availability group "
    "and is currently not accessible for queries. Either data movement is suspended or the availability "
    "replica is not enabled for read access. (976) (SQLDriverConnect)"
)


def test_an_unreadable_always_on_secondary_is_its_own_reason_and_says_the_fix_first() -> None:
    found = classify(pyodbc.ProgrammingError("42000", AG_SECONDARY))
    assert found.kind is Kind.NOT_READABLE and found.code == "42000 (976)"
    # The fix comes first: log lines keep the first 300 characters of a message.
    assert found.message.startswith("Always On secondary not readable")
    assert "ALLOW_CONNECTIONS" in found.message[:300] and "`database`" in found.message[:300]


def test_a_connect_to_an_unreadable_secondary_fails_as_not_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    """976 at login (the target's `database` is an availability database on a secondary that allows
    no reads) is counted as not_readable, not as a generic connect failure."""
    monkeypatch.setenv("X", "pw")

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise pyodbc.ProgrammingError("42000", AG_SECONDARY)

    monkeypatch.setattr(pyodbc, "connect", refuse)
    with pytest.raises(SourceError) as caught:
        connect_pyodbc(target(database="sales"))()
    assert caught.value.reason == "not_readable" and caught.value.code == "42000 (976)"
    assert "ALLOW_CONNECTIONS" in str(caught.value)
    assert "not_readable" in MssqlSource.error_reasons
