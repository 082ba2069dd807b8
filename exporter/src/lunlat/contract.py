"""The metric contract: every metric name, type, help text and label set lunlat publishes.

This module is the single definition that the exporter, the metric reference
(docs/reference/metrics.md, generated from here), the alert and recording rules and the dashboards
are checked against (docs/contract.md §3). Change a name here and the tests
that compare the docs and rules with this module fail until they follow.

It is assembled at the top of the exporter's layers (docs/architecture.md, "The layers"): the ground's
names (`ground.py`: what a metric is, the roles, the label names, the host layer's and the exporter's
own series) re-exported as they are, and what every registered engine adds (`engines/registry.py`).
Code below the engines reads `ground` itself, so a ground fact never loads an engine.
"""

from __future__ import annotations

from lunlat import ground
from lunlat.engines.registry import ENGINES
from lunlat.ground import *  # noqa: F403 - the ground's names are the contract's: contract.DEVICE_READS …
from lunlat.ground import Capability, MetricSpec

# What a source may be unable to read: a database in a container (any engine), then each engine's.
CAPABILITIES: tuple[Capability, ...] = (
    ground.CONTAINER_CAPABILITY,
    *(capability for engine in ENGINES for capability in engine.capabilities),
)
CAPABILITY_NAMES: frozenset[str] = frozenset(c.name for c in CAPABILITIES)
FIXABLE_CAPABILITIES: tuple[str, ...] = tuple(c.name for c in CAPABILITIES if c.fixable)

ALL_METRICS: tuple[MetricSpec, ...] = (
    *ground.DEVICE_METRICS,
    *ground.BIO_METRICS,
    *ground.QUEUE_LIMIT_METRICS,
    ground.LUN_INFO,
    *ground.PATH_METRICS,
    *(spec for engine in ENGINES for spec in engine.metrics),
    *ground.HEALTH_METRICS,
    *ground.DB_FILE_MAP_METRICS,
)
