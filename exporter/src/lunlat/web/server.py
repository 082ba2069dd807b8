"""The HTTP server of `lunlat serve`: /metrics, a landing page, /-/healthy, /-/ready and /-/reload.

The accept loop, each connection's admission and TLS handshake (`Server`), and the exchange on a
connection (`Handler`): the request head read within lunlat's limits (web/limits.py) and parsed by
h11 (web/head.py), basic auth, then the endpoint. The design, and what no client can make the
exporter hold, is on the docs site's page docs/web.md.
"""

from __future__ import annotations

import errno
import gzip
import html
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from lunlat import __version__, logs
from lunlat.exposition import CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE
from lunlat.scrape import Scraper
from lunlat.web import head
from lunlat.web.config import WebConfig, WebGate
from lunlat.web.limits import (
    ACCEPT_BACKOFF,
    BUSY_ANSWER,
    LINGER,
    MAX_SCRAPE_TIMEOUT,
    MIN_SCRAPE_TIMEOUT,
    WARN_EVERY,
    Budget,
    Connection,
    Connections,
    DeadlineWriter,
    HeadTooLargeError,
    Limits,
    RequestReader,
    connection_cap,
    error_text,
)
from lunlat.web.threads import Workers

log = logs.get(__name__)

# Deadline for a scrape when Prometheus does not send X-Prometheus-Scrape-Timeout-Seconds.
DEFAULT_SCRAPE_TIMEOUT = 10.0
# Head room left under Prometheus' own timeout so the answer arrives before it gives up.
SCRAPE_TIMEOUT_MARGIN = 0.5
# Seconds a new connection has to send its first bytes and finish the TLS handshake.
HANDSHAKE_TIMEOUT = 10.0
# Go's net/http answers a plain-HTTP request on a TLS listener with exactly this, when the first
# five bytes are one of these (golang/go src/net/http/server.go, (*conn).serve and
# tlsRecordHeaderLooksLikeHTTP); any other non-TLS start is just closed.
PLAIN_HTTP_STARTS = (b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO")
PLAIN_HTTP_ANSWER = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
# Level 1 compresses exposition text ~7x at a fraction of the time of the default level 6.
GZIP_LEVEL = 1


class ListenAddressError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str  # "" = every interface
    port: int

    @classmethod
    def parse(cls, text: str) -> ListenAddress:
        """`:PORT`, `HOST:PORT` or `[IPv6]:PORT`, as --web.listen-address takes them."""
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ListenAddressError(f"{text!r} has no port: use HOST:PORT or :PORT")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise ListenAddressError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:PORT")
        if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise ListenAddressError(f"{text!r}: port must be a number from 0 to 65535")
        return cls(host, int(port_text))


def _wants_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() == "gzip":
            q = params.strip().removeprefix("q=")
            try:
                return not params or float(q) > 0
            except ValueError:
                return False
    return False


def _version(params: list[str]) -> tuple[int, ...] | None:
    """The `version` parameter of a media range as numbers, () without one, None if unreadable."""
    for param in params:
        key, sep, value = param.strip().partition("=")
        if sep and key == "version":
            try:
                return tuple(int(part) for part in value.split("."))
            except ValueError:
                return None
    return ()


def wants_openmetrics(accept: str) -> bool:
    """Whether to answer OpenMetrics 1.0.0 to this Accept header, as prometheus_client decides
    (exposition.choose_encoder, 0.26): the media ranges in the order sent, q-values not weighed; the
    first `application/openmetrics-text` without a version or with one of 1.0.0 and up is
    answered in OpenMetrics, a `text/plain` of version 1.0.0 and up in text, anything else passed
    over; nothing found: text. Where client_python would answer a version after 1.0.0, lunlat, which
    writes 1.0.0 only, passes that range over too, so a later one may still take 1.0.0.

    Prometheus asks for OpenMetrics 1.0.0 first (2.x before 2.49: always; later: by
    scrape_protocols, OpenMetricsText1.0.0 first by default), and so gets it."""
    for media_range in accept.split(","):
        media_type, *params = media_range.split(";")
        version = _version(params)
        if media_type.strip() == "application/openmetrics-text":
            if version in ((), (1, 0, 0)):
                return True
        elif media_type.strip() == "text/plain" and version and version >= (1, 0, 0):
            return False
    return False


def _scrape_timeout(header: str | None) -> float:
    if not header:
        return DEFAULT_SCRAPE_TIMEOUT
    try:
        value = float(header)
    except ValueError:
        return DEFAULT_SCRAPE_TIMEOUT
    if not value > 0:  # also rejects NaN
        return DEFAULT_SCRAPE_TIMEOUT
    value = min(value, MAX_SCRAPE_TIMEOUT)  # inf - 0.5 is still inf: clamp first
    return max(MIN_SCRAPE_TIMEOUT, value - SCRAPE_TIMEOUT_MARGIN, value / 2)


def listen_backlog() -> int:
    """The kernel's accept-queue limit, as Go's net.Listen uses it (golang/go src/net/sock_linux.go
    maxListenerBacklog reads /proc/sys/net/core/somaxconn). socketserver's default of 5 dropped
    connections as soon as a few dozen scrapers arrived at once."""
    try:
        value = int(Path("/proc/sys/net/core/somaxconn").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return socket.SOMAXCONN
    return min(value, 65535) if value > 0 else socket.SOMAXCONN


# /-/reload: re-read the config file. Called with nothing, returns None when done, else why not.
RELOAD_PATH = "/-/reload"
Reload = Callable[[], "str | None"]
MAX_BODY = 4096


LANDING = """<!doctype html>
<html><head><title>lunlat exporter</title></head>
<body>
<h1>lunlat exporter</h1>
<p>Per-LUN read and write latency for data and log volumes, version {version}.</p>
<ul><li><a href="{metrics}">Metrics</a></li><li><a href="/-/healthy">Health</a></li></ul>
</body></html>
"""


class EncodedBodies:
    """The last body gzipped, shared by the scrapes that got that very body.

    Concurrent scrapes of one collection get the same body object from the scraper (scrape.py);
    compressing it once instead of once per scraper keeps 200 scrapers arriving together from
    paying 200 gzip runs under the GIL.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plain: bytes | None = None
        self._gzip: bytes | None = None

    def get(self, body: bytes, compress: bool) -> bytes:
        if not compress:
            return body
        with self._lock:
            if body is not self._plain:
                self._plain, self._gzip = body, None
            if self._gzip is None:
                self._gzip = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            return self._gzip


class Server(HTTPServer):
    """http.server's accept loop, each connection answered on a thread of lunlat's pool (threads.py).

    HTTPServer, not ThreadingHTTPServer: socketserver's ThreadingMixIn starts a thread per connection
    (its process_request) and joins them on close, both replaced here by the pool; of the mixin only
    its per-connection wrapper was left in use, which is `_answer`."""

    request_queue_size = listen_backlog()

    def __init__(
        self,
        address: ListenAddress,
        scraper: Scraper,
        telemetry_path: str = "/metrics",
        max_requests: int = 40,
        web: WebGate | None = None,
        reload: Reload | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.scraper = scraper
        self.encoded = EncodedBodies()
        self.reload = reload  # None: the lifecycle API is not enabled (--web.enable-lifecycle)
        self.telemetry_path = telemetry_path
        self.slots = threading.BoundedSemaphore(max_requests) if max_requests > 0 else None
        self.web = web
        self.limits = limits or Limits()
        self.connections = Connections(connection_cap(self.limits.max_connections), max_requests)
        self.head_budget = Budget(self.limits.head_budget)
        self._accept_delay = 0.0
        self._warned: dict[str, float] = {}
        self.workers: Workers[tuple[socket.socket, Any]] = Workers(
            lambda accepted: self._answer(*accepted), "lunlat-http"
        )
        if address.host:
            self.address_family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
            super().__init__((address.host, address.port), Handler)
            return
        try:
            self.address_family = socket.AF_INET6
            super().__init__(("::", address.port), Handler)
        except OSError as exc:
            if exc.errno != errno.EAFNOSUPPORT:  # a host without IPv6: every IPv4 interface then
                raise
            self.address_family = socket.AF_INET
            super().__init__(("0.0.0.0", address.port), Handler)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            # ":PORT" means every interface, IPv4 included.
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            accepted = super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                self._out_of_descriptors(exc)
            raise
        self._accept_delay = 0.0
        return accepted

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        """On a waiting thread of the pool (threads.py), not a new thread per connection."""
        assert isinstance(request, socket.socket)
        self.workers.submit((request, client_address))

    def _answer(self, request: socket.socket, client_address: Any) -> None:
        """One connection, on a thread of the pool: answered, its errors logged, then closed (what
        socketserver.ThreadingMixIn.process_request_thread does on a thread of its own)."""
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - any failure is one log line (handle_error), never a dead thread
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self.workers.close()

    def _out_of_descriptors(self, exc: OSError) -> None:
        """The listening socket stays readable, so returning at once would spin: make room, back off."""
        low, high = ACCEPT_BACKOFF
        self._accept_delay = min(max(self._accept_delay * 2, low), high)
        made_room = self.connections.evict_idle()
        self._warn(
            "accept", "cannot accept a connection", err=error_text(exc), connections=len(self.connections)
        )
        if not made_room:
            time.sleep(self._accept_delay)
        else:  # the closed connection's thread lets go of its descriptor in a moment
            time.sleep(low)

    def verify_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> bool:
        """Every connection counts against --web.max-connections; False (then closed) past it."""
        assert isinstance(request, socket.socket)
        if self.connections.admit(request):
            return True
        self._warn("busy", "connection refused: every connection is being answered", cap=self.connections.cap)
        if self.web is None or not self.web.tls:
            self._answer_busy(request)
        return False

    @staticmethod
    def _answer_busy(request: socket.socket) -> None:
        """503 without blocking the accept loop; what the client already sent is read first, so that
        closing does not reset the connection under the answer."""
        try:
            request.setblocking(False)
            request.send(BUSY_ANSWER)
            for _ in range(16):  # what has arrived, up to 1 MiB: the accept loop does not linger
                if not request.recv(65536):
                    break
        except OSError:
            pass

    def finish_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        """Runs in the connection's thread: the TLS handshake (if any), then the HTTP exchange."""
        assert isinstance(request, socket.socket)
        conn = self.connections.get(request)
        if conn is None:  # closed to make room before its thread started
            return
        config = self.web.current() if self.web is not None else None
        if config is None or config.context is None:
            Handler(request, client_address, self, conn)
            return
        tls = self._handshake(request, config)
        if tls is None:
            return
        try:
            if self.connections.rebind(conn, tls):
                Handler(tls, client_address, self, conn)
        finally:
            self.connections.forget(request)  # before its descriptor is closed (Connections)
            tls.close()

    def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
        if isinstance(request, socket.socket):
            self.connections.forget(request)  # before its descriptor is closed (Connections)
        super().shutdown_request(request)

    def _warn(self, key: str, msg: str, **fields: Any) -> None:
        """At most one warning a minute for a condition that can repeat on every connection."""
        now = time.monotonic()
        if now - self._warned.get(key, -WARN_EVERY) < WARN_EVERY:
            return
        self._warned[key] = now
        log.warning(msg, **fields)

    def _handshake(self, request: socket.socket, config: WebConfig) -> ssl.SSLSocket | None:
        assert config.context is not None
        request.settimeout(HANDSHAKE_TIMEOUT)
        tls: ssl.SSLSocket | None = None
        try:
            # The first five bytes, left in the socket for the handshake: a TLS record header or not.
            start = request.recv(5, socket.MSG_PEEK | socket.MSG_WAITALL)
            if start in PLAIN_HTTP_STARTS:
                self._refuse_plain_http(request)
                return None
            tls = config.context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
            tls.do_handshake()
        except (OSError, ValueError) as exc:  # ssl.SSLError and timeouts are OSErrors
            log.debug("TLS handshake failed", client=_client(request), err=error_text(exc))
            if tls is not None:  # it owns the connection now: shutdown_request no longer closes it
                self.connections.forget(request)
                tls.close()
            return None
        if not WebGate.san_allowed(config, tls.getpeercert()):
            log.debug("TLS client certificate has no allowed SAN", client=_client(request))
            self.connections.forget(request)
            tls.close()
            return None
        return tls

    @staticmethod
    def _refuse_plain_http(request: socket.socket) -> None:
        log.debug("http request on the TLS listener", client=_client(request))
        try:
            request.sendall(PLAIN_HTTP_ANSWER)
            # Read what the client sent, so closing answers FIN rather than a reset that could
            # overtake the 400 on its way to the client.
            request.settimeout(0.2)
            request.recv(65536)
        except OSError:
            pass

    def handle_error(self, request: object, client_address: object) -> None:
        """One structured line instead of socketserver's traceback on stderr: a client that went
        away mid-answer is routine (debug); anything else is an error, its traceback at debug."""
        exc = sys.exc_info()[1]
        client = client_address[0] if isinstance(client_address, tuple) else str(client_address)
        if isinstance(exc, (ConnectionError, TimeoutError, ssl.SSLError)):
            log.debug("client connection lost", client=client, err=error_text(exc))
            return
        log.error("request failed", client=client, err=error_text(exc))
        log.debug("traceback", exc_info=True)


def _client(request: socket.socket) -> str:
    try:
        return str(request.getpeername()[0])
    except OSError:
        return "?"


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = f"lunlat/{__version__}"
    sys_version = ""  # http.server would append "Python/3.x.y" to the Server header: no need to tell
    protocol_version = "HTTP/1.1"
    _date: tuple[int, str] = (-1, "")  # the Date header's second and text

    def __init__(
        self, request: socket.socket, client_address: Any, server: Server, conn: Connection | None = None
    ) -> None:
        # Server.finish_request passes the connection it counts; without one it is counted nowhere.
        self.conn = conn if conn is not None else Connection(request, request, time.monotonic())
        self.answered = 0  # requests answered on this connection
        self.body: RequestReader | None = None  # the request being answered, for its small body
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        # StreamRequestHandler's, with our own reader and writer: timeouts are set per read and write.
        self.connection = self.request
        self.connection.settimeout(self.server.limits.header_timeout)
        self.reader = self.connection.makefile("rb")
        self.rfile = self.reader
        self.writer = DeadlineWriter(self.connection, self.server.limits.write_timeout)
        self.wfile = self.writer

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The Date header, formatted once a second rather than for every answer (email.utils's
        formatting was a visible part of each answer's cost with 100 scrapers at once)."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        second = int(time.time())
        cached = Handler._date  # one tuple, read and replaced whole: safe across threads
        if cached[0] != second:
            cached = Handler._date = (second, super().date_time_string(second))
        return cached[1]

    def log_message(self, format: str, *args: object) -> None:
        if log.is_enabled_for(logging.DEBUG):  # formatted only when it will be written
            log.debug("http", client=self.client_address[0], request=format % args)

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        # The web config's security headers go on every answer, errors included (as the toolkit).
        if self.server.web is not None:
            for name, value in self.server.web.current().headers.items():
                self.send_header(name, value)

    def handle_one_request(self) -> None:
        """Replaces http.server's: the head is read here within the limits (docs/web.md), then
        basic auth (when configured) before anything else, then the method."""
        self.close_connection = True
        # Until a request line says otherwise: every answer, errors too, has an HTTP/1.1 status line.
        self.command, self.requestline, self.request_version = "", "", "HTTP/1.1"
        reader = self._next_request()
        if reader is None:
            return
        try:
            lines = self._read_head(reader)
            if lines is None or not self.server.connections.serving(self.conn):
                return
            self.writer.arm()
            refused = self._parse(lines)
        finally:
            reader.release()  # before a refusal lingers: what the head drew is of no use any more
        if refused is not None:
            self._refuse(refused.status, refused.text)
            return
        try:
            self.body = reader
            if self._admit():
                getattr(self, f"do_{self.command}")()
        finally:
            self.body = None
            self.answered += 1
            self.server.connections.waiting(self.conn)

    def _next_request(self) -> RequestReader | None:
        """Waits for the first byte of a kept-alive connection's next request (its first request's
        deadline runs from the start); None if the client closes or stays idle too long."""
        limits = self.server.limits
        if self.answered:
            self.connection.settimeout(limits.idle_timeout)
            try:
                if not self.reader.peek(1):
                    return None
            except (OSError, ValueError) as exc:
                log.debug("idle connection closed", client=self.client_address[0], err=error_text(exc))
                return None
        deadline = time.monotonic() + limits.header_timeout
        return RequestReader(self.reader, self.connection, deadline, self.server.head_budget)

    def _read_head(self, reader: RequestReader) -> list[bytes] | None:
        try:
            return reader.head()
        except HeadTooLargeError as refused:
            reader.release()  # before lingering: what it drew is of no use any more
            self._refuse(refused.status, refused.text)
        except (OSError, ValueError) as exc:  # timeouts, resets, TLS errors: no answer, as Go
            log.debug("request not read", client=self.client_address[0], err=error_text(exc))
        return None

    def _refuse(self, status: HTTPStatus, text: str) -> None:
        """Answers and closes a connection whose request is still being sent, or was not readable: the
        write side first, then what keeps coming is read for LINGER seconds, so the client reads the
        answer rather than a reset."""
        self.close_connection = True
        self.writer.arm()
        try:
            self._text(status, text)
            self.connection.shutdown(socket.SHUT_WR)
            drain = bytearray(16384)
            until = time.monotonic() + LINGER
            while (left := until - time.monotonic()) > 0:
                self.connection.settimeout(left)
                if not self.connection.recv_into(drain):
                    break
        except (OSError, ValueError):
            pass

    def _parse(self, lines: list[bytes]) -> head.HeadError | None:
        """The head, parsed by h11 (head.py), into the handler's command, path, version and headers;
        the refusal to answer (as a head too large is, _refuse) if it is malformed."""
        self.raw_requestline = lines[0]
        self.requestline = lines[0].decode("iso-8859-1").rstrip("\r\n")
        try:
            parsed = head.parse(lines)
        except head.HeadError as refused:
            return refused
        self.command, self.path, self.request_version = parsed.method, parsed.target, parsed.version
        self.headers = parsed.headers
        tokens = {token.strip().lower() for token in self.headers.get("Connection", "").split(",")}
        # HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless told to keep it
        # (RFC 9112 9.3; h11 would close every HTTP/1.0 connection, its state machine is not used).
        self.close_connection = "close" in tokens or (parsed.minor == 0 and "keep-alive" not in tokens)
        return None

    def _admit(self) -> bool:
        """Basic auth (when configured) before anything else, then the method: one this handler has
        no do_* for is 405 (http.server would answer 501). A GET or HEAD with a small body has it read
        and dropped; with any other, the connection closes after the answer."""
        web = self.server.web
        if web is not None and not web.authorized(web.current(), self.headers.get("Authorization")):
            self.close_connection = self.close_connection or self._has_body()
            self._text(HTTPStatus.UNAUTHORIZED, "401 Unauthorized\n", {"WWW-Authenticate": "Basic"})
            return False
        if not hasattr(self, f"do_{self.command}"):
            self._not_allowed()
            return False
        if self.command in ("GET", "HEAD") and self._has_body():
            length = self._small_body()
            if length is None:
                self.close_connection = True
            else:
                self._skip_body(length)
        return True

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        extra: dict[str, str] | None = None,
        scrape: bool = False,
    ) -> None:
        with self.server.connections.writing(self.conn, scrape):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    def _text(self, status: HTTPStatus, text: str, extra: dict[str, str] | None = None) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8", extra)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == self.server.telemetry_path:
            self._metrics()
        elif path == "/":
            page = LANDING.format(
                version=html.escape(__version__), metrics=html.escape(self.server.telemetry_path)
            )
            self._send(HTTPStatus.OK, page.encode(), "text/html; charset=utf-8")
        elif path == "/-/healthy":
            self._text(HTTPStatus.OK, "Healthy\n")
        elif path == "/-/ready":
            self._text(HTTPStatus.OK, "Ready\n")
        elif path == RELOAD_PATH:
            self._lifecycle_get()
        else:
            self._text(HTTPStatus.NOT_FOUND, f"404 not found: {path[:200]}\n")

    do_HEAD = do_GET

    def _has_body(self) -> bool:
        return self.headers.get("Content-Length", "0") != "0" or "Transfer-Encoding" in self.headers

    def _small_body(self) -> int | None:
        """The body's length when it is one to read and drop (a Content-Length up to MAX_BODY)."""
        length = self.headers.get("Content-Length", "0")
        if "Transfer-Encoding" in self.headers or not (length.isascii() and length.isdigit()):
            return None
        return int(length) if int(length) <= MAX_BODY else None

    def _skip_body(self, length: int) -> None:
        if length and self.body is not None:
            if self.headers.get("Expect", "").lower() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.body.skip(length)

    def _not_allowed(self) -> None:
        # A request body we did not read would be parsed as the next request: close instead.
        self.close_connection = self.close_connection or self._has_body()
        self._text(
            HTTPStatus.METHOD_NOT_ALLOWED, f"405 method {self.command} not allowed\n", {"Allow": "GET, HEAD"}
        )

    do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    # --- lifecycle API (POST/PUT /-/reload), with Prometheus' answers: github.com/prometheus/prometheus
    # web/web.go registers POST and PUT; without --web.enable-lifecycle they get 403 "Lifecycle API
    # is not enabled.", GET gets 405 "Only POST or PUT requests allowed", a failed reload 500
    # "failed to reload config: …", a done one 200 with an empty body.

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path != RELOAD_PATH:
            self._not_allowed()
            return
        if not self._discard_body():
            return
        if self.server.reload is None:
            self._text(HTTPStatus.FORBIDDEN, "Lifecycle API is not enabled.")
            return
        problem = self.server.reload()
        if problem is None:
            self._text(HTTPStatus.OK, "")
        else:
            self._text(HTTPStatus.INTERNAL_SERVER_ERROR, f"failed to reload config: {problem}\n")

    do_PUT = do_POST

    def _lifecycle_get(self) -> None:
        self._text(HTTPStatus.METHOD_NOT_ALLOWED, "Only POST or PUT requests allowed", {"Allow": "POST, PUT"})

    def _discard_body(self) -> bool:
        """Read the request body (a reload takes none) so the connection stays usable; refuse one
        that is too large or has no length."""
        length = self._small_body()
        if length is None:
            self.close_connection = True
            self._text(HTTPStatus.BAD_REQUEST, "400 a reload takes no body\n")
            return False
        self._skip_body(length)
        return True

    def _metrics(self) -> None:
        slots = self.server.slots
        if slots is not None and not slots.acquire(blocking=False):
            self._text(
                HTTPStatus.SERVICE_UNAVAILABLE, "503 too many scrapes in flight (--web.max-requests)\n"
            )
            return
        body: bytes | None = None
        failure = ""
        compress = _wants_gzip(self.headers.get("Accept-Encoding", ""))
        openmetrics = wants_openmetrics(self.headers.get("Accept", ""))
        try:
            timeout = _scrape_timeout(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
            body = self.server.encoded.get(self.server.scraper.scrape_bytes(timeout, openmetrics), compress)
        except Exception as exc:  # never let a bug kill the connection without an answer
            log.error("scrape failed", err=f"{type(exc).__name__}: {exc}")
            log.debug("traceback", exc_info=True)
            failure = f"500 scrape failed: {type(exc).__name__}\n"
        finally:
            # Let go before writing: a slow reader holds its connection, never a scrape slot.
            if slots is not None:
                slots.release()
        if body is None:
            self._text(HTTPStatus.INTERNAL_SERVER_ERROR, failure)
            return
        self._send(
            HTTPStatus.OK,
            body,
            OPENMETRICS_CONTENT_TYPE if openmetrics else CONTENT_TYPE,
            {"Content-Encoding": "gzip"} if compress else {},
            scrape=True,
        )
