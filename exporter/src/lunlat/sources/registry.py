"""Every source lunlat has, in the order they are built and scraped.

A host source module offers `build(context)` (see `factory`); adding one is that module plus one
line here. Database engines come from `engines.registry` (an engine is its package plus one line
there). The host layer comes first: database sources publish LUN labels it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lunlat.config import Config
from lunlat.dbfiles import DbLunLabels
from lunlat.engines.registry import ENGINES
from lunlat.sources import biolatency, diskstats, psutil_disks
from lunlat.sources.base import Source
from lunlat.sources.factory import BuildError, Context, Factory, Settings

FACTORIES: tuple[tuple[str, Factory], ...] = (
    ("diskstats", diskstats.build),
    ("psutil", psutil_disks.build),
    ("biolatency", biolatency.build),
    *((engine.key, engine.build) for engine in ENGINES),
)


@dataclass(slots=True)
class Built:
    sources: list[Source] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each
    db_labels: DbLunLabels | None = None  # what the database sources tell the host layer

    def close(self) -> None:
        """Close what was built (database sessions) when it will not be used."""
        close_sources(self.sources)


def build_sources(config: Config, settings: Settings, db_labels: DbLunLabels | None = None) -> Built:
    """Every registered source for `config`, or the problems of those that cannot be built.
    `db_labels`: the running sources' on a reload (see Context.of)."""
    context = Context.of(config, settings, db_labels)
    built = Built(db_labels=context.db_labels)
    for _name, factory in FACTORIES:
        result = factory(context)
        if isinstance(result, BuildError):
            built.problems.append(str(result))
        else:
            built.sources.extend(result)
    return built


def close_sources(sources: list[Source]) -> None:
    """Let go of what sources hold between scrapes (database connections)."""
    for source in sources:
        close = getattr(source, "close", None)
        if callable(close):
            close()
