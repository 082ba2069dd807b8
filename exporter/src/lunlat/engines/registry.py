"""Every database engine lunlat reads, in the order their sources are built and their series ruled.

Adding an engine is its package (`engines/__init__.py`) plus one line here.
"""

from __future__ import annotations

from typing import Any

from lunlat.engines import mssql, oracle, postgres
from lunlat.engines.engine import Engine

# Any: each engine is typed by its own target (Engine[OracleTarget] …); a caller that needs the
# target's type takes it from the engine it names (Config.targets(engine)).
ENGINES: tuple[Engine[Any], ...] = (
    oracle.ENGINE,
    mssql.ENGINE,
    postgres.ENGINE,
)


def engine(key: str) -> Engine[Any]:
    """The engine whose config section is `key`."""
    for candidate in ENGINES:
        if candidate.key == key:
            return candidate
    raise KeyError(key)
