"""A request head, parsed by h11 once lunlat's reader has taken it within its limits (docs/web.md).

h11 (python-hyper/h11) parses bytes it is handed and does no I/O: the head reaches it whole, read by
`limits.RequestReader` under lunlat's deadline, size, line and shared-budget limits, so h11 never
waits on a socket and never buffers more than that one head. Only the head: the small body a GET may
carry is read and dropped by the reader, and answers are written by http.server's handler.

Before h11, the request line is sorted as Go's server sorts it, so that each fault keeps a status
and text of its own: not three words (400 "malformed request line"), a version Go's ParseHTTPVersion
would not read (400 "malformed HTTP version"), a version other than HTTP/1.x (505). h11 reads what
it does not refuse the same way (h11's `request_line` in h11/_abnf.py takes `HTTP/` and one digit,
a dot, one digit).

Against the parser it replaced (bench/request_heads.py, docs/benchmarks.md): a scrape's head costs
~1.5x as much (tens of µs), the largest head lunlat reads (1 MiB) ~2.6x the CPU (~12 ms) at less than
half the memory; the limits are the reader's, and hold as before.
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from http import HTTPStatus

import h11

from lunlat.web.limits import HTTP_VERSION, MAX_HEADER_BYTES


@dataclass(frozen=True, slots=True)
class Head:
    """A parsed request head: what http.server's handler keeps of one (command, path, version,
    headers as an `http.client.HTTPMessage`, looked up without regard to case)."""

    method: str
    target: str
    version: str  # as sent, "HTTP/1.1"
    minor: int
    headers: http.client.HTTPMessage


class HeadError(Exception):
    """A head to refuse: the status to answer and its text (one line)."""

    def __init__(self, status: HTTPStatus, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def parse(lines: list[bytes]) -> Head:
    """The request line and header lines as `limits.RequestReader.head` returns them (line ends
    kept, the empty line that ends the head not among them); raises HeadError."""
    line = lines[0].decode("iso-8859-1").rstrip("\r\n")
    words = line.split()
    # golang/go src/net/http/request.go parseRequestLine: method, target and version, space-separated.
    if len(words) != 3:  # HTTP/0.9's "GET /" too: lunlat answers HTTP/1.x only
        raise HeadError(HTTPStatus.BAD_REQUEST, "400 Bad Request: malformed request line\n")
    version = HTTP_VERSION.fullmatch(words[2])
    if version is None:
        raise HeadError(HTTPStatus.BAD_REQUEST, "400 Bad Request: malformed HTTP version\n")
    if int(version.group(1)) != 1:
        raise HeadError(
            HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
            "505 HTTP Version Not Supported: unsupported protocol version\n",
        )
    # An HTTP/1.1 head without Host is answered, as lunlat always has (tests/unit/test_server.py sends
    # such heads); h11 refuses one ("Missing mandatory Host: header", h11/_events.py Request, after
    # RFC 7230 5.4). An empty Host stands in for it, which h11 takes (h11/_abnf.py: a field value may
    # be empty) and lunlat never reads: the answer does not depend on Host.
    stand_in = words[2] == "HTTP/1.1" and not any(line[:5].lower() == b"host:" for line in lines[1:])
    request = _h11_request(b"".join([lines[0], *([b"Host:\r\n"] if stand_in else []), *lines[1:], b"\r\n"]))
    headers = http.client.HTTPMessage()
    # h11's names are lower-cased; raw_items() keeps them as sent (h11 docs, api.rst "headers-format").
    for name, value in request.headers.raw_items()[1 if stand_in else 0 :]:
        headers[name.decode("ascii")] = value.decode("iso-8859-1")
    return Head(
        method=request.method.decode("ascii"),
        target=request.target.decode("ascii"),
        version=words[2],
        minor=int(version.group(2)),
        headers=headers,
    )


def _h11_request(head: bytes) -> h11.Request:
    """h11's Request for a whole head, or HeadError with h11's suggested status.

    A fresh server-side Connection per head (h11 docs, api.rst "The Connection object"): its state
    machine is not used past the Request event, since lunlat keeps its own keep-alive and body rules.
    `max_incomplete_event_size` bounds what h11 buffers of an event not yet complete ("mostly sets a
    limit on the maximum size of the request/response line + headers. If this is exceeded, then
    next_event will raise RemoteProtocolError": h11/_connection.py Connection's docstring); the reader
    has already held the head to MAX_HEADER_BYTES, so it is a second guard, never the first.
    next_event raises RemoteProtocolError for whatever the peer got wrong, its `error_status_hint` the
    status a server should answer (h11/_util.py ProtocolError: 400 unless said otherwise; 501 for a
    Transfer-Encoding other than chunked, h11/_headers.py normalize_and_validate)."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        status = _status(exc.error_status_hint)
        raise HeadError(status, f"{status.value} {status.phrase}: {str(exc)[:200]}\n") from None
    if not isinstance(event, h11.Request):  # a whole head is a Request or an error (h11 api.rst, "Events")
        raise HeadError(HTTPStatus.BAD_REQUEST, "400 Bad Request: no request in the head\n")
    return event


def _status(hint: int) -> HTTPStatus:
    try:
        return HTTPStatus(hint)
    except ValueError:
        return HTTPStatus.BAD_REQUEST
