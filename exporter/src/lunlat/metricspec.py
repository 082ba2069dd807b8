"""What a metric is (name, type, help, labels) and what a database layer a source may be unable to
read is: the shapes `contract` and every engine's `metrics` module fill in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["counter", "gauge", "histogram"]

PREFIX = "lunlat_"

# The base units lunlat's names end in (Prometheus' naming practices, "Base units": seconds, bytes).
# A name's unit is declared by that suffix, the one place it is said; OpenMetrics' `# UNIT` line
# repeats it, and OpenMetrics 1.0 requires the unit to be a suffix of the family's name.
BASE_UNITS: tuple[str, ...] = ("seconds", "bytes")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.name.startswith(PREFIX):
            raise ValueError(f"metric {self.name} lacks the {PREFIX} prefix")
        if self.type == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"counter {self.name} must end in _total")

    @property
    def unit(self) -> str:
        """The base unit the name ends in, before a counter's `_total` ("" for none): what
        OpenMetrics' `# UNIT` line says."""
        stem = self.name.removesuffix("_total") if self.type == "counter" else self.name
        return next((unit for unit in BASE_UNITS if stem.endswith(f"_{unit}")), "")


@dataclass(frozen=True, slots=True)
class Capability:
    """A part of a database a source may be unable to read (`lunlat_source_capability{capability}`).

    `fixable`: the login, grants or exporter config can restore it, so a 0 opens a ticket
    (LunLatencySourceCapabilityMissing); otherwise the server's release or service lacks it, and a 0
    is said once in the log and shown, never ticketed (a ticket no one could close).
    """

    name: str
    meaning: str
    fixable: bool
