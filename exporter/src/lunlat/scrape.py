"""Runs the sources at scrape time: in parallel, under deadlines, one collection per source at a time.

- Concurrent scrapes share the collection in flight of each source ("single flight"), so each sees
  one consistent snapshot and a slow database is never queried twice at once.
- A source past its deadline (or the scrape's) is reported down for that scrape; its collection
  keeps its thread until it returns, and later scrapes wait on that same collection rather than
  piling up new ones.
- A source with a minimum interval (a database target's `min_interval_seconds`) is collected at
  most once per interval: a scrape arriving sooner after the last collection started is served that
  collection again (its families, up, duration; its errors were counted once, when it ran), and
  `lunlat_source_collection_age_seconds` says how old it is. Two HA Prometheus servers (or a
  Prometheus and a vmagent) scraping seconds apart then cost the database one collection, not two.
- Health families (docs/contract.md §3) come from what the collections reported, never from a failed scrape.
- Concurrent scrapes that got the very same outcomes (and error counts) share one rendered body:
  200 scrapers arriving together cost one render, not 200 under the GIL.
"""

from __future__ import annotations

import platform
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.openmetrics import exposition as openmetrics_exposition
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from lunlat import __version__, ground, logs
from lunlat.exposition import render, render_openmetrics
from lunlat.model import Family, LabelSet
from lunlat.sources.base import Source, SourceError, Throttled

log = logs.get(__name__)

# prometheus_client's openmetrics modules carry no type hints (0.26): the signature, said once.
generate_openmetrics = cast(Callable[[CollectorRegistry], bytes], openmetrics_exposition.generate_latest)


@dataclass(slots=True)
class Outcome:
    families: list[Family]
    up: bool
    duration: float
    errors: Counter[str] = field(default_factory=Counter)
    finished: float = 0.0  # scraper clock when the collection ended


@dataclass(slots=True)
class _Flight:
    future: Future[Outcome]
    started: float
    source: Source  # a reload may bring a new source under the same name
    timeout_counted: bool = False


def process_registry() -> CollectorRegistry:
    """The process_* and python_* metrics every Prometheus client exposes, from prometheus_client."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class Scraper:
    def __init__(
        self,
        sources: Sequence[Source],
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _unique_names(sources)
        self._sources = list(sources)
        self._names = {s.name for s in sources}
        self._registry = registry
        self._clock = clock
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._problems: dict[str, tuple[str, str] | None] = {}  # last failure per source: log changes only
        self._executor = self._new_executor(len(sources))
        self._providers: list[Callable[[], list[Family]]] = []
        # Every declared reason starts at 0, so rate() and increase() see the first error.
        self._errors: Counter[tuple[str, str]] = Counter()
        self._declare_errors(self._sources)
        self._errors_version = 0  # bumped on every change to _errors: part of the shared body's key
        # The last body of each format (False: text, True: OpenMetrics), kept apart so a Prometheus
        # asking for OpenMetrics and a person with curl do not render for each other.
        self._rendered: dict[bool, tuple[tuple[Outcome, ...], int, bytes, tuple[float, ...]]] = {}
        self._render_lock = threading.Lock()
        self._build_info = Family(
            ground.BUILD_INFO,
            [("", LabelSet(ground.BUILD_INFO.labels, (__version__, platform.python_version())), 1)],
        )

    @staticmethod
    def _new_executor(sources: int) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=2 * sources + 2, thread_name_prefix="lunlat-source")

    def _declare_errors(self, sources: Sequence[Source]) -> None:
        for source in sources:
            for reason in (*source.error_reasons, "timeout", "internal"):
                self._errors[(source.name, reason)] += 0

    def add_families(self, provider: Callable[[], list[Family]]) -> None:
        """Publish what `provider` returns in every scrape, after the health families."""
        self._providers.append(provider)

    @property
    def sources(self) -> list[Source]:
        """The sources scraped now."""
        with self._lock:
            return list(self._sources)

    def replace(self, sources: Sequence[Source], retire: Callable[[Source], None]) -> None:
        """Scrape `sources` from now on, instead of the current ones (a config reload).

        The swap is atomic: a scrape under way finishes with the sources it started with, the next
        one sees only the new. Error counters of names that stay keep counting; those of names
        that went are no longer published. `retire` is called with each old source once its
        collection in flight (if any) has ended, so a database session is never closed under a
        query.
        """
        _unique_names(sources)
        with self._lock:
            old, self._sources = self._sources, list(sources)
            kept = self._names = {s.name for s in sources}
            for key in [k for k in self._errors if k[0] not in kept]:
                del self._errors[key]
            self._declare_errors(sources)
            self._errors_version += 1
            for name in [n for n in self._problems if n not in kept]:
                del self._problems[name]
            if len(sources) > len(old):
                # The pool's size follows the sources; running collections finish on the old one.
                self._executor.shutdown(wait=False)
                self._executor = self._new_executor(len(sources))
            flights = {id(f.source): f for f in self._flights.values()}
        staying = {id(s) for s in sources}
        for source in old:
            if id(source) in staying:  # a source the reload kept as it was
                continue
            flight = flights.get(id(source))
            if flight is None:
                retire(source)
            else:
                flight.future.add_done_callback(_then(retire, source))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _run(self, source: Source) -> Outcome:
        started = self._clock()
        problem: str | None = None
        kind: tuple[str, str] | None = None  # what the failure is, without the details that vary
        try:
            result = source.collect()
            outcome = Outcome(result.families, True, 0.0, result.errors)
        except SourceError as exc:
            problem, kind = f"{exc.reason}: {exc}", exc.kind
            outcome = Outcome([], False, 0.0, Counter({exc.reason: exc.count}))
        except Exception as exc:  # a bug in a source must not take the exporter down
            problem = f"internal: {type(exc).__name__}: {exc}"
            kind = ("internal", problem)
            log.debug("traceback", exc_info=True)
            outcome = Outcome([], False, 0.0, Counter({"internal": 1}))
        outcome.finished = self._clock()
        outcome.duration = outcome.finished - started
        with self._lock:
            if source.name in self._names:  # not a source a reload removed while it ran
                for reason, count in outcome.errors.items():
                    self._errors[(source.name, reason)] += count
            self._errors_version += 1
            previous = self._problems.get(source.name)
            self._problems[source.name] = kind
        # Log changes of state (up -> down with the first error, down -> up) and of the kind of
        # failure, not every scrape: a source down for a day must not fill the disk, and a
        # driver's message that names a new connection id each attempt is not a new failure.
        if kind is not None and kind != previous:
            log.warning("source failed", source=source.name, err=problem)
        elif kind is None and previous is not None:
            log.info("source recovered", source=source.name)
        return outcome

    def _flight(self, source: Source, now: float) -> tuple[_Flight, bool]:
        """The collection this scrape gets, and whether it had ended before the scrape came (a
        collection served again within the source's minimum interval)."""
        with self._lock:
            flight = self._flights.get(source.name)
            if flight is not None and flight.source is source:
                if not flight.future.done():
                    return flight, False
                # Measured from the start, so the database sees at most one collection per
                # interval however long each takes. A new source (a reload that changed the
                # target, its interval included) never gets its predecessor's collection.
                if now - flight.started < min_interval(source):
                    return flight, True
            flight = _Flight(self._executor.submit(self._run, source), now, source)
            self._flights[source.name] = flight
            return flight, False

    def collect(self, timeout: float) -> list[tuple[Source, Outcome]]:
        """Collect every source within `timeout` seconds."""
        return [(source, outcome) for source, outcome, _ in self._collect(timeout)]

    def _collect(self, timeout: float) -> list[tuple[Source, Outcome, float]]:
        """Every source's outcome and its age: seconds since a collection served again ended, 0
        for one that ended while this scrape waited for it."""
        arrived = self._clock()
        deadline = arrived + timeout
        sources = self._sources  # one set for the whole scrape, even across a reload
        flights = [(source, *self._flight(source, arrived)) for source in sources]
        outcomes: list[tuple[Source, Outcome, float]] = []
        for source, flight, again in flights:
            until = deadline if source.timeout is None else min(deadline, flight.started + source.timeout)
            try:
                outcome = flight.future.result(timeout=max(0.0, until - self._clock()))
            except FutureTimeout:
                with self._lock:
                    if not flight.timeout_counted and source.name in self._names:
                        flight.timeout_counted = True
                        self._errors[(source.name, "timeout")] += 1
                        self._errors_version += 1
                        log.warning(
                            "source timed out",
                            source=source.name,
                            after_seconds=round(until - flight.started, 3),
                        )
                outcome = Outcome([], False, until - flight.started)
            # Tenths of a second: plenty for an age measured against intervals of seconds, and coarse
            # enough that a burst of scrapers served the same collection shares one rendered body
            # (the age is part of the body's key; milliseconds would render one body per scraper).
            age = round(max(0.0, arrived - outcome.finished), 1) if again else 0.0
            outcomes.append((source, outcome, age))
        return outcomes

    def health_families(
        self, outcomes: list[tuple[Source, Outcome]], ages: Sequence[float] | None = None
    ) -> list[Family]:
        """`ages`: of each outcome, as `_collect` measured them (None: all fresh)."""
        up = Family(ground.SOURCE_UP)
        duration = Family(ground.SOURCE_DURATION)
        age = Family(ground.SOURCE_COLLECTION_AGE)
        for i, (source, outcome) in enumerate(outcomes):
            labels = LabelSet(("source",), (source.name,))
            up.add(labels, 1 if outcome.up else 0)
            duration.add(labels, round(outcome.duration, 6))
            age.add(labels, 0.0 if ages is None else ages[i])
        errors = Family(ground.SOURCE_ERRORS)
        with self._lock:
            snapshot = sorted(self._errors.items())
        for (name, reason), count in snapshot:
            errors.add(LabelSet(ground.SOURCE_ERRORS.labels, (name, reason)), count)
        return [up, duration, errors, age, self._build_info, *(f for p in self._providers for f in p())]

    def scrape(self, timeout: float) -> str:
        """The full /metrics body, as text (tools and tests; the server takes `scrape_bytes`)."""
        return self.scrape_bytes(timeout).decode()

    def scrape_bytes(self, timeout: float, openmetrics: bool = False) -> bytes:
        """The full /metrics body, UTF-8, in the text format or (`openmetrics`) OpenMetrics 1.0.
        Only the bytes are kept for the scrapes that share it, not the text too: with show-paths on
        10,000 devices the body is ~15 MB (bench/)."""
        served = self._collect(timeout)
        outcomes = [(source, outcome) for source, outcome, _ in served]
        shared = tuple(outcome for _, outcome in outcomes)
        ages = tuple(age for _, _, age in served)
        with self._render_lock:
            with self._lock:
                version = self._errors_version
            cached = self._rendered.get(openmetrics)
            # Identity, not equality: the same Outcome objects means the same collections. A timed-out
            # source gets a fresh Outcome per scrape, so such a scrape always renders its own body.
            # A collection served again is older at each scrape: its age is part of the key.
            if (
                cached is not None
                and cached[1] == version
                and cached[3] == ages
                and len(cached[0]) == len(shared)
                and all(a is b for a, b in zip(cached[0], shared, strict=True))
            ):
                return cached[2]
            self._rendered.pop(openmetrics, None)  # the old body goes before the new one is built
            families = [
                *(f for outcome in shared for f in outcome.families),
                *self.health_families(outcomes, ages),
            ]
            if not openmetrics:
                body = render(families).encode()
                if self._registry is not None:
                    body += generate_latest(self._registry)
            elif self._registry is None:
                body = render_openmetrics(families).encode()
            else:  # prometheus_client's OpenMetrics of its own families ends the page with `# EOF`
                body = render_openmetrics(families, eof=False).encode() + generate_openmetrics(self._registry)
            self._rendered[openmetrics] = (shared, version, body, ages)
            return body


def min_interval(source: Source) -> float:
    """Seconds within which a source's last collection is served again (0: every scrape collects)."""
    return source.min_interval if isinstance(source, Throttled) else 0.0


def _unique_names(sources: Sequence[Source]) -> None:
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"source names must be unique: {names}")


def _then(retire: Callable[[Source], None], source: Source) -> Callable[[Future[Outcome]], None]:
    def done(_future: Future[Outcome]) -> None:
        retire(source)

    return done
