"""The `mssql:` target every FreeTDS test builds: the TDS test server (or a dead port) on 127.0.0.1."""

from __future__ import annotations

from typing import Any

from lunlat.engines.mssql.config import MssqlTarget

PASSWORD_ENV = "LUNLAT_TEST_MSSQL_PASSWORD"  # noqa: S105 - the variable's name, not a password


def freetds_target(port: int, name: str = "SQL Server 1", **settings: Any) -> MssqlTarget:
    """A target through FreeTDS without TLS (the test server answers ENCRYPT_NOT_SUP); `settings`
    are any other target keys (timeout_seconds, workload, database, min_interval_seconds, …)."""
    return MssqlTarget(
        name=name,
        server=f"127.0.0.1,{port}",
        driver="FreeTDS",
        user="lunlat",
        password_env=settings.pop("password_env", PASSWORD_ENV),
        encrypt=False,
        **settings,
    )
