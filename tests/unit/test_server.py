"""HTTP behaviour of the exporter: endpoints, methods, gzip, limits, listen addresses."""

from __future__ import annotations

import gzip
import http.client
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lunlat.exposition import CONTENT_TYPE
from lunlat.scrape import Scraper
from lunlat.server import ListenAddress, ListenAddressError, Server, _scrape_timeout, _wants_gzip
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
    assert _scrape_timeout("0.6") == 0.3  # half of a short timeout, not 0.1
    for bad in ("abc", "-1", "nan", "0"):
        assert _scrape_timeout(bad) == 10.0
    assert _wants_gzip("gzip, deflate")
    assert _wants_gzip("deflate, GZIP;q=0.5")
    assert not _wants_gzip("gzip;q=0")
    assert not _wants_gzip("identity")
    assert not _wants_gzip("gzip;q=x")
