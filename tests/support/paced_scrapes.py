"""Scrapes a test spaces out on a fake clock, each waiting for its source's collection to end.

Why: the scraper stops waiting for a database source at the source's own deadline (twice its
`timeout_seconds`) and serves later scrapes the collection still in flight. A test that advances a
fake clock between scrapes means each scrape to be a new attempt or a wait for the backoff; on a
busy host the first collection can outlast that deadline, and every later scrape of the loop then
returns at once, sharing it, so the loop counts no attempt at all. Waiting for each collection to
end keeps one scrape one collection, as it is when scrapes come seconds apart.
"""

from __future__ import annotations

import threading
import time

import pytest

from lunlat.scrape import Scraper
from lunlat.sources.base import Source, SourceResult

ENDED_WITHIN_S = 30.0  # a bound a correct run never nears: the tests' connects are cut within 2 s


class PacedScrapes:
    """Counts the collections of `source` that ended, so each scrape can wait for its own."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, scraper: Scraper, source: Source) -> None:
        self._scraper = scraper
        self._ended = threading.Semaphore(0)
        collect = source.collect

        def counted() -> SourceResult:
            try:
                return collect()
            finally:
                self._ended.release()

        monkeypatch.setattr(source, "collect", counted)

    def scrape(self, timeout: float = 5.0) -> None:
        """One scrape, returning once the collection it started has ended."""
        started = time.monotonic()
        self._scraper.scrape(timeout)
        if not self._ended.acquire(timeout=ENDED_WITHIN_S):
            raise AssertionError(
                f"the collection of a scrape had not ended {time.monotonic() - started:.0f} s after it began"
            )
