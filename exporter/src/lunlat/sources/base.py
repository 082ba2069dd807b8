"""The small interface every source implements, and how a source reports trouble."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from lunlat.model import Family


class SourceError(Exception):
    """A collection that failed as a whole: the source is down for this scrape, counted by `reason`."""

    def __init__(self, reason: str, message: str, count: int = 1, code: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        # 0 when the failure was already counted (e.g. a source waiting to reconnect after a
        # failed attempt): the source is down, but no new error happened.
        self.count = count
        # The class of the failure (a driver's error code) where the message carries details that
        # change on every attempt (ids, times): a change of `code` is worth a log line, a change
        # of message is not. None: the message itself is the class.
        self.code = code

    @property
    def kind(self) -> tuple[str, str]:
        """What the failure is, for "log once per change": reason and code (or the message)."""
        return self.reason, str(self) if self.code is None else self.code


@dataclass(slots=True)
class SourceResult:
    families: list[Family]
    # Errors that cost part of the data but not the collection (a malformed line, a missing grant).
    errors: Counter[str] = field(default_factory=Counter)


@runtime_checkable
class Reusable(Protocol):
    """A source that a config reload may keep running instead of its rebuilt twin.

    `built_from` is what the source was built from (a database target's config): when the reloaded
    config builds a source of the same name from an equal value, the running one stays, with its
    open session, so a reload that adds a LUN does not reconnect every database.
    """

    @property
    def built_from(self) -> object: ...


@runtime_checkable
class CarriesState(Protocol):
    """A rebuilt source that takes over what its predecessor of the same name knew.

    The diskstats source takes over the 32-bit wrap offsets: a fresh one would publish the raw,
    wrapped milliseconds, which Prometheus reads as a counter reset and an increase of up to 2^32 ms
    (a false latency spike, a false page).
    """

    def carry_over(self, previous: object) -> None: ...


@runtime_checkable
class Throttled(Protocol):
    """A source collected at most once per `min_interval` seconds (0: at every scrape).

    The scraper serves the last collection again to a scrape that comes sooner (scrape.py), so two
    HA Prometheus servers, or a Prometheus and a vmagent, do not double the queries a database
    answers.
    """

    @property
    def min_interval(self) -> float: ...


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
