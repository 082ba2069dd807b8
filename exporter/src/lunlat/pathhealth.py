"""Multipath path health off the scrape path: path states read on their own short cadence, while scraped.

Reading every path's sysfs state at every scrape cost 73 ms of a 90 ms scrape on the synthetic
10,000-device host (7,992 state files; issue 29, bench/scrape_vs_node_exporter.py). A path's state
changes without the device set changing, so it cannot be cached with the topology; it is read by a
thread of its own instead, every `interval / 2` seconds, and a scrape serves the last reading with
its age (`lunlat_lun_paths_age_seconds`).

The thread reads only while someone scrapes: each scrape wakes it, and once no scrape has come for
IDLE_AFTER seconds it sleeps until the next one (an idle exporter reads no sysfs, issue 29). It is
never on the scrape path.

The bound: a scrape never serves a reading `interval` seconds old or older. Should the thread fall
behind (a starved machine, a first scrape after idling, or no thread: tests), the scrape reads the
states itself. `interval` is below MAX_INTERVAL, the 15 s `scrape_interval` lunlat's docs ask for
(docs/alerting.md; also what Prometheus' example config sets: prometheus/prometheus
documentation/examples/prometheus.yml, "Set the scrape interval to every 15 seconds. Default is
every 1 minute."). So a path lost just after a scrape is failed in the next scrape: the reading that
scrape serves was taken less than `interval` before it, after the loss (tests/unit/test_pathhealth.py
drives this at the default cadence with a fake clock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lunlat import ground
from lunlat.model import Family, LabelSet, Sample
from lunlat.topology import PathState, path_state

DEFAULT_INTERVAL = 5.0
MIN_INTERVAL = 0.5  # below this the thread would read sysfs more than it sleeps on a large host
MAX_INTERVAL = 15.0  # the scrape interval lunlat's docs assume: a lost path shows within one
# The thread sleeps after this long without a scrape: twice Prometheus' default scrape_interval
# (prometheus/prometheus docs/configuration/configuration.md, "[ scrape_interval: <duration> |
# default = 1m ]"), so a server at its default keeps it awake even across one missed scrape.
IDLE_AFTER = 120.0

# (lun, device) of a published multipath LUN and the state file of each of its paths.
Multipaths = Sequence[tuple[LabelSet, tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class Reading:
    """One reading of every path state: what a scrape publishes, and when it was read."""

    read_at: float  # clock when the reading started
    families: list[Family]  # lunlat_lun_paths, lunlat_lun_paths_failed
    unknown: list[str] = field(default_factory=list)  # state files that could not be read


def read_states(multipaths: Multipaths, now: float) -> Reading:
    """lunlat_lun_paths and lunlat_lun_paths_failed of each multipath LUN, states read now."""
    if not multipaths:
        return Reading(now, [])
    paths: list[Sample] = []
    failed: list[Sample] = []
    unknown: list[str] = []
    for labels, files in multipaths:
        states = [path_state(f) for f in files]
        paths.append(("", labels, len(files)))
        failed.append(("", labels, states.count(PathState.FAILED)))
        if PathState.UNKNOWN in states:
            unknown.extend(f for f, state in zip(files, states, strict=True) if state is PathState.UNKNOWN)
    return Reading(now, [Family(ground.LUN_PATHS, paths), Family(ground.LUN_PATHS_FAILED, failed)], unknown)


class PathWatcher:
    """Keeps a reading of the path states no older than `interval` seconds.

    `watch` is told the multipath LUNs whenever the topology changes (their old reading is dropped:
    a new map's paths are read at the next scrape); `reading` is what a scrape publishes.
    `background=False` reads only when a scrape finds the reading too old (tests drive it with a
    fake clock, without threads or sleeps).
    """

    def __init__(
        self,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        background: bool = True,
    ) -> None:
        if not MIN_INTERVAL <= interval <= MAX_INTERVAL:
            raise ValueError(
                f"path state interval {interval:g} s: must be between {MIN_INTERVAL:g} and {MAX_INTERVAL:g} s"
            )
        self.interval = interval
        self._clock = clock
        self._background = background
        self._lock = threading.Lock()  # guards _multipaths and _reading, never held while reading
        self._multipaths: Multipaths = ()
        self._reading: Reading | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by a scrape: the thread, asleep while idle, resumes
        self._last_scrape = -float("inf")  # clock of the last scrape, under _lock

    def watch(self, multipaths: Multipaths) -> None:
        with self._lock:
            if multipaths is not self._multipaths:
                self._multipaths = multipaths
                self._reading = None

    def reading(self) -> Reading:
        """The last reading, or a new one when it is `interval` old or more (or there is none)."""
        with self._lock:
            reading, multipaths = self._reading, self._multipaths
            self._last_scrape = self._clock()
        self._wake.set()
        # A host without multipath maps (most) gets no thread.
        if multipaths and self._background and self._thread is None and not self._stop.is_set():
            self._start()
        if reading is not None and self._clock() - reading.read_at < self.interval:
            return reading
        return self._read(multipaths)

    def age(self, reading: Reading) -> float:
        return max(0.0, self._clock() - reading.read_at)

    def refresh(self) -> None:
        """Read every state now (the thread's step)."""
        with self._lock:
            multipaths = self._multipaths
        self._read(multipaths)

    def pause(self) -> float | None:
        """Seconds the thread waits before its next reading; None while no one scrapes (for
        IDLE_AFTER seconds): it then sleeps until a scrape wakes it."""
        with self._lock:
            last = self._last_scrape
        if self._clock() - last >= IDLE_AFTER:
            return None
        # Half the interval: a reading is replaced before a scrape could find it `interval` old.
        return self.interval / 2

    def close(self) -> None:
        """Stop the thread (a reload retired the source); it ends within one wait."""
        self._stop.set()
        self._wake.set()

    def _read(self, multipaths: Multipaths) -> Reading:
        # Read without the lock: a scrape never waits for the thread's reading of thousands of
        # files (only the scraper's own collection, one at a time, and the thread ever read).
        reading = read_states(multipaths, self._clock())
        with self._lock:
            # Kept unless the maps changed meanwhile, or a newer reading came first.
            current = self._reading
            if multipaths is self._multipaths and (current is None or current.read_at <= reading.read_at):
                self._reading = reading
        return reading

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lunlat-path-states", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pause = self.pause()
            if pause is None:
                self._wake.clear()
                # Asked again after clearing: a scrape between the two would otherwise be slept through.
                if self.pause() is None:
                    self._wake.wait()
                # Woken by a scrape, which read the states itself if they were too old: wait a step.
                continue
            if self._stop.wait(pause):
                return
            self.refresh()
