"""What an engine's rows of the Database I/O dashboard are, as data (`engine_rows`, by engine key).

`database_io` turns them into panels, adding the dashboard's variables (job, instance, database,
role) to every selector. `fixed` matchers are label -> value, or label -> '=~"regex"'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lunlat.ground import MetricSpec


@dataclass(frozen=True, slots=True)
class PerWait:
    """Average wait = Δ time / Δ waits from two counters, summed by `by` (a replica's waits:
    `replica`, filtered by database only and role="replica")."""

    time: MetricSpec
    waits: MetricSpec
    by: str
    fixed: tuple[tuple[str, str], ...] = ()
    replica: bool = False


@dataclass(frozen=True, slots=True)
class PerFile:
    """Average time per operation of each file: Δ time / Δ operations per file."""

    time: MetricSpec
    operations: MetricSpec


@dataclass(frozen=True, slots=True)
class SumRate:
    """Rate of a counter summed by `by` (seconds waited per second, a count of waiters)."""

    metric: MetricSpec
    by: str
    fixed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Quantile:
    """A quantile of a histogram's buckets, summed by `by`."""

    quantile: float
    histogram: MetricSpec
    by: str
    fixed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Buckets:
    """A histogram's buckets per `le` (a heatmap)."""

    histogram: MetricSpec
    fixed: tuple[tuple[str, str], ...] = ()


Expression = PerWait | PerFile | SumRate | Quantile | Buckets


@dataclass(frozen=True, slots=True)
class PanelQuery:
    expression: Expression
    legend: str


@dataclass(frozen=True, slots=True)
class Panel:
    """`latency`: seconds against the goal line; `rate`: a count per second; `heatmap`: one histogram."""

    title: str
    description: str
    queries: tuple[PanelQuery, ...]
    kind: Literal["latency", "rate", "heatmap"] = "latency"
    span: int = 12
    height: int = 9


@dataclass(frozen=True, slots=True)
class DashboardRow:
    title: str
    panels: tuple[Panel, ...]
