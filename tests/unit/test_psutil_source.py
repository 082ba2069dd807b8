"""The psutil fallback: same metric names from psutil's per-disk counters (hosts without diskstats)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig, LunEntry, LunMatch
from lunlat.sources.base import SourceError
from lunlat.sources.psutil_disks import PsutilDisksSource
from tests.support.device_series import by_device

# psutil's shapes: Linux/FreeBSD have busy_time, Windows/macOS do not.
WithBusy = namedtuple(
    "WithBusy", "read_count write_count read_bytes write_bytes read_time write_time busy_time"
)
NoBusy = namedtuple("NoBusy", "read_count write_count read_bytes write_bytes read_time write_time")


def by_metric(source: PsutilDisksSource) -> dict[str, dict[tuple[str, ...], float]]:
    return {f.spec.name: by_device(f) for f in source.collect().families}


def test_counters_map_to_the_contract_with_times_in_seconds() -> None:
    disks = {"PhysicalDrive0": NoBusy(10, 20, 4096, 8192, 1234, 5)}
    got = by_metric(PsutilDisksSource(DiskstatsConfig(), counters=lambda: disks))
    key = ("PhysicalDrive0", "PhysicalDrive0")
    assert got[contract.DEVICE_READS.name] == {key: 10}
    assert got[contract.DEVICE_WRITES.name] == {key: 20}
    assert got[contract.DEVICE_READ_BYTES.name] == {key: 4096}
    assert got[contract.DEVICE_WRITE_BYTES.name] == {key: 8192}
    assert got[contract.DEVICE_READ_TIME.name] == {key: 1.234}
    assert got[contract.DEVICE_WRITE_TIME.name] == {key: 0.005}
    assert contract.DEVICE_IO_TIME.name not in got  # no busy_time on this platform: no series
    assert contract.DEVICE_IO_IN_PROGRESS.name not in got


def test_busy_time_becomes_io_time_where_present() -> None:
    disks = {"ada0": WithBusy(1, 1, 1, 1, 1, 1, 2500)}
    got = by_metric(PsutilDisksSource(DiskstatsConfig(), counters=lambda: disks))
    assert got[contract.DEVICE_IO_TIME.name] == {("ada0", "ada0"): 2.5}


def test_filters_and_device_labels_from_config() -> None:
    disks: Mapping[str, Any] = {n: NoBusy(1, 1, 1, 1, 1, 1) for n in ("disk0", "disk1", "ram0")}
    config = DiskstatsConfig(include="^disk")
    luns = [
        LunEntry(match=LunMatch(device="/dev/disk1"), database="SQL Server 1", role="log"),
        LunEntry(match=LunMatch(alias="ignored_without_sysfs"), role="data"),
    ]
    families = {
        f.spec.name: f for f in PsutilDisksSource(config, luns, counters=lambda: disks).collect().families
    }
    assert set(by_device(families[contract.DEVICE_READS.name])) == {("disk0", "disk0"), ("disk1", "disk1")}
    info = {s[1].as_dict()["device"]: s[1].as_dict() for s in families[contract.LUN_INFO.name].samples}
    assert info["disk1"]["database"] == "SQL Server 1" and info["disk1"]["role"] == "log"
    assert info["disk0"]["role"] == ""


def test_a_psutil_failure_is_a_source_error() -> None:
    def broken() -> Mapping[str, Any]:
        raise OSError("no permission")

    with pytest.raises(SourceError) as err:
        PsutilDisksSource(DiskstatsConfig(), counters=broken).collect()
    assert err.value.reason == "read_failed"


def test_the_real_psutil_call_works_here() -> None:
    families = PsutilDisksSource(DiskstatsConfig()).collect().families
    assert any(f.spec is contract.LUN_INFO for f in families)
