"""Config reload without a restart (SIGHUP, `POST /-/reload`), as Prometheus does it.

The file is read again and every source rebuilt through the registry; only when both succeed are
the new sources swapped into the scraper (the old ones retired: database sessions closed once their
collection in flight ends). A database target whose config did not change keeps its running source
and session; the diskstats source carries its 32-bit wrap offsets over. A bad file keeps the
running config and says why, one log line per problem, and in `lunlat_config_last_reload_successful` 0 until a good file is loaded; the answer
to `/-/reload` is then 500 with the reason (Prometheus: "failed to reload config: …",
github.com/prometheus/prometheus web/web.go `reload`).

No file can wedge a reload: the config is read by files.read_regular (no FIFO, device or file over
1 MiB), and the work runs in a thread its caller waits on for at most RELOAD_DEADLINE_SECONDS; past
that the reload counts as failed, and further reloads answer at once until the stuck one ends (its
result is then dropped). Database targets a reload removes are named at warn: a file cut short can
still parse.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from lunlat import ground, logs
from lunlat.config import ConfigError
from lunlat.configfile import load_config
from lunlat.dbfiles import DbLunLabels
from lunlat.engines.dbsource import DbSource
from lunlat.model import Family, LabelSet
from lunlat.scrape import Scraper
from lunlat.sources.base import CarriesState, Reusable, Source
from lunlat.sources.factory import Settings
from lunlat.sources.registry import Built, build_sources, close_sources

log = logs.get(__name__)

_NO_LABELS = LabelSet((), ())
# A reload reads at most a 1 MiB file (config.CONFIG_MAX_BYTES: ~9 s measured on a busy 2-core
# machine) and builds the sources (databases are connected at the first scrape, not here); past
# this something blocks (a file on a hung NFS or FUSE mount, a driver import), and the caller is
# answered instead of waiting with it.
RELOAD_DEADLINE_SECONDS = 30.0


class _Attempt:
    """One reload under way: when it started, and its outcome once done."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.done = threading.Event()  # its outcome is in `problems` (it was not abandoned)
        self.ended = threading.Event()  # its thread is done, abandoned or not
        self.problems: list[str] = []
        self.abandoned = False  # its caller stopped waiting: its result is dropped


class Reloader:
    """Rebuilds the scraper's sources from the config file; one reload at a time, each answered
    within `deadline_seconds`."""

    def __init__(
        self,
        path: Path | None,
        settings: Settings,
        scraper: Scraper,
        db_labels: DbLunLabels | None = None,
        wall_clock: Callable[[], float] = time.time,
        deadline_seconds: float = RELOAD_DEADLINE_SECONDS,
    ) -> None:
        self._path = path
        self._source_name = str(path) if path is not None else "(embedded default)"
        self._db_labels = db_labels  # the running sources' LUN labels, handed on to the new ones
        self._settings = settings
        self._scraper = scraper
        self._wall_clock = wall_clock
        self._deadline = deadline_seconds
        # Guards the attempt under way, the swap and the outcome; never held while a file is read.
        self._lock = threading.Lock()
        self._running: _Attempt | None = None
        # The config running now was loaded at start (a bad one never gets this far).
        self._successful = True
        self._success_time = wall_clock()
        scraper.add_families(self.families)

    def reload(self) -> str | None:
        """Load the config file again and swap in its sources: None when done, else why not (the
        old config keeps running). Returns within the deadline whatever the file or a driver does:
        the work runs in its own thread and the caller stops waiting at the deadline. Reloads run
        one at a time: a second waits for the one under way, and once that one is past its deadline
        every later call answers at once (SIGHUPs and POSTs cannot pile up stuck threads)."""
        deadline = time.monotonic() + self._deadline
        attempt = self._start(deadline)
        if isinstance(attempt, str):
            return attempt
        threading.Thread(target=self._work, args=(attempt,), name="reload", daemon=True).start()
        if attempt.done.wait(max(0.0, deadline - time.monotonic())):
            return "; ".join(attempt.problems) or None
        with self._lock:
            if attempt.done.is_set():  # it finished while this thread waited for the lock
                return "; ".join(attempt.problems) or None
            attempt.abandoned = True
            self._successful = False
        problem = (
            f"{self._source_name}: the reload did not finish within {self._deadline:g} s (a file on a hung "
            "mount, a blocking driver?); the running config stays"
        )
        log.error("config reload failed; the running config stays", file=self._source_name, err=problem)
        return problem

    def _start(self, deadline: float) -> _Attempt | str:
        """A new attempt, once the one under way (if any) has ended; why not when that one is stuck."""
        while True:
            with self._lock:
                running = self._running
                if running is None:
                    self._running = _Attempt(self._wall_clock())
                    return self._running
            if running.abandoned or not running.ended.wait(max(0.0, deadline - time.monotonic())):
                since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(running.started))
                problem = f"a reload is still running since {since}: the running config stays"
                log.error("config reload refused", file=self._source_name, err=problem)
                return problem

    def _work(self, attempt: _Attempt) -> None:
        """Load and build (unlocked: this may block), then swap unless the caller gave up."""
        built: Built | None = None
        try:
            problems, built = self._prepare()
        except Exception as exc:  # a bug in a factory must not kill the reload's thread
            log.debug("traceback", exc_info=True)
            problems = [f"internal: {type(exc).__name__}: {exc}"]
        with self._lock:
            self._running = None
            attempt.ended.set()
            if attempt.abandoned:
                if built is not None:
                    built.close()
                log.warning(
                    "a reload that overran its deadline ended; nothing of it is used", file=self._source_name
                )
                return
            if not problems and built is not None:
                problems = self._swap(built)
            self._conclude(problems)
            attempt.problems = problems
            attempt.done.set()

    def _prepare(self) -> tuple[list[str], Built | None]:
        """The new config's sources, or the problems of the file or of the build."""
        try:
            config = load_config(self._path)
        except ConfigError as exc:
            return [str(p) for p in exc.problems], None
        built = build_sources(config, self._settings, self._db_labels)
        if built.problems:
            built.close()
            return built.problems, None
        return [], built

    def _swap(self, built: Built) -> list[str]:
        sources = _reuse(self._scraper.sources, built.sources)
        kept = {s.name for s in sources}
        dropped = [s.name for s in self._scraper.sources if isinstance(s, DbSource) and s.name not in kept]
        try:
            self._scraper.replace(sources, lambda source: close_sources([source]))
        except ValueError as exc:  # names not unique: the config checks should have said so
            built.close()
            return [str(exc)]
        if dropped:
            # Said at warn: a file cut short can still parse, and would drop targets silently.
            log.warning(
                "config reload removes database targets", file=self._source_name, targets=",".join(dropped)
            )
        if built.db_labels is not None:
            built.db_labels.keep(s.name for s in sources)
        self._db_labels = built.db_labels
        log.info("config reloaded", file=self._source_name, sources=",".join(s.name for s in sources))
        return []

    def _conclude(self, problems: list[str]) -> None:
        """The outcome, in the metrics and the log (one line per problem)."""
        if not problems:
            self._successful = True
            self._success_time = self._wall_clock()
            return
        self._successful = False
        for problem in problems:
            log.error("config reload failed; the running config stays", file=self._source_name, err=problem)

    def families(self) -> list[Family]:
        return [
            Family(ground.CONFIG_LAST_RELOAD_SUCCESSFUL, [("", _NO_LABELS, 1 if self._successful else 0)]),
            Family(ground.CONFIG_LAST_RELOAD_SUCCESS_TIME, [("", _NO_LABELS, round(self._success_time, 3))]),
        ]


def _reuse(running: list[Source], rebuilt: list[Source]) -> list[Source]:
    """The sources to run after a reload: a running source whose config did not change stays (its
    database session open), the rebuilt one is closed unused; a rebuilt source takes over what its
    predecessor knew (diskstats' wrap offsets)."""
    by_name = {s.name: s for s in running}
    out: list[Source] = []
    for new in rebuilt:
        old = by_name.get(new.name)
        if (
            old is not None
            and type(old) is type(new)
            and isinstance(old, Reusable)
            and isinstance(new, Reusable)
            and old.built_from == new.built_from
        ):
            close_sources([new])
            if isinstance(old, DbSource):
                # A reload is what an operator does after fixing a grant: ask what it held off now.
                old.retry_now()
            out.append(old)
            continue
        if old is not None and isinstance(new, CarriesState):
            new.carry_over(old)
        out.append(new)
    return out
