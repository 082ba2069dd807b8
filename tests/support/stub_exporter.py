"""A stub of an exporter for tests: an HTTP server on loopback answering one path with the text
exposition a function gives (a fixed page, or a sequence of scrapes)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.exporter_process import LOOPBACK


@contextmanager
def serving(path: str, body: Callable[[], str]) -> Iterator[int]:
    """Serves `body()` at `path` (404 elsewhere) until the block ends; yields the port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != path:
                self.send_error(404)
                return
            data = body().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name=f"stub {path}", daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
