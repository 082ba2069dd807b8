"""What an engine package tells the rest of lunlat (`engines/__init__.py`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from lunlat.dbtarget import DatabaseTarget
from lunlat.metricspec import Capability, MetricSpec

if TYPE_CHECKING:  # the factory module imports the config, which imports the engines
    from lunlat.sources.base import Source
    from lunlat.sources.factory import BuildError, Context

# The labels of every engine's per-file series. `db_instance` rather than `instance`: Prometheus
# owns `instance` (the scrape target) and would rename an exporter's `instance` to
# `exported_instance` at every scrape. `workload` (from the target's config) is on the file series
# too, so the db-layer recording rules carry it like the host layer's and the goal overrides by
# workload apply to both layers. `db` is the database inside the instance (a PDB, a SQL Server database).
DB_FILE_LABELS: tuple[str, ...] = ("database", "workload", "db", "db_instance", "file", "role", "lun")

# A problem with a target this host could not serve: (key path inside the engine's list, what is wrong).
TargetProblem = tuple[tuple[int | str, ...], str]


@dataclass(frozen=True, slots=True)
class FileLayer:
    """The per-file counters from which the rules, the report and the dashboards compute a database's
    own latency per LUN (the `db` layer): time / operations per direction, summed per LUN, database
    and role. `*_queued`: time inside `*_time` that is not the device's (a throttle's queue): left out
    of the layer's latency, which is the device's share. `judged`: PromQL label matchers the layer adds
    to every selector of these counters, so the layer (and what the rules judge) is the part of the I/O
    the engine's clients wait for, where the engine's series split it (PostgreSQL's `kind`); the
    other series stay published and drawn, unjudged. Empty: every series of the counters."""

    reads: MetricSpec
    writes: MetricSpec
    read_time: MetricSpec
    write_time: MetricSpec
    read_bytes: MetricSpec | None = None
    write_bytes: MetricSpec | None = None
    read_queued: MetricSpec | None = None
    write_queued: MetricSpec | None = None
    judged: str = ""


@dataclass(frozen=True, slots=True)
class WaitLayer:
    """An engine's per-wait series and the waits the rules and dashboards single out.

    `label` names the wait in its series (`event`, `wait_type`); every wait series also carries
    `measure`, what one wait is by the wait's reference page (`measure_of`): `per_io` (one I/O),
    `per_commit` (a commit's wait around its log write), `per_latch` (one task's wait on a page's
    latch), `time_spent` (no unit per wait). `log_write` is the wait of the local log write as the
    engine keeps it (Oracle's per-I/O 'log file parallel write'; SQL Server keeps only the commit's
    WRITELOG), `replica` a synchronous replica's share (role="replica") of the same measure: the
    rules set one beside the other and never add waits of different measures. `data_read` is the
    wait a query feels for a data read.
    """

    waits: MetricSpec
    time: MetricSpec
    label: str
    log_write: str
    replica: str
    data_read: str
    measure_of: Callable[[str], str]
    histogram: MetricSpec | None = None  # the waits' latency distribution, where the engine keeps one
    # The histogram's finite buckets, (upper bound in seconds, its `le` label), ascending: the rules
    # count a database's judged waits at or below its goal from them (the SLO per I/O, layer db).
    histogram_buckets: tuple[tuple[float, str], ...] = ()

    def __post_init__(self) -> None:
        log, replica = self.measure_of(self.log_write), self.measure_of(self.replica)
        if not log or log != replica:
            raise ValueError(
                f"{self.log_write!r} is measured {log or 'nowhere'}, {self.replica!r} {replica or 'nowhere'}: "
                "a replica's share needs waits of one measure (set beside each other, never added across)"
            )


# --- the engine's rows of the Database I/O dashboard, as data ------------------------------------
# The exporter draws nothing: the dashboards' generator (dashboards/, lunlat-dashboards) turns these
# into panels, adding the dashboard's variables (job, instance, database, role) to every selector.
# `fixed` matchers are label -> value, or label -> '=~"regex"'.


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


@dataclass(frozen=True, slots=True)
class Hints:
    """How the alerts' hints name, to a reader of this engine, what a slow LUN of a role costs
    ("Oracle 'db file sequential read'"); None: not named."""

    data_read: str | None = None  # the wait of one data read
    log_write: str | None = None  # what a commit waits for
    log_throttle: str | None = None  # waits of a governed log rate (role throttle)


@dataclass(frozen=True, slots=True)
class Engine:
    """One database engine: see `engines/__init__.py`."""

    key: str  # the config's section, the sources' name prefix and the rules' `engine` label
    title: str  # how people name it ("SQL Server")
    target: type[DatabaseTarget]  # one entry of the config's section
    extra: str  # pip install 'lunlat[<extra>]' brings the driver
    driver_module: str  # what the extra installs, imported to check it is there
    driver_name: str  # how its users name the driver ("python-oracledb")
    metrics: tuple[MetricSpec, ...]
    capabilities: tuple[Capability, ...]
    files: FileLayer
    waits: WaitLayer | None  # None: the engine keeps no per-wait counters
    # The module whose build(context) makes the engine's sources. Imported at the first build, not
    # here: a source imports the config, which imports the engines.
    source_module: str
    # What else the driver needs on this host (an ODBC driver registered with unixODBC), checked by
    # check-config once the driver imports.
    host_problems: Callable[[Sequence[DatabaseTarget]], list[TargetProblem]] | None = None
    install_hint: str = ""  # said after `pip install 'lunlat[<extra>]'` when the driver is missing
    dashboard: tuple[DashboardRow, ...] = ()  # its rows of the Database I/O dashboard
    hints: Hints = Hints()

    def build(self, context: Context) -> Sequence[Source] | BuildError:
        """The sources of the config's targets of this engine, or why they cannot be built."""
        module = importlib.import_module(self.source_module)
        built: Sequence[Source] | BuildError = module.build(context)
        return built
