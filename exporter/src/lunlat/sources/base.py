"""The small interface every source implements, and how a source reports trouble."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from lunlat.model import Family


class SourceError(Exception):
    """A collection that failed as a whole: the source is down for this scrape, counted by `reason`."""

    def __init__(self, reason: str, message: str, count: int = 1) -> None:
        super().__init__(message)
        self.reason = reason
        # 0 when the failure was already counted (e.g. a source waiting to reconnect after a
        # failed attempt): the source is down, but no new error happened.
        self.count = count


@dataclass(slots=True)
class SourceResult:
    families: list[Family]
    # Errors that cost part of the data but not the collection (a malformed line, a missing grant).
    errors: Counter[str] = field(default_factory=Counter)


class Source(Protocol):
    """A source collects fresh samples at scrape time.

    The scraper never runs two collections of one source at once (concurrent scrapes share the one
    in flight), so a source may keep state between collections without locking.
    """

    @property
    def name(self) -> str: ...

    @property
    def error_reasons(self) -> tuple[str, ...]:
        """Every reason this source may count, so each series exists at 0 before its first error."""
        ...

    @property
    def timeout(self) -> float | None:
        """Deadline of one collection in seconds, or None to be bounded only by the scrape's."""
        ...

    def collect(self) -> SourceResult: ...
