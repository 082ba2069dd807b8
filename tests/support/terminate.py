"""SIGTERM ends a test run as Ctrl-C does, so the fixtures' teardown runs: a lab unmounted and its
loop devices detached, servers stopped, a device's queue limit set back. Without it a SIGTERM kills
pytest on the spot (Python's default action for the signal; signal(7): "Term"), and `.ci/run`, which
stops the other lanes with SIGTERM when one of its steps fails, left their resources behind. SIGINT
cannot stand in: a non-interactive shell starts its background jobs with SIGINT ignored (the Bash
manual, 3.7.6 Signals: "When job control is not in effect, asynchronous commands ignore SIGINT and
SIGQUIT").

Loaded for every run through tests/pytest.ini's `addopts` (`-p tests.support.terminate`). A second
SIGTERM during the teardown is ignored, so the teardown is not cut short.
"""

from __future__ import annotations

import signal
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt  # pytest tears down what was set up, then exits 2


def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGTERM, _interrupt)
