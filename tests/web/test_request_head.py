"""Request heads parsed by h11 (lunlat/web/head.py): what is read, what is refused and with which status.

The limits on a head (size, lines, deadline, shared budget) are the reader's and are tested in
tests/unit/test_server.py and tests/web/test_hardening_http.py; here the head has passed them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http import HTTPStatus

import pytest

from lunlat.scrape import Scraper
from lunlat.sources.base import SourceResult
from lunlat.web import head
from lunlat.web.server import ListenAddress, Server


def lines(text: bytes) -> list[bytes]:
    """A head as the reader hands it over: its lines, ends kept, without the empty line that ends it."""
    return text.splitlines(keepends=True)


def test_a_scrape_head_is_read_whole() -> None:
    parsed = head.parse(
        lines(
            b"GET /metrics?x=1 HTTP/1.1\r\nHost: 10.0.0.17:9910\r\nAccept-Encoding: gzip\r\n"
            b"X-Prometheus-Scrape-Timeout-Seconds:  10 \r\n"
        )
    )
    assert (parsed.method, parsed.target, parsed.version, parsed.minor) == (
        "GET",
        "/metrics?x=1",
        "HTTP/1.1",
        1,
    )
    # Looked up without regard to case; surrounding whitespace is not part of a value (RFC 9112 5.1).
    assert parsed.headers.get("accept-encoding") == "gzip"
    assert parsed.headers.get("X-PROMETHEUS-SCRAPE-TIMEOUT-SECONDS") == "10"
    assert parsed.headers.get("Host") == "10.0.0.17:9910"


def test_a_head_without_host_is_read_and_no_host_is_made_up() -> None:
    """lunlat answered HTTP/1.1 heads without Host before h11, and still does."""
    for version in (b"HTTP/1.1", b"HTTP/1.0"):
        parsed = head.parse(lines(b"GET /-/healthy " + version + b"\r\nConnection: close\r\n"))
        assert parsed.target == "/-/healthy" and "Host" not in parsed.headers
        assert list(parsed.headers.items()) == [("Connection", "close")]


@pytest.mark.parametrize(
    ("head_text", "status", "says"),
    [
        (b"GET / HTTP/2.0\r\n", HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "unsupported protocol version"),
        (b"GET / HTTP/1\r\n", HTTPStatus.BAD_REQUEST, "malformed HTTP version"),
        (b"GET /\r\n", HTTPStatus.BAD_REQUEST, "malformed request line"),
        # What h11 refuses, as RFC 9112 tells a server to: no whitespace between a field's name and
        # its colon (5.1), a line that is no field, a Content-Length that is no number or two that
        # disagree (6.3), more than one Host (3.2), a transfer coding it does not know (501, 6.1).
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n",
            HTTPStatus.BAD_REQUEST,
            "illegal header line",
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n", HTTPStatus.BAD_REQUEST, "illegal header line"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: five\r\n", HTTPStatus.BAD_REQUEST, "Content-Length"),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n",
            HTTPStatus.BAD_REQUEST,
            "Content-Length",
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n", HTTPStatus.BAD_REQUEST, "multiple Host"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n", HTTPStatus.NOT_IMPLEMENTED, "chunked"),
        (b"GET /\xff HTTP/1.1\r\nHost: x\r\n", HTTPStatus.BAD_REQUEST, "request line"),
    ],
)
def test_a_malformed_head_is_refused_with_its_status(head_text: bytes, status: HTTPStatus, says: str) -> None:
    with pytest.raises(head.HeadError) as refused:
        head.parse(lines(head_text))
    assert refused.value.status == status and says in refused.value.text
    assert refused.value.text.startswith(f"{status.value} ") and refused.value.text.endswith("\n")


@pytest.fixture
def server() -> Iterator[Server]:
    class Empty:
        name = "empty"
        error_reasons: tuple[str, ...] = ()
        timeout: float | None = None

        def collect(self) -> SourceResult:
            return SourceResult([])

    srv = Server(ListenAddress("127.0.0.1", 0), Scraper([Empty()]), "/metrics")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_the_server_answers_a_refused_head_with_a_status_line_and_closes(server: Server) -> None:
    """The status h11 suggests, plain text, and the connection closed: nothing after a head it could
    not read is taken for a request."""
    raw = exchange(
        server.port,
        b"GET /-/ready HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
        b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert raw.startswith(b"HTTP/1.1 501 Not Implemented\r\n"), raw[:200]
    assert b"Connection: close\r\n" in raw and b"Healthy" not in raw


def test_an_http_1_0_client_asking_for_keep_alive_keeps_its_connection(server: Server) -> None:
    """lunlat's rule, not h11's (h11 closes every HTTP/1.0 connection)."""
    raw = exchange(
        server.port,
        b"GET /-/ready HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /-/healthy HTTP/1.0\r\n\r\n",
    )
    assert raw.count(b" 200 OK\r\n") == 2 and raw.endswith(b"Healthy\n")
