"""A config reload with the emulated Oracle: an unchanged target keeps its session, a changed one is
reconnected (old session closed), and the error counters count on."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lunlat.configfile import load_config
from lunlat.engines.oracle import source as oracle
from lunlat.engines.oracle.metrics import ORACLE_WAIT_DURATION
from lunlat.reload import Reloader
from lunlat.scrape import Scraper
from lunlat.sources.factory import Settings
from lunlat.sources.registry import build_sources
from tests.oracle.emulation import EmulatedConnection, OracleEmulation
from tests.oracle.test_oracle_source import DATA_READ
from tests.support.exposition_samples import samples

TARGET = (
    "oracle:\n  - {name: Oracle, dsn: 'db1:1521/ORCL', user: lunlat, password_env: LUNLAT_TEST_RELOAD_PW}\n"
)


def _served(tmp_path: Path) -> tuple[Path, Scraper, Reloader]:
    """The config TARGET on an empty host tree, its scraper and the reloader that rereads it."""
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "diskstats").write_text("")
    (tmp_path / "proc" / "1" / "mountinfo").write_text("")
    config = tmp_path / "lunlat.yaml"
    config.write_text(TARGET)
    settings = Settings(tmp_path / "proc", tmp_path / "sys")
    scraper = Scraper(build_sources(load_config(config), settings).sources)
    return config, scraper, Reloader(config, settings, scraper)


def test_a_reload_keeps_an_unchanged_target_and_replaces_a_changed_one_keeping_the_error_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_RELOAD_PW", "pw")
    emu = OracleEmulation()
    made: list[EmulatedConnection] = []

    def connect_for(_target: object) -> Callable[[], EmulatedConnection]:
        def connect() -> EmulatedConnection:
            made.append(emu.connect())
            return made[-1]

        return connect

    monkeypatch.setattr(oracle, "connect_oracledb", connect_for)
    config, scraper, reloader = _served(tmp_path)
    lost = ("lunlat_source_errors_total", (("reason", "connection_lost"), ("source", "oracle:Oracle")))
    up = ("lunlat_source_up", (("source", "oracle:Oracle"),))
    try:
        assert samples(scraper.scrape(5))[up] == 1 and state(made[0]) == "open"
        emu.kill_sessions()
        assert samples(scraper.scrape(5))[lost] == 1
        time.sleep(1.1)  # the first backoff step
        assert samples(scraper.scrape(5))[up] == 1 and len(made) == 2 and state(made[1]) == "open"

        # A reload that changes only the LUN entries keeps the database's session as it is.
        config.write_text(TARGET + "luns:\n  - {match: {device: sdz}, role: data}\n")
        assert reloader.reload() is None
        kept = samples(scraper.scrape(5))
        assert len(made) == 2 and state(made[1]) == "open", "an unchanged target must not reconnect"
        assert kept[up] == 1 and kept[lost] == 1

        # A changed target gets a new source: the old session is closed, a new one opened.
        config.write_text(
            TARGET.replace("}", ", timeout_seconds: 4}") + "luns:\n  - {match: {device: sdz}, role: data}\n"
        )
        assert reloader.reload() is None
        assert state(made[1]) == "closed", "the reload must close the old session"
        after = samples(scraper.scrape(5))
        assert len(made) == 3 and state(made[2]) == "open"
        assert after[up] == 1 and after[lost] == 1  # counting on, not reset
    finally:
        scraper.close()
        emu.release()


def test_a_reload_asks_a_query_switched_off_for_a_missing_grant_again_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 43: an operator who gave the grant back and reloads sees it used at the next scrape, not
    # after the no_grant pause; the session stays as it is.
    monkeypatch.setenv("LUNLAT_TEST_RELOAD_PW", "pw")
    emu = OracleEmulation()
    monkeypatch.setattr(oracle, "connect_oracledb", lambda _target: emu.connect)
    config, scraper, reloader = _served(tmp_path)
    no_grant = ("lunlat_source_errors_total", (("reason", "no_grant"), ("source", "oracle:Oracle")))

    def histograms(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> int:
        return sum(name == f"{ORACLE_WAIT_DURATION.name}_count" for name, _ in found)

    try:
        emu.advance(60, DATA_READ)  # waits, so the histogram has rows
        emu.revoke("gv$con_event_histogram_micro")
        denied = samples(scraper.scrape(5))
        assert denied[no_grant] == 1 and histograms(denied) == 0
        emu.grant("gv$con_event_histogram_micro")
        assert histograms(samples(scraper.scrape(5))) == 0  # held off: not asked at every scrape
        config.write_text(TARGET + "luns:\n  - {match: {device: sdz}, role: data}\n")
        assert reloader.reload() is None
        after = samples(scraper.scrape(5))
        assert histograms(after) > 0 and after[no_grant] == 1
    finally:
        scraper.close()
        emu.release()


def state(conn: EmulatedConnection) -> str:
    return str(conn._state)
