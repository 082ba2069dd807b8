"""What one HTTP client may cost lunlat's server, and the pieces that hold it to that.

The limits, and why each has its value, are on the docs site's page docs/web.md; this module keeps
the bookkeeping apart from the request handling: the connection table and who makes room at the cap, the
bounded request-head reader, the whole-answer write deadline, and the open-file limit at start.
"""

from __future__ import annotations

import io
import re
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING

from lunlat import logs

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

log = logs.get(__name__)

# Bounds of the deadline a scraper's header may ask for. Below 1 s a client could turn every source
# down and count `timeout` errors at will (a header of 1e-9); above 120 s it would hold a scrape slot
# far past any sane scrape_timeout (Prometheus' default is 10 s, and it requires the timeout to be at
# most the scrape interval). inf and 1e300 land on the ceiling.
MIN_SCRAPE_TIMEOUT = 1.0
MAX_SCRAPE_TIMEOUT = 120.0


# --- what a client may send and how long it may take (docs/web.md) ---
# The request line and headers together: Go's limit (golang/go src/net/http/server.go
# DefaultMaxHeaderBytes, 1 << 20, "including the request line").
MAX_HEADER_BYTES = 1 << 20
# One line of the head, and the number of header lines: CPython's Lib/http/client.py _MAXLINE and
# _MAXHEADERS, the limits of the parser http.server used. A longer request line is 414, the rest 431.
MAX_LINE = 65536
MAX_HEADERS = 100
# Bytes of a head that are its own; past them it draws on HEAD_BUDGET, shared by all connections.
FREE_HEAD_BYTES = 16 << 10
HEAD_BUDGET = 16 << 20
# Seconds from a request's first byte (from the connection's start, for its first request) to the
# end of its head and small body, as Go's ReadHeaderTimeout measures a whole head rather than each
# read. Scrapers send their request as soon as they are connected; HANDSHAKE_TIMEOUT likewise.
HEADER_TIMEOUT = 10.0
# Seconds a kept-alive connection waits for its next request: above the 5 minutes Prometheus keeps an
# idle one (its scrape pools' clients come from prometheus/common config/http_config.go
# NewClientFromConfig, whose default idleConnTimeout is 5 min, "typically above the maximum sane
# scrape interval"), so the scraper closes first and never finds a reused connection gone.
IDLE_TIMEOUT = 360.0
# Seconds to write a whole answer: no scraper waits longer than the 120 s scrape timeout lunlat accepts.
WRITE_TIMEOUT = MAX_SCRAPE_TIMEOUT
WRITE_CHUNK = 256 << 10  # bytes a send is given at a time, each under what is left of the deadline
DEFAULT_MAX_CONNECTIONS = 512
# Descriptors kept for everything but connections (sources, database sessions, BPF maps, logs) when
# the open-file limit is what bounds the connections.
FD_RESERVE = 256
# Go's accept loop on a temporary error: sleep 5 ms, doubling up to 1 s (golang/go
# src/net/http/server.go (*Server).Serve, tempDelay).
ACCEPT_BACKOFF = (0.005, 1.0)
# After refusing a request still being sent: close the write side, then read what keeps coming for
# this long before closing, so the client sees the answer rather than a reset (golang/go
# src/net/http/server.go rstAvoidanceDelay, 500 ms, closeWriteAndWait).
LINGER = 0.5
# Seconds between two warnings of a condition that can repeat on every connection.
WARN_EVERY = 60.0
BUSY_TEXT = b"503 too many connections (--web.max-connections)\n"
BUSY_ANSWER = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(BUSY_TEXT), BUSY_TEXT)
)
# A version as Go's ParseHTTPVersion takes it (golang/go src/net/http/request.go): HTTP/major.minor.
HTTP_VERSION = re.compile(r"HTTP/([0-9]{1,6})\.([0-9]{1,6})")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client may cost (docs/web.md). The deadlines are settable for tests."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout: float = HEADER_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    write_timeout: float = WRITE_TIMEOUT
    head_budget: int = HEAD_BUDGET


def raise_open_file_limit() -> None:
    """The soft RLIMIT_NOFILE up to the hard limit, never down, as Go does for itself at start
    (golang/go src/syscall/rlimit.go init: the low soft limit is there for programs using select(),
    which Go does not use). Neither does lunlat's own code (socketserver waits with poll), and a
    driver's C library that still did would see a descriptor past 1024 only with that many open:
    --web.max-connections keeps well below. `serve` starts no child that would inherit the limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError) as exc:
        log.warning("open-file limit not read", err=error_text(exc))
        return
    if soft == resource.RLIM_INFINITY or soft >= hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as exc:
        log.warning("open-file limit not raised", soft=soft, hard=hard, err=error_text(exc))
        return
    log.debug("open-file limit raised", soft=hard, was=soft)


def connection_cap(wanted: int) -> int:
    """`wanted`, or fewer if the open-file limit leaves less room for connections."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    room = max(soft - FD_RESERVE, soft // 2, 1)
    if wanted > room:
        log.warning(
            "--web.max-connections lowered to fit the open-file limit",
            max_connections=room,
            open_file_limit=soft,
        )
        return room
    return wanted


class Budget:
    """Bytes shared by every connection: the part of each request head past its own FREE_HEAD_BYTES."""

    def __init__(self, total: int) -> None:
        self._left = total
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if size > self._left:
                return False
            self._left -= size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self._left += size


@dataclass(eq=False, slots=True)
class Connection:
    """An open connection. `sock` is what closing it to make room shuts down (the accepted socket,
    then its TLS socket); `accepted` is its key."""

    accepted: socket.socket
    sock: socket.socket
    waiting_since: float | None  # monotonic start of its wait for a request; None while one is answered
    writing_since: float | None = None
    closed: bool = False


class Connections:
    """The open connections, the caps on them and on answers being written, and who makes room.

    A connection leaves (forget) before its descriptor is closed, and is only ever shut down from here
    under the lock while it is in: a descriptor number reused by a new connection is never touched.
    """

    def __init__(self, cap: int, bodies: int) -> None:
        self.cap = cap
        self._bodies = bodies  # scrape bodies being written at once; 0: no bound
        self._open: dict[socket.socket, Connection] = {}
        self._writing: set[Connection] = set()  # answers being written
        self._scrapes: set[Connection] = set()  # of which scrape bodies
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    @property
    def writing_now(self) -> int:
        return len(self._writing)

    def admit(self, accepted: socket.socket) -> bool:
        """Count a new connection in. Past the cap the one waiting longest for a request makes room,
        else the one writing an answer longest (a client that pipelines requests and reads none would
        otherwise hold its connection for the write deadline). False when every connection is busy
        with a request (collecting a scrape, at most --web.max-requests of them)."""
        with self._lock:
            if (
                len(self._open) >= self.cap
                and not self._evict_idle()
                and not self._evict_longest(self._writing)
            ):
                return False
            self._open[accepted] = Connection(accepted, accepted, time.monotonic())
            return True

    def evict_idle(self) -> bool:
        """Close the connection that has waited longest for a request; False if none is waiting."""
        with self._lock:
            return self._evict_idle()

    def get(self, accepted: socket.socket) -> Connection | None:
        with self._lock:
            return self._open.get(accepted)

    def rebind(self, conn: Connection, sock: socket.socket) -> bool:
        """The connection now speaks through `sock` (TLS); False if it was closed meanwhile."""
        with self._lock:
            conn.sock = sock
            return not conn.closed

    def serving(self, conn: Connection) -> bool:
        """A request's head is in: not idle any more. False if the connection was closed meanwhile."""
        with self._lock:
            conn.waiting_since = None
            return not conn.closed

    def waiting(self, conn: Connection) -> None:
        with self._lock:
            conn.waiting_since = time.monotonic()

    @contextmanager
    def writing(self, conn: Connection, scrape: bool) -> Iterator[None]:
        """An answer is being written. Scrape bodies are bounded too: past the bound the one written
        longest is cut off, so that slow readers cannot pin more of them in memory."""
        with self._lock:
            if scrape and self._bodies and len(self._scrapes) >= self._bodies:
                self._evict_longest(self._scrapes)
            conn.writing_since = time.monotonic()
            self._writing.add(conn)
            if scrape:
                self._scrapes.add(conn)
        try:
            yield
        finally:
            with self._lock:
                conn.writing_since = None
                self._writing.discard(conn)
                self._scrapes.discard(conn)

    def forget(self, accepted: socket.socket) -> None:
        with self._lock:
            conn = self._open.pop(accepted, None)
            if conn is not None:
                conn.closed = True
                self._writing.discard(conn)
                self._scrapes.discard(conn)

    def _evict_idle(self) -> bool:
        idle = [c for c in self._open.values() if c.waiting_since is not None]
        if not idle:
            return False
        self._evict(min(idle, key=lambda c: c.waiting_since or 0.0))
        return True

    def _evict_longest(self, writers: set[Connection]) -> bool:
        if not writers:
            return False
        self._evict(min(writers, key=lambda c: c.writing_since or 0.0))
        return True

    def _evict(self, conn: Connection) -> None:
        # Shut down, not closed: the connection's own thread wakes from its read or write and closes it.
        self._open.pop(conn.accepted, None)
        self._writing.discard(conn)
        self._scrapes.discard(conn)
        conn.closed = True
        with suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)
        log.debug("connection closed to make room", idle=conn.waiting_since is not None)


class HeadTooLargeError(Exception):
    def __init__(self, status: HTTPStatus, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class RequestReader:
    """Reads a request's head (and a small body) from the connection's buffered file: every read of
    the socket under one deadline, every byte counted against the head's limits and, past
    FREE_HEAD_BYTES, the shared budget (given back by release())."""

    def __init__(
        self, reader: io.BufferedReader, sock: socket.socket, deadline: float, budget: Budget
    ) -> None:
        self._reader = reader
        self._sock = sock
        self._deadline = deadline
        self._budget = budget
        self._size = 0
        self._drawn = 0

    def head(self) -> list[bytes] | None:
        """The request line and header lines, line ends kept; None if the client closed first."""
        line = self._line(HTTPStatus.REQUEST_URI_TOO_LONG)
        while line in (b"\r\n", b"\n"):  # empty lines before a request line are ignored (RFC 9112 2.2)
            line = self._line(HTTPStatus.REQUEST_URI_TOO_LONG)
        lines = [line]
        while True:
            if not line.endswith(b"\n"):
                return None  # the client closed mid-head
            line = self._line(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            if line in (b"\r\n", b"\n"):
                return lines
            if len(lines) > MAX_HEADERS:  # the request line and MAX_HEADERS headers are in already
                raise HeadTooLargeError(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    f"431 more than {MAX_HEADERS} request header lines\n",
                )
            lines.append(line)

    def skip(self, size: int) -> None:
        """Read and drop `size` bytes (a small body)."""
        while size > 0:
            chunk = self._peek()
            if not chunk:
                raise ConnectionAbortedError("client closed mid-body")
            size -= len(self._reader.read(min(size, len(chunk))))

    def release(self) -> None:
        self._budget.give(self._drawn)
        self._drawn = 0

    def _line(self, too_long: HTTPStatus) -> bytes:
        parts: list[bytes] = []
        length = 0
        while True:
            chunk = self._peek()
            if not chunk:
                return b"".join(parts)  # end of stream
            end = chunk.find(b"\n") + 1
            take = end or len(chunk)
            length += take
            self._count(take, length, too_long)
            parts.append(self._reader.read(take))
            if end:
                return b"".join(parts)

    def _peek(self) -> bytes:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received in time")
        self._sock.settimeout(left)
        return self._reader.peek(1)  # what is buffered, or one read of the socket

    def _count(self, size: int, line_length: int, too_long: HTTPStatus) -> None:
        if line_length > MAX_LINE:
            what = "request line" if too_long == HTTPStatus.REQUEST_URI_TOO_LONG else "request header line"
            raise HeadTooLargeError(too_long, f"{too_long.value} {what} longer than {MAX_LINE} bytes\n")
        self._size += size
        if self._size > MAX_HEADER_BYTES:
            raise HeadTooLargeError(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"431 request line and headers larger than {MAX_HEADER_BYTES} bytes\n",
            )
        over = self._size - FREE_HEAD_BYTES - self._drawn
        if over > 0:
            if not self._budget.take(over):
                raise HeadTooLargeError(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    f"431 request headers over {FREE_HEAD_BYTES} bytes while other large ones are read; retry later\n",
                )
            self._drawn += over


class DeadlineWriter(io.BufferedIOBase):
    """The connection's output: each answer written whole within `timeout` seconds of its first byte,
    else TimeoutError (a socket timeout alone bounds each send, and a client reading a byte now and
    then would never reach it)."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = timeout
        self._deadline: float | None = None

    def arm(self) -> None:
        """The next answer's deadline starts at its first byte."""
        self._deadline = None

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer, /) -> int:
        if self._deadline is None:
            self._deadline = time.monotonic() + self._timeout
        with memoryview(data) as view, view.cast("B") as octets:
            sent = 0
            while sent < len(octets):
                left = self._deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("answer not written in time")
                self._sock.settimeout(left)
                sent += self._sock.send(octets[sent : sent + WRITE_CHUNK])
            return sent


def error_text(exc: BaseException | None) -> str:
    """An exception as one log field: its type and message."""
    return f"{type(exc).__name__}: {exc}" if exc is not None else ""
