"""Against a real SQL Server, when one is given (marked `live`; skipped otherwise).

    LUNLAT_TEST_MSSQL_DSN=sql1.example.com,1433 LUNLAT_TEST_MSSQL_PASSWORD=… \\
    [LUNLAT_TEST_MSSQL_USER=lunlat LUNLAT_TEST_MSSQL_DRIVER=FreeTDS LUNLAT_TEST_MSSQL_ENCRYPT=no] bash .ci/run

The login is the one deploy/mssql/grants.sql creates (docker-compose profile `mssql` runs one).
"""

from __future__ import annotations

import os

import pytest

from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql.config import MssqlTarget
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from tests.support.live_database import collect_twice_cleanly

SERVER = os.environ.get("LUNLAT_TEST_MSSQL_DSN", "")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not SERVER, reason="no live SQL Server: set LUNLAT_TEST_MSSQL_DSN (and _PASSWORD)"),
]


def test_a_live_instance_answers_every_query_with_the_least_privilege_login() -> None:
    target = MssqlTarget(
        name="live",
        server=SERVER,
        driver=os.environ.get("LUNLAT_TEST_MSSQL_DRIVER", "FreeTDS"),
        user=os.environ.get("LUNLAT_TEST_MSSQL_USER", "lunlat"),
        password_env="LUNLAT_TEST_MSSQL_PASSWORD",  # noqa: S106 - a variable name
        encrypt=os.environ.get("LUNLAT_TEST_MSSQL_ENCRYPT", "yes") != "no",
        trust_server_certificate=True,
        timeout_seconds=10,
    )
    second = collect_twice_cleanly(MssqlSource(target, connect_pyodbc(target)))
    reads = next(f for f in second.families if f.spec is mssql_metrics.MSSQL_FILE_READS).by_labels()
    role = mssql_metrics.MSSQL_FILE_LABELS.index("role")
    db = mssql_metrics.MSSQL_FILE_LABELS.index("db")
    assert {k[role] for k in reads} >= {"data", "log", "temp"}
    assert {"master", "tempdb", "model", "msdb"} <= {k[db] for k in reads}, "VIEW ANY DEFINITION missing?"
