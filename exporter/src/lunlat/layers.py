"""The per-LUN latency layers as PromQL: the host layer (diskstats counters labelled through
lunlat_lun_info) and each engine's own (its `Engine.files`). The rules (alerts/) record them; the
report computes a phase's averages with the same expressions, so the two never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from lunlat import contract
from lunlat.engines.engine import Engine, FileLayer
from lunlat.engines.registry import ENGINES

# Labels that identify one judged series (a LUN of a host, in one layer, with its roles).
SERIES_LABELS: tuple[str, ...] = ("job", "instance", "lun", "layer", "database", "role", "workload")


@dataclass(frozen=True, slots=True)
class HostLayer:
    """The host layer: diskstats counters per LUN, labelled with roles through lunlat_lun_info."""

    selector: str
    name: str = "host"

    def _per_lun(self, counter: str, window: str) -> str:
        by = ", ".join(label for label in SERIES_LABELS if label != "layer")
        return (
            f"sum by ({by}) (\n"
            f"    rate({counter}{{{self.selector}}}[{window}])\n"
            "  * on (job, instance, lun, device) group_left (database, role, workload)\n"
            f'    {contract.LUN_INFO.name}{{{self.selector}, kind="lun"}}\n'
            ")"
        )

    def operations(self, op: str, window: str) -> str:
        spec = contract.DEVICE_READS if op == "read" else contract.DEVICE_WRITES
        return self._per_lun(spec.name, window)

    def time(self, op: str, window: str) -> str:
        spec = contract.DEVICE_READ_TIME if op == "read" else contract.DEVICE_WRITE_TIME
        return self._per_lun(spec.name, window)

    def bytes(self, op: str, window: str) -> str | None:
        spec = contract.DEVICE_READ_BYTES if op == "read" else contract.DEVICE_WRITE_BYTES
        return self._per_lun(spec.name, window)


@dataclass(frozen=True, slots=True)
class DbLayer:
    """A database's own view (its engine's per-file counters, `Engine.files`), summed per LUN,
    database and role.

    Files whose LUN the exporter could not find (lun="") still form one series per database and
    role: the database's latency matters even when the mapping is unknown.
    """

    selector: str
    files: FileLayer
    name: str = "db"
    # The `engine` label of the layer's recorded series: the engines' rules share names, and a
    # static label keeps them distinct rules (promtool's duplicate-rule lint); the alerts carry it,
    # so Alertmanager routes a page by what the database is, never by how it is named.
    engine: str = ""

    def _per_lun(self, counter: str, window: str) -> str:
        by = ", ".join(label for label in SERIES_LABELS if label != "layer")
        return f"sum by ({by}) (\n    rate({counter}{{{self.selector}}}[{window}])\n)"

    def operations(self, op: str, window: str) -> str:
        return self._per_lun((self.files.reads if op == "read" else self.files.writes).name, window)

    def time(self, op: str, window: str) -> str:
        spent = (self.files.read_time if op == "read" else self.files.write_time).name
        queued = self.files.read_queued if op == "read" else self.files.write_queued
        if queued is None:
            return self._per_lun(spent, window)
        # A file without the queued series (an engine release without it) keeps its stall as is: `or` fills a
        # zero for it, so the subtraction never drops the file.
        selector, by = self.selector, ", ".join(label for label in SERIES_LABELS if label != "layer")
        return (
            f"sum by ({by}) (\n"
            f"    rate({spent}{{{selector}}}[{window}])\n"
            f"  - (rate({queued.name}{{{selector}}}[{window}]) or rate({spent}{{{selector}}}[{window}]) * 0)\n"
            ")"
        )

    def bytes(self, op: str, window: str) -> str | None:
        spec = self.files.read_bytes if op == "read" else self.files.write_bytes
        return None if spec is None else self._per_lun(spec.name, window)


def db_layer(engine: Engine, selector: str) -> DbLayer:
    """The database layer of `engine`'s series."""
    return DbLayer(selector, engine.files, engine=engine.key)


def db_layers(selector: str) -> tuple[DbLayer, ...]:
    """The database layer of every registered engine."""
    return tuple(db_layer(engine, selector) for engine in ENGINES)


Layer = HostLayer | DbLayer
