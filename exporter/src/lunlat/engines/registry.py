"""Every database engine lunlat reads, in the order their sources are built and their series ruled.

Adding an engine is its package (`engines/__init__.py`) plus one line here.
"""

from __future__ import annotations

from lunlat.engines import mssql, oracle, postgres
from lunlat.engines.engine import Engine

ENGINES: tuple[Engine, ...] = (
    oracle.ENGINE,
    mssql.ENGINE,
    postgres.ENGINE,
)


def engine(key: str) -> Engine:
    """The engine whose config section is `key`."""
    for candidate in ENGINES:
        if candidate.key == key:
            return candidate
    raise KeyError(key)
