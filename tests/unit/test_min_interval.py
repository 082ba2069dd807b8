"""A source's minimum interval in the scraper: a collection younger than it is served again, its
health as it was, its errors counted once, its age published; and the config key's bounds."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from lunlat.configfile import parse_config
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceError, SourceResult
from tests.support.exposition_samples import errors, samples, up
from tests.support.fake_clock import FakeClock
from tests.unit.test_config import MSSQL, ORACLE, problems
from tests.unit.test_scrape import FakeSource


class ThrottledSource(FakeSource):
    def __init__(self, name: str, min_interval: float, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.min_interval = min_interval


def age(text: str, source: str) -> float:
    return samples(text)[("lunlat_source_collection_age_seconds", (("source", source),))]


def duration(text: str, source: str) -> float:
    return samples(text)[("lunlat_source_duration_seconds", (("source", source),))]


def test_a_young_collection_is_served_again_and_a_source_without_interval_collects_every_time() -> None:
    clock = FakeClock()
    db = ThrottledSource("db", 10)
    host = FakeSource("host")
    scraper = Scraper([host, db], clock=clock)
    first = scraper.scrape(5)
    clock.now += 9.5
    second = scraper.scrape(5)
    assert (db.calls, host.calls) == (1, 2)
    value = ("lunlat_test_value", (("source", "db"),))
    assert samples(first)[value] == samples(second)[value]
    assert (age(first, "db"), age(second, "db"), age(second, "host")) == (0, 9.5, 0)
    clock.now += 0.5  # 10 s after the collection started: a new one
    third = scraper.scrape(5)
    assert db.calls == 2 and age(third, "db") == 0


def test_the_age_grows_in_every_body_though_the_collection_is_the_same() -> None:
    clock = FakeClock()
    scraper = Scraper([ThrottledSource("db", 30)], clock=clock)
    ages = []
    for _ in range(4):
        ages.append(age(scraper.scrape(5), "db"))
        clock.now += 2
    assert ages == [0, 2, 4, 6]


def test_scrapers_arriving_together_for_a_served_collection_share_one_body() -> None:
    """The age is in tenths of a second, so a burst of scrapers milliseconds apart shares one render."""
    clock = FakeClock()
    scraper = Scraper([ThrottledSource("db", 10)], clock=clock)
    scraper.scrape(5)
    clock.now += 5
    first = scraper.scrape_bytes(5)  # the body the server sends, kept once as bytes
    clock.now += 0.02
    assert scraper.scrape_bytes(5) is first
    clock.now += 0.2
    later = scraper.scrape_bytes(5)
    assert later is not first and age(later.decode(), "db") == 5.2


def test_the_interval_counts_from_the_start_so_a_slow_collection_costs_no_extra_wait() -> None:
    clock = FakeClock()

    def slow() -> SourceResult:
        clock.now += 4  # the collection takes 4 s
        return SourceResult([])

    db = ThrottledSource("db", 10, behaviour=slow)
    scraper = Scraper([db], clock=clock)
    body = scraper.scrape(30)
    assert duration(body, "db") == 4
    clock.now += 3  # 7 s after the start, 3 s after the end
    again = scraper.scrape(30)
    assert db.calls == 1 and duration(again, "db") == 4 and age(again, "db") == 3
    clock.now += 3  # 10 s after the start
    scraper.scrape(30)
    assert db.calls == 2


def test_errors_of_a_collection_served_again_are_not_counted_again() -> None:
    clock = FakeClock()
    outcomes: list[SourceResult | SourceError] = [
        SourceResult([], Counter({"bad_row": 2})),
        SourceError("connect_failed", "refused"),
    ]

    def next_outcome() -> SourceResult:
        got = outcomes.pop(0)
        if isinstance(got, SourceError):
            raise got
        return got

    scraper = Scraper(
        [ThrottledSource("db", 10, behaviour=next_outcome, reasons=("bad_row", "connect_failed"))],
        clock=clock,
    )
    for _ in range(3):
        body = scraper.scrape(5)
        assert up(body, "db") == 1 and errors(body, "db", "bad_row") == 2
        clock.now += 3
    clock.now += 1  # 10 s: the failing collection
    for _ in range(3):
        body = scraper.scrape(5)
        assert up(body, "db") == 0 and errors(body, "db", "connect_failed") == 1
        assert errors(body, "db", "bad_row") == 2
        clock.now += 3


@pytest.mark.parametrize("text", [ORACLE, MSSQL])
def test_min_interval_is_a_key_of_both_targets_default_0_bounded_0_to_30(text: str) -> None:
    kind = text.split(":", 1)[0]
    (target,) = getattr(parse_config(text), kind)
    assert target.min_interval_seconds == 0
    (target,) = getattr(parse_config(text + "    min_interval_seconds: 12.5\n"), kind)
    assert target.min_interval_seconds == 12.5
    for bad, needle in (("-1", "greater than or equal to 0"), ("31", "less than or equal to 30")):
        got = problems(text + f"    min_interval_seconds: {bad}\n")
        assert any(k == f"{kind}[0].min_interval_seconds" and needle in m for _, k, m in got), got
