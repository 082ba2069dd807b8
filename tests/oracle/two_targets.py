"""Two Oracle targets in one fresh process, through the real python-oracledb driver.

Run by tests/oracle/test_real_driver.py as `python -m tests.oracle.two_targets HUNG_PORT REFUSED_PORT`
in a process of its own: python-oracledb picks thin or thick mode once per process, so the test
needs a process in which no connect has happened yet. The first target's login meets a listener
that accepts and never answers; the second's port refuses. Prints one JSON object per target
(name, reason, message, seconds) on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time

from lunlat.engines.oracle.config import OracleTarget
from lunlat.engines.oracle.source import OracleSource, connect_oracledb
from lunlat.sources.base import SourceError

PASSWORD_ENV = "LUNLAT_TEST_TWO_TARGETS_PASSWORD"  # noqa: S105 - a variable name


def source(name: str, port: int, timeout: float) -> OracleSource:
    target = OracleTarget(
        name=name,
        dsn=f"127.0.0.1:{port}/ORCL",
        user="lunlat",
        password_env=PASSWORD_ENV,
        timeout_seconds=timeout,
    )
    return OracleSource(target, connect_oracledb(target))


def attempt(src: OracleSource) -> dict[str, object]:
    started = time.monotonic()
    try:
        src.collect()
    except SourceError as exc:
        return {
            "name": src.name,
            "reason": exc.reason,
            "message": str(exc),
            "seconds": time.monotonic() - started,
        }
    return {"name": src.name, "reason": "", "message": "connected", "seconds": time.monotonic() - started}


def main(hung_port: int, refused_port: int) -> None:
    os.environ.setdefault(PASSWORD_ENV, "not-a-secret")
    # The hung target's login is cut at 0.3 s and its thread stays in the driver; the refusing
    # target then has 5 s, far more than a refused TCP connect needs.
    for src in (source("hung", hung_port, 0.3), source("refused", refused_port, 5.0)):
        print(json.dumps(attempt(src)), flush=True)
    # The hung login's thread never ends: leave without waiting for it.
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
