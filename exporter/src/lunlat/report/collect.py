"""What the report reads from Prometheus: per phase, each LUN's Δ time, Δ operations and Δ bytes
per op, and over the whole range the latency curves and histograms the plots draw.

Both layers are the rules' own PromQL (`lunlat.promql.layers`): the host layer the goals choose
(`host_layer(goals)`: lunlat's device counters, or node_exporter's or windows_exporter's joined to
lunlat's LUNs and roles) and each engine's database layer; a phase's Δ is the layer's rate over the
whole phase times its seconds, so the report and the alerts never disagree on a number."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from lunlat import ground
from lunlat.engines.registry import ENGINES
from lunlat.goals import Goals
from lunlat.promql import averages
from lunlat.promql.layers import (
    LUN_LABELS,
    DbLayer,
    ExporterHostLayer,
    HostLayer,
    Layer,
    db_layers,
    host_layer,
    small_ios,
)
from lunlat.report.api import Prometheus, ReportError

# About this many points per plotted curve, whatever the range: the step grows with it.
POINTS = 300
STEPS: tuple[int, ...] = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
MIN_RATE_WINDOW = 60
CSV_COLUMNS: tuple[str, ...] = (
    "phase",
    "phase_start",
    "phase_end",
    "layer",
    "instance",
    "database",
    "role",
    "workload",
    "lun",
    "device",
    "op",
    "avg_latency_seconds",
    "iops",
    "throughput_bytes",
    "operations",
    "goal_seconds",
    "breach",
    # Added with the judged figure (issue 37), after the older columns so readers of those keep working.
    "judged_io",
    "judged_latency_seconds",
    "judged_iops",
    "average_above_goal",
)
# Which I/Os a row's goal judges, as the rules' `judged` label says (docs/alerting.md, "What is judged"):
# the per-I/O histogram's small size class, every I/O of the LUN, or the database layer's own I/O;
# `mixed` only for a page's table cell summing LUNs judged on different I/Os (some without histogram).
JudgedKind = Literal["small", "all", "database", "mixed"]


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def window(self) -> str:
        return f"{round(self.seconds)}s"


def parse_time(text: str) -> float:
    """RFC 3339 (2026-11-25T10:00:00Z) or Unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ReportError(f"not an RFC 3339 time or Unix seconds: {text!r}") from None
    if moment.tzinfo is None:
        raise ReportError(f"time without a zone (add Z or +HH:MM): {text!r}")
    return moment.timestamp()


_PHASE = re.compile(r"^([^=]+)=(.+?)\.\.(.+)$")


def parse_phases(specs: Iterable[str], start: float, end: float) -> list[Phase]:
    """`NAME=FROM..TO` each, inside [start, end]; none: the whole range is one phase."""
    if not end > start:
        raise ReportError("--to must be after --from")
    phases: list[Phase] = []
    for spec in specs:
        match = _PHASE.match(spec)
        if match is None:
            raise ReportError(f"--phase wants NAME=FROM..TO, got {spec!r}")
        name, begin, finish = match.group(1).strip(), parse_time(match.group(2)), parse_time(match.group(3))
        if not finish > begin:
            raise ReportError(f"phase {name!r} ends before it starts")
        if begin < start or finish > end:
            raise ReportError(f"phase {name!r} is outside the report's range (--from .. --to)")
        if any(p.name == name for p in phases):
            raise ReportError(f"phase {name!r} given twice")
        if round(finish - begin) < 1:
            raise ReportError(f"phase {name!r} is shorter than a second")
        phases.append(Phase(name, begin, finish))
    return phases or [Phase("all", start, end)]


def choose_step(seconds: float) -> int:
    """The query step of the plots: about POINTS points over the range, on a round value."""
    wanted = seconds / POINTS
    return next((s for s in STEPS if s >= wanted), STEPS[-1])


@dataclass(slots=True)
class Row:
    phase: Phase
    layer: str
    labels: dict[str, str]
    op: str
    time_total: float
    operations: float
    bytes_total: float | None
    goal_seconds: float | None  # None: not judged (a LUN no database uses, goals `unowned`)
    min_iops: float
    # The I/Os the goal judges (None: not judged, no goal) and their Δ time and Δ operations over the
    # phase: the small ones' from the per-I/O histogram, or the row's own for `all` and `database`.
    # Defaults: a row built without them judges every I/O it counts, as a host without the histogram.
    judged_kind: JudgedKind | None = "all"
    judged_time: float | None = None
    judged_operations: float | None = None

    @property
    def avg(self) -> float | None:
        return self.time_total / self.operations if self.operations > 0 else None

    @property
    def iops(self) -> float:
        return self.operations / self.phase.seconds

    def judged_totals(self) -> tuple[float, float] | None:
        """(Δ time, Δ operations) of the judged I/Os; None when the row is not judged."""
        if self.judged_kind is None or self.goal_seconds is None:
            return None
        if self.judged_time is None or self.judged_operations is None:
            return self.time_total, self.operations
        return self.judged_time, self.judged_operations

    @property
    def judged_avg(self) -> float | None:
        """The average of the judged I/Os over the phase: what the alerts judge."""
        judged = self.judged_totals()
        return None if judged is None or judged[1] <= 0 else judged[0] / judged[1]

    @property
    def judged_iops(self) -> float | None:
        judged = self.judged_totals()
        return None if judged is None else judged[1] / self.phase.seconds

    @property
    def breach(self) -> bool | None:
        """The judged I/Os' average above the goal, as the breach alerts judge it; None when not
        judged (no goal, no judged operation, or the judged I/Os below the idle guard: the rules
        count the guard on the judged I/Os, so a LUN busy with scans but few small reads is idle)."""
        avg, iops = self.judged_avg, self.judged_iops
        if avg is None or iops is None or self.goal_seconds is None or iops < self.min_iops:
            return None
        return avg > self.goal_seconds

    @property
    def average_above_goal(self) -> bool | None:
        """The LUN's average (every I/O) above the goal, idle guard on every I/O: what
        LunLatencyAverageHigh flags; None when not judged."""
        avg = self.avg
        if avg is None or self.goal_seconds is None or self.iops < self.min_iops:
            return None
        return avg > self.goal_seconds

    @property
    def flagged(self) -> bool:
        """The average above the goal while the judged I/Os are not (within it, or too few to judge):
        shown and warned about, never paged (LunLatencyAverageHigh)."""
        return bool(self.average_above_goal) and not self.breach

    def csv(self) -> dict[str, str]:
        avg, throughput = self.avg, self.bytes_total
        judged, judged_iops = self.judged_avg, self.judged_iops
        return {
            "phase": self.phase.name,
            "phase_start": _iso(self.phase.start),
            "phase_end": _iso(self.phase.end),
            "layer": self.layer,
            "instance": self.labels.get("instance", ""),
            "database": self.labels.get("database", ""),
            "role": self.labels.get("role", ""),
            "workload": self.labels.get("workload", ""),
            "lun": self.labels.get("lun", ""),
            "device": self.labels.get("device", ""),
            "op": self.op,
            "avg_latency_seconds": "" if avg is None else repr(avg),
            "iops": repr(self.iops),
            "throughput_bytes": "" if throughput is None else repr(throughput / self.phase.seconds),
            "operations": repr(self.operations),
            "goal_seconds": "" if self.goal_seconds is None else repr(self.goal_seconds),
            "breach": _yes_no(self.breach),
            "judged_io": (self.judged_kind or "") if self.goal_seconds is not None else "",
            "judged_latency_seconds": "" if judged is None else repr(judged),
            "judged_iops": "" if judged_iops is None else repr(judged_iops),
            "average_above_goal": _yes_no(self.average_above_goal),
        }


def _yes_no(verdict: bool | None) -> str:
    return {None: "", True: "yes", False: "no"}[verdict]


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class JudgedIos:
    """One phase's small I/Os per LUN from the per-I/O histogram (Collector.judged_ios)."""

    with_histogram: set[tuple[str, ...]]  # (job, instance, lun) of the LUNs with the histogram
    small: dict[tuple[str, str], dict[tuple[str, ...], float]]  # (op, sum|count) -> LUN key -> rate


@dataclass
class Curve:
    """One LUN's latency (or one histogram) over the range."""

    key: tuple[str, ...]
    points: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass
class Collected:
    phases: list[Phase]
    rows: list[Row]
    step: int
    start: float
    end: float
    # (instance, lun) -> op -> [(t, latency seconds)], and -> op -> [(t, iops)]
    latency: dict[tuple[str, str], dict[str, list[tuple[float, float]]]]
    iops: dict[tuple[str, str], dict[str, list[tuple[float, float]]]]
    # title -> [(le, count in the range)], cumulative buckets turned into per-bucket counts
    histograms: dict[str, list[tuple[float, float]]]


def _key(metric: dict[str, str], labels: Iterable[str]) -> tuple[str, ...]:
    return tuple(metric.get(label, "") for label in labels)


class Collector:
    def __init__(self, prometheus: Prometheus, goals: Goals, progress: Callable[[str], None]) -> None:
        self.prometheus = prometheus
        self.goals = goals
        self.progress = progress
        self.host: HostLayer | ExporterHostLayer = host_layer(goals)

    def selector(self, metric: str) -> str:
        return f"{metric}{{{self.goals.selector}}}"

    @property
    def info(self) -> str:
        return f'{ground.LUN_INFO.name}{{{self.goals.selector}, kind="lun"}}'

    def _vector(self, promql: str, at: float, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        result = self.prometheus.query(promql, at)
        self.progress(promql)
        out = {}
        for sample in result:
            value = float(sample["value"][1])
            if math.isfinite(value):
                out[_key(sample["metric"], labels)] = value
        return out

    def queries(self, phases: list[Phase]) -> int:
        """How many queries collect() runs, for the progress bar."""
        check = 1 if isinstance(self.host, HostLayer) else 2
        layers: tuple[Layer, ...] = (self.host, *db_layers(self.goals.selector))
        # Per phase: the devices, each layer's operations, time and bytes per op, and the judged
        # small I/Os (judged_ios: which LUNs have the histogram, then its small sum and count per op).
        per_phase = (
            1
            + sum(2 + (layer.bytes(op, "1s") is not None) for layer in layers for op in averages.OPS)
            + 1
            + 2 * len(averages.OPS)
        )
        histograms = 1 + sum(1 for e in ENGINES if e.waits is not None and e.waits.histogram is not None)
        return check + len(phases) * per_phase + 2 * len(averages.OPS) + histograms

    def _check(self, promql: str, at: float) -> bool:
        found = bool(self.prometheus.query(promql, at))
        self.progress(promql)
        return found

    def check_data(self, start: float, end: float) -> None:
        window = f"{max(1, round(end - start))}s"
        host = self.host
        if isinstance(host, HostLayer):
            promql = f"count(last_over_time({self.selector(ground.DEVICE_READS.name)}[{window}]))"
            if not self._check(promql, end):
                raise ReportError(
                    f"no lunlat series ({ground.DEVICE_READS.name}{{{self.goals.selector}}}) "
                    f"between {_iso(start)} and {_iso(end)}"
                )
            return
        source, reads = self.goals.host_layer.source, host.counters["reads"]
        promql = f"count(last_over_time({reads}{{{host.selector}}}[{window}]))"
        if not self._check(promql, end):
            raise ReportError(
                f"no {source} series ({reads}{{{host.selector}}}) between {_iso(start)} and {_iso(end)}: "
                "the goals' host_layer.selector must pick its scrape job"
            )
        # The exporter's counters are there: without a LUN joined to them the host layer is empty,
        # which the report would show as "no host latency" rather than as the wrong join it is.
        if not self._check(f"count({host.operations('read', window)})", end):
            ex, lu = host.exporter_host, host.lunlat_host
            raise ReportError(
                f"{source} series found, but none joins lunlat's LUNs ({self.goals.selector}) between "
                f"{_iso(start)} and {_iso(end)}: the host ({ex.label} =~ {ex.regex!r} on {source}'s side, "
                f"{lu.label} =~ {lu.regex!r} on lunlat's) and the {host.key} must be equal on both sides; "
                "set host_layer.exporter_host and lunlat_host in the goals (docs/host-layer.md)"
            )

    def _goal(self, labels: dict[str, str]) -> tuple[float | None, float]:
        """(goal in seconds, idle guard) as the rules judge these labels; no goal: not judged."""
        tier = self.goals.judged(labels)
        return (None, 0.0) if tier is None else (tier[0] / 1000, tier[1])

    def _judge(self, labels: dict[str, str], op: str) -> JudgedKind:
        """Which of a host-layer LUN's `op` I/Os its tier judges (goals `judge`). A LUN no database
        uses takes the default's, as its goal series in the rules does (lunlat_rules.tiers.goal_tiers)."""
        tier = self.goals.tier(labels) if labels.get("role") else self.goals.default
        return tier.judged_io(op)

    def judged_ios(self, phase: Phase) -> JudgedIos:
        """The small I/Os of `phase` per LUN and op, from the per-I/O histogram, as the rules' judged
        latency reads them (lunlat.promql.layers.small_ios), and which LUNs have the histogram at all."""
        # As the rules' `has_histogram`: any of the LUN's histogram series, whatever op and size. A LUN
        # with it but without small I/Os has nothing judged (idle), never its average instead.
        promql = (
            f"group by (job, instance, lun) "
            f"(last_over_time({self.selector(ground.DEVICE_IO_LATENCY.name + '_count')}[{phase.window}]))"
        )
        with_histogram = set(self._vector(promql, phase.end, ("job", "instance", "lun")))
        small: dict[tuple[str, str], dict[tuple[str, ...], float]] = {}
        for op in averages.OPS:
            for part in ("sum", "count"):
                small[(op, part)] = self._vector(
                    small_ios(self.goals.selector, op, part, phase.window), phase.end, LUN_LABELS
                )
        return JudgedIos(with_histogram, small)

    def devices(self, phase: Phase) -> dict[tuple[str, str], str]:
        """(instance, lun) -> the LUN's device, from lunlat_lun_info (none for windows_exporter's
        volumes: lunlat publishes no device there)."""
        promql = f"max by (instance, lun, device) (last_over_time({self.info}[{phase.window}]))"
        found = self._vector(promql, phase.end, ("instance", "lun", "device"))
        return {(instance, lun): device for instance, lun, device in found}

    def layer_rows(
        self,
        layer: Layer,
        phase: Phase,
        devices: dict[tuple[str, str], str],
        judged: JudgedIos | None = None,
    ) -> list[Row]:
        """A layer's rows of `phase`: the rules' per-LUN rates over the whole phase, times its
        seconds (the phase's increase). A host layer's rows judge what `judged` holds where the
        tier judges small I/Os; a database layer's judge their own average, as the rules do."""
        rows = []
        for op in averages.OPS:
            ops = self._vector(layer.operations(op, phase.window), phase.end, LUN_LABELS)
            spent = self._vector(layer.time(op, phase.window), phase.end, LUN_LABELS)
            moved_query = layer.bytes(op, phase.window)
            moved = self._vector(moved_query, phase.end, LUN_LABELS) if moved_query else {}
            for key, rate in ops.items():
                labels = dict(zip(LUN_LABELS, key, strict=True))
                labels["device"] = devices.get((labels["instance"], labels["lun"]), "")
                goal, min_iops = self._goal(labels)
                throughput = moved.get(key)
                kind: JudgedKind = "database" if isinstance(layer, DbLayer) else self._judge(labels, op)
                judged_time = judged_operations = None
                if kind == "small":
                    if (
                        judged is None
                        or (labels["job"], labels["instance"], labels["lun"]) not in judged.with_histogram
                    ):
                        kind = "all"  # no histogram of this LUN: every I/O, as the rules fall back
                    else:
                        judged_time = judged.small[(op, "sum")].get(key, 0.0) * phase.seconds
                        judged_operations = judged.small[(op, "count")].get(key, 0.0) * phase.seconds
                rows.append(
                    Row(
                        phase,
                        layer.name,
                        labels,
                        op,
                        spent.get(key, 0.0) * phase.seconds,
                        rate * phase.seconds,
                        None if throughput is None else throughput * phase.seconds,
                        goal,
                        min_iops,
                        kind,
                        judged_time,
                        judged_operations,
                    )
                )
        return rows

    def curves(
        self, start: float, end: float, step: int
    ) -> tuple[dict[tuple[str, str], dict[str, list[tuple[float, float]]]], ...]:
        window = f"{max(MIN_RATE_WINDOW, 2 * step)}s"
        latency: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
        iops: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
        for op in averages.OPS:
            # The host layer's per-LUN rates over the window: Δ time / Δ operations where there was one.
            ops = self.host.operations(op, window)
            for target, promql in ((latency, f"{self.host.time(op, window)}\n/\n({ops} > 0)"), (iops, ops)):
                for series in self.prometheus.query_range(promql, start, end, step):
                    metric = series["metric"]
                    points = [(float(t), float(v)) for t, v in series["values"] if math.isfinite(float(v))]
                    target.setdefault((metric.get("instance", ""), metric.get("lun", "")), {})[op] = points
                self.progress(promql)
        return latency, iops

    def histograms(self, start: float, end: float) -> dict[str, list[tuple[float, float]]]:
        window = f"{max(1, round(end - start))}s"
        found: dict[str, list[tuple[float, float]]] = {}
        wanted: list[tuple[ground.MetricSpec, tuple[str, ...], str]] = [
            (ground.DEVICE_IO_LATENCY, ("instance", "lun", "op"), "{lun} {op} ({instance}), per I/O")
        ]
        for engine in ENGINES:
            waits = engine.waits
            if waits is not None and waits.histogram is not None:
                wanted.append(
                    (waits.histogram, ("database", waits.label), f"{{database}}: {{{waits.label}}}")
                )
        for spec, by, title in wanted:
            promql = (
                f"sum by ({', '.join(by)}, le) (increase({self.selector(spec.name + '_bucket')}[{window}]))"
            )
            groups: dict[tuple[str, ...], list[tuple[float, float]]] = {}
            for sample in self.prometheus.query(promql, end):
                metric = sample["metric"]
                groups.setdefault(_key(metric, by), []).append(
                    (float(metric.get("le", "+Inf")), float(sample["value"][1]))
                )
            self.progress(promql)
            for key, buckets in groups.items():
                buckets.sort()
                counts = [(le, c - (buckets[i - 1][1] if i else 0.0)) for i, (le, c) in enumerate(buckets)]
                if sum(c for _, c in counts) > 0:
                    found[title.format(**dict(zip(by, key, strict=True)))] = counts
        return found

    def collect(self, start: float, end: float, phases: list[Phase]) -> Collected:
        self.check_data(start, end)
        rows: list[Row] = []
        for phase in phases:
            devices = self.devices(phase)
            rows += self.layer_rows(self.host, phase, devices, self.judged_ios(phase))
            for layer in db_layers(self.goals.selector):
                rows += self.layer_rows(layer, phase, devices)
        step = choose_step(end - start)
        latency, iops = self.curves(start, end, step)
        return Collected(phases, rows, step, start, end, latency, iops, self.histograms(start, end))
