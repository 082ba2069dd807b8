"""A PostgreSQL that is gone, through the real driver (psycopg → libpq): a dead port and a listener that
accepts and never answers (a login no real server can be made to hang in) cost one connect thread at
most and one log line, not one per attempt."""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack

import pytest

from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import PostgresSource, connect_psycopg
from lunlat.scrape import Scraper
from tests.support import misbehaving_peers
from tests.support.fake_clock import FakeClock
from tests.support.paced_scrapes import PacedScrapes
from tests.support.skip_unless_installed import needs

pytestmark = needs("psycopg")


@pytest.mark.parametrize("peer", ["dead port", "silent listener"])
def test_a_dead_server_is_logged_once_and_keeps_no_thread(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, peer: str
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_PG_DEAD_PASSWORD", "pw")
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    with ExitStack() as stack:
        port = (
            misbehaving_peers.closed_port()
            if peer == "dead port"
            else stack.enter_context(misbehaving_peers.silent_listener())
        )
        target = PostgresTarget(
            name="PG",
            host="127.0.0.1",
            port=port,
            user="lunlat",
            password_env="LUNLAT_TEST_PG_DEAD_PASSWORD",  # noqa: S106 - a variable name
            timeout_seconds=1,
        )
        postgres = PostgresSource(target, connect_psycopg(target), clock=clock)
        scraper = Scraper([postgres])
        stack.callback(scraper.close)
        scrapes = PacedScrapes(monkeypatch, scraper, postgres)
        for _ in range(8):
            scrapes.scrape(5)
            clock.now += 0.7  # attempts and waits for the backoff alternate
            hanging = [t for t in threading.enumerate() if t.name == "postgres:PG-connect" and t.is_alive()]
            assert len(hanging) <= 1
        errors = scraper.health_families(scraper.collect(5))[2].by_labels()
    attempts = sum(errors[("postgres:PG", reason)] for reason in ("connect_failed", "connect_timeout"))
    assert attempts >= 3, errors
    assert len(misbehaving_peers.failure_lines(caplog.records)) == 1, misbehaving_peers.failure_lines(
        caplog.records
    )
