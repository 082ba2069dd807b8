"""What every database source shares: a session kept between scrapes, queries run under gates,
rows checked before they become samples, warnings logged once, label sets reused.

Driver specifics come from the subclass: its `classify` (what an exception means) and its SQL.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from lunlat import logs
from lunlat.config import _DatabaseTarget
from lunlat.dbfiles import NOWHERE, DbLunLabels, FileLocator, Location, device_labels
from lunlat.model import LabelSet
from lunlat.sources.base import SourceError
from lunlat.sources.dbsession import Classified, Conn, Kind, QueryGates, Session

log = logs.get(__name__)


@dataclass(frozen=True, slots=True)
class Query:
    name: str  # used in logs and in the per-query error handling
    sql: str
    per_scrape: bool  # False: a lookup, cached and refreshed now and then


class BadRowError(ValueError):
    pass


def count_value(value: object, column: str) -> int:
    """A counter column: a non-negative whole number (NUMBER arrives as int, or float if the
    driver was told so)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRowError(f"{column} is {value!r}, not a number")
    if value < 0 or value != value or (isinstance(value, float) and not value.is_integer()):  # noqa: PLR0124
        raise BadRowError(f"{column} is {value!r}, not a whole number >= 0")
    return int(value)


def seconds_value(value: object, column: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise BadRowError(f"{column} is {value!r}, not a number of seconds >= 0")
    return float(value)


def text_value(value: object, column: str) -> str:
    if not isinstance(value, str):
        raise BadRowError(f"{column} is {value!r}, not text")
    return value


def id_value(value: object, column: str) -> int:
    return 0 if value is None else count_value(value, column)  # NULL ids (CON_ID in older views) are 0


class DbSource(Generic[Conn]):
    """Base of the database sources; see the module docstring."""

    error_reasons: tuple[str, ...] = (
        "connect_failed",
        "connect_timeout",
        "connection_lost",
        "query_timeout",
        "no_grant",
        "query_failed",
        "bad_row",
    )
    grants_hint = ""  # where a missing grant is explained (deploy/…/grants.sql)
    _target: _DatabaseTarget  # the target's config, set by each engine's source

    @property
    def built_from(self) -> object:
        """The target's config: a reload with an equal one keeps this source (base.Reusable)."""
        return self._target

    @property
    def min_interval(self) -> float:
        """The target's `min_interval_seconds` (base.Throttled): the scraper serves the last
        collection again to scrapes that come sooner."""
        return self._target.min_interval_seconds

    def __init__(
        self,
        name: str,
        connect: Callable[[], Conn],
        classify: Callable[[BaseException], Classified],
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        locator: FileLocator | None = None,
        db_labels: DbLunLabels | None = None,
    ) -> None:
        self.name = name
        # The connect and each query are bounded by `timeout`; the collection as a whole by
        # twice that (a connect and a slow query), and always by the scrape's own deadline.
        self.timeout: float | None = 2 * timeout
        self._session: Session[Conn] = Session(name, connect, classify, timeout, clock)
        self._classify = classify
        self._clock = clock
        self._gates = QueryGates(clock=clock)
        self._warned = logs.Once()
        self._labels: dict[tuple[object, ...], LabelSet] = {}
        self._locator = locator
        self._locations: dict[str, Location] = {}
        self._db_labels = db_labels
        self._published: object = None  # what the last publish of host-layer labels was built from
        if db_labels is not None:
            db_labels.register(name)

    # --- database files on the host's LUNs ------------------------------------------------------

    def _refresh_locations(self) -> None:
        """Forget where files were and re-read the host (new session, new file names)."""
        self._locations = {}
        if self._locator is not None:
            self._locator.refresh()

    def _locate(self, path: str, expect_lun: bool = True) -> Location:
        if self._locator is None:
            return NOWHERE
        found = self._locations.get(path)
        if found is None:
            found = self._locations[path] = self._locator.locate(path)
            if not found.luns and expect_lun:
                self._warn_once("locate", path, "database file on no known LUN", path)
        return found

    def _publish_lun_labels(
        self, key: object, files: Callable[[], Iterable[tuple[Location, str]]], database: str, workload: str
    ) -> None:
        """Tell the host layer which devices hold this database's files, by role; only when `key`
        (what the files were derived from) changed, so a steady scrape does no work here."""
        if self._db_labels is None or self._locator is None or key == self._published:
            return
        self._published = key
        self._db_labels.publish(self.name, device_labels(files(), database, workload))

    def close(self) -> None:
        self._session.close()

    def _prepare(self, cursor: Any) -> None:
        """Driver-specific cursor settings (fetch size …) before a query runs."""

    def _query(self, conn: Conn, query: Query, errors: Counter[str]) -> list[Any] | None:
        if not self._gates.open(query.name):
            return None
        try:
            cursor = conn.cursor()
            try:
                self._prepare(cursor)
                cursor.execute(query.sql)
                rows: list[Any] = cursor.fetchall()
            finally:
                cursor.close()
        except Exception as exc:  # noqa: BLE001 - every driver error is classified below
            found = self._classify(exc)
            detail = f"{query.name}: {found.code}: {found.message}" if found.code else found.message
            if found.kind is Kind.LOST:
                self._session.lost(detail, found.code)
                raise SourceError(found.kind.value, detail, code=found.code) from None
            if found.kind is Kind.TIMEOUT:
                # The session may still be busy on the server: never reuse it.
                self._session.drop(detail)
                raise SourceError(found.kind.value, detail, code=found.code) from None
            errors[found.kind.value] += 1
            if found.kind is Kind.NO_GRANT:
                self._gates.close(query.name)
                log.warning(
                    self._no_grant_message(query, found.code),
                    source=self.name,
                    query=query.name,
                    err=found.code,
                )
            else:
                self._warn_once(query.name, found.code or found.message, "query failed", detail)
            return None
        if self._gates.reopen(query.name):
            log.info("query enabled again", source=self.name, query=query.name)
        return rows

    def _no_grant_message(self, query: Query, code: str) -> str:
        """The log line of a query switched off for a missing grant (an engine may say more)."""
        return f"query disabled: missing grant (see {self.grants_hint}); retried in 10 minutes"

    def _warn_once(self, where: str, key: str, what: str, detail: str) -> None:
        if not self._warned.first((where, key)):
            return
        log.warning(what, source=self.name, query=where, err=detail[:300])

    def _rows(
        self, rows: Sequence[Any], query: Query, errors: Counter[str], parse: Callable[[Any], Any]
    ) -> list[Any]:
        """Parsed rows; a row with an unexpected value is skipped and counted, never published."""
        out = []
        for row in rows:
            try:
                out.append(parse(row))
            except (BadRowError, ValueError, TypeError, IndexError) as exc:
                errors["bad_row"] += 1
                self._warn_once(query.name, str(exc), "skipping row", f"{exc} in {row!r}"[:300])
        return out

    def _label_set(self, names: tuple[str, ...], values: tuple[str, ...]) -> LabelSet:
        key = (names, values)
        found = self._labels.get(key)
        if found is None:
            if len(self._labels) > 100_000:  # files come and go; never grow without bound
                self._labels.clear()
            found = self._labels[key] = LabelSet(names, values)
        return found
