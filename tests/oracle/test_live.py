"""Against a real Oracle database, when one is given (marked `live`; skipped otherwise).

    LUNLAT_TEST_ORACLE_DSN=host:1521/FREEPDB1 LUNLAT_TEST_ORACLE_USER=lunlat \\
    LUNLAT_TEST_ORACLE_PASSWORD=… bash .ci/run

The user is the one deploy/oracle/grants.sql creates (docker-compose profile `oracle` runs one).
"""

from __future__ import annotations

import os

import pytest

from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.engines.oracle.config import OracleTarget
from lunlat.engines.oracle.source import OracleSource, connect_oracledb
from lunlat.model import Family
from tests.support.live_database import collect_twice_cleanly

DSN = os.environ.get("LUNLAT_TEST_ORACLE_DSN", "")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not DSN, reason="no live Oracle: set LUNLAT_TEST_ORACLE_DSN (and _USER, _PASSWORD)"),
]


def _by_name(families: list[Family]) -> dict[str, Family]:
    return {f.spec.name: f for f in families}


def test_a_live_database_answers_every_query_with_the_least_privilege_user() -> None:
    target = OracleTarget(
        name="live",
        dsn=DSN,
        user=os.environ.get("LUNLAT_TEST_ORACLE_USER", "lunlat"),
        password_env="LUNLAT_TEST_ORACLE_PASSWORD",  # noqa: S106 - the variable's name, not a password
        timeout_seconds=10,
    )
    second = collect_twice_cleanly(OracleSource(target, connect_oracledb(target)))
    families = _by_name(second.families)
    reads = families[oracle_metrics.ORACLE_FILE_READS.name].by_labels()
    roles = {labels[oracle_metrics.ORACLE_FILE_LABELS.index("role")] for labels in reads}
    assert {"data", "log", "control"} <= roles
    histogram = families[oracle_metrics.ORACLE_WAIT_DURATION.name]
    buckets: dict[tuple[str, ...], list[float]] = {}
    counts: dict[tuple[str, ...], float] = {}
    for suffix, labels, value in histogram.all_samples():
        if suffix == "_bucket":
            buckets.setdefault(labels.values[:-1], []).append(value)
        elif suffix == "_count":
            counts[labels.values] = value
    assert buckets, "an open database has waited for I/O at least once"
    for key, cumulative in buckets.items():
        assert cumulative == sorted(cumulative) and cumulative[-1] == counts[key]
