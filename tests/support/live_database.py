"""Shared by the live database tests: two collections on one session, both without errors."""

from __future__ import annotations

from typing import Protocol

from lunlat.sources.base import SourceResult


class DatabaseSource(Protocol):
    def collect(self) -> SourceResult: ...

    def close(self) -> None: ...


def collect_twice_cleanly(source: DatabaseSource) -> SourceResult:
    """The second of two collections (the first also looks names up); fails on any counted error."""
    try:
        first = source.collect()
        second = source.collect()
    finally:
        source.close()
    assert not first.errors and not second.errors, (first.errors, second.errors)
    return second
