"""The project's tests: their command-line options (pytest reads them only from the root conftest), and
what every test must leave behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/expected.prom from what lunlat serve publishes on the golden host "
        "(tests/golden/README.md), then review it with git diff",
    )


CONNECT_ENDS_WITHIN_S = 15.0  # a bound a correct test never nears: its connects are cut within seconds


@pytest.fixture(autouse=True)
def _connect_attempts_end_with_their_test() -> Iterator[None]:
    """A database source's abandoned connect attempt is recorded module-wide by the source's name
    (engines/dbsession.py `_HANGING`), so that a reload's new session waits for it too. One that a
    test leaves running (an emulated login woken at teardown but not yet ended, a silent listener's
    login not yet failed) makes the next test's source of the same name refuse to connect ("the
    last connect attempt still hangs"): wait for each to end here, and fail the test that leaks one."""
    yield
    attempts = [t for t in threading.enumerate() if t.name.endswith("-connect") and t.is_alive()]
    for attempt in attempts:
        attempt.join(CONNECT_ENDS_WITHIN_S)
    hanging = sorted(t.name for t in attempts if t.is_alive())
    assert not hanging, f"connect attempts still hang {CONNECT_ENDS_WITHIN_S:g} s after the test: {hanging}"
