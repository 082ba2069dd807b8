"""The HTTP side: /metrics, a landing page, /-/healthy and /-/ready, with exporter conventions.

stdlib ThreadingHTTPServer: one thread per connection, a cap on scrapes in flight
(--web.max-requests), gzip when the scraper asks for it, 4xx for anything else. With
--web.config.file (lunlat.webconfig) every endpoint is behind TLS and/or basic auth; the TLS
handshake runs in the connection's own thread, so a slow or silent client never holds up the
accept loop.
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
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from lunlat import __version__, logs
from lunlat.exposition import CONTENT_TYPE
from lunlat.scrape import Scraper
from lunlat.webconfig import WebConfig, WebGate

log = logs.get(__name__)

# Deadline for a scrape when Prometheus does not send X-Prometheus-Scrape-Timeout-Seconds.
DEFAULT_SCRAPE_TIMEOUT = 10.0
# Head room left under Prometheus' own timeout so the answer arrives before it gives up.
SCRAPE_TIMEOUT_MARGIN = 0.5
# Bounds of the deadline a scraper's header may ask for. Below 1 s a client could turn every source
# down and count `timeout` errors at will (a header of 1e-9); above 120 s it would hold a scrape slot
# far past any sane scrape_timeout (Prometheus' default is 10 s, and it requires the timeout to be at
# most the scrape interval). inf and 1e300 land on the ceiling.
MIN_SCRAPE_TIMEOUT = 1.0
MAX_SCRAPE_TIMEOUT = 120.0
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
    """The last body as bytes and gzipped, shared by the scrapes that got that very body.

    Concurrent scrapes of one collection get the same body object from the scraper (scrape.py);
    encoding and compressing it once instead of once per scraper keeps 200 scrapers arriving
    together from paying 200 gzip runs under the GIL.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._text: str | None = None
        self._plain = b""
        self._gzip: bytes | None = None

    def get(self, text: str, compress: bool) -> bytes:
        with self._lock:
            if text is not self._text:
                self._text, self._plain, self._gzip = text, text.encode(), None
            if not compress:
                return self._plain
            if self._gzip is None:
                self._gzip = gzip.compress(self._plain, compresslevel=GZIP_LEVEL, mtime=0)
            return self._gzip


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = listen_backlog()

    def __init__(
        self,
        address: ListenAddress,
        scraper: Scraper,
        telemetry_path: str = "/metrics",
        max_requests: int = 40,
        web: WebGate | None = None,
        reload: Reload | None = None,
    ) -> None:
        self.scraper = scraper
        self.encoded = EncodedBodies()
        self.reload = reload  # None: the lifecycle API is not enabled (--web.enable-lifecycle)
        self.telemetry_path = telemetry_path
        self.slots = threading.BoundedSemaphore(max_requests) if max_requests > 0 else None
        self.web = web
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

    def finish_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: object
    ) -> None:
        """Runs in the connection's thread: the TLS handshake (if any), then the HTTP exchange."""
        assert isinstance(request, socket.socket)
        config = self.web.current() if self.web is not None else None
        if config is None or config.context is None:
            super().finish_request(request, client_address)
            return
        tls = self._handshake(request, config)
        if tls is None:
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()

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
            log.debug("TLS handshake failed", client=_client(request), err=_reason(exc))
            if tls is not None:  # it owns the connection now: shutdown_request no longer closes it
                tls.close()
            return None
        if not WebGate.san_allowed(config, tls.getpeercert()):
            log.debug("TLS client certificate has no allowed SAN", client=_client(request))
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
            log.debug("client connection lost", client=client, err=_reason(exc))
            return
        log.error("request failed", client=client, err=_reason(exc))
        log.debug("traceback", exc_info=True)


def _client(request: socket.socket) -> str:
    try:
        return str(request.getpeername()[0])
    except OSError:
        return "?"


def _reason(exc: BaseException | None) -> str:
    return f"{type(exc).__name__}: {exc}" if exc is not None else ""


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = f"lunlat/{__version__}"
    sys_version = ""  # http.server would append "Python/3.x.y" to the Server header: no need to tell
    protocol_version = "HTTP/1.1"
    # Seconds a connection may sit idle (or trickle a request) before its thread lets go of it.
    timeout = 60

    def log_message(self, format: str, *args: object) -> None:
        if log.is_enabled_for(logging.DEBUG):  # formatted only when it will be written
            log.debug("http", client=self.client_address[0], request=format % args)

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        # The web config's security headers go on every answer, errors included (as the toolkit).
        if self.server.web is not None:
            for name, value in self.server.web.current().headers.items():
                self.send_header(name, value)

    def parse_request(self) -> bool:
        """Every request passes basic auth (when configured) before anything else, then the method
        check: a method this handler has no do_* for is 405 (http.server would answer 501)."""
        if not super().parse_request():
            return False
        web = self.server.web
        if web is not None and not web.authorized(web.current(), self.headers.get("Authorization")):
            self.close_connection = self.close_connection or self._has_body()
            self._text(HTTPStatus.UNAUTHORIZED, "401 Unauthorized\n", {"WWW-Authenticate": "Basic"})
            return False
        if not hasattr(self, f"do_{self.command}"):
            self._not_allowed()
            return False
        return True

    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
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
        length = self.headers.get("Content-Length", "0")
        if self.headers.get("Transfer-Encoding") or not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            self._text(HTTPStatus.BAD_REQUEST, "400 a reload takes no body\n")
            return False
        self.rfile.read(int(length))
        return True

    def _metrics(self) -> None:
        slots = self.server.slots
        if slots is not None and not slots.acquire(blocking=False):
            self._text(
                HTTPStatus.SERVICE_UNAVAILABLE, "503 too many scrapes in flight (--web.max-requests)\n"
            )
            return
        try:
            timeout = _scrape_timeout(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
            compress = _wants_gzip(self.headers.get("Accept-Encoding", ""))
            try:
                body = self.server.encoded.get(self.server.scraper.scrape(timeout), compress)
            except Exception as exc:  # never let a bug kill the connection without an answer
                log.error("scrape failed", err=f"{type(exc).__name__}: {exc}")
                log.debug("traceback", exc_info=True)
                self._text(HTTPStatus.INTERNAL_SERVER_ERROR, f"500 scrape failed: {type(exc).__name__}\n")
                return
            self._send(HTTPStatus.OK, body, CONTENT_TYPE, {"Content-Encoding": "gzip"} if compress else {})
        finally:
            if slots is not None:
                slots.release()
