"""The latency goal definition (`alerts/goals.yaml`): default goal, overrides, breach, tail, SLO, health,
paths, drift, and the array exporters whose own latency is set beside the host's.

Rules, dashboards and docs are generated from this one file (docs/contract.md §2: the goal is not exporter
config). Validation is strict like the exporter config: unknown keys, bad durations, regexes or
matchers are errors naming file, line and key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from lunlat.promql.recorded import DRIFT_INTERVAL
from lunlat.yamlmodel import LocatedError, Strict, check_regex, load_model, parse_model

Severity = Literal["page", "warning"]
# The tail alert may also open a ticket: a tail under a fine average is rarely worth a page.
TailSeverity = Literal["page", "warning", "ticket"]
# Labels of a judged latency series an override can match on.
MatchLabel = Literal["workload", "database", "role"]
# Which I/Os of a LUN's host layer its goal judges, per op (docs/alerting.md, "What is judged"):
# `small`, the I/Os of the per-I/O histogram's small size class (ground.BIO_SIZES: up to 16 KiB, the
# database's one- and two-page transactional I/O), or `all` of them (the LUN's average). Without the
# histogram on a host, every I/O is judged whatever this says, and the alert says so.
Judged = Literal["small", "all"]

# Prometheus durations: one or more <number><unit>, largest unit first ("1h30m").
_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$")
_UNIT_SECONDS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
# One PromQL label matcher: name, operator, double- or single-quoted value.
_MATCHER = re.compile(
    r"""\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*"""
)


# A Prometheus metric name and a label name (prometheus.io/docs/concepts/data_model: "Metric names
# and labels"); `__`-prefixed label names are reserved for Prometheus' own use.
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# An array's name becomes the `array` label value of its recorded series and is read by people.
_ARRAY_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")

# The unit an array exporter publishes latency in, and how many of it make a second.
LatencyUnit = Literal["seconds", "milliseconds", "microseconds", "nanoseconds"]
PER_SECOND: dict[str, str] = {
    "seconds": "1",
    "milliseconds": "1e3",
    "microseconds": "1e6",
    "nanoseconds": "1e9",
}


def duration_seconds(text: str) -> float:
    """Seconds in a Prometheus duration; ValueError names what is wrong."""
    match = _DURATION.match(text)
    if not text or match is None or not any(match.groups()):
        raise ValueError(f"not a Prometheus duration like 30s, 5m or 1h30m: {text!r}")
    return sum(int(n) * unit for n, unit in zip(match.groups(), _UNIT_SECONDS, strict=True) if n)


def check_matchers(value: str) -> str:
    """A pydantic validator: `value` is a comma-separated list of PromQL label matchers."""
    # A comma inside a quoted value splits wrongly; rejoin until each part is a whole matcher.
    matchers, pending = [], ""
    for part in value.split(","):
        pending = f"{pending},{part}" if pending else part
        if _MATCHER.fullmatch(pending):
            matchers.append(pending)
            pending = ""
    if pending or not matchers:
        raise ValueError(f'not a list of PromQL label matchers like job="lunlat": {value!r}')
    return value


def _metric_name(value: str) -> str:
    if not _METRIC_NAME.match(value):
        raise ValueError("not a Prometheus metric name")
    return value


def _label_name(value: str) -> str:
    if not _LABEL_NAME.match(value) or value.startswith("__"):
        raise ValueError("not a Prometheus label name (or one reserved by Prometheus)")
    return value


_Label = TypeVar("_Label", bound=str)


def _patterns(value: dict[_Label, str], labels: str) -> dict[_Label, str]:
    """A `match:` of label regexes: at least one, each one RE2 (Prometheus) accepts."""
    if not value:
        raise ValueError(f"name at least one of {labels}")
    for pattern in value.values():
        check_regex(pattern)  # RE2 (Prometheus) takes a subset of Python's syntax: the common part
    return value


def _any_duration(text: str) -> str:
    """A `for`: any Prometheus duration, 0s included (fire on the first evaluation that sees it)."""
    duration_seconds(text)
    return text


def _duration(text: str) -> str:
    if duration_seconds(text) <= 0:
        raise ValueError(f"must be longer than zero: {text!r}")
    return text


class JudgedOps(Strict):
    """Which I/Os the goal judges, per op (Judged); an override's unset op keeps the default's."""

    read: Judged | None = None
    write: Judged | None = None

    def of(self, op: str) -> Judged | None:
        return self.read if op == "read" else self.write


class Tier(Strict):
    """What the default sets and an override may change."""

    goal_ms: float | None = Field(default=None, gt=0, description="Average latency objective, ms.")
    severity: Severity | None = None
    min_iops: float | None = Field(default=None, ge=0, description="Idle guard, operations per second.")
    judge: JudgedOps | None = Field(default=None, description="Which I/Os the goal judges, per op.")
    throughput_floor_mib_s: float | None = Field(
        default=None,
        gt=0,
        description="Throughput a busy LUN must reach, MiB/s (reads and writes together): DSS scans.",
    )


# OLTP reads are judged on the small I/Os the database waits for one page at a time; writes on every
# write, since a log writer's commit-sized writes grow with group commit and each is waited for.
DEFAULT_JUDGE = JudgedOps(read="small", write="all")


class DefaultTier(Tier):
    goal_ms: float = Field(default=1.0, gt=0)
    severity: Severity = "page"
    min_iops: float = Field(default=10.0, ge=0)
    judge: JudgedOps = Field(default_factory=lambda: DEFAULT_JUDGE)

    @field_validator("judge")
    @classmethod
    def _every_op(cls, value: JudgedOps) -> JudgedOps:
        return JudgedOps(read=value.read or DEFAULT_JUDGE.read, write=value.write or DEFAULT_JUDGE.write)

    def judged_io(self, op: str) -> Judged:
        """Which of the LUN's `op` I/Os this tier judges."""
        return self.judge.of(op) or "all"


class Override(Tier):
    match: dict[MatchLabel, str]

    @field_validator("match")
    @classmethod
    def _match(cls, value: dict[MatchLabel, str]) -> dict[MatchLabel, str]:
        return _patterns(value, "workload, database, role")

    @model_validator(mode="after")
    def _changes_something(self) -> Override:
        if all(
            value is None
            for value in (self.goal_ms, self.severity, self.min_iops, self.judge, self.throughput_floor_mib_s)
        ):
            raise ValueError(
                "an override must set goal_ms, severity, min_iops, judge or throughput_floor_mib_s"
            )
        return self


# What a LUN no database uses is judged as: the same severities as the tail alert, or not at all.
UnownedSeverity = Literal["page", "warning", "ticket", "none"]


class Unowned(Strict):
    """A LUN no database uses: no `role` on its lunlat_lun_info (neither a database source's file map
    nor a `luns:` entry gave it one): a root disk, a backup or scratch LUN. Its latency is shown but
    is no database's goal: it is judged at its own goal and severity, or (`none`) not at all."""

    goal_ms: float | None = Field(default=None, gt=0, description="Its goal, ms; the default's when unset.")
    severity: UnownedSeverity = "none"
    min_iops: float | None = Field(
        default=None, ge=0, description="Its idle guard; the default's when unset."
    )


class Breach(Strict):
    for_: str = Field(default="15s", alias="for")

    _for = field_validator("for_")(_any_duration)


class Tail(Strict):
    """The tail alert: a LUN's average at or below its goal while more than `above_percent` % of its
    single I/Os (the per-I/O histogram, lunlat_device_io_latency_seconds) are slower than the goal,
    for `for`. Judged like the breach alerts: over the breach window, busy LUNs only (idle guard)."""

    above_percent: float = Field(
        default=5.0, gt=0, lt=100, description="Share of I/Os slower than the goal that is too many, %."
    )
    for_: str = Field(default="15m", alias="for")
    severity: TailSeverity = "ticket"

    _for = field_validator("for_")(_any_duration)


class Throughput(Strict):
    """The throughput floor's ticket (a tier's `throughput_floor_mib_s`): a LUN moving fewer MiB/s than
    its floor over `window` while I/O waited on it the whole time (an average of at least `queue_min`
    I/Os in flight: the workload wanted more than it got), for `for`."""

    window: str = "5m"
    queue_min: float = Field(default=1.0, gt=0, description="Average I/Os in flight that mark a busy LUN.")
    for_: str = Field(default="10m", alias="for")
    severity: TailSeverity = "ticket"

    _window = field_validator("window")(_duration)

    _for = field_validator("for_")(_any_duration)


class BurnWindow(Strict):
    long: str
    short: str
    burn_rate: float = Field(gt=0)

    _durations = field_validator("long", "short")(_duration)

    @model_validator(mode="after")
    def _short_is_shorter(self) -> BurnWindow:
        if duration_seconds(self.short) >= duration_seconds(self.long):
            raise ValueError(f"short window {self.short} must be shorter than long window {self.long}")
        return self


# Labels of an SLO series (recorded.SLO_LABELS) an objective can match on.
SloMatchLabel = Literal["workload", "database", "role", "op"]


class SloObjective(Strict):
    """An objective for the SLOs whose labels match (PromQL regexes, fully anchored; first match
    wins, `slo.objective` otherwise)."""

    match: dict[SloMatchLabel, str]
    objective: float = Field(gt=0, lt=1)

    @field_validator("match")
    @classmethod
    def _match(cls, value: dict[SloMatchLabel, str]) -> dict[SloMatchLabel, str]:
        return _patterns(value, "workload, database, role, op")

    @property
    def error_budget(self) -> float:
        return round(1 - self.objective, 12)


class Slo(Strict):
    objective: float = Field(
        default=0.99,
        gt=0,
        lt=1,
        description="Fraction of judged I/Os (judged minutes where no per-I/O histogram exists) at or below goal.",
    )
    objectives: list[SloObjective] = Field(default_factory=list)
    period: str = "30d"
    fast: list[BurnWindow] = Field(
        default_factory=lambda: [
            BurnWindow(long="1h", short="5m", burn_rate=14.4),
            BurnWindow(long="6h", short="30m", burn_rate=6),
        ]
    )
    slow: list[BurnWindow] = Field(
        default_factory=lambda: [
            BurnWindow(long="1d", short="2h", burn_rate=3),
            BurnWindow(long="3d", short="6h", burn_rate=1),
        ]
    )

    _period = field_validator("period")(_duration)

    @model_validator(mode="after")
    def _windows(self) -> Slo:
        if not self.fast or not self.slow:
            raise ValueError("fast and slow each need at least one window pair")
        period = duration_seconds(self.period)
        for pair in (*self.fast, *self.slow):
            if duration_seconds(pair.long) > period:
                raise ValueError(f"window {pair.long} is longer than the SLO period {self.period}")
        return self

    @property
    def error_budget(self) -> float:
        return round(1 - self.objective, 12)

    def windows(self) -> list[str]:
        """Every window a burn alert reads, shortest first."""
        return sorted(
            {w for pair in (*self.fast, *self.slow) for w in (pair.long, pair.short)}, key=duration_seconds
        )


class Health(Strict):
    exporter_down_for: str = "2m"
    exporter_absent_for: str = "5m"
    source_down_for: str = "2m"
    source_errors_window: str = "15m"
    source_capability_missing_for: str = "15m"
    # A database's file map older than its target's file_map_max_age_seconds, or missing (dropped as
    # too old, or never read): the ticket says so, so labels gone empty are never silent (issue 43).
    file_map_stale_for: str = "5m"

    _durations = field_validator("*")(_duration)


class Paths(Strict):
    """A multipath LUN that lost a path (lunlat_lun_paths, lunlat_lun_paths_failed)."""

    for_: str = Field(default="1m", alias="for")
    # The working paths are compared with the most paths the LUN had over this window, so the alert
    # lasts while multipathd drops a deleted path from the map (the count goes down, no path failed).
    lookback: str = "1d"
    severity: Severity = "warning"

    _for = field_validator("for_")(_any_duration)

    _lookback = field_validator("lookback")(_duration)


# A drift opens a ticket (or a warning), never a page: the LUN is still within its goal.
DriftSeverity = Literal["warning", "ticket"]


class Drift(Strict):
    """Drift before the breach (docs/alerting.md, "Drift before the breach"): a LUN's judged latency,
    averaged over `window`, at least `ratio` times its same-hour-of-week baseline (the same window's
    average 1 … `weeks` weeks ago, their median) and at least `min_rise_ms` above it, while still
    within its goal, for `for`. Every figure is the project's own (no source gives them)."""

    ratio: float = Field(default=2.0, gt=1, description="k: how many times its baseline the LUN must run at.")
    min_rise_ms: float = Field(
        default=0.2,
        ge=0,
        description="The least rise over the baseline that counts, ms (0.05 → 0.12 is noise).",
    )
    window: str = "1h"
    weeks: int = Field(
        default=2, ge=1, le=4, description="How many past weeks the baseline is the median of (retention!)."
    )
    for_: str = Field(default="30m", alias="for")
    severity: DriftSeverity = "ticket"

    _for = field_validator("for_")(_any_duration)

    @field_validator("window")
    @classmethod
    def _window(cls, value: str) -> str:
        # The window's average is recorded once per DRIFT_INTERVAL: a shorter window would skip I/O
        # between two records (and 1m would be the breach window's name again); over a day it is no
        # longer an hour of the week.
        seconds = duration_seconds(value)
        interval = duration_seconds(DRIFT_INTERVAL)
        if not interval <= seconds <= 86400:
            raise ValueError(
                f"must be from {DRIFT_INTERVAL} (how often the drift group records it) to 1d "
                f"(a same-hour-of-week baseline): {value!r}"
            )
        return value

    def offsets(self) -> list[str]:
        """The baseline's offsets, one per past week: 1w, 2w …"""
        return [f"{week}w" for week in range(1, self.weeks + 1)]


class ArraySeries(Strict):
    """One operation's latency series of an array exporter: a metric, and the matchers that pick this
    operation's series of it when reads and writes share the metric (a `dimension` or `op` label)."""

    metric: str
    match: str | None = Field(
        default=None, description='PromQL label matchers, e.g. dimension="usec_per_read_op".'
    )

    _metric = field_validator("metric")(_metric_name)

    @field_validator("match")
    @classmethod
    def _match(cls, value: str | None) -> str | None:
        return None if value is None else check_matchers(value)


class NaaSource(Strict):
    """An info series that carries the LUN identity the latency series lack, joined on `join_on`
    (not `on`: YAML 1.1, which PyYAML reads, takes a bare `on` for the boolean true)."""

    metric: str
    join_on: list[str] = Field(min_length=1, description="Labels the latency and info series share per LUN.")

    _metric = field_validator("metric")(_metric_name)

    @model_validator(mode="before")
    @classmethod
    def _bare_on(cls, data: object) -> object:
        if isinstance(data, dict) and True in data:
            raise ValueError("a bare `on` key reads as YAML's true: name the join labels `join_on`")
        return data

    @field_validator("join_on")
    @classmethod
    def _on(cls, value: list[str]) -> list[str]:
        for label in value:
            _label_name(label)
        if "naa" in value:
            raise ValueError("`naa` is what the join adds; join on the labels that name the LUN")
        return value


class ArrayNaa(Strict):
    """Where a LUN's NAA (lowercase hex, no prefix: lunlat_lun_info's `naa`) comes from: label `label`
    of the latency series, or of `from`'s info series; rewritten as `replacement` from `regex`'s groups
    (PromQL label_replace: RE2, fully anchored, `$1` the first group). Series whose label does not
    match `regex` are left out, never joined by a wrong NAA."""

    label: str = "naa"
    regex: str | None = None
    replacement: str = "$1"
    from_: NaaSource | None = Field(default=None, alias="from")

    _label = field_validator("label")(_label_name)

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        check_regex(value)  # RE2 (Prometheus) takes a subset of Python's syntax: the common part
        if value is not None and re.compile(value).groups < 1:
            raise ValueError("needs a capture group for the replacement to use")
        return value

    @property
    def rewritten(self) -> bool:
        """Whether PromQL must make `naa` (label_replace), or the series carry it as it is."""
        return self.label != "naa" or self.regex is not None or self.replacement != "$1"


class Array(Strict):
    """An array exporter's per-LUN (per-volume) latency, read beside the host's (recorded in group lunlat-latency-read or -write)."""

    name: str = Field(description="The `array` label of its recorded series.")
    selector: str | None = Field(default=None, description="PromQL matchers added to every series it reads.")
    read: ArraySeries
    write: ArraySeries
    unit: LatencyUnit
    naa: ArrayNaa = Field(default_factory=ArrayNaa)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _ARRAY_NAME.match(value):
            raise ValueError("lower-case letters, digits, _ and -, starting with a letter")
        return value

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        return None if value is None else check_matchers(value)

    def series(self, op: str) -> ArraySeries:
        return self.read if op == "read" else self.write


# Where the host layer's counters come from: lunlat's own diskstats source, or an exporter the user
# already runs (docs/host-layer.md says what each gives).
HostLayerSource = Literal["lunlat", "node_exporter", "windows_exporter"]


class HostJoin(Strict):
    """Which label names a host on one side of the host-layer join, and the part of it that does
    (`regex`, RE2 fully anchored like label_replace, its first group the host)."""

    label: str
    regex: str = "(.+)"

    _label = field_validator("label")(_label_name)

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str) -> str:
        check_regex(value)
        if re.compile(value).groups < 1:
            raise ValueError("needs a capture group: its first group is the host")
        return value


# node_exporter and lunlat are two scrape targets on one host: the same host name, different ports.
# The default takes the host from `instance` without its port (an optional ":<digits>"), which always
# matches, so no series is left without a host and joined to another host's by an empty one.
INSTANCE_HOST = HostJoin(label="instance", regex="(.+?)(?::[0-9]+)?")
# windows_exporter runs on the SQL Server host, lunlat elsewhere: lunlat's instance names no database
# host. The Windows target carries the `database` label of lunlat's target for that server (a label
# of its scrape config), joined to the `database` label of the database's file series.
DATABASE_HOST = HostJoin(label="database")


class HostLayerChoice(Strict):
    """Where the rules' host layer (layer="host") reads its counters: lunlat's own (default), or
    node_exporter's diskstats (joined to lunlat_lun_info on host and device), or windows_exporter's
    logical_disk (joined to each database file's volume). See docs/host-layer.md."""

    source: HostLayerSource = "lunlat"
    selector: str | None = Field(
        default=None, description='PromQL matchers picking the exporter\'s series, e.g. job="node".'
    )
    exporter_host: HostJoin | None = Field(default=None, description="The host on the exporter's series.")
    lunlat_host: HostJoin | None = Field(default=None, description="The host on lunlat's series.")

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        return None if value is None else check_matchers(value)

    @model_validator(mode="after")
    def _complete(self) -> HostLayerChoice:
        if self.source == "lunlat":
            if self.selector or self.exporter_host or self.lunlat_host:
                raise ValueError(
                    "source lunlat reads lunlat's own series: selector and hosts are for an exporter"
                )
            return self
        if not self.selector:
            raise ValueError(
                f'source {self.source} needs `selector`, the matchers of its scrape job (e.g. job="node")'
            )
        return self

    def hosts(self) -> tuple[HostJoin, HostJoin]:
        """(the exporter's, lunlat's) host labels, each side's default where unset."""
        default = INSTANCE_HOST if self.source == "node_exporter" else DATABASE_HOST
        return self.exporter_host or default, self.lunlat_host or default


class Goals(Strict):
    selector: str = Field(
        default='job="lunlat"', description="PromQL matchers picking lunlat's scrape job(s)."
    )
    runbook_base_url: str = "https://github.com/lunlat/lunlat/blob/main/alerts/runbooks"
    default: DefaultTier = Field(default_factory=DefaultTier)
    overrides: list[Override] = Field(default_factory=list)
    # Between the overrides and the default: an override naming such a LUN still wins.
    unowned: Unowned = Field(default_factory=Unowned)
    breach: Breach = Field(default_factory=Breach)
    tail: Tail = Field(default_factory=Tail)
    throughput: Throughput = Field(default_factory=Throughput)
    slo: Slo = Field(default_factory=Slo)
    health: Health = Field(default_factory=Health)
    paths: Paths = Field(default_factory=Paths)
    drift: Drift = Field(default_factory=Drift)
    # None by default: which arrays there are is configuration, not code.
    arrays: list[Array] = Field(default_factory=list)
    host_layer: HostLayerChoice = Field(default_factory=HostLayerChoice)

    _selector = field_validator("selector")(check_matchers)

    @model_validator(mode="after")
    def _array_names(self) -> Goals:
        seen: dict[str, int] = {}
        for index, array in enumerate(self.arrays):
            if array.name in seen:
                raise LocatedError(
                    f"another array is named {array.name!r}: their series would mix",
                    ("arrays", index, "name"),
                    ("arrays", seen[array.name], "name"),
                )
            seen[array.name] = index
        return self

    @field_validator("runbook_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://\S+$", value):
            raise ValueError(f"not an http(s) URL: {value!r}")
        return value.rstrip("/")

    def tier(self, labels: dict[str, str]) -> DefaultTier:
        """The goal a series with these labels is judged against (first matching override wins)."""
        for override in self.overrides:
            if all(re.fullmatch(p, labels.get(k, "")) for k, p in override.match.items()):
                return self.resolve(override)
        return self.default

    def judged(self, labels: dict[str, str]) -> tuple[float, float] | None:
        """(goal_ms, min_iops) the rules judge a LUN with these labels against: one no database uses
        (no `role`) by `unowned`, None when that says not to judge it; any other by `tier`."""
        if labels.get("role"):
            tier = self.tier(labels)
            return tier.goal_ms, tier.min_iops
        unowned = self.unowned_tier()
        return None if unowned is None else (unowned[0], unowned[2])

    def judged_io(self, labels: dict[str, str], op: str) -> Judged:
        """Which of the `op` I/Os of a LUN with these labels the rules judge: its tier's, or the
        default's for a LUN no database uses (its `unowned` goal has no `judge` of its own)."""
        return (self.tier(labels) if labels.get("role") else self.default).judged_io(op)

    def resolve(self, override: Override) -> DefaultTier:
        default, judge = self.default, override.judge or JudgedOps()
        return DefaultTier(
            goal_ms=override.goal_ms if override.goal_ms is not None else default.goal_ms,
            severity=override.severity or default.severity,
            min_iops=override.min_iops if override.min_iops is not None else default.min_iops,
            judge=JudgedOps(read=judge.read or default.judge.read, write=judge.write or default.judge.write),
            throughput_floor_mib_s=(
                override.throughput_floor_mib_s
                if override.throughput_floor_mib_s is not None
                else default.throughput_floor_mib_s
            ),
        )

    def unowned_tier(self) -> tuple[float, str, float] | None:
        """(goal_ms, severity, min_iops) of a LUN no database uses; None when it is not judged."""
        unowned = self.unowned
        if unowned.severity == "none":
            return None
        return (
            unowned.goal_ms if unowned.goal_ms is not None else self.default.goal_ms,
            unowned.severity,
            unowned.min_iops if unowned.min_iops is not None else self.default.min_iops,
        )


def parse_goals(text: str, source: str = "<goals>") -> Goals:
    return parse_model(text, source, Goals)


def load_goals(path: Path) -> Goals:
    return load_model(path, Goals)


# Where the commands look for the goals when none is named: the repository's, run from its root.
DEFAULT_GOALS_FILE = Path("alerts/goals.yaml")


def goals_or_default(path: Path | None) -> Goals:
    """The goals in `path`; with none named, DEFAULT_GOALS_FILE where it exists, else the built-in
    defaults (a 1 ms goal for every LUN): a command run outside the repository still judges. A named
    file that cannot be read or is wrong raises ConfigError, as load_goals does."""
    if path is None:
        if not DEFAULT_GOALS_FILE.is_file():
            return Goals()
        path = DEFAULT_GOALS_FILE
    return load_goals(path)
