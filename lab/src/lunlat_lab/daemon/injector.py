"""The settings in force and one slot queue per array: each I/O runs inside its service time."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Literal, TypeVar

from lunlat_lab.daemon.latency import sample_latency_ms, service_seconds
from lunlat_lab.daemon.sleeper import DeadlineSleeper
from lunlat_lab.daemon.slots import SlotQueue
from lunlat_lab.settings import Settings

Op = Literal["read", "write"]
T = TypeVar("T")


class Injector:
    """The settings in force and one SlotQueue per array; `serve` runs one I/O under the model."""

    def __init__(
        self,
        settings: Settings,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, SlotQueue] = {}
        self._settings = settings
        self._rng = rng or random.Random()
        self._clock = clock
        self.sleeper = DeadlineSleeper(clock, sleep, self._rng)
        self.apply(settings)

    @property
    def settings(self) -> Settings:
        return self._settings

    def queue(self, array: str) -> SlotQueue:
        return self._queues[array]

    def apply(self, settings: Settings) -> None:
        """Put new settings in force. Queues are resized in place (their waiters stay queued) and
        created before the settings that name them are published, so a reader of `settings` always
        finds its array's queue. An array that disappears keeps its queue for I/Os still on it."""
        with self._lock:
            for name, array in settings.arrays.items():
                queue = self._queues.get(name)
                if queue is None:
                    self._queues[name] = SlotQueue(array.slots)
                elif queue.size != array.slots:
                    queue.resize(array.slots)
            self._settings = settings  # one reference swap: each I/O sees old or new, never a mix

    def service_time(self, lun: str, op: Op, nbytes: int) -> float | None:
        """Seconds one I/O holds its array's slot, sampled now; None for a file with no settings."""
        settings = self._settings
        setting = settings.luns.get(lun)
        if setting is None:
            return None
        mean = setting.read_ms if op == "read" else setting.write_ms
        latency = sample_latency_ms(mean, setting.jitter, self._rng)
        bandwidth = settings.arrays[setting.array].bandwidth_mib_s
        return service_seconds(latency, nbytes, bandwidth, settings.overhead_ms.get(op, 0.0))

    def serve(self, lun: str | None, op: Op, nbytes: int, io: Callable[[], T]) -> T:
        """Run `io` (the real pread/pwrite) inside the I/O's service time on its array."""
        setting = self._settings.luns.get(lun) if lun is not None else None
        if lun is None or setting is None:
            return io()
        with self._queues[setting.array]:
            start = self._clock()
            # Sampled once the slot is held: a change made while the I/O queued applies to it.
            seconds = self.service_time(lun, op, nbytes)
            result = io()
            if seconds is not None:
                self.sleeper.until(start + seconds)
        return result
