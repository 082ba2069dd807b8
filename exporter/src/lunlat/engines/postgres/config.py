"""A PostgreSQL target of the config (`postgres:`)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from lunlat.dbtarget import DatabaseTarget, not_blank

# A password in a connection string: the keyword form ("password = …") or a URI's user:password@
# (https://www.postgresql.org/docs/18/libpq-connect.html, "Connection Strings").
_DSN_PASSWORD = re.compile(r"(?:^|\s)password\s*=|^postgres(?:ql)?://[^/@?]*:[^/@?]*@", re.IGNORECASE)

# libpq's default port ("port: Port number to connect to at the server host ... Defaults to 5432",
# https://www.postgresql.org/docs/18/libpq-connect.html, PGPORT / the compiled-in default).
POSTGRES_DEFAULT_PORT = 5432


class PostgresTarget(DatabaseTarget):
    """One PostgreSQL cluster (pg_stat_io and pg_stat_wal are cluster-wide: one database to log into)."""

    dsn: str | None = Field(
        default=None,
        description="A libpq connection string ('host=db1 port=5432 dbname=postgres sslmode=verify-full') or "
        "URI, without the password; or give host (and port, dbname).",
    )
    host: str | None = Field(default=None, description="Host name, IP address or Unix socket directory.")
    port: int = Field(default=POSTGRES_DEFAULT_PORT, gt=0, lt=65536)
    dbname: str = Field(
        default="postgres", description="The database the login opens (any: the views read are cluster-wide)."
    )

    _blank = field_validator("name", "user", "dbname")(not_blank)

    @model_validator(mode="after")
    def _dsn_or_host(self) -> PostgresTarget:
        if (self.dsn is None) == (self.host is None):
            raise ValueError("give dsn (a libpq connection string) or host, not both and not neither")
        if self.dsn is not None and _DSN_PASSWORD.search(self.dsn):
            raise ValueError("dsn must not hold the password: give password_env or password_file")
        return self

    def endpoint(self) -> tuple[str, int] | None:
        """Host and port of a `host:` target over TCP; None for a dsn (libpq parses it) or a socket directory."""
        if self.host is None or self.host.startswith("/"):
            return None
        return self.host, self.port
