"""A SQL Server that is gone, through the real driver (pyodbc → FreeTDS): a dead port and a listener
that accepts and never answers cost constant resources and one log line, not one per attempt."""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack

import pytest

from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from lunlat.scrape import Scraper
from tests.mssql.targets import freetds_target
from tests.mssql.test_mssql_source import NO_DRIVER
from tests.support import misbehaving_peers
from tests.support.fake_clock import FakeClock
from tests.support.paced_scrapes import PacedScrapes

pytestmark = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)


def source(port: int, clock: FakeClock) -> MssqlSource:
    target = freetds_target(
        port,
        "SQL",
        password_env="LUNLAT_TEST_MSSQL_DEAD_PASSWORD",  # noqa: S106 - a variable name
        timeout_seconds=1,
    )
    return MssqlSource(target, connect_pyodbc(target), clock=clock)


@pytest.mark.parametrize("peer", ["dead port", "silent listener"])
def test_a_dead_server_is_logged_once_and_keeps_no_thread(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, peer: str
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_DEAD_PASSWORD", "pw")
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    with ExitStack() as stack:
        port = (
            misbehaving_peers.closed_port()
            if peer == "dead port"
            else stack.enter_context(misbehaving_peers.silent_listener())
        )
        mssql = source(port, clock)
        scraper = Scraper([mssql])
        stack.callback(scraper.close)
        scrapes = PacedScrapes(monkeypatch, scraper, mssql)
        for _ in range(8):
            scrapes.scrape(5)
            clock.now += 0.7  # attempts and waits for the backoff alternate
            hanging = [t for t in threading.enumerate() if t.name == "mssql:SQL-connect" and t.is_alive()]
            assert len(hanging) <= 1
        errors = scraper.health_families(scraper.collect(5))[2].by_labels()
    attempts = sum(errors[("mssql:SQL", reason)] for reason in ("connect_failed", "connect_timeout"))
    assert attempts >= 3, errors
    assert len(misbehaving_peers.failure_lines(caplog.records)) == 1, misbehaving_peers.failure_lines(
        caplog.records
    )
