"""Families of the host layer (docs/contract.md §3), shared by the diskstats and psutil sources."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from lunlat import ground
from lunlat.config import DiskstatsConfig
from lunlat.model import Family, LabelList, LabelSet, Sample
from lunlat.sources.published import PublishedDevice

# The per-device families in contract order, each with the exponent its column is counted in:
# times arrive as integer milliseconds and are exposed exactly (see Family.exponent).
_EXPONENTS: dict[str, int] = {
    ground.DEVICE_READ_TIME.name: -3,
    ground.DEVICE_WRITE_TIME.name: -3,
    ground.DEVICE_IO_TIME.name: -3,
    ground.DEVICE_IO_WEIGHTED_TIME.name: -3,
    ground.DEVICE_DISCARD_TIME.name: -3,
    ground.DEVICE_FLUSH_TIME.name: -3,
}


def device_families(labels: LabelList, columns: dict[ground.MetricSpec, list[int]]) -> list[Family]:
    """One family per contract metric present in `columns`; each column is aligned with `labels`.

    Time columns are in milliseconds, everything else in the metric's base unit.
    """
    families = []
    for spec in ground.DEVICE_METRICS:
        column = columns.get(spec)
        if column is None:
            continue
        families.append(Family(spec, exponent=_EXPONENTS.get(spec.name, 0), column=(labels, column)))
    return families


@dataclass(frozen=True, slots=True)
class DeviceFilter:
    """`diskstats.include` / `diskstats.exclude` on kernel device names, compiled once from the
    config; one `ignored` for every host source (as node_exporter's one deviceFilter,
    prometheus/node_exporter collector/device_filter.go)."""

    include: re.Pattern[str] | None = None
    exclude: re.Pattern[str] | None = None

    @classmethod
    def from_config(cls, config: DiskstatsConfig) -> DeviceFilter:
        return cls(
            re.compile(config.include) if config.include else None,
            re.compile(config.exclude) if config.exclude else None,
        )

    def ignored(self, name: str) -> bool:
        """Whether the device is left out: not matched by `include`, or matched by `exclude`."""
        return (self.include is not None and self.include.search(name) is None) or (
            self.exclude is not None and self.exclude.search(name) is not None
        )


class LunInfo(NamedTuple):
    """The labels of one lunlat_lun_info sample, in contract order (ground.LUN_INFO_LABELS)."""

    lun: str
    device: str
    wwid: str = ""
    naa: str = ""  # the NAA designator, lowercase hex (luns.naa): joins the array's own exporters
    array: str = ground.ARRAY_UNKNOWN  # the array serving the LUN: `luns:` entry, else arrayid.from_wwid
    vendor: str = ""
    model: str = ""
    paths: str = ""  # comma-separated path devices of a multipath LUN
    database: str = ""
    role: str = ""
    workload: str = ""
    mountpoint: str = ""  # comma-separated mountpoints
    kind: str = "lun"  # ground.KINDS

    def sample(self) -> Sample:
        return ("", LabelSet(ground.LUN_INFO_LABELS, tuple(self)), 1)

    def published(self) -> PublishedDevice:
        """The device as its own series label it (PublishedDevice.label_values), with these values."""
        return PublishedDevice(self.lun, self.device, self.role, self.kind, self.database, self.workload)

    def device_labels(self) -> LabelSet:
        """The labels (ground.DEVICE_LABELS) of the device's own series."""
        return LabelSet(ground.DEVICE_LABELS, self.published().label_values())


assert LunInfo._fields == ground.LUN_INFO_LABELS, "LunInfo must name the contract's labels in order"
