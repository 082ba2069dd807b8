"""How a database engine's sources are built from the build's `Context` (sources/factory.py): one
source per target of the engine's config section, each given its container and a file locator.

The database part of building, beside the engines: `Engine.build` (engine.py), the one build every
engine uses, calls `per_target`; an engine's source class makes the source of one target from these
(its `built`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from lunlat import containers
from lunlat.dbfiles import FileLocator
from lunlat.dbtarget import DatabaseTarget
from lunlat.sources.base import Source
from lunlat.sources.factory import BuildError, Context

TargetT = TypeVar("TargetT", bound=DatabaseTarget)
SourceT = TypeVar("SourceT", bound=Source)


def locator(context: Context) -> FileLocator | None:
    """Where a database source finds its files' LUNs (a new locator per source), or None
    without sysfs."""
    if context.platform != "diskstats":
        return None
    return FileLocator(context.settings.procfs, context.settings.sysfs)


def per_target(
    context: Context,
    found: Sequence[TargetT],
    make: Callable[[TargetT, containers.ContainerMapper | None], SourceT],
) -> list[SourceT] | BuildError:
    """One database source per target, each given its container (`container`); the BuildError of
    the first target that cannot be built stands for them all."""
    try:
        for target in found:
            _check_map_age(context, target)
        return [make(target, container(context, target)) for target in found]
    except BuildError as exc:
        return exc


def _check_map_age(context: Context, target: DatabaseTarget) -> None:
    """A file map is read again every refresh interval (dbsource, file lookups): a limit that is not
    longer would drop a healthy map between two readings."""
    limit, refresh = target.file_map_max_age_seconds, context.settings.refresh_interval
    if limit <= refresh:
        raise BuildError(
            f"database {target.name!r}: file_map_max_age_seconds ({limit:g} s) must be longer than "
            f"--collector.topology.refresh-interval ({refresh:g} s), how often its file map is read "
            "again: raise file_map_max_age_seconds, or lower the refresh interval"
        )


def container(context: Context, target: DatabaseTarget) -> containers.ContainerMapper | None:
    """The container `target`'s database runs in (its `container:`, or found by its published
    port with a `docker:` section), or None; BuildError when one is asked for without the SDK."""
    ref = containers.ref_for(target, context.config.docker)
    if ref is None:
        return None
    if not containers.sdk_installed():
        raise BuildError(f"database {target.name!r} runs in a container: {containers.SDK_MISSING}")
    return containers.ContainerMapper(ref, context.config.docker)
