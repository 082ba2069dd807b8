"""`min_interval_seconds` through the real driver: two scrapers cost SQL Server one collection per
interval, counted in the batches the TDS test server receives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from lunlat.scrape import Scraper
from tests.mssql.targets import freetds_target
from tests.mssql.tds_server import DmvState, TdsServer
from tests.mssql.test_mssql_source import NO_DRIVER
from tests.support.exposition_samples import samples
from tests.support.fake_clock import FakeClock

pytestmark = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)

AGE = ("lunlat_source_collection_age_seconds", (("source", "mssql:SQL Server 1"),))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[TdsServer]:
    monkeypatch.setenv("LUNLAT_TEST_MSSQL_PASSWORD", "pw")
    with TdsServer(DmvState()) as srv:
        yield srv


def collections(srv: TdsServer) -> int:
    """Collections the server answered: each reads sys.dm_io_virtual_file_stats once."""
    return sum("dm_io_virtual_file_stats" in batch.lower() for batch in srv.batches)


@pytest.mark.parametrize(("interval", "expected"), [(10, 6), (0, 12)])
def test_two_scrapers_cost_one_collection_per_interval(
    server: TdsServer, interval: int, expected: int
) -> None:
    target = freetds_target(server.port, min_interval_seconds=interval)
    clock = FakeClock()
    scraper = Scraper([MssqlSource(target, connect_pyodbc(target), clock=clock)], clock=clock)
    ages = []
    try:
        for _ in range(6):  # two servers every 15 s, the second 7 s after the first
            ages.append(samples(scraper.scrape(10))[AGE])
            clock.now += 7
            ages.append(samples(scraper.scrape(10))[AGE])
            clock.now += 8
    finally:
        scraper.close()
    assert collections(server) == expected
    assert ages == ([0, 7] * 6 if interval else [0] * 12)
