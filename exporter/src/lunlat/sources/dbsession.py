"""A database connection kept between scrapes: bounded connect, reconnect with backoff, query gates.

Shared by the database sources. Driver specifics come in as two callables: `connect` (returns an
open connection) and `classify` (names what an exception means). Why the connect runs in a thread
of its own: python-oracledb thin has no timeout for the handshake after TCP connect, and a
database in trouble can hold a login for minutes; a scrape must not wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from lunlat import logs
from lunlat.sources.base import SourceError

log = logs.get(__name__)


class Connection(Protocol):
    """The part of a DB-API connection the database sources use (python-oracledb, pyodbc, and the
    tests' emulations)."""

    def cursor(self) -> Any: ...

    def close(self) -> None: ...


Conn = TypeVar("Conn", bound=Connection)


class Kind(Enum):
    """What a driver error means for the collector."""

    NO_GRANT = "no_grant"  # this query is not allowed: disable it, keep the rest
    QUERY_FAILED = "query_failed"  # this query failed for another reason: count it, keep the rest
    TIMEOUT = "query_timeout"  # past the call timeout: the session may be stuck, drop it
    LOST = "connection_lost"  # the connection is gone (or the database is restarting): reconnect


@dataclass(frozen=True, slots=True)
class Classified:
    kind: Kind
    code: str  # the driver's code (ORA-00942, DPY-4024, 08S01 …) for logs
    message: str  # one line, no secrets


class Session(Generic[Conn]):
    """One connection, opened on demand, dropped on trouble, reopened after a growing pause."""

    def __init__(
        self,
        source: str,
        connect: Callable[[], Conn],
        classify: Callable[[BaseException], Classified],
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
    ) -> None:
        self._source = source
        self._connect = connect
        self._classify = classify
        self._timeout = timeout
        self._clock = clock
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._backoff = 0.0
        self._retry_at = -float("inf")
        self._last_error = ""
        self._conn: Conn | None = None
        self.connects = 0  # successful connects, for logs and tests

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def connection(self) -> Conn:
        """The open connection, connecting first if needed; SourceError when that is not possible."""
        if self._conn is not None:
            return self._conn
        if self._clock() < self._retry_at:
            # Not an attempt, so not counted: the error was counted when the attempt failed.
            raise SourceError(
                "connect_failed", f"not connected, waiting to retry: {self._last_error}", count=0
            )
        conn = self._open()
        self._conn = conn
        self._backoff = 0.0
        self.connects += 1
        return conn

    def _open(self) -> Conn:
        box: dict[str, object] = {}
        done = threading.Event()
        abandoned = threading.Event()

        def attempt() -> None:
            try:
                box["conn"] = self._connect()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc
            done.set()
            if abandoned.is_set() and "conn" in box:
                _close_quietly(box["conn"])  # type: ignore[arg-type]

        threading.Thread(target=attempt, name=f"{self._source}-connect", daemon=True).start()
        if not done.wait(self._timeout):
            abandoned.set()
            if done.is_set() and "conn" in box:  # finished between the wait and the flag
                _close_quietly(box["conn"])  # type: ignore[arg-type]
            self._failed(f"connect took longer than {self._timeout:g} s")
            raise SourceError("connect_timeout", self._last_error)
        error = box.get("error")
        if isinstance(error, BaseException):
            if isinstance(error, SourceError):  # raised by `connect` itself (e.g. a missing password)
                self._failed(str(error))
                raise SourceError(error.reason, self._last_error) from None
            if not isinstance(error, Exception):
                raise error
            found = self._classify(error)
            self._failed(f"{found.code}: {found.message}" if found.code else found.message)
            raise SourceError("connect_failed", self._last_error) from None
        return box["conn"]  # type: ignore[return-value]

    def _failed(self, message: str) -> None:
        self._last_error = message
        self._backoff = (
            self._backoff_initial if self._backoff == 0 else min(self._backoff * 2, self._backoff_max)
        )
        self._retry_at = self._clock() + self._backoff

    def drop(self, reason: str) -> None:
        """Close the connection after trouble; the next scrape reconnects (after the backoff when
        the connection was lost, at once after a timeout on a healthy link)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            _close_quietly(conn)
        log.debug("connection dropped", source=self._source, why=reason)

    def lost(self, message: str) -> None:
        self.drop(message)
        self._failed(message)

    def close(self) -> None:
        self.drop("closing")


def _close_quietly(conn: Connection) -> None:
    try:
        conn.close()
    except Exception:  # closing a broken connection may fail any way it likes
        log.debug("close failed", exc_info=True)


class QueryGates:
    """Queries switched off after a missing grant, retried after `retry_after` seconds so a grant
    given later takes effect without a restart."""

    def __init__(self, retry_after: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._retry_after = retry_after
        self._clock = clock
        self._closed_until: dict[str, float] = {}

    def open(self, name: str) -> bool:
        return self._clock() >= self._closed_until.get(name, -float("inf"))

    def close(self, name: str) -> None:
        self._closed_until[name] = self._clock() + self._retry_after

    def reopen(self, name: str) -> bool:
        """Mark `name` working again; True when it had been closed (worth a log line)."""
        return self._closed_until.pop(name, None) is not None
