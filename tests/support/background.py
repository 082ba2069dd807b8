"""A loop in a thread for the length of a `with` block: a fake host's load, a database's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def in_background(run: Callable[[], None], stop: threading.Event, name: str) -> Iterator[None]:
    """`run` in a thread until the block ends, then `stop` set and the thread joined."""
    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
