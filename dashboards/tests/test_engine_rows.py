"""Each engine's rows of the Database I/O dashboard, kept with the generator (engine_rows), match the
engines' registry: one module of rows per engine, none for an engine that is not there."""

from __future__ import annotations

from lunlat.engines.registry import ENGINES
from lunlat_dashboards.engine_rows import ROWS


def test_every_engine_has_its_rows_and_no_other_key_has_any() -> None:
    assert set(ROWS) == {engine.key for engine in ENGINES}
    assert all(ROWS[engine.key] for engine in ENGINES), "an engine with no row on the dashboard"
