"""Waiting in tests for something another thread or process does: poll, and fail naming what."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15.0, poll: float = 0.05) -> None:
    """Return once `condition()` holds; raise AssertionError naming `what` after `timeout` seconds
    (a bound that a correct run never reaches)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)
