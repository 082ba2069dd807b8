"""The scrape orchestrator: parallel sources, deadlines, single flight, health metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from lunlat.contract import MetricSpec
from lunlat.model import Family, LabelSet
from lunlat.scrape import Scraper, process_registry
from lunlat.sources.base import SourceError, SourceResult
from tests.support.exposition_samples import errors, samples, up


class FakeSource:
    def __init__(
        self,
        name: str,
        behaviour: Callable[[], SourceResult] | None = None,
        timeout: float | None = None,
        reasons: tuple[str, ...] = ("read_failed",),
    ) -> None:
        self.name = name
        self.error_reasons = reasons
        self.timeout = timeout
        self.calls = 0
        self._behaviour = behaviour or self._ok
        self._lock = threading.Lock()
        self.concurrent = 0
        self.max_concurrent = 0

    def _ok(self) -> SourceResult:
        family = Family(MetricSpec("lunlat_test_value", "gauge", "test", ("source",)))
        family.add(LabelSet(("source",), (self.name,)), self.calls)
        return SourceResult([family])

    def collect(self) -> SourceResult:
        with self._lock:
            self.calls += 1
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            return self._behaviour()
        finally:
            with self._lock:
                self.concurrent -= 1


def test_healthy_sources_are_up_and_every_reason_starts_at_zero() -> None:
    scraper = Scraper([FakeSource("a"), FakeSource("b", reasons=("x", "y"))])
    text = scraper.scrape(5)
    assert up(text, "a") == 1 and up(text, "b") == 1
    for source, reason in [("a", "read_failed"), ("a", "timeout"), ("b", "x"), ("b", "y"), ("b", "internal")]:
        assert errors(text, source, reason) == 0
    assert samples(text)[("lunlat_test_value", (("source", "a"),))] == 1
    info = [k for k in samples(text) if k[0] == "lunlat_build_info"]
    assert len(info) == 1 and dict(info[0][1])["version"]


def test_a_failing_source_is_down_counted_by_reason_and_the_rest_still_served() -> None:
    def fail() -> SourceResult:
        raise SourceError("read_failed", "no such file")

    scraper = Scraper([FakeSource("good"), FakeSource("bad", fail)])
    text = scraper.scrape(5)
    assert up(text, "good") == 1 and up(text, "bad") == 0
    assert errors(text, "bad", "read_failed") == 1
    text = scraper.scrape(5)
    assert errors(text, "bad", "read_failed") == 2
    assert ("lunlat_test_value", (("source", "good"),)) in samples(text)


def test_an_unexpected_exception_is_internal_not_a_crash() -> None:
    def bug() -> SourceResult:
        raise KeyError("oops")

    text = Scraper([FakeSource("buggy", bug)]).scrape(5)
    assert up(text, "buggy") == 0 and errors(text, "buggy", "internal") == 1


def test_partial_errors_count_but_keep_the_source_up() -> None:
    def partial() -> SourceResult:
        return SourceResult([], Counter({"read_failed": 3}))

    text = Scraper([FakeSource("p", partial)]).scrape(5)
    assert up(text, "p") == 1 and errors(text, "p", "read_failed") == 3


def test_a_slow_source_times_out_once_and_does_not_pile_up() -> None:
    release = threading.Event()

    def stuck() -> SourceResult:
        release.wait(10)
        return SourceResult([])

    slow = FakeSource("slow", stuck, timeout=0.2)
    fast = FakeSource("fast")
    scraper = Scraper([slow, fast])
    started = time.monotonic()
    text = scraper.scrape(5)
    assert time.monotonic() - started < 2.5  # bounded by the source's 0.2 s, not the scrape's 5 s
    assert up(text, "slow") == 0 and up(text, "fast") == 1
    assert samples(text)[("lunlat_source_duration_seconds", (("source", "slow"),))] >= 0.2
    text = scraper.scrape(0.2)  # still stuck: waits on the same collection
    assert up(text, "slow") == 0
    assert slow.calls == 1  # no second collection started while the first is in flight
    assert errors(text, "slow", "timeout") == 1  # one stuck collection, one timeout
    release.set()
    time.sleep(0.1)
    text = scraper.scrape(5)
    assert up(text, "slow") == 1 and slow.calls == 2
    scraper.close()


def test_concurrent_scrapes_share_one_collection() -> None:
    gate = threading.Event()

    def gated() -> SourceResult:
        gate.wait(5)
        return SourceResult([])

    source = FakeSource("s", gated)
    scraper = Scraper([source])
    bodies: list[str] = []
    threads = [threading.Thread(target=lambda: bodies.append(scraper.scrape(5))) for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join()
    assert len(bodies) == 5 and all(up(b, "s") == 1 for b in bodies)
    assert source.calls == 1 and source.max_concurrent == 1


def test_sources_run_in_parallel() -> None:
    # Each source waits until all four are inside collect(): only a parallel run gets them all up.
    barrier = threading.Barrier(4)

    def together() -> SourceResult:
        barrier.wait(timeout=5)
        return SourceResult([])

    text = Scraper([FakeSource(f"s{i}", together) for i in range(4)]).scrape(10)
    assert all(up(text, f"s{i}") == 1 for i in range(4))


def test_process_metrics_come_from_prometheus_client() -> None:
    text = Scraper([FakeSource("a")], process_registry()).scrape(5)
    names = {s[0] for s in samples(text)}
    assert "process_cpu_seconds_total" in names or "python_info" in names


def test_duplicate_source_names_are_refused() -> None:
    try:
        Scraper([FakeSource("a"), FakeSource("a")])
    except ValueError as exc:
        assert "unique" in str(exc)
    else:
        raise AssertionError("duplicate names accepted")


def test_a_persistent_failure_is_logged_once_and_recovery_once(caplog: pytest.LogCaptureFixture) -> None:
    failing = [True]

    def flaky() -> SourceResult:
        if failing[0]:
            raise SourceError("read_failed", "gone")
        return SourceResult([])

    scraper = Scraper([FakeSource("f", flaky)])
    with caplog.at_level(logging.INFO, logger="lunlat"):
        for _ in range(3):
            scraper.scrape(5)
        failing[0] = False
        scraper.scrape(5)
        scraper.scrape(5)
    messages = [r.getMessage() for r in caplog.records if r.name == "lunlat.scrape"]
    assert messages == ["source failed", "source recovered"]


def test_concurrent_scrapes_of_one_collection_share_one_rendered_body() -> None:
    gate = threading.Event()

    def slow() -> SourceResult:
        gate.wait(5)
        return SourceResult([])

    scraper = Scraper([FakeSource("a", slow)], process_registry())
    bodies: list[bytes] = []
    threads = [threading.Thread(target=lambda: bodies.append(scraper.scrape_bytes(5))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # all eight wait on the one collection in flight
    gate.set()
    for t in threads:
        t.join()
    assert len(bodies) == 8 and all(body is bodies[0] for body in bodies)
    # The next scrape starts a new collection: a body of its own, with fresh process metrics.
    assert scraper.scrape_bytes(5) is not bodies[0]
    scraper.close()
