"""What an engine package tells the rest of lunlat (`engines/__init__.py`): its `Engine`, data.

An engine names its target type and its source class; the one build here (`Engine.build`) makes a
source per target of its config section, typed by the target, with no engine code of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from lunlat.containers import ContainerMapper
from lunlat.dbtarget import DatabaseTarget
from lunlat.engines.build import per_target
from lunlat.ground import Capability, MetricSpec
from lunlat.sources.base import Source
from lunlat.sources.factory import BuildError, Context

TargetT = TypeVar("TargetT", bound=DatabaseTarget)
TargetT_contra = TypeVar("TargetT_contra", bound=DatabaseTarget, contravariant=True)

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


@dataclass(frozen=True, slots=True)
class Hints:
    """How the alerts' hints name, to a reader of this engine, what a slow LUN of a role costs
    ("Oracle 'db file sequential read'"); None: not named."""

    data_read: str | None = None  # the wait of one data read
    log_write: str | None = None  # what a commit waits for
    log_throttle: str | None = None  # waits of a governed log rate (role throttle)


class EngineSource(Protocol[TargetT_contra]):
    """An engine's source class as the build uses it: the source of one target of the config."""

    @classmethod
    def built(cls, target: TargetT_contra, context: Context, container: ContainerMapper | None) -> Source:
        """The source of `target`, with its container (None: not in one) and what `context` gives."""
        ...


@dataclass(frozen=True, slots=True)
class Engine(Generic[TargetT]):
    """One database engine: see `engines/__init__.py`."""

    key: str  # the config's section, the sources' name prefix and the rules' `engine` label
    title: str  # how people name it ("SQL Server")
    target: type[TargetT]  # one entry of the config's section
    source: type[EngineSource[TargetT]]  # makes the source of one target (`build`)
    extra: str  # pip install 'lunlat[<extra>]' brings the driver
    driver_module: str  # what the extra installs, imported to check it is there
    driver_name: str  # how its users name the driver ("python-oracledb")
    metrics: tuple[MetricSpec, ...]
    capabilities: tuple[Capability, ...]
    files: FileLayer
    waits: WaitLayer | None  # None: the engine keeps no per-wait counters
    # What else the driver needs on this host (an ODBC driver registered with unixODBC), checked by
    # check-config once the driver imports.
    host_problems: Callable[[Sequence[TargetT]], list[TargetProblem]] | None = None
    install_hint: str = ""  # said after `pip install 'lunlat[<extra>]'` when the driver is missing
    hints: Hints = Hints()

    def build(self, context: Context) -> list[Source] | BuildError:
        """The sources of the config's targets of this engine, or why they cannot be built."""
        return per_target(
            context,
            context.config.targets(self),
            lambda target, container: self.source.built(target, context, container),
        )
