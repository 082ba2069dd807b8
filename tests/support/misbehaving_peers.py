"""Peers that misbehave at the socket level, for the real database drivers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never says a word; yields the port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for conn in accepted:
            conn.close()
        server.close()


def closed_port() -> int:
    """A port nothing listens on (bound and released, so no other test holds it just now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def failure_lines(records: Sequence[object]) -> list[str]:
    """The "source failed" lines among captured log records."""
    return [
        str(getattr(r, "kv", {}).get("err"))
        for r in records
        if getattr(r, "name", "") == "lunlat.scrape" and getattr(r, "msg", "") == "source failed"
    ]
