"""A synthetic source for the dashboards' tests: the contract's families for made-up LUNs, its counters
one step of I/Os further at each collection, so rates over any window are what the step implies."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from lunlat.sources.base import SourceResult


@dataclass
class SteppingSource:
    """Counts its collections; a subclass says what `k` steps of its LUNs' I/Os publish."""

    steps: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return "synthetic"

    @property
    def error_reasons(self) -> tuple[str, ...]:
        return ()

    @property
    def timeout(self) -> float | None:
        return None

    def collect(self) -> SourceResult:
        with self._lock:
            self.steps += 1
            k = self.steps
        return self.families(k)

    def families(self, k: int) -> SourceResult:
        raise NotImplementedError
