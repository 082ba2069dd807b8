"""HTTP behaviour of the exporter: endpoints, methods, gzip, limits, listen addresses."""

from __future__ import annotations

import email.utils
import gzip
import http.client
import logging
import os
import resource
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lunlat import __version__
from lunlat.exposition import CONTENT_TYPE
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceResult
from lunlat.web.limits import MAX_SCRAPE_TIMEOUT, MIN_SCRAPE_TIMEOUT, Limits
from lunlat.web.server import (
    EncodedBodies,
    ListenAddress,
    ListenAddressError,
    Server,
    _scrape_timeout,
    _wants_gzip,
)


class Empty:
    name = "empty"
    error_reasons: tuple[str, ...] = ()
    timeout: float | None = None

    def __init__(self) -> None:
        self.gate: threading.Event | None = None

    def collect(self) -> SourceResult:
        if self.gate is not None:
            self.gate.wait(5)
        return SourceResult([])


@pytest.fixture
def source() -> Empty:
    return Empty()


@pytest.fixture
def server(source: Empty) -> Iterator[Server]:
    srv = Server(ListenAddress("127.0.0.1", 0), Scraper([source]), "/metrics", max_requests=2)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(
    server: Server, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_metrics_is_valid_exposition(server: Server) -> None:
    status, headers, body = request(server, "GET", "/metrics")
    assert status == 200 and headers["content-type"] == CONTENT_TYPE
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert {"lunlat_source_up", "lunlat_build_info"} <= names


def test_gzip_when_asked(server: Server) -> None:
    status, headers, body = request(server, "GET", "/metrics", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert b"lunlat_source_up" in gzip.decompress(body)
    _, headers, body = request(server, "GET", "/metrics", {"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in headers and b"lunlat_source_up" in body


def test_landing_health_and_ready(server: Server) -> None:
    status, headers, body = request(server, "GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'href="/metrics"' in body
    assert request(server, "GET", "/-/healthy")[0] == 200
    assert request(server, "GET", "/-/ready")[0] == 200
    assert request(server, "GET", "/metrics?x=1")[0] == 200  # query strings are ignored


def test_unknown_paths_and_methods_are_4xx(server: Server) -> None:
    status, _, body = request(server, "GET", "/metricz")
    assert status == 404 and b"/metricz" in body
    status, headers, _ = request(server, "POST", "/metrics")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    status, headers, body = request(server, "HEAD", "/metrics")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0


def test_too_many_scrapes_in_flight_get_503(server: Server, source: Empty) -> None:
    source.gate = threading.Event()
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(request(server, "GET", "/metrics")[0]))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    # Both slots are taken once the two requests sit in the (shared) gated collection.
    for _ in range(100):
        if server.slots is not None and server.slots._value == 0:
            break
        threading.Event().wait(0.02)
    status, _, body = request(server, "GET", "/metrics")
    source.gate.set()
    for t in threads:
        t.join()
    assert status == 503 and b"--web.max-requests" in body
    assert results == [200, 200]


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        (":10431", "", 10431),
        ("127.0.0.1:9", "127.0.0.1", 9),
        ("[::1]:80", "::1", 80),
        ("localhost:0", "localhost", 0),
    ],
)
def test_listen_address_forms(text: str, host: str, port: int) -> None:
    assert ListenAddress.parse(text) == ListenAddress(host, port)


@pytest.mark.parametrize("text", ["10431", ":port", ":70000", "::1:80", "host:", ":-1"])
def test_bad_listen_addresses_are_refused(text: str) -> None:
    with pytest.raises(ListenAddressError):
        ListenAddress.parse(text)


def test_scrape_timeout_header_and_gzip_negotiation() -> None:
    assert _scrape_timeout(None) == 10.0
    assert _scrape_timeout("10") == 9.5
    assert _scrape_timeout("3") == 2.5
    assert _scrape_timeout("2") == 1.5
    assert _scrape_timeout("1.5") == 1.0
    for bad in ("abc", "-1", "nan", "0"):
        assert _scrape_timeout(bad) == 10.0
    assert _wants_gzip("gzip, deflate")
    assert _wants_gzip("deflate, GZIP;q=0.5")
    assert not _wants_gzip("gzip;q=0")
    assert not _wants_gzip("identity")
    assert not _wants_gzip("gzip;q=x")


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "BREW", "PROPFIND"])
def test_every_method_but_get_and_head_is_405(server: Server, method: str) -> None:
    """As docs/cli.md says: http.server answers 501 for a method without a do_* handler."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest(method, "/metrics" if method != "CONNECT" else "example.com:443", skip_host=True)
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 405 and resp.getheader("Allow") == "GET, HEAD"
    finally:
        conn.close()


@pytest.mark.parametrize("header", ["inf", "1e300", "Infinity", "1e-9", "0.0000001"])
def test_absurd_scrape_timeout_headers_are_clamped(server: Server, header: str) -> None:
    """inf/1e300 used to answer 500 (OverflowError); 1e-9 turned every source down."""
    status, _, body = request(server, "GET", "/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": header})
    assert status == 200
    assert 'lunlat_source_up{source="empty"} 1' in body.decode()
    assert 'lunlat_source_errors_total{source="empty",reason="timeout"} 0' in body.decode()
    assert MIN_SCRAPE_TIMEOUT <= _scrape_timeout(header) <= MAX_SCRAPE_TIMEOUT


def test_slow_source_is_still_up_under_a_tiny_timeout_header(server: Server, source: Empty) -> None:
    source.gate = threading.Event()
    threading.Timer(0.2, source.gate.set).start()  # the source needs 0.2 s, the header allows 1 ns
    status, _, body = request(server, "GET", "/metrics", {"X-Prometheus-Scrape-Timeout-Seconds": "1e-9"})
    assert status == 200 and 'lunlat_source_up{source="empty"} 1' in body.decode()


def test_client_gone_mid_answer_is_one_debug_line_not_a_traceback(
    server: Server, source: Empty, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="lunlat")
    # Caught at the `lunlat` logger itself: after logs.setup() it does not propagate to caplog's root.
    logging.getLogger("lunlat").addHandler(caplog.handler)
    source.gate = threading.Event()
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        # Close with a reset (SO_LINGER 0) while the scrape waits: the answer meets a dead peer.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        threading.Event().wait(0.1)
        sock.close()
    threading.Event().wait(0.1)
    source.gate.set()
    for _ in range(100):
        if any(r.getMessage() == "client connection lost" for r in caplog.records):
            break
        threading.Event().wait(0.05)
    assert "Traceback" not in capfd.readouterr().err
    lost = [r for r in caplog.records if r.getMessage() == "client connection lost"]
    assert lost and all(r.levelname == "DEBUG" for r in lost)
    assert not [r for r in caplog.records if r.levelno >= 20 and r.name == "lunlat.web.server"]
    logging.getLogger("lunlat").removeHandler(caplog.handler)


def test_200_concurrent_scrapes_all_connect_and_get_200_or_503(source: Empty) -> None:
    """socketserver's listen backlog of 5 dropped SYNs as soon as a few dozen scrapers arrived at once
    (the clients then waited 1, 3, 7 … s for a retry). Connections opened before the server accepts
    any must all complete their TCP handshake; then every one gets a whole 200 or a clean 503."""
    srv = Server(ListenAddress("127.0.0.1", 0), Scraper([source]), "/metrics", max_requests=40)
    sockets: list[socket.socket] = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    try:
        refused = 0
        for _ in range(200):
            try:
                sockets.append(socket.create_connection(("127.0.0.1", srv.port), timeout=2))
            except OSError:
                refused += 1
                if refused == 3:  # each costs the 2 s timeout: enough to know
                    break
        assert refused == 0
        thread.start()
        for sock in sockets:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        statuses: list[int] = []
        for sock in sockets:
            sock.settimeout(30)
            response = http.client.HTTPResponse(sock)
            response.begin()
            body = response.read()
            assert len(body) == int(response.getheader("Content-Length") or -1)
            statuses.append(response.status)
        assert set(statuses) <= {200, 503} and 200 in statuses
    finally:
        for sock in sockets:
            sock.close()
        if thread.is_alive():  # shutdown() waits for a serve_forever that never started otherwise
            srv.shutdown()
        srv.server_close()


def test_scrapes_of_one_body_share_its_encodings() -> None:
    bodies = EncodedBodies()
    body = b"lunlat_build_info 1\n" * 100
    plain, packed = bodies.get(body, compress=False), bodies.get(body, compress=True)
    assert plain is body and gzip.decompress(packed) == plain  # the body itself: no copy kept
    # The same body object (a scrape that shared the collection) gets the very same bytes: no new gzip run.
    assert bodies.get(body, compress=True) is packed
    other = b"".join([b"lunlat_build_info 1\n"] * 100)  # equal bytes, another scrape's body
    assert bodies.get(other, compress=True) is not packed
    assert gzip.decompress(bodies.get(other, compress=True)) == plain


def test_the_scraper_keeps_the_body_as_bytes_only() -> None:
    scraper = Scraper([])
    first = scraper.scrape_bytes(5)
    assert isinstance(first, bytes) and b"lunlat_build_info" in first
    assert scraper.scrape_bytes(5) is first  # nothing changed: the kept body, served again
    assert scraper.scrape(5) == first.decode()


def test_the_server_header_names_lunlat_not_the_python_version(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/-/healthy")
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.getheader("Server", "").strip() == f"lunlat/{__version__}"


def test_every_answer_has_todays_date_as_an_http_date(server: Server) -> None:
    """The Date header is cached for a second (server.py): still RFC 9110's IMF-fixdate, of now."""
    for _ in range(3):
        before = time.time()
        _, headers, _ = request(server, "GET", "/-/healthy")
        after = time.time()
        date = email.utils.parsedate_to_datetime(headers["date"])
        assert headers["date"].endswith(" GMT") and date.tzinfo is not None
        assert int(before) - 1 <= date.timestamp() <= after


def test_connections_one_after_another_are_answered_by_one_thread(server: Server) -> None:
    """A thread that answered a connection takes the next one (workers.py) instead of a new thread
    starting for each: ten scrapes in turn leave one thread."""
    for _ in range(10):
        assert request(server, "GET", "/metrics")[0] == 200
        wait_for(lambda: server.workers.waiting == server.workers.threads)  # back to waiting
    assert server.workers.threads == 1


# --- bounded requests, deadlines, connection cap (issue 25) ---------------------------------------


@contextmanager
def serving(srv: Server) -> Iterator[Server]:
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def exchange(port: int, data: bytes, wait: float = 5.0) -> bytes:
    """Send `data` on a fresh connection, then read until the server closes (or `wait` passes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(data)
        return read_until_closed(sock, wait)


def read_until_closed(sock: socket.socket, wait: float) -> bytes:
    """Everything the peer sends until it closes; raises TimeoutError if it keeps the connection open."""
    sock.settimeout(wait)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The HTTP responses in a byte stream (each with a Content-Length), in order."""
    found = []
    while raw:
        head, sep, raw = raw.partition(b"\r\n\r\n")
        assert sep, f"no end of head in {head[:200]!r}"
        status_line, *lines = head.decode("latin-1").split("\r\n")
        assert status_line.startswith("HTTP/1.1 "), status_line
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        length = int(headers["content-length"])
        found.append((int(status_line.split()[1]), headers, raw[:length]))
        raw = raw[length:]
    return found


def test_headers_over_1_mib_are_431_plain_text_and_the_connection_closes(server: Server) -> None:
    """http.server took 100 lines of 64 KiB (6.5 MB) into memory; Go's limit is 1 MiB for the head."""
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-Pad-%d: %s\r\n" % (i, b"a" * 50_000) for i in range(40)
    )
    ((status, headers, body),) = responses(exchange(server.port, head + b"\r\n"))
    assert status == 431 and headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["connection"] == "close" and b"1048576" in body


def test_more_than_100_header_lines_are_431_plain_text(server: Server) -> None:
    head = b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 101
    ((status, headers, body),) = responses(exchange(server.port, head + b"\r\n"))
    assert status == 431 and headers["content-type"] == "text/plain; charset=utf-8" and b"100" in body
    # 100 are fine, as http.client's parser takes them.
    head = b"GET /-/healthy HTTP/1.1\r\nConnection: close\r\n" + b"X-A: b\r\n" * 99
    assert responses(exchange(server.port, head + b"\r\n"))[0][:1] == (200,)


def test_a_request_line_over_64_kib_is_414_plain_text(server: Server) -> None:
    line = b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n"
    ((status, headers, body),) = responses(exchange(server.port, line + b"Host: x\r\n\r\n"))
    assert status == 414 and headers["content-type"] == "text/plain; charset=utf-8" and b"65536" in body


@pytest.mark.parametrize(
    ("line", "status", "says"),
    [
        (b"GET / HTTP/9.9", 505, b"unsupported protocol version"),
        (b"GET / HTTP/2.0", 505, b"unsupported protocol version"),
        (b"GET / FOO", 400, b"malformed HTTP version"),
        (b"GET / HTTP/1", 400, b"malformed HTTP version"),
        (b"GET /", 400, b"malformed request line"),  # HTTP/0.9: no status line, no headers
        (b"GARBAGE", 400, b"malformed request line"),
    ],
)
def test_bad_request_lines_get_a_status_line_and_plain_text(
    server: Server, line: bytes, status: int, says: bytes
) -> None:
    """http.server answered these as HTTP/0.9: an HTML page without any status line."""
    raw = exchange(server.port, line + b"\r\nHost: x\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 %d " % status), raw[:200]
    ((_, headers, body),) = responses(raw)
    assert headers["content-type"] == "text/plain; charset=utf-8" and says in body
    assert headers["connection"] == "close"


SMUGGLED = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"


def test_a_get_with_a_small_body_is_answered_once_and_the_connection_kept(server: Server) -> None:
    """The body used to be read as a second request: two answers to one request behind a proxy."""
    first = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(SMUGGLED), SMUGGLED)
    second = b"GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answers = responses(exchange(server.port, first + second))
    assert [status for status, _, _ in answers] == [200, 200]
    assert b"lunlat exporter" in answers[0][2] and answers[1][2] == b"Ready\n"


@pytest.mark.parametrize(
    "framing",
    [
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED),
        b"Content-Length: 5000\r\n\r\n" + SMUGGLED + b"x" * (5000 - len(SMUGGLED)),
    ],
    ids=["chunked", "over-4-KiB"],
)
def test_a_get_with_a_body_too_large_to_skip_is_answered_then_closed(server: Server, framing: bytes) -> None:
    answers = responses(exchange(server.port, b"GET /-/ready HTTP/1.1\r\nHost: x\r\n" + framing))
    assert len(answers) == 1
    status, headers, body = answers[0]
    assert status == 200 and body == b"Ready\n" and headers["connection"] == "close"


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True if the peer closes (EOF or reset) within `seconds`, reading and dropping what it sends."""
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


@pytest.fixture
def quick(source: Empty) -> Iterator[Server]:
    """A server with short deadlines, so that tests can watch them pass."""
    limits = Limits(header_timeout=1.0, idle_timeout=1.0, write_timeout=1.0, max_connections=3)
    with serving(
        Server(ListenAddress("127.0.0.1", 0), Scraper([source]), "/metrics", 2, limits=limits)
    ) as srv:
        yield srv


def test_a_head_trickled_a_byte_at_a_time_is_cut_at_the_header_deadline(quick: Server) -> None:
    """The old 60 s timeout applied to each recv: a byte every second kept a connection forever."""
    with socket.create_connection(("127.0.0.1", quick.port), timeout=5) as sock:
        started = time.monotonic()
        cut = False
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            try:
                sock.send(bytes([byte]))
            except OSError:
                cut = True
                break
            if closed_within(sock, 0.2):
                cut = True
                break
        assert cut and time.monotonic() - started < 4.0


def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(quick: Server) -> None:
    with socket.create_connection(("127.0.0.1", quick.port), timeout=5) as sock:
        assert closed_within(sock, 4.0)


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(quick: Server) -> None:
    with socket.create_connection(("127.0.0.1", quick.port), timeout=5) as sock:
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.read() == b"Healthy\n" and not response.will_close
        assert closed_within(sock, 4.0)


def test_keep_alive_serves_several_requests_on_one_connection(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        for _ in range(3):
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            assert response.status == 200 and b"lunlat_build_info" in response.read()
        assert conn.sock is not None  # one connection all along
    finally:
        conn.close()


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_past_the_connection_cap_the_longest_idle_connection_makes_room(quick: Server) -> None:
    """Idle connections cost nothing to open: refusing new ones past the cap would let a few hundred of
    them lock every scraper out. The connection waiting longest for a request is closed instead."""
    idle = [socket.create_connection(("127.0.0.1", quick.port), timeout=5) for _ in range(3)]
    try:
        wait_for(lambda: len(quick.connections) == 3)
        status, _, body = request(quick, "GET", "/metrics")
        assert status == 200 and b"lunlat_build_info" in body
        assert closed_within(idle[0], 0.5)  # the oldest made room
        assert not closed_within(idle[2], 0.2)  # the newest is still open
    finally:
        for sock in idle:
            sock.close()


def test_past_the_connection_cap_with_every_connection_busy_a_new_one_gets_503(source: Empty) -> None:
    source.gate = threading.Event()
    limits = Limits(max_connections=2)
    srv = Server(ListenAddress("127.0.0.1", 0), Scraper([source]), "/metrics", 2, limits=limits)
    busy: list[socket.socket] = []
    with serving(srv) as running:
        try:
            for _ in range(2):  # two scrapes wait in the gated collection: both connections are busy
                busy.append(socket.create_connection(("127.0.0.1", running.port), timeout=5))
                busy[-1].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            wait_for(lambda: running.slots is not None and running.slots._value == 0)
            ((status, headers, body),) = responses(exchange(running.port, b"GET /metrics HTTP/1.1\r\n\r\n"))
            assert status == 503 and b"--web.max-connections" in body and headers["connection"] == "close"
        finally:
            source.gate.set()
            for sock in busy:
                sock.close()


class Big(Scraper):
    """A scraper whose body is larger than the kernel buffers a slow reader's connection can hold
    (net.ipv4.tcp_wmem's 4 MiB at most, and the reader's small receive buffer)."""

    BODY = b"lunlat_padding_total 1\n" * 400_000  # 9.2 MB

    def __init__(self) -> None:
        super().__init__([])

    def scrape_bytes(self, timeout: float, openmetrics: bool = False) -> bytes:
        return self.BODY


def slow_reader(port: int) -> socket.socket:
    """A scrape whose client reads the status line, then nothing more."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(12) == b"HTTP/1.1 200"
    return sock


def test_slow_readers_hold_no_scrape_slot_and_real_scrapes_get_their_body() -> None:
    """A 12.7 MB body read at 512 B/s held a --web.max-requests slot for hours: 40 such clients and
    every real scrape got 503. The slot is let go once the body is built; the slowest writer past the
    bound is cut off, so slow readers cannot pin more bodies than scrapes could."""
    srv = Server(ListenAddress("127.0.0.1", 0), Big(), "/metrics", max_requests=2)
    with serving(srv):
        slow = [slow_reader(srv.port) for _ in range(3)]
        try:
            for _ in range(3):
                status, _, body = request(srv, "GET", "/metrics")
                assert status == 200 and len(body) == len(Big.BODY)
            # The third slow reader cut the first off, the first real scrape the second.
            assert closed_within(slow[0], 2.0) and closed_within(slow[1], 2.0)
        finally:
            for sock in slow:
                sock.close()


def test_an_answer_not_read_within_the_write_deadline_is_cut_off() -> None:
    srv = Server(ListenAddress("127.0.0.1", 0), Big(), "/metrics", limits=Limits(write_timeout=1.0))
    with serving(srv), slow_reader(srv.port) as sock:
        time.sleep(2.0)  # past the deadline: the server gives up on this answer and closes
        received = 12
        with suppress(ConnectionError):
            received += len(read_until_closed(sock, 5.0))
        assert received < len(Big.BODY)


def test_the_accept_loop_backs_off_instead_of_spinning_when_out_of_file_descriptors(server: Server) -> None:
    """accept() failing with EMFILE left the listening socket readable: the loop spun at ~60 % of a
    core. Go's accept loop sleeps 5 ms, doubling to 1 s (golang/go src/net/http/server.go Serve)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    client = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    try:
        time.sleep(0.1)
        server.shutdown()  # accept nothing until the limit is down
        pending = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        lowest_free = os.open(os.devnull, os.O_RDONLY)  # new descriptors take the lowest free number
        os.close(lowest_free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # accept() now fails with EMFILE
        try:
            thread.start()
            cpu = time.process_time()
            time.sleep(1.0)
            spent = time.process_time() - cpu
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert spent < 0.3, f"the accept loop used {spent:.2f} s of CPU in 1 s"
        pending.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert b"Healthy" in read_until_closed(pending, 5.0)
        pending.close()
    finally:
        client.close()


def test_large_heads_draw_on_a_budget_shared_by_all_connections(source: Empty) -> None:
    """Every head may bring 16 KiB on its own; past that it draws on a shared budget, so a few hundred
    connections sending 1 MiB heads at once cannot hold hundreds of MiB."""
    srv = Server(
        ListenAddress("127.0.0.1", 0), Scraper([source]), "/metrics", limits=Limits(head_budget=300_000)
    )
    pad = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 20_000) for i in range(10))  # 200 KB
    with serving(srv):
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as first:
            first.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n" + pad)  # not finished: it holds 184 KB
            time.sleep(0.2)
            ((status, _, body),) = responses(
                exchange(srv.port, b"GET /-/healthy HTTP/1.1\r\n" + pad + b"\r\n")
            )
            assert status == 431 and b"retry" in body
            first.sendall(b"Connection: close\r\n\r\n")
            assert b"Healthy" in read_until_closed(first, 5.0)
        # Given back when the head was done: the same large head passes now.
        ((status, _, body),) = responses(
            exchange(srv.port, b"GET /-/healthy HTTP/1.1\r\n" + pad + b"Connection: close\r\n\r\n")
        )
        assert status == 200 and body == b"Healthy\n"


def test_connections_stuck_writing_to_a_client_that_reads_nothing_make_room_too(source: Empty) -> None:
    """A client can pipeline thousands of requests and read none of the answers: its connection is then
    busy writing until the write deadline. At the cap, the one writing longest makes room."""
    srv = Server(
        ListenAddress("127.0.0.1", 0), Scraper([source]), "/metrics", limits=Limits(max_connections=2)
    )
    stuck: list[socket.socket] = []
    with serving(srv):
        try:
            for _ in range(2):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", srv.port))
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 20_000)  # 12 MB of answers
                stuck.append(sock)
            wait_for(lambda: srv.connections.writing_now == 2, seconds=30)
            status, _, body = request(srv, "GET", "/metrics")
            assert status == 200 and b"lunlat_build_info" in body
        finally:
            for sock in stuck:
                sock.close()
