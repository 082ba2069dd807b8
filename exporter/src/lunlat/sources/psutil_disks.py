"""Fallback host source for hosts without /proc/diskstats (Windows, macOS, BSD): psutil.

psutil.disk_io_counters(perdisk=True) gives per-disk counts, bytes and read/write time in
milliseconds, and with nowrap=True (its default) undoes the wraps of the platform's counters itself.
There is no sysfs here, so the LUN is the disk name psutil reports; config entries match it by `device`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psutil

from lunlat import arrayid, ground, logs
from lunlat.config import DiskstatsConfig, LunEntry
from lunlat.model import Family, LabelList
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.factory import BuildError, Context
from lunlat.sources.host import DeviceFilter, LunInfo, device_families

log = logs.get(__name__)

DiskCounters = Callable[[], Mapping[str, Any]]


def _psutil_counters() -> Mapping[str, Any]:
    return psutil.disk_io_counters(perdisk=True, nowrap=True) or {}


class PsutilDisksSource:
    name = "psutil"
    error_reasons: tuple[str, ...] = ("read_failed",)
    timeout: float | None = None

    def __init__(
        self,
        config: DiskstatsConfig,
        luns: Sequence[LunEntry] = (),
        counters: DiskCounters = _psutil_counters,
    ) -> None:
        self._filter = DeviceFilter.from_config(config)
        self._luns = list(luns)
        self._counters = counters
        self._info_cache: dict[str, LunInfo] = {}
        for entry in self._luns:
            if entry.match.device is None:
                log.warning(
                    "without sysfs only `device` matches work; entry ignored",
                    match=entry.match.describe(),
                )

    def _info(self, name: str) -> LunInfo:
        cached = self._info_cache.get(name)
        if cached is None:
            database = role = workload = array = ""
            for entry in self._luns:  # first matching entry wins, per label
                if entry.match.device is not None and entry.match.device.removeprefix("/dev/") == name:
                    database = database or (entry.database or "")
                    role = role or (entry.role or "")
                    workload = workload or (entry.workload or "")
                    array = array or (entry.array or "")
            # psutil gives no WWID: the array is the `luns:` entry's or unknown.
            cached = LunInfo(
                name, name, database=database, role=role, workload=workload, array=arrayid.label(array, "")
            )
            self._info_cache[name] = cached
        return cached

    def collect(self) -> SourceResult:
        try:
            disks = self._counters()
        except (OSError, RuntimeError) as exc:
            raise SourceError("read_failed", f"psutil.disk_io_counters failed: {exc}") from None
        names = sorted(n for n in disks if not self._filter.ignored(n))
        labels = LabelList([self._info(n).device_labels() for n in names])
        rows = [disks[n] for n in names]
        columns: dict[ground.MetricSpec, list[int]] = {
            ground.DEVICE_READS: [int(r.read_count) for r in rows],
            ground.DEVICE_WRITES: [int(r.write_count) for r in rows],
            ground.DEVICE_READ_TIME: [int(r.read_time) for r in rows],
            ground.DEVICE_WRITE_TIME: [int(r.write_time) for r in rows],
            ground.DEVICE_READ_BYTES: [int(r.read_bytes) for r in rows],
            ground.DEVICE_WRITE_BYTES: [int(r.write_bytes) for r in rows],
        }
        # busy_time exists on Linux and FreeBSD only.
        if rows and all(hasattr(r, "busy_time") for r in rows):
            columns[ground.DEVICE_IO_TIME] = [int(r.busy_time) for r in rows]
        families = device_families(labels, columns)
        families.append(Family(ground.LUN_INFO, [self._info(n).sample() for n in names]))
        return SourceResult(families)


def build(context: Context) -> list[PsutilDisksSource] | BuildError:
    """The host layer from psutil, where it was chosen (--collector.host.source, or no diskstats)."""
    if context.platform != "psutil":
        return []
    log.info("host counters from psutil", platform=sys.platform)
    return [PsutilDisksSource(context.diskstats(), context.config.luns)]
