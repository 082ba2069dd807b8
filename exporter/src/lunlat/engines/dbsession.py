"""A database connection kept between scrapes: bounded connect, reconnect with backoff, query gates.

Shared by the database sources. Driver specifics come in as two callables: `connect` (returns an
open connection) and `classify` (names what an exception means). Why the connect runs in a thread
of its own: python-oracledb thin has no timeout for the handshake after TCP connect, and a
database in trouble can hold a login for minutes; a scrape must not wait for it.

python-oracledb offers `tcp_connect_timeout` (TRANSPORT_CONNECT_TIMEOUT in a connect descriptor),
which bounds only `socket.create_connection` (github.com/oracle/python-oracledb,
src/oracledb/impl/thin/protocol.pyx `_connect_tcp`); the transport then sets the socket blocking
with no timeout (src/oracledb/impl/thin/transport.pyx `set_from_socket`: `sock.settimeout(None)`)
until `call_timeout` is set on the open connection; `expire_time` only turns on TCP keepalive,
which a peer that accepts and never answers passes. So an attempt cut at the timeout may hang as
long as the peer keeps the socket open, and a new attempt per retry would leave a thread each:
while the last attempt still hangs, no new one starts (one thread per dead target, however long
it stays dead).
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
    # the database is there but refuses reads in its current role (an Always On secondary that allows
    # none): count it apart from query_failed, keep the rest; the engine's message carries the fix
    NOT_READABLE = "not_readable"
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
        self._last_reason = "connect_failed"
        self._last_code: str | None = None
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
                self._last_reason,
                f"not connected, waiting to retry: {self._last_error}",
                count=0,
                code=self._last_code,
            )
        conn = self._open()
        self._conn = conn
        self._backoff = 0.0
        self.connects += 1
        return conn

    def _open(self) -> Conn:
        with _HANGING_LOCK:
            hanging = _HANGING.get(self._source)
        if hanging is not None and not hanging.done.is_set():
            # thin's login has no timeout of its own (see the module docstring): an attempt cut at
            # the timeout may hang for as long as the peer keeps the socket open. Starting another
            # would leave one thread per retry behind; wait for this one to end instead.
            self._failed(
                "connect_timeout",
                "",
                f"the last connect attempt still hangs, {self._clock() - hanging.started:.0f} s after it began",
            )
            raise SourceError("connect_timeout", self._last_error, code="")
        with _HANGING_LOCK:
            _HANGING.pop(self._source, None)
        attempt = _Attempt(self._connect, self._clock())
        threading.Thread(target=attempt.run, name=f"{self._source}-connect", daemon=True).start()
        if not attempt.done.wait(self._timeout):
            attempt.abandon()
            with _HANGING_LOCK:
                _HANGING[self._source] = attempt
            self._failed("connect_timeout", "", f"connect took longer than {self._timeout:g} s")
            raise SourceError("connect_timeout", self._last_error, code="")
        error = attempt.error
        if error is not None:
            if isinstance(error, SourceError):  # raised by `connect` itself (e.g. a missing password)
                code = str(error) if error.code is None else error.code  # the waits say the same
                self._failed(error.reason, code, str(error))
                raise SourceError(error.reason, self._last_error, code=code) from None
            if not isinstance(error, Exception):
                raise error
            found = self._classify(error)
            if found.kind is Kind.TIMEOUT:
                # The driver's own login timeout (FreeTDS's HYT00 "Timeout expired" after the same
                # `timeout_seconds`) is the bound above, met by the driver first: one failure either
                # way, so a silent server is one kind of failure (and one log line), whichever fires.
                self._failed(
                    "connect_timeout", "", f"connect took longer than {self._timeout:g} s ({found.code})"
                )
                raise SourceError("connect_timeout", self._last_error, code="") from None
            self._failed(
                "connect_failed",
                found.code,
                f"{found.code}: {found.message}" if found.code else found.message,
            )
            raise SourceError("connect_failed", self._last_error, code=found.code) from None
        assert attempt.conn is not None
        return attempt.conn

    def _failed(self, reason: str, code: str | None, message: str) -> None:
        self._last_reason, self._last_code, self._last_error = reason, code, message
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

    def lost(self, message: str, code: str = "") -> None:
        self.drop(message)
        self._failed("connection_lost", code, message)

    def close(self) -> None:
        self.drop("closing")


class _Attempt(Generic[Conn]):
    """One connect in a thread of its own; a connection that arrives after the attempt was
    abandoned is closed, never leaked."""

    def __init__(self, connect: Callable[[], Conn], started: float) -> None:
        self._connect = connect
        self.started = started
        self.conn: Conn | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._abandoned = False

    def run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self.error = exc
            self.done.set()
            return
        with self._lock:
            self.conn = conn
            late = self._abandoned
        self.done.set()
        if late:
            _close_quietly(conn)

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            conn = self.conn
        if conn is not None:  # finished between the wait and the flag
            _close_quietly(conn)


# The abandoned connect attempt of each source, by name: kept here rather than in the Session so
# that the new session a config reload makes for the same target waits for it too.
_HANGING: dict[str, _Attempt[Any]] = {}
_HANGING_LOCK = threading.Lock()


def _close_quietly(conn: Connection) -> None:
    try:
        conn.close()
    except Exception:  # closing a broken connection may fail any way it likes
        log.debug("close failed", exc_info=True)


class QueryGates:
    """Queries switched off after a missing grant, so a login without it is not refused at every scrape.

    A closed query is asked again after a pause that doubles with each refusal in a row, from
    `retry_after` up to `retry_max`, and at once at a new session or a config reload (`open_all`):
    a DBA who re-runs the grants script, or configuration management that recreates the role, ends
    the session or reloads, and the grant is seen then, not after a fixed pause (issue 43).
    """

    def __init__(
        self,
        retry_after: float = 60.0,
        retry_max: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._retry_after = retry_after
        self._retry_max = retry_max
        self._clock = clock
        self._closed_until: dict[str, float] = {}
        self._refusals: dict[str, int] = {}  # refusals in a row, kept across sessions: the backoff goes on

    def open(self, name: str) -> bool:
        return self._clock() >= self._closed_until.get(name, -float("inf"))

    def close(self, name: str) -> float:
        """Switch `name` off after a refusal; the pause until it is asked again (seconds)."""
        refusals = self._refusals.get(name, 0)
        self._refusals[name] = refusals + 1
        pause = min(self._retry_after * 2.0**refusals, self._retry_max)
        self._closed_until[name] = self._clock() + pause
        return pause

    def open_all(self) -> None:
        """Ask every closed query again at its next turn (a new session, a reload)."""
        for name in self._closed_until:
            self._closed_until[name] = -float("inf")

    def reopen(self, name: str) -> bool:
        """Mark `name` working again; True when it had been closed (worth a log line)."""
        self._refusals.pop(name, None)
        return self._closed_until.pop(name, None) is not None
