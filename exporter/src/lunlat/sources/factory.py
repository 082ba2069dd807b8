"""How a source is built: each source module offers a factory, `registry` lists them.

A factory takes the `Context` (the config, the command line's settings, what the host layer shares
with the database sources) and returns its sources, none when it has nothing to do (no target
configured, another host source chosen), or a `BuildError` saying in one line why it cannot run.
Factories never exit: only the command decides what an error means (exit 2 at start, keep the
running sources on a reload).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from lunlat import containers
from lunlat.config import BiolatencyConfig, Config, DiskstatsConfig
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.dbtarget import DatabaseTarget
from lunlat.pathhealth import DEFAULT_INTERVAL as PATH_STATE_INTERVAL
from lunlat.sources.base import Source
from lunlat.sources.published import PublishedDevices

TargetT = TypeVar("TargetT", bound=DatabaseTarget)
SourceT = TypeVar("SourceT", bound=Source)

HostSource = Literal["auto", "diskstats", "psutil"]
HOST_SOURCES: tuple[HostSource, ...] = ("auto", "diskstats", "psutil")


class BuildError(Exception):
    """A source that cannot be built; the message is one line naming what is wrong."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the command line says about the sources (everything else is in the config file)."""

    procfs: Path = Path("/proc")
    sysfs: Path = Path("/sys")
    host_source: HostSource = "auto"
    show_paths: bool | None = None  # overrides the config's diskstats.show_paths when set
    refresh_interval: float = 300.0
    biolatency: bool | None = None  # overrides the config's biolatency.enabled when set
    path_state_interval: float = PATH_STATE_INTERVAL  # multipath path states read this often
    counters: bool | None = None  # overrides the config's diskstats.counters when set

    def host_platform(self) -> Literal["diskstats", "psutil"]:
        """Where host counters come from: <procfs>/diskstats, or psutil where there is none and
        the host is not Linux (on Linux a missing diskstats is a wrong --path.procfs)."""
        if self.host_source != "auto":
            return self.host_source
        use_psutil = not (self.procfs / "diskstats").exists() and not sys.platform.startswith("linux")
        return "psutil" if use_psutil else "diskstats"


@dataclass(frozen=True, slots=True)
class Context:
    config: Config
    settings: Settings
    platform: Literal["diskstats", "psutil"]
    # Database sources tell the host layer which LUNs hold which database files; that needs
    # sysfs, so there is none under psutil.
    db_labels: DbLunLabels | None
    # The devices the host layer publishes (written by diskstats, read by biolatency): one per build,
    # so a reload's sources share the new filter.
    published: PublishedDevices = field(default_factory=PublishedDevices)

    @classmethod
    def of(cls, config: Config, settings: Settings, db_labels: DbLunLabels | None = None) -> Context:
        """`db_labels`: the running sources' (a reload), so the host layer keeps what the database
        sources told it until they tell it again."""
        platform = settings.host_platform()
        if platform != "diskstats":
            return cls(config, settings, platform, None)
        return cls(config, settings, platform, db_labels if db_labels is not None else DbLunLabels())

    def diskstats(self) -> DiskstatsConfig:
        """The config's device filter, with --collector.diskstats.show-paths and
        --[no-]collector.diskstats.counters applied."""
        update: dict[str, bool] = {}
        if self.settings.show_paths is not None:
            update["show_paths"] = self.settings.show_paths
        if self.settings.counters is not None:
            update["counters"] = self.settings.counters
        return self.config.diskstats.model_copy(update=update) if update else self.config.diskstats

    def biolatency(self) -> BiolatencyConfig:
        """The config's biolatency section, with --[no-]collector.biolatency applied."""
        if self.settings.biolatency is None:
            return self.config.biolatency
        return self.config.biolatency.model_copy(update={"enabled": self.settings.biolatency})

    def locator(self) -> FileLocator | None:
        """Where a database source finds its files' LUNs (a new locator per source), or None
        without sysfs."""
        if self.platform != "diskstats":
            return None
        return FileLocator(self.settings.procfs, self.settings.sysfs)

    def per_target(
        self, found: Sequence[TargetT], make: Callable[[TargetT, containers.ContainerMapper | None], SourceT]
    ) -> list[SourceT] | BuildError:
        """One database source per target, each given its container (`container`); the BuildError of
        the first target that cannot be built stands for them all."""
        try:
            for target in found:
                self._check_map_age(target)
            return [make(target, self.container(target)) for target in found]
        except BuildError as exc:
            return exc

    def _check_map_age(self, target: DatabaseTarget) -> None:
        """A file map is read again every refresh interval (dbsource, file lookups): a limit that is not
        longer would drop a healthy map between two readings."""
        limit, refresh = target.file_map_max_age_seconds, self.settings.refresh_interval
        if limit <= refresh:
            raise BuildError(
                f"database {target.name!r}: file_map_max_age_seconds ({limit:g} s) must be longer than "
                f"--collector.topology.refresh-interval ({refresh:g} s), how often its file map is read "
                "again: raise file_map_max_age_seconds, or lower the refresh interval"
            )

    def container(self, target: DatabaseTarget) -> containers.ContainerMapper | None:
        """The container `target`'s database runs in (its `container:`, or found by its published
        port with a `docker:` section), or None; BuildError when one is asked for without the SDK."""
        ref = containers.ref_for(target, self.config.docker)
        if ref is None:
            return None
        if not containers.sdk_installed():
            raise BuildError(f"database {target.name!r} runs in a container: {containers.SDK_MISSING}")
        return containers.ContainerMapper(ref, self.config.docker)


Factory = Callable[[Context], "Sequence[Source] | BuildError"]
