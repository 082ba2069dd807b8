"""Config reload without a restart (SIGHUP, `POST /-/reload`), as Prometheus does it.

The file is read again and every source rebuilt through the registry; only when both succeed are
the new sources swapped into the scraper (the old ones retired: database sessions closed once their
collection in flight ends). A database target whose config did not change keeps its running source
and session; the diskstats source carries its 32-bit wrap offsets over. A bad file keeps the running config and says why, one log line per
problem, and in `lunlat_config_last_reload_successful` 0 until a good file is loaded; the answer
to `/-/reload` is then 500 with the reason (Prometheus: "failed to reload config: …",
github.com/prometheus/prometheus web/web.go `reload`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from lunlat import contract, logs
from lunlat.config import ConfigError, load_config
from lunlat.dbfiles import DbLunLabels
from lunlat.model import Family, LabelSet
from lunlat.scrape import Scraper
from lunlat.sources.base import CarriesState, Reusable, Source
from lunlat.sources.factory import Settings
from lunlat.sources.registry import build_sources, close_sources

log = logs.get(__name__)

_NO_LABELS = LabelSet((), ())


class Reloader:
    """Rebuilds the scraper's sources from the config file; one reload at a time."""

    def __init__(
        self,
        path: Path | None,
        settings: Settings,
        scraper: Scraper,
        db_labels: DbLunLabels | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = path
        self._source_name = str(path) if path is not None else "(embedded default)"
        self._db_labels = db_labels  # the running sources' LUN labels, handed on to the new ones
        self._settings = settings
        self._scraper = scraper
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        # The config running now was loaded at start (a bad one never gets this far).
        self._successful = True
        self._success_time = wall_clock()
        scraper.add_families(self.families)

    def reload(self) -> str | None:
        """Load the config file again and swap in its sources: None when done, else why not (the
        old config keeps running)."""
        with self._lock:
            try:
                problems = self._swap()
            except Exception as exc:  # a bug in a factory must not kill the reload's caller
                log.debug("traceback", exc_info=True)
                problems = [f"internal: {type(exc).__name__}: {exc}"]
            if problems:
                self._successful = False
                for problem in problems:
                    log.error(
                        "config reload failed; the running config stays", file=self._source_name, err=problem
                    )
                return "; ".join(problems)
            self._successful = True
            self._success_time = self._wall_clock()
            return None

    def _swap(self) -> list[str]:
        try:
            config = load_config(self._path)
        except ConfigError as exc:
            return [str(p) for p in exc.problems]
        built = build_sources(config, self._settings, self._db_labels)
        if built.problems:
            built.close()
            return built.problems
        sources = _reuse(self._scraper.sources, built.sources)
        try:
            self._scraper.replace(sources, lambda source: close_sources([source]))
        except ValueError as exc:  # names not unique: the config checks should have said so
            built.close()
            return [str(exc)]
        if built.db_labels is not None:
            built.db_labels.keep(s.name for s in sources)
        self._db_labels = built.db_labels
        log.info("config reloaded", file=self._source_name, sources=",".join(s.name for s in sources))
        return []

    def families(self) -> list[Family]:
        return [
            Family(contract.CONFIG_LAST_RELOAD_SUCCESSFUL, [("", _NO_LABELS, 1 if self._successful else 0)]),
            Family(
                contract.CONFIG_LAST_RELOAD_SUCCESS_TIME, [("", _NO_LABELS, round(self._success_time, 3))]
            ),
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
            out.append(old)
            continue
        if old is not None and isinstance(new, CarriesState):
            new.carry_over(old)
        out.append(new)
    return out
