"""`min_interval_seconds` against the emulated Oracle: two scrapers cost the database one collection
per interval, measured by the statements the emulation executes; a collection served again keeps
its truthful health (up, duration, errors counted once) and says its age."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest

from lunlat.configfile import load_config
from lunlat.engines.oracle import source as oracle
from lunlat.engines.oracle.source import OracleSource
from lunlat.reload import Reloader
from lunlat.scrape import Scraper
from lunlat.sources.factory import Settings
from lunlat.sources.registry import build_sources
from tests.oracle.emulation import EmulatedConnection, OracleEmulation
from tests.oracle.test_oracle_source import DATA_READ, target
from tests.support.exposition_samples import samples
from tests.support.fake_clock import FakeClock

SOURCE = (("source", "oracle:Oracle"),)
UP = ("lunlat_source_up", SOURCE)
AGE = ("lunlat_source_collection_age_seconds", SOURCE)
DURATION = ("lunlat_source_duration_seconds", SOURCE)


def collections(emu: OracleEmulation) -> int:
    """Collections the database answered: each reads V$IOSTAT_FILE once (lookups never do)."""
    return sum("iostat_file" in statement.lower() for statement in emu.executed)


def file_reads(text: str) -> float:
    return sum(v for (name, _), v in samples(text).items() if name == "lunlat_oracle_file_reads_total")


def two_prometheus(
    min_interval: float, periods: int = 20, offset: float = 7.0
) -> tuple[OracleEmulation, list[str]]:
    """Two servers scraping every 15 s, the second `offset` s after the first, the database busy
    in between; every body they got, in order."""
    emu = OracleEmulation()
    emu.advance(60, DATA_READ)
    clock = FakeClock()
    source = OracleSource(target(min_interval_seconds=min_interval), emu.connect, clock=clock)
    scraper = Scraper([source], clock=clock)
    bodies: list[str] = []
    try:
        for _ in range(periods):
            bodies.append(scraper.scrape(5))  # Prometheus A
            clock.now += offset
            emu.advance(offset, DATA_READ)
            bodies.append(scraper.scrape(5))  # Prometheus B (or a vmagent)
            clock.now += 15 - offset
            emu.advance(15 - offset, DATA_READ)
    finally:
        scraper.close()
    return emu, bodies


def test_two_scrapers_cost_one_collection_per_interval_not_two() -> None:
    emu, bodies = two_prometheus(min_interval=10)
    assert collections(emu) == 20  # 40 scrapes, one collection per 15 s period
    for a, b in zip(bodies[::2], bodies[1::2], strict=True):
        # B, 7 s after A, is served A's collection: the same counters although the database
        # moved on, its health as it was, and its age.
        assert file_reads(b) == file_reads(a) > 0
        assert samples(a)[UP] == samples(b)[UP] == 1
        assert samples(a)[DURATION] == samples(b)[DURATION]
        assert samples(a)[AGE] == 0 and samples(b)[AGE] == 7
    # A gets a new collection every time: the data still moves at the scrape interval.
    reads = [file_reads(a) for a in bodies[::2]]
    assert all(later > earlier for earlier, later in pairwise(reads))


def test_the_second_scraper_late_in_the_period_gets_the_collections_instead() -> None:
    # 12 s after A, B is past the interval and collects; A, 3 s after B, is then served B's.
    emu, bodies = two_prometheus(min_interval=10, offset=12)
    assert collections(emu) == 21  # A's first, then B's in each of the 20 periods
    assert [samples(body)[AGE] for body in bodies[:6]] == [0, 0, 3, 0, 3, 0]


def test_without_an_interval_every_scrape_queries_as_before() -> None:
    emu, bodies = two_prometheus(min_interval=0)
    assert collections(emu) == 40
    assert all(samples(body)[AGE] == 0 for body in bodies)


def test_a_failed_collection_served_again_counts_nothing_and_does_not_reconnect() -> None:
    emu = OracleEmulation()
    emu.connect_error = "ORA-01017"  # invalid username/password
    clock = FakeClock()
    source = OracleSource(target(min_interval_seconds=10), emu.connect, clock=clock)
    scraper = Scraper([source], clock=clock)
    failed = ("lunlat_source_errors_total", (("reason", "connect_failed"), ("source", "oracle:Oracle")))
    try:
        first = samples(scraper.scrape(5))
        assert first[UP] == 0 and first[failed] == 1 and emu.connect_attempts == 1
        clock.now += 5
        again = samples(scraper.scrape(5))
        assert again[UP] == 0 and again[failed] == 1 and again[AGE] == 5
        assert emu.connect_attempts == 1  # the database saw no second login
        emu.connect_error = None
        clock.now += 5
        recovered = samples(scraper.scrape(5))
        assert recovered[UP] == 1 and recovered[failed] == 1 and recovered[AGE] == 0
        assert emu.connect_attempts == 2
    finally:
        scraper.close()


def test_a_reload_keeps_an_unchanged_targets_collection_and_a_changed_interval_collects_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUNLAT_TEST_INTERVAL_PW", "pw")
    emu = OracleEmulation()

    def connect_for(_target: object) -> Callable[[], EmulatedConnection]:
        return emu.connect

    monkeypatch.setattr(oracle, "connect_oracledb", connect_for)
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "diskstats").write_text("")
    (tmp_path / "proc" / "1" / "mountinfo").write_text("")

    def write(interval: int, luns: str = "") -> None:
        config.write_text(
            "oracle:\n  - {name: Oracle, dsn: 'db1:1521/ORCL', user: lunlat, "
            f"password_env: LUNLAT_TEST_INTERVAL_PW, min_interval_seconds: {interval}}}\n" + luns
        )

    config = tmp_path / "lunlat.yaml"
    write(10)
    clock = FakeClock()
    settings = Settings(tmp_path / "proc", tmp_path / "sys")
    scraper = Scraper(build_sources(load_config(config), settings).sources, clock=clock)
    reloader = Reloader(config, settings, scraper)
    try:
        scraper.scrape(5)
        assert collections(emu) == 1
        write(10, "luns:\n  - {match: {device: sdz}, role: data}\n")  # the target is unchanged
        assert reloader.reload() is None
        clock.now += 3
        assert samples(scraper.scrape(5))[AGE] == 3 and collections(emu) == 1
        write(5)  # a changed interval: a new source, which never serves its predecessor's collection
        assert reloader.reload() is None
        clock.now += 1
        assert samples(scraper.scrape(5))[AGE] == 0 and collections(emu) == 2
        clock.now += 4
        assert samples(scraper.scrape(5))[AGE] == 4 and collections(emu) == 2
        clock.now += 1
        scraper.scrape(5)
        assert collections(emu) == 3  # 5 s: the new interval holds
    finally:
        scraper.close()
