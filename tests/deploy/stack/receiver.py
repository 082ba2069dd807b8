"""The stack test's webhook receiver (tests/deploy/test_stack.py), run in the stack beside
Alertmanager: records every notification POSTed to it (Alertmanager's webhook JSON) with the path it
came on, and answers GET /notifications with all of them as a JSON list. Standard library only: it
runs on the test's Debian base image."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PORT = 9095
notifications: list[dict[str, Any]] = []
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            payload = json.loads(body)
        except ValueError:
            self.send_error(400, "not JSON")
            return
        with lock:
            notifications.append({"path": self.path, "payload": payload})
        self._answer(200, b"")

    def do_GET(self) -> None:
        if self.path != "/notifications":
            self.send_error(404, "only /notifications")
            return
        with lock:
            body = json.dumps(notifications).encode()
        self._answer(200, body)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


if __name__ == "__main__":
    ThreadingHTTPServer(("", PORT), Handler).serve_forever()
