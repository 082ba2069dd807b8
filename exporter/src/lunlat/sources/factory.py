"""How a source is built: each host source module offers a factory, each engine's is its `Engine.build`
(engines/engine.py, with the database part of building in engines/build.py); `registry` lists them.

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
from typing import Literal

from lunlat.config import BiolatencyConfig, Config, DiskstatsConfig
from lunlat.dbfiles import DbLunLabels
from lunlat.pathhealth import DEFAULT_INTERVAL as PATH_STATE_INTERVAL
from lunlat.sources.base import Source
from lunlat.sources.published import PublishedDevices

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


Factory = Callable[[Context], "Sequence[Source] | BuildError"]
