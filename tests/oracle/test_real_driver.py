"""The real python-oracledb thin driver against sockets that misbehave (no Oracle server needed).

What the emulation cannot show: that the connect path the exporter really uses is bounded when
nothing listens, and when something accepts the TCP connection but never answers the login (thin
mode has no handshake timeout of its own), and that the password never reaches a log or an error.
"""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from lunlat.engines.oracle.config import OracleTarget
from lunlat.engines.oracle.source import OracleSource, connect_oracledb
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceError
from tests.support import misbehaving_peers
from tests.support.fake_clock import FakeClock
from tests.support.paced_scrapes import PacedScrapes
from tests.support.skip_unless_installed import needs

pytestmark = needs("oracledb")  # the real driver against sockets that misbehave
SECRET = "hunter2-do-not-log"  # noqa: S105 - a test value that must never appear in logs


def settle() -> None:
    """After a silent listener closed: the abandoned login thread now fails on the reset and drops
    the driver's socket without closing it; collect it here, inside the test, whose marks ignore
    that ResourceWarning."""
    time.sleep(0.5)
    gc.collect()


@pytest.fixture
def silent_listener() -> Iterator[int]:
    with misbehaving_peers.silent_listener() as port:
        yield port
    settle()


def source(port: int, timeout: float = 0.5, clock: Callable[[], float] = time.monotonic) -> OracleSource:
    target = OracleTarget(
        name="Oracle",
        dsn=f"127.0.0.1:{port}/ORCL",
        user="lunlat",
        password_env="LUNLAT_TEST_REAL_DRIVER_PASSWORD",  # noqa: S106 - a variable name
        timeout_seconds=timeout,
    )
    return OracleSource(target, connect_oracledb(target), clock=clock)


def test_nothing_listening_fails_fast_with_the_drivers_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", SECRET)
    with pytest.raises(SourceError) as caught:
        source(misbehaving_peers.closed_port()).collect()
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
        source(misbehaving_peers.closed_port()).collect()
    assert caught.value.reason == "connect_failed"
    assert "LUNLAT_TEST_REAL_DRIVER_PASSWORD is not set" in str(caught.value)


def test_a_hung_first_login_does_not_hold_up_another_targets_connect() -> None:
    """python-oracledb chooses thin or thick mode at the first connect of a process and makes every
    other connect wait until that one ends (oracledb/driver_mode.py, get_manager): a first login
    that hangs would make every other Oracle target time out. Run in a fresh process, where no
    connect has chosen the mode yet."""
    root = Path(__file__).resolve().parents[2]
    with misbehaving_peers.silent_listener() as hung_port:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.oracle.two_targets",
                str(hung_port),
                str(misbehaving_peers.closed_port()),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    hung, refused = (json.loads(line) for line in done.stdout.splitlines())
    assert hung["reason"] == "connect_timeout", hung
    # Its own failure, at once: the refusal (DPY-6005 ... Connection refused), not a wait for the
    # hung login until its own 5 s timeout.
    assert refused["reason"] == "connect_failed", refused
    assert "DPY-6005" in refused["message"] and "refused" in refused["message"].lower(), refused


def connect_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith("-connect") and t.is_alive()]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
def test_a_database_that_never_answers_costs_one_thread_however_long_it_stays_dead(
    monkeypatch: pytest.MonkeyPatch, silent_listener: int
) -> None:
    """thin's login waits forever on a listener that accepts and never answers; each abandoned
    attempt keeps its thread. A new attempt must not start while the last one still hangs."""
    monkeypatch.setenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", SECRET)
    clock = FakeClock()
    dead = source(silent_listener, timeout=0.2, clock=clock)
    before = len(connect_threads())
    reasons = []
    for _ in range(12):
        clock.now += 120  # past the longest backoff: every scrape is a retry
        with pytest.raises(SourceError) as caught:
            dead.collect()
        reasons.append(caught.value.reason)
        assert len(connect_threads()) - before <= 1
    assert set(reasons) == {"connect_timeout"}
    dead.close()


@pytest.mark.parametrize("peer", ["dead port", "silent listener"])
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
def test_a_dead_database_is_logged_once_not_at_every_attempt(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, peer: str
) -> None:
    """Each attempt's DPY-6005 names a new CONNECTION_ID, and scrapes between attempts say
    "waiting to retry": neither is a new failure."""
    monkeypatch.setenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", SECRET)
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    with ExitStack() as stack:
        stack.callback(settle)  # last: after the listener closed
        port = (
            misbehaving_peers.closed_port()
            if peer == "dead port"
            else stack.enter_context(misbehaving_peers.silent_listener())
        )
        oracle = source(port, timeout=0.2, clock=clock)
        scraper = Scraper([oracle])
        stack.callback(scraper.close)
        scrapes = PacedScrapes(monkeypatch, scraper, oracle)
        for _ in range(20):
            scrapes.scrape(5)
            clock.now += 0.7  # attempts and waits for the backoff alternate
        errors = scraper.health_families(scraper.collect(5))[2].by_labels()
    attempts = sum(errors[("oracle:Oracle", reason)] for reason in ("connect_failed", "connect_timeout"))
    assert attempts >= 4, errors
    assert len(misbehaving_peers.failure_lines(caplog.records)) == 1, misbehaving_peers.failure_lines(
        caplog.records
    )


def _keepalive_sockets_to(port: int) -> int:
    """Client sockets connected to `port` whose keepalive timer runs (/proc/net/tcp: `tr` 2 is the
    keepalive timer, in the kernel's Documentation/networking/proc_net_tcp.rst)."""
    found = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        timer = int(fields[5].split(":")[0], 16)
        if remote_port == port and timer == 2:
            found += 1
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
def test_a_hanging_login_has_tcp_keepalive_so_a_dropped_path_cannot_hang_it_forever(
    monkeypatch: pytest.MonkeyPatch, silent_listener: int
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_REAL_DRIVER_PASSWORD", SECRET)
    src = source(silent_listener, timeout=0.3)
    with pytest.raises(SourceError):
        src.collect()  # cut at the timeout; the login thread hangs on in the driver
    deadline = time.monotonic() + 5
    while _keepalive_sockets_to(silent_listener) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _keepalive_sockets_to(silent_listener) == 1
    src.close()
