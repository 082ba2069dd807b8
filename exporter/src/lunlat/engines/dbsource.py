"""What every database source shares: a session kept between scrapes, queries run under gates,
rows checked before they become samples, warnings logged once, label sets reused.

Driver specifics come from the subclass: its `classify` (what an exception means) and its SQL.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from lunlat import ground, logs
from lunlat.containers import ContainerMapper
from lunlat.dbfiles import NOWHERE, DbLunLabels, FileLocator, Location, device_labels
from lunlat.dbtarget import DatabaseTarget
from lunlat.engines.dbsession import Classified, Conn, Kind, QueryGates, Session
from lunlat.model import Family, LabelSet
from lunlat.sources.base import SourceError

log = logs.get(__name__)


@dataclass(frozen=True, slots=True)
class Query:
    name: str  # used in logs and in the per-query error handling
    sql: str
    per_scrape: bool  # False: a lookup, cached and refreshed now and then


# A container lookup that failed is tried again this often (besides at every new session), so a
# passing engine outage does not leave the files without `lun` until the database reconnects.
CONTAINER_RETRY_SECONDS = 60.0


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


def retried(pause: float) -> str:
    """When a query switched off for a missing grant is asked again (dbsession.QueryGates)."""
    return f"retried at the next session or config reload, or in {pause:.0f} s"


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
        "duplicate_row",
    )
    grants_hint = ""  # where a missing grant is explained (deploy/…/grants.sql)
    _target: DatabaseTarget  # the target's config, set by each engine's source

    @property
    def built_from(self) -> object:
        """The target's config (and the engine's, for a target in a container): a reload with equal
        ones keeps this source (base.Reusable)."""
        if self._container is None:
            return self._target
        return (self._target, self._container.ref, self._container.docker)

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
        container: ContainerMapper | None = None,
    ) -> None:
        self.name = name
        # The connect and each query are bounded by `timeout`; the collection as a whole by
        # twice that (a connect and a slow query), and always by the scrape's own deadline.
        self.timeout: float | None = 2 * timeout
        self._session: Session[Conn] = Session(name, connect, classify, timeout, clock)
        self._classify = classify
        self._clock = clock
        self._gates = QueryGates(clock=clock)
        self._gates_session = 0  # the session the gates were last opened for (Session.connects)
        # The file map (ground.DB_FILE_MAP_AGE): when the database last answered the source's file
        # lookups, None while the source has none. Each engine keeps what it read and says here when.
        self._map_read_at: float | None = None
        self._map_generation = 0  # changes when a map is dropped, so host labels are published again
        self._map_stale = False  # a lookup went unanswered since the map was read (said once)
        self._map_said = logs.Once()
        self._warned = logs.Once()
        self._labels: dict[tuple[object, ...], LabelSet] = {}
        self._locator = locator
        self._locations: dict[str, Location] = {}
        self._db_labels = db_labels
        self._published: object = None  # what the last publish of host-layer labels was built from
        # The database's container, when it runs in one: its paths are mapped to the host's first.
        self._container = container
        self._container_said = logs.Once()
        self._container_checked = -float("inf")
        self._container_down = False
        self._container_generation = 0  # changes when the mapping does, so host labels are published again
        if db_labels is not None:
            db_labels.register(name)

    # --- database files on the host's LUNs ------------------------------------------------------

    def _refresh_locations(self) -> None:
        """Forget where files were and re-read the host (new session, new file names), and the
        container's mounts: a recreated container may have others."""
        self._locations = {}
        if self._locator is not None:
            self._locator.refresh()
            if self._container is not None:
                self._refresh_container()

    def _refresh_container(self) -> bool:
        """Ask the engine for the container's mounts (bounded, never raises); a failure is said once
        per spell, with its cause. True when mapped."""
        assert self._container is not None
        self._container.refresh()
        self._container_checked = self._clock()
        self._container_generation += 1
        if self._container.problem:
            self._container_down = True
            if self._container_said.first("container"):
                log.warning(
                    "database container not mapped: its files get an empty lun until the engine answers",
                    source=self.name,
                    container=self._container.ref.describe(),
                    err=self._container.problem,
                )
            return False
        if self._container_down:
            log.info("database container mapped again", source=self.name)
        self._container_down = False
        self._container_said.forget("container")
        paths = self._container.paths
        log.debug(
            "database container mapped",
            source=self.name,
            container=paths.name if paths is not None else "",
            mounts=len(paths.mounts) if paths is not None else 0,
        )
        return True

    def _host_path(self, path: str) -> str | None:
        """Where a path the database reports is on the host: itself, or through its container."""
        if self._container is None:
            return path
        due = self._clock() - self._container_checked >= CONTAINER_RETRY_SECONDS
        if not self._container.mapped and due and self._refresh_container():
            self._locations = {}
        return self._container.host_path(path)

    def _locate(self, path: str, expect_lun: bool = True) -> Location:
        if self._locator is None:
            return NOWHERE
        host_path = self._host_path(path)
        found = self._locations.get(path)
        if found is None:
            found = NOWHERE if host_path is None else self._locator.locate(host_path)
            self._locations[path] = found
            # An unmapped container was said once, with its cause: not again for each file.
            if not found.luns and expect_lun and (self._container is None or self._container.mapped):
                self._warn_once("locate", path, "database file on no known LUN", host_path or path)
        return found

    # --- the file map: the last one read keeps labelling until it is too old (issue 43) -----------------

    @property
    def _map_max_age(self) -> float:
        return self._target.file_map_max_age_seconds

    def _map_confirmed(self, at: float | None = None) -> None:
        """The database answered every file lookup: the map is as fresh as the oldest answer (`at`,
        now when not given)."""
        if self._map_stale:
            log.info("file map read again", source=self.name)
        self._map_stale = False
        self._map_said.forget("dropped")
        self._map_read_at = self._clock() if at is None else at

    def _map_unconfirmed(self) -> None:
        """A file lookup went unanswered (its query's own line says why): the last map stays, said
        once per spell."""
        if self._map_read_at is not None and not self._map_stale:
            self._map_stale = True
            log.warning(
                "file map not read again: the last one keeps labelling the series (`file`, `lun`) and the "
                f"LUNs' roles for up to file_map_max_age_seconds ({self._map_max_age:g} s); "
                "lunlat_database_file_map_age_seconds says how old it is",
                source=self.name,
            )

    def _map_expired(self) -> bool:
        """True once, when the map outlived its limit: the engine then forgets it (files moved
        while the database could not be asked must not keep a wrong `lun`)."""
        if self._map_read_at is None or self._clock() - self._map_read_at <= self._map_max_age:
            return False
        age = self._clock() - self._map_read_at
        self._map_read_at = None
        self._map_stale = False
        self._map_generation += 1
        if self._map_said.first("dropped"):
            log.warning(
                "file map dropped: not read again for longer than file_map_max_age_seconds; the series have "
                f"no `file` or `lun` and the LUNs no role until the database answers the lookups ({self.grants_hint})",
                source=self.name,
                age_seconds=round(age),
                limit_seconds=self._map_max_age,
            )
        return True

    def _map_families(self) -> list[Family]:
        """The map's age (absent without a map) and its limit, for LunLatencyFileMapStale."""
        labels = self._label_set(ground.DB_FILE_MAP_AGE.labels, (self.name,))
        age = Family(ground.DB_FILE_MAP_AGE)
        if self._map_read_at is not None:
            age.add(labels, max(0.0, self._clock() - self._map_read_at))
        limit = Family(ground.DB_FILE_MAP_MAX_AGE)
        limit.add(labels, self._map_max_age)
        return [age, limit]

    def _lookup_open(self, *queries: Query) -> bool:
        """Whether a lookup that went unanswered may be asked again now: one of its queries is not
        held off by its gate (so a closed gate costs no work at each scrape)."""
        self._gates_follow_session()
        return any(self._gates.open(query.name) for query in queries)

    def _gates_follow_session(self) -> None:
        """A new session asks every query switched off again at once: a grant given back is usually
        followed by a new session (the role recreated, the session ended, a password rotated)."""
        if self._session.connects != self._gates_session:
            self._gates_session = self._session.connects
            self._gates.open_all()

    def retry_now(self) -> None:
        """A config reload kept this source: ask every query switched off again at its next turn
        (a reload is what an operator does after fixing a grant)."""
        self._gates.open_all()

    def _capabilities(self, **readable: bool) -> Family:
        """`lunlat_source_capability` of this source: the parts given (e.g. asm=True), and
        `container` for a target in a container (1 when its paths are mapped to the host's)."""
        found = dict(readable)
        if self._container is not None and self._locator is not None:
            found["container"] = self._container.mapped
        family = Family(ground.SOURCE_CAPABILITY)
        for capability, value in found.items():
            family.add(self._label_set(ground.SOURCE_CAPABILITY.labels, (self.name, capability)), int(value))
        return family

    def _publish_lun_labels(
        self, key: object, files: Callable[[], Iterable[tuple[Location, str]]], database: str, workload: str
    ) -> None:
        """Tell the host layer which devices hold this database's files, by role; only when `key`
        (what the files were derived from) changed, so a steady scrape does no work here."""
        key = (key, self._container_generation, self._map_generation)
        if self._db_labels is None or self._locator is None or key == self._published:
            return
        self._published = key
        self._db_labels.publish(self.name, device_labels(files(), database, workload))

    def close(self) -> None:
        self._session.close()

    def _prepare(self, cursor: Any) -> None:
        """Driver-specific cursor settings (fetch size …) before a query runs."""

    def _query(self, conn: Conn, query: Query, errors: Counter[str]) -> list[Any] | None:
        self._gates_follow_session()
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
                pause = self._gates.close(query.name)
                log.warning(
                    self._no_grant_message(query, found.code, pause),
                    source=self.name,
                    query=query.name,
                    err=found.code,
                )
            else:
                what = (
                    "query failed" if found.kind is Kind.QUERY_FAILED else f"query failed: {found.kind.value}"
                )
                self._warn_once(query.name, found.code or found.message, what.replace("_", " "), detail)
            return None
        if self._gates.reopen(query.name):
            log.info("query enabled again", source=self.name, query=query.name)
        return rows

    def _no_grant_message(self, query: Query, code: str, pause: float) -> str:
        """The log line of a query switched off for a missing grant (an engine may say more)."""
        return f"query disabled: missing grant (see {self.grants_hint}); {retried(pause)}"

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

    def _summed(
        self, parsed: Iterable[tuple[LabelSet, tuple[float, ...]]], query: Query, errors: Counter[str]
    ) -> list[tuple[LabelSet, tuple[float, ...]]]:
        """One entry per label set, in the order first seen.

        Two samples with the same name and labels make the page invalid and Prometheus drops the
        whole scrape, so rows that share every label become one series. Their values are summed:
        each is a counter of I/O the labels cannot tell apart (two files with one path, a row a view
        answers twice), and the sum is that label set's counter whatever order the rows arrive in (no
        statement has an ORDER BY; keeping "the first" could switch rows between scrapes and fake a
        counter reset). Latency, time over count, is the rows' weighted mean. Counted as
        `duplicate_row`, said once per series.
        """
        merged: dict[LabelSet, tuple[float, ...]] = {}
        for labels, values in parsed:
            before = merged.get(labels)
            if before is None:
                merged[labels] = values
                continue
            merged[labels] = tuple(map(operator.add, before, values))
            self._duplicate(query, labels.text, errors)
        return list(merged.items())

    def _duplicate(self, query: Query, key: str, errors: Counter[str]) -> None:
        """A row whose labels an earlier row of the same answer had: counted, said once per key."""
        errors["duplicate_row"] += 1
        if self._warned.first(("duplicate_row", query.name, key)):
            log.warning(
                "rows with the same labels summed into one series",
                source=self.name,
                query=query.name,
                labels=key[:300],
            )

    def _label_set(self, names: tuple[str, ...], values: tuple[str, ...]) -> LabelSet:
        key = (names, values)
        found = self._labels.get(key)
        if found is None:
            if len(self._labels) > 100_000:  # files come and go; never grow without bound
                self._labels.clear()
            found = self._labels[key] = LabelSet(names, values)
        return found
