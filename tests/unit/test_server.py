"""HTTP behaviour of the exporter: endpoints, methods, gzip, limits, listen addresses."""

from __future__ import annotations

import gzip
import http.client
import logging
import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lunlat import __version__
from lunlat.exposition import CONTENT_TYPE
from lunlat.scrape import Scraper
from lunlat.server import (
    MAX_SCRAPE_TIMEOUT,
    MIN_SCRAPE_TIMEOUT,
    EncodedBodies,
    ListenAddress,
    ListenAddressError,
    Server,
    _scrape_timeout,
    _wants_gzip,
)
from lunlat.sources.base import SourceResult


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
    """As the README says: http.server answers 501 for a method without a do_* handler."""
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
    assert not [r for r in caplog.records if r.levelno >= 20 and r.name == "lunlat.server"]
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
    text = "lunlat_build_info 1\n" * 100
    plain, packed = bodies.get(text, compress=False), bodies.get(text, compress=True)
    assert plain == text.encode() and gzip.decompress(packed) == plain
    # The same body object (a scrape that shared the collection) gets the very same bytes: no new gzip run.
    assert bodies.get(text, compress=True) is packed and bodies.get(text, compress=False) is plain
    other = "".join(["lunlat_build_info 1\n"] * 100)  # equal text, another scrape's body
    assert bodies.get(other, compress=True) is not packed
    assert gzip.decompress(bodies.get(other, compress=True)) == plain


def test_the_server_header_names_lunlat_not_the_python_version(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/-/healthy")
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.getheader("Server", "").strip() == f"lunlat/{__version__}"
