"""A SQL Server target of the config (`mssql:`)."""

from __future__ import annotations

from pydantic import Field, field_validator

from lunlat.dbtarget import DatabaseTarget, not_blank

# SQL Server's default TCP port.
MSSQL_DEFAULT_PORT = 1433


class MssqlTarget(DatabaseTarget):
    """One SQL Server instance (every database it hosts; Always On secondaries included)."""

    server: str = Field(description="host, host,port or host\\instance, as in an ODBC connection string.")
    driver: str = Field(
        default="ODBC Driver 18 for SQL Server",
        description="The ODBC driver name as odbcinst knows it ('FreeTDS' where Microsoft's is not installed).",
    )
    encrypt: bool = True
    trust_server_certificate: bool = False
    database: str | None = Field(
        default=None,
        description="The database the login opens (ODBC DATABASE=); Azure SQL Database: the one database read.",
    )

    @field_validator("name", "server", "user", "driver", "database")
    @classmethod
    def _odbc_value(cls, value: str | None) -> str | None:
        # These go into an ODBC connection string, where ; and braces delimit attributes.
        if value is None:
            return None
        if any(c in value for c in ";{}"):
            raise ValueError("must not contain ';', '{' or '}'")
        return not_blank(value)

    def endpoint(self) -> tuple[str, int] | None:
        """Host and port of `server` (host or host,port; 1433 by default); None for host\\instance,
        whose port SQL Server Browser assigns at run time."""
        host, comma, port = self.server.partition(",")
        host = host.strip().removeprefix("tcp:")
        if "\\" in host:
            return None
        if not comma:
            return host, MSSQL_DEFAULT_PORT
        return (host, int(port)) if port.strip().isdigit() else None
