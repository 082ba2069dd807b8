"""The PostgreSQL source's parts that need no server: the config target, error classes, settings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import classify, temp_tablespace_names
from lunlat.sources.dbsession import Kind
from tests.extras import need


def target(**fields: object) -> PostgresTarget:
    return PostgresTarget.model_validate({"name": "pg", "user": "lunlat", "password_env": "PW", **fields})


def test_a_target_takes_a_dsn_or_a_host_and_never_a_password_in_the_dsn() -> None:
    assert target(host="db1").endpoint() == ("db1", 5432)
    assert target(dsn="host=db1 dbname=postgres").endpoint() is None
    assert target(dsn="postgresql://lunlat@db1/password_vault").dsn  # a database may be named so
    for bad in (
        {},
        {"host": "db1", "dsn": "host=db1"},
        {"dsn": "host=db1 password=secret"},
        {"dsn": "host=db1 PASSWORD = 'x'"},
        {"dsn": "postgresql://lunlat:secret@db1/postgres"},
    ):
        with pytest.raises(ValidationError):
            target(**bad)


def test_temp_tablespaces_is_a_comma_list_of_possibly_quoted_names() -> None:
    assert temp_tablespace_names("") == ()
    assert temp_tablespace_names('fast, "Temp Space"') == ("fast", "Temp Space")


@pytest.mark.parametrize(
    ("sqlstate", "kind"),
    [
        ("57014", Kind.TIMEOUT),  # query_canceled: statement_timeout
        ("42501", Kind.NO_GRANT),  # insufficient_privilege
        ("08006", Kind.LOST),  # connection_failure
        ("57P01", Kind.LOST),  # admin_shutdown
        ("28P01", Kind.QUERY_FAILED),  # invalid_password: at connect, connect_failed with this code
        ("42P01", Kind.QUERY_FAILED),  # undefined_table
    ],
)
def test_psycopg_errors_are_classified_by_sqlstate(sqlstate: str, kind: Kind) -> None:
    psycopg = need("psycopg")
    # psycopg.errors.lookup: the exception class of a SQLSTATE (psycopg's errors page).
    error = psycopg.errors.lookup(sqlstate)("boom")
    assert error.sqlstate == sqlstate
    found = classify(error)
    assert (found.kind, found.code) == (kind, sqlstate)


def test_a_socket_the_server_closed_is_a_lost_connection() -> None:
    psycopg = need("psycopg")
    assert classify(psycopg.OperationalError("server closed the connection unexpectedly")).kind is Kind.LOST
    assert classify(psycopg.InterfaceError("the connection is closed")).kind is Kind.LOST
