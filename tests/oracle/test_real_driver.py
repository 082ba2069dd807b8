"""The real python-oracledb thin driver against sockets that misbehave (no Oracle server needed).

What the emulation cannot show: that the connect path the exporter really uses is bounded when
nothing listens, and when something accepts the TCP connection but never answers the login (thin
mode has no handshake timeout of its own), and that the password never reaches a log or an error.
"""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from lunlat.config import OracleTarget
from lunlat.sources.base import SourceError
from lunlat.sources.oracle import OracleSource, connect_oracledb

SECRET = "hunter2-do-not-log"  # noqa: S105 - a test value that must never appear in logs


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never says a word."""
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
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    for conn in accepted:
        conn.close()
    server.close()
    # The abandoned login thread now fails on the reset and drops the driver's socket without
    # closing it: collect it here, inside this test, whose marks ignore that ResourceWarning.
    time.sleep(0.5)
    gc.collect()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def source(port: int, timeout: float = 0.5) -> OracleSource:
    target = OracleTarget(
        name="Oracle",
        dsn=f"127.0.0.1:{port}/ORCL",
        user="lunlat",
        password_env="LUNLAT_TEST_REAL_DRIVER_PASSWORD",  # noqa: S106 - a variable name
        timeout_seconds=timeout,
    )
    return OracleSource(target, connect_oracledb(target))


def test_nothing_listening_fails_fast_with_the_drivers_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", SECRET)
    with pytest.raises(SourceError) as caught:
        source(closed_port()).collect()
    assert caught.value.reason == "connect_failed"
    assert "DPY-6005" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
def test_a_login_that_never_answers_is_cut_at_the_timeout(
    monkeypatch: pytest.MonkeyPatch, silent_listener: int, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", SECRET)
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        source(silent_listener, timeout=0.5).collect()
    elapsed = time.monotonic() - started
    assert caught.value.reason == "connect_timeout"
    assert elapsed < 5, f"the connect took {elapsed:.1f} s: thin's handshake was not bounded"
    assert all(SECRET not in r.getMessage() and SECRET not in str(r.__dict__) for r in caplog.records)


def test_a_missing_password_variable_is_named_not_guessed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", raising=False)
    with pytest.raises(SourceError) as caught:
        source(closed_port()).collect()
    assert caught.value.reason == "connect_failed"
    assert "LUNLAT_TEST_REAL_DRIVER_PASSWORD is not set" in str(caught.value)
