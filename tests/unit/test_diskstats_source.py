"""DiskstatsSource on fake hosts: what it publishes, with which labels and values, and when it notices change."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig, LunEntry, LunMatch
from lunlat.model import Family
from lunlat.pathhealth import DEFAULT_INTERVAL
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.diskstats import UNMATCHED_NAMED, DiskstatsSource
from tests.support.device_series import by_device, role_labels
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost, Stats

DATA_WWID = "3600a098038303634722b4d59614a6f31"
LOCAL_WWID = "naa.5000c500a1b2c3d4"
NVME_WWID = "eui.0025388b71b3c0a1"
PATHS = ("sdb", "sdc", "sdd", "sde")

# What each per-device family publishes, from the numbers written to /proc/diskstats, in base units.
EXPECTED: dict[str, Callable[[Stats], float]] = {
    contract.DEVICE_READS.name: lambda s: s.reads,
    contract.DEVICE_WRITES.name: lambda s: s.writes,
    contract.DEVICE_READ_TIME.name: lambda s: s.read_ms / 1000,
    contract.DEVICE_WRITE_TIME.name: lambda s: s.write_ms / 1000,
    contract.DEVICE_READ_BYTES.name: lambda s: s.read_sectors * 512,
    contract.DEVICE_WRITE_BYTES.name: lambda s: s.write_sectors * 512,
    contract.DEVICE_IO_IN_PROGRESS.name: lambda s: s.in_flight,
    contract.DEVICE_IO_TIME.name: lambda s: s.io_ms / 1000,
    contract.DEVICE_IO_WEIGHTED_TIME.name: lambda s: s.weighted_ms / 1000,
    contract.DEVICE_DISCARDS.name: lambda s: s.discards,
    contract.DEVICE_DISCARD_TIME.name: lambda s: s.discard_ms / 1000,
    contract.DEVICE_DISCARD_BYTES.name: lambda s: s.discard_sectors * 512,
    contract.DEVICE_FLUSHES.name: lambda s: s.flushes,
    contract.DEVICE_FLUSH_TIME.name: lambda s: s.flush_ms / 1000,
}


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """Root on a local disk; Oracle data on an LV on a 4-path multipath map; NVMe scratch; an
    unattached loop device and a RAM disk."""
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid=LOCAL_WWID, vendor="SEAGATE", model="ST600MM0009")
    h.add_partition("sda", 1)
    for path in PATHS:
        h.add_scsi_disk(path, wwid="naa." + DATA_WWID[1:], vendor="NETAPP", model="LUN C-Mode")
    h.add_multipath("dm-3", alias="ora_data", wwid=DATA_WWID, paths=list(PATHS))
    h.add_lvm("dm-4", vg="vgora", lv="oradata", on=["dm-3"])
    h.add_nvme("nvme0n1", wwid=NVME_WWID, model="Samsung SSD 980 PRO 1TB")
    h.add_loop("loop0")
    h.add_ramdisk("ram0")
    h.mount("/", "sda1")
    h.mount("/u02/oradata", "dm-4")
    # Realistic magnitudes for the map, times past 2**31 ms included.
    h.stats["dm-3"] = Stats(
        reads=56403,
        reads_merged=0,
        read_sectors=2971538,
        read_ms=3_000_000_123,
        writes=13469,
        write_sectors=1928128,
        write_ms=7175,
        in_flight=2,
        io_ms=12648,
        weighted_ms=40868,
        discards=301,
        discard_sectors=88_000,
        discard_ms=4_294_967_000,
        flushes=13001,
        flush_ms=2417,
    )
    h.write()
    return h


ORA_ENTRY = LunEntry(match=LunMatch(alias="ora_data"), database="ORCL", role="data", workload="oltp")


def source(
    host: FakeHost,
    config: DiskstatsConfig | None = None,
    luns: list[LunEntry] | None = None,
    clock: Callable[[], float] | None = None,
) -> DiskstatsSource:
    return DiskstatsSource(
        host.procfs,
        host.sysfs,
        config or DiskstatsConfig(),
        luns=luns or [],
        refresh_interval=300.0,
        clock=clock or FakeClock(),
    )


@dataclass
class Collected:
    result: SourceResult

    def family(self, name: str) -> Family:
        (family,) = [f for f in self.result.families if f.spec.name == name]
        return family

    def info(self) -> dict[str, dict[str, str]]:
        """lunlat_lun_info label sets by device."""
        samples = list(self.family(contract.LUN_INFO.name).all_samples())
        assert all(value == 1 for _, _, value in samples)
        return {labels.as_dict()["device"]: labels.as_dict() for _, labels, _ in samples}

    def devices(self) -> set[str]:
        return set(self.info())

    def lun_of(self) -> dict[str, str]:
        return {device: labels["lun"] for device, labels in self.info().items()}


def collect(src: DiskstatsSource) -> Collected:
    return Collected(src.collect())


def assert_consistent(host: FakeHost, got: Collected) -> None:
    """Every published device once in every device family and in lun_info, with the values written."""
    info_devices = [
        labels.as_dict()["device"] for _, labels, _ in got.family(contract.LUN_INFO.name).all_samples()
    ]
    assert len(info_devices) == len(set(info_devices))
    published = {(labels["lun"], device) for device, labels in got.info().items()}
    names = {f.spec.name for f in got.result.families}
    assert names - {s.name for s in contract.PATH_METRICS} == {
        s.name for s in (*contract.DEVICE_METRICS, contract.LUN_INFO)
    }
    for spec in contract.DEVICE_METRICS:
        family = got.family(spec.name)
        keys = [labels.values for _, labels, _ in family.all_samples()]
        assert len(keys) == len(set(keys)), spec.name
        values = by_device(family)
        assert set(values) == published, spec.name
        # Each series carries its device's kind and roles, the values lunlat_lun_info has (the rules
        # sum by them with no join).
        assert role_labels(family) == {
            (labels["lun"], device): {k: labels[k] for k in contract.DEVICE_ROLE_LABELS}
            for device, labels in got.info().items()
        }, spec.name
        for (lun, device), value in values.items():
            assert value == EXPECTED[spec.name](host.stats[device]), (spec.name, lun, device)


# --- what is published -------------------------------------------------------------------------


def test_default_publishes_luns_not_paths_partitions_or_hidden_devices(host: FakeHost) -> None:
    got = collect(source(host, luns=[ORA_ENTRY]))
    assert got.devices() == {"sda", "dm-3", "dm-4", "nvme0n1"}
    assert got.result.errors == {}
    assert_consistent(host, got)


def test_lun_info_labels_of_a_multipath_map(host: FakeHost) -> None:
    info = collect(source(host, luns=[ORA_ENTRY])).info()
    assert info["dm-3"] == {
        "lun": "ora_data",
        "device": "dm-3",
        "wwid": DATA_WWID,
        "naa": DATA_WWID[1:],  # the NAA without scsi_id's type digit 3
        "array": contract.ARRAY_UNKNOWN,  # a NetApp NAA names no array (arrayid.py)
        "vendor": "NETAPP",
        "model": "LUN C-Mode",
        "paths": "sdb,sdc,sdd,sde",
        "database": "ORCL",
        "role": "data",
        "workload": "oltp",
        "mountpoint": "/u02/oradata",  # the LV's mount, carried down to the map
        "kind": "lun",
    }
    assert info["sda"]["lun"] == LOCAL_WWID
    assert info["sda"]["naa"] == "5000c500a1b2c3d4"  # a plain disk's naa. WWID
    assert info["nvme0n1"]["naa"] == ""  # an EUI-64 is no NAA
    assert info["dm-4"]["naa"] == ""  # an LV has no WWID of its own
    assert (info["sda"]["database"], info["sda"]["mountpoint"]) == ("", "/")
    assert (info["nvme0n1"]["lun"], info["nvme0n1"]["model"]) == (NVME_WWID, "Samsung SSD 980 PRO 1TB")
    assert (info["dm-4"]["lun"], info["dm-4"]["database"]) == ("vgora-oradata", "")


def test_counters_equal_what_diskstats_says(host: FakeHost) -> None:
    got = collect(source(host))
    assert by_device(got.family(contract.DEVICE_READ_TIME.name))[("ora_data", "dm-3")] == 3_000_000.123
    assert by_device(got.family(contract.DEVICE_READ_BYTES.name))[("ora_data", "dm-3")] == 2971538 * 512
    assert by_device(got.family(contract.DEVICE_IO_IN_PROGRESS.name))[("ora_data", "dm-3")] == 2
    assert_consistent(host, got)


@pytest.mark.parametrize(
    ("fields", "absent"),
    [
        (11, {"discards_completed", "discard_time", "discard_bytes", "flush_requests", "flush_time"}),
        (15, {"flush_requests", "flush_time"}),
    ],
)
def test_an_older_kernel_format_publishes_no_discard_or_flush_series_it_does_not_print(
    host: FakeHost, fields: int, absent: set[str]
) -> None:
    """Before 4.18 a line has 11 stats fields, before 5.5 15 (Documentation/admin-guide/iostats.rst):
    a series for a field the kernel lacks would be a false 0."""
    text = host.diskstats_text()
    (host.procfs / "diskstats").write_text(
        "".join(" ".join(line.split()[: 3 + fields]) + "\n" for line in text.splitlines())
    )
    got = collect(source(host))
    names = {f.spec.name for f in got.result.families}
    gone = {s.name for s in contract.DEVICE_METRICS if any(f"_{a}_" in s.name for a in absent)}
    assert len(gone) == len(absent)
    assert (
        names - {s.name for s in contract.PATH_METRICS}
        == {s.name for s in (*contract.DEVICE_METRICS, contract.LUN_INFO)} - gone
    )
    assert by_device(got.family(contract.DEVICE_READ_TIME.name))[("ora_data", "dm-3")] == 3_000_000.123


def test_show_paths_publishes_paths_and_partitions_with_their_kind(host: FakeHost) -> None:
    got = collect(source(host, DiskstatsConfig(show_paths=True), luns=[ORA_ENTRY]))
    info = got.info()
    assert set(info) == {"sda", "sda1", "dm-3", "dm-4", "nvme0n1", *PATHS}
    for path in PATHS:
        assert (info[path]["kind"], info[path]["lun"], info[path]["database"]) == ("path", "ora_data", "ORCL")
        assert info[path]["paths"] == ""
    assert (info["sda1"]["kind"], info["sda1"]["lun"]) == ("partition", LOCAL_WWID)
    assert {info[d]["kind"] for d in ("sda", "dm-3", "dm-4", "nvme0n1")} == {"lun"}
    assert_consistent(host, got)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (DiskstatsConfig(include="^dm-"), {"dm-3", "dm-4"}),
        (DiskstatsConfig(include="^(sd|nvme)"), {"sda", "nvme0n1"}),
        (DiskstatsConfig(exclude="^dm-4$"), {"sda", "dm-3", "nvme0n1", "ram0"}),  # no default exclude
        (DiskstatsConfig(include="^sd", show_paths=True), {"sda", "sda1", *PATHS}),
        (DiskstatsConfig(include="^sd", exclude="^sd[bc]$", show_paths=True), {"sda", "sda1", "sdd", "sde"}),
        (DiskstatsConfig(exclude=None), {"sda", "dm-3", "dm-4", "nvme0n1", "ram0"}),
    ],
)
def test_include_and_exclude_filter_by_kernel_name(
    host: FakeHost, config: DiskstatsConfig, expected: set[str]
) -> None:
    got = collect(source(host, config))
    assert got.devices() == expected
    assert_consistent(host, got)


def test_lun_labels_reach_partitions_and_paths_shown(host: FakeHost) -> None:
    luns = [LunEntry(match=LunMatch(device="/dev/sda"), workload="system")]
    info = collect(source(host, DiskstatsConfig(show_paths=True), luns=luns)).info()
    assert info["sda"]["workload"] == info["sda1"]["workload"] == "system"
    assert info["dm-3"]["workload"] == ""


# --- change over time --------------------------------------------------------------------------


def test_a_new_device_is_published_on_the_next_collect(host: FakeHost) -> None:
    src = source(host)
    assert "sdf" not in collect(src).devices()
    host.add_scsi_disk("sdf", wwid="naa.5000c500a1b2c3f6", vendor="SEAGATE", model="ST600MM0009")
    host.write()
    got = collect(src)
    assert got.lun_of()["sdf"] == "naa.5000c500a1b2c3f6"
    assert_consistent(host, got)


def test_a_vanished_device_is_no_longer_published(host: FakeHost) -> None:
    src = source(host)
    assert "nvme0n1" in collect(src).devices()
    del host.stats["nvme0n1"]
    host.write()
    got = collect(src)
    assert "nvme0n1" not in got.devices()
    assert_consistent(host, got)


def test_a_mount_change_is_seen_on_the_next_collect(host: FakeHost) -> None:
    src = source(host)
    assert collect(src).info()["dm-3"]["mountpoint"] == "/u02/oradata"
    host.unmount("/u02/oradata")
    host.mount("/u05/oradata", "dm-4")
    host.write()
    info = collect(src).info()
    assert info["dm-3"]["mountpoint"] == info["dm-4"]["mountpoint"] == "/u05/oradata"


def test_a_mount_change_moves_config_labels_by_mount(host: FakeHost) -> None:
    luns = [LunEntry(match=LunMatch(mount="/u05/oradata/ORCL/system01.dbf"), database="ORCL")]
    src = source(host, luns=luns)
    assert collect(src).info()["dm-3"]["database"] == ""
    host.mount("/u05/oradata", "dm-4")
    host.write()
    assert collect(src).info()["dm-3"]["database"] == "ORCL"


def test_a_dm_rename_is_seen_after_the_refresh_interval(host: FakeHost) -> None:
    clock = FakeClock()
    src = source(host, DiskstatsConfig(show_paths=True), clock=clock)
    assert collect(src).lun_of()["dm-3"] == "ora_data"
    host.rename_dm("dm-3", "ora_data_a")
    host.stats["dm-3"] = Stats.distinct(99)  # counters move; the device set stays the same
    host.write()
    clock.now += 299.0
    # Within the interval the topology is cached: same names, values already fresh.
    got = collect(src)
    assert got.lun_of()["dm-3"] == "ora_data"
    assert_consistent(host, got)
    clock.now += 2.0
    got = collect(src)
    luns = got.lun_of()
    assert luns["dm-3"] == "ora_data_a"
    assert all(luns[p] == "ora_data_a" for p in PATHS)
    assert_consistent(host, got)


def test_a_loop_device_attached_after_start_is_published_once_it_does_io(host: FakeHost) -> None:
    """`losetup` on a loop device that already exists changes neither diskstats' device set nor the
    mounts; its first I/O is what says so, long before the refresh interval."""
    clock = FakeClock()
    src = source(host, clock=clock)
    assert "loop0" not in collect(src).devices()
    host.set_loop_backing("loop0", "/srv/lab/lun0.img")
    host.write()
    clock.now += 1.0
    assert "loop0" not in collect(src).devices()  # no I/O yet: the cached topology stands
    host.stats["loop0"] = Stats.distinct(7)
    host.write()
    got = collect(src)
    assert got.lun_of()["loop0"] == "loop0"
    assert_consistent(host, got)


def test_an_unattached_loop_device_that_counts_io_stays_hidden(host: FakeHost) -> None:
    """I/O counted on a loop device with no backing file (an open that failed) re-reads it and
    finds it still unattached."""
    src = source(host)
    collect(src)
    host.stats["loop0"] = Stats.distinct(3)
    host.write()
    assert "loop0" not in collect(src).devices()
    host.stats["loop0"] = Stats.distinct(4)
    host.write()
    assert "loop0" not in collect(src).devices()


def test_collect_twice_without_change_publishes_the_same(host: FakeHost) -> None:
    src = source(host, luns=[ORA_ENTRY])
    first = collect(src)
    second = collect(src)
    assert first.info() == second.info()
    assert_consistent(host, second)


# --- errors ------------------------------------------------------------------------------------


def test_malformed_lines_are_counted_and_the_rest_published(host: FakeHost) -> None:
    host.extra_diskstats_lines += [
        "   8     240 sdp 1 2 3 4 5",  # too few fields
        "   8     224 sdo 1 2 3 4 5 6 7 x 9 10 11 12 13 14 15 16 17",  # not a number
        "   8     208 sdn 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 -17",  # negative
    ]
    host.write()
    got = collect(source(host))
    assert got.result.errors["malformed_line"] == 3
    assert got.devices() == {"sda", "dm-3", "dm-4", "nvme0n1"}
    assert_consistent(host, got)


def test_a_device_listed_twice_is_counted_and_published_once(host: FakeHost) -> None:
    host.extra_diskstats_lines.append(" 253       3 dm-3 " + " ".join(["7"] * 17))
    host.write()
    got = collect(source(host))
    assert got.result.errors["duplicate_device"] == 1
    assert_consistent(host, got)  # the first line's values


def test_missing_diskstats_is_a_read_failure(host: FakeHost) -> None:
    (host.procfs / "diskstats").unlink()
    with pytest.raises(SourceError) as caught:
        source(host).collect()
    assert caught.value.reason == "read_failed"
    assert caught.value.reason in DiskstatsSource.error_reasons


def test_a_new_multipath_map_hides_disks_that_were_luns_until_then(host: FakeHost) -> None:
    """The topology is re-read incrementally on a device change: the new map's paths must be
    re-read too (their holders changed), not taken from the cache."""
    src = source(host)
    new_paths = ["sdf", "sdg"]
    for path in new_paths:
        host.add_scsi_disk(
            path, wwid="naa.600a0980383030534a3f463045727a99", vendor="NETAPP", model="LUN C-Mode"
        )
    host.write()
    before = collect(src)
    assert {before.info()[p]["kind"] for p in new_paths} == {"lun"}
    host.add_multipath("dm-9", alias="mssql_log", wwid="3600a0980383030534a3f463045727a99", paths=new_paths)
    host.write()
    after = collect(src)
    assert not set(new_paths) & after.devices()  # now paths: hidden by default
    assert after.info()["dm-9"]["paths"] == "sdf,sdg"
    assert_consistent(host, after)
    # The map goes away (multipath -f): the disks are LUNs again.
    del host.stats["dm-9"]
    for path in new_paths:
        (host.dir_of(path) / "holders" / "dm-9").unlink()
    host.write()
    again = collect(src)
    assert {again.info()[p]["kind"] for p in new_paths} == {"lun"}
    assert "dm-9" not in again.devices()
    assert_consistent(host, again)


# --- multipath path health -----------------------------------------------------------------------


def paths_of(got: Collected) -> dict[str, tuple[float, float]]:
    """(lunlat_lun_paths, lunlat_lun_paths_failed) by device."""
    paths = by_device(got.family(contract.LUN_PATHS.name))
    failed = by_device(got.family(contract.LUN_PATHS_FAILED.name))
    assert set(paths) == set(failed)
    return {device: (paths[(lun, device)], failed[(lun, device)]) for lun, device in paths}


def test_path_health_is_published_for_multipath_luns_only(host: FakeHost) -> None:
    got = collect(source(host))
    # dm-3 is the map; the LV on it, the local disk and the NVMe namespace have no paths.
    assert paths_of(got) == {"dm-3": (4, 0)}
    assert by_device(got.family(contract.LUN_PATHS.name)) == {("ora_data", "dm-3"): 4}


def paths_age(got: Collected) -> float:
    (age,) = by_device(got.family(contract.LUN_PATHS_AGE.name)).values()
    return age


@pytest.mark.parametrize("state", ["offline", "transport-offline", "blocked", "quiesce", "created-blocked"])
def test_a_path_not_running_is_failed_within_the_path_state_interval(host: FakeHost, state: str) -> None:
    clock = FakeClock()
    src = source(host, clock=clock)
    assert paths_of(collect(src)) == {"dm-3": (4, 0)}
    assert paths_age(collect(src)) == 0.0
    host.set_state("sdc", state)
    # Same devices, same mounts: the reading of the states is served with its age until it is
    # DEFAULT_INTERVAL old, never past that.
    clock.now += DEFAULT_INTERVAL - 0.5
    got = collect(src)
    assert paths_of(got) == {"dm-3": (4, 0)}
    assert paths_age(got) == DEFAULT_INTERVAL - 0.5
    clock.now += 0.5
    got = collect(src)
    assert paths_of(got) == {"dm-3": (4, 1)}
    assert paths_age(got) == 0.0
    host.set_state("sdd", state)
    clock.now += DEFAULT_INTERVAL
    assert paths_of(collect(src)) == {"dm-3": (4, 2)}
    host.set_state("sdc", "running")
    host.set_state("sdd", "running")
    clock.now += DEFAULT_INTERVAL
    assert paths_of(collect(src)) == {"dm-3": (4, 0)}


def test_a_new_multipath_map_has_its_paths_read_at_once(host: FakeHost) -> None:
    clock = FakeClock()
    src = source(host, clock=clock)
    collect(src)
    for p in ("sdx", "sdy"):
        host.add_scsi_disk(p, wwid="naa.600a098038303634722b4d59614a7000")
    host.add_multipath(
        "dm-9", alias="ora_new", wwid="3600a098038303634722b4d59614a7000", paths=["sdx", "sdy"]
    )
    host.set_state("sdy", "offline")
    host.write()
    got = collect(src)  # the clock has not moved: the topology changed, so the states are read again
    assert paths_of(got) == {"dm-3": (4, 0), "dm-9": (2, 1)}
    assert paths_age(got) == 0.0


def test_no_multipath_map_no_path_age(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.write()
    names = {f.spec.name for f in collect(source(h)).result.families}
    assert contract.LUN_PATHS_AGE.name not in names
    assert contract.LUN_PATHS.name not in names


def test_a_path_device_gone_from_sysfs_but_still_in_the_map_is_failed(host: FakeHost) -> None:
    src = source(host)
    collect(src)
    host.remove_block_device("sde")
    host.write()
    # The map still lists sde (a dangling slaves/ link): a path, and a failed one.
    assert paths_of(collect(src)) == {"dm-3": (4, 1)}


def test_a_path_dropped_from_the_map_is_one_path_less(host: FakeHost) -> None:
    src = source(host)
    collect(src)
    host.remove_block_device("sde")
    (host.dir_of("dm-3") / "slaves" / "sde").unlink()  # multipathd reloaded the map without it
    host.write()
    assert paths_of(collect(src)) == {"dm-3": (3, 0)}


def test_a_map_without_paths_is_published_with_none(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_multipath("dm-0", alias="orphan", wwid=DATA_WWID, paths=[])
    h.write()
    assert paths_of(collect(source(h))) == {"dm-0": (0, 0)}


def test_nvme_paths_of_a_dm_multipath_map_are_live_or_failed(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_nvme("nvme0n1", wwid=NVME_WWID)
    h.add_nvme("nvme1n1", wwid=NVME_WWID)
    h.add_multipath("dm-0", alias="nvme_lun", wwid=NVME_WWID, paths=["nvme0n1", "nvme1n1"])
    h.write()
    clock = FakeClock()
    src = source(h, clock=clock)
    assert paths_of(collect(src)) == {"dm-0": (2, 0)}
    h.set_state("nvme1n1", "connecting")  # drivers/nvme/host/sysfs.c: only "live" takes I/O
    clock.now += DEFAULT_INTERVAL
    assert paths_of(collect(src)) == {"dm-0": (2, 1)}


def test_a_path_without_a_state_attribute_is_not_counted_failed(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_virtio("vda")
    h.add_virtio("vdb")
    h.add_multipath("dm-0", alias="virt", wwid=DATA_WWID, paths=["vda", "vdb"])
    h.write()
    assert paths_of(collect(source(h))) == {"dm-0": (2, 0)}


def test_paths_shown_with_show_paths_carry_no_path_health_of_their_own(host: FakeHost) -> None:
    got = collect(source(host, DiskstatsConfig(show_paths=True)))
    assert "sdb" in got.devices()
    assert set(paths_of(got)) == {"dm-3"}


# --- luns: entries that match no device ----------------------------------------------------------


def _unmatched_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "lunlat.sources.diskstats" and "no device (yet)" in r.msg]


def _missing(count: int) -> list[LunEntry]:
    return [LunEntry(match=LunMatch(alias=f"gone_{i:05d}"), role="data") for i in range(count)]


def test_many_unmatched_entries_are_named_a_few_then_counted_in_one_line(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    """A config of 24,000 entries matching nothing logged 24,000 lines at start and at every reload."""
    caplog.set_level(logging.INFO)
    collect(source(host, luns=_missing(500)))
    lines = _unmatched_lines(caplog)
    assert len(lines) == UNMATCHED_NAMED + 1
    summary = lines[-1].kv  # type: ignore[attr-defined]
    assert summary["more"] == 500 - UNMATCHED_NAMED


def test_a_reloaded_source_does_not_name_the_same_unmatched_entries_again(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = source(host, luns=_missing(3))
    collect(before)
    assert len(_unmatched_lines(caplog)) == 3
    caplog.clear()
    after = source(host, luns=_missing(4))
    after.carry_over(before)
    collect(after)
    lines = _unmatched_lines(caplog)
    assert [r.kv["match"] for r in lines] == ["alias=gone_00003"]  # type: ignore[attr-defined]


def test_without_counters_the_source_publishes_names_roles_and_path_health_only(host: FakeHost) -> None:
    """`diskstats.counters: false` (--no-collector.diskstats.counters): node_exporter's counters are
    the host layer (goals host_layer), lunlat keeps what joins them to LUNs and roles."""
    got = collect(source(host, DiskstatsConfig(counters=False), luns=[ORA_ENTRY]))
    names = {f.spec.name for f in got.result.families}
    assert not names & {s.name for s in contract.DEVICE_METRICS}
    assert contract.LUN_INFO.name in names and {s.name for s in contract.PATH_METRICS} <= names
    assert got.info()["dm-3"]["database"] == "ORCL"
    with_counters = {f.spec.name for f in collect(source(host, luns=[ORA_ENTRY])).result.families}
    assert with_counters - names == {s.name for s in contract.DEVICE_METRICS}


@pytest.mark.parametrize(
    ("flags", "config", "counters"),
    [
        ([], DiskstatsConfig(), True),
        (["--no-collector.diskstats.counters"], DiskstatsConfig(), False),
        ([], DiskstatsConfig(counters=False), False),
        (["--collector.diskstats.counters"], DiskstatsConfig(counters=False), True),
    ],
)
def test_the_counters_flag_overrides_the_config(
    flags: list[str], config: DiskstatsConfig, counters: bool
) -> None:
    from lunlat.cli import _parser, source_settings  # noqa: PLC0415
    from lunlat.config import Config  # noqa: PLC0415
    from lunlat.sources.factory import Context  # noqa: PLC0415

    settings = source_settings(
        _parser().parse_args(["serve", "--collector.host.source", "diskstats", *flags])
    )
    assert Context.of(Config(diskstats=config), settings).diskstats().counters is counters


def test_queue_limits_are_published_where_the_device_has_them(host: FakeHost) -> None:
    """queue_depth of each SCSI disk (a multipath map's: its paths' summed), nr_requests of each request
    queue; a device without the attribute has no series, and a host where none has one no family."""
    assert not {s.name for s in contract.QUEUE_LIMIT_METRICS} & {
        f.spec.name for f in collect(source(host)).result.families
    }, "no device has the attributes yet: no family"
    for path, path_depth in zip(PATHS, (32, 32, 16, 16), strict=True):
        host.set_queue_limits(path, queue_depth=path_depth, nr_requests=64)
    host.set_queue_limits("sda", queue_depth=254, nr_requests=256)
    host.set_queue_limits("dm-3", nr_requests=4)
    host.set_queue_limits("nvme0n1", nr_requests=1023)
    got = collect(source(host, DiskstatsConfig(show_paths=True), luns=[ORA_ENTRY]))
    assert by_device(got.family(contract.DEVICE_QUEUE_DEPTH.name)) == {
        ("naa.5000c500a1b2c3d4", "sda"): 254,
        **{("ora_data", path): d for path, d in zip(PATHS, (32, 32, 16, 16), strict=True)},
        ("ora_data", "dm-3"): 96,
    }
    assert by_device(got.family(contract.DEVICE_NR_REQUESTS.name)) == {
        ("naa.5000c500a1b2c3d4", "sda"): 256,
        **{("ora_data", path): 64 for path in PATHS},
        ("ora_data", "dm-3"): 4,
        ("eui.0025388b71b3c0a1", "nvme0n1"): 1023,
    }


def test_a_changed_nr_requests_shows_at_the_next_topology_read(host: FakeHost) -> None:
    clock = FakeClock()
    host.set_queue_limits("dm-3", nr_requests=128)
    src = source(host, luns=[ORA_ENTRY], clock=clock)
    assert by_device(collect(src).family(contract.DEVICE_NR_REQUESTS.name)) == {("ora_data", "dm-3"): 128}
    host.set_queue_limits("dm-3", nr_requests=4)
    clock.now += 301.0
    assert by_device(collect(src).family(contract.DEVICE_NR_REQUESTS.name)) == {("ora_data", "dm-3"): 4}
