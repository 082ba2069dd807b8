"""Config `luns:` entries: WWID spellings, what each match names, and how labels spread over the stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from lunlat.config import LunEntry, LunMatch
from lunlat.contract import Role
from lunlat.luns import NO_LABELS, LunLabels, assign, matched_devices
from lunlat.topology import BlockDevice, LunView, MountTable, read_block_devices, read_mounts, resolve
from lunlat.wwid import key, naa, same
from tests.support.fake_host import FakeHost

DATA_WWID = "3600a098038303634722b4d59614a6f31"
REDO_WWID = "3600a098038303634722b4d59614a6f32"
LOCAL_WWID = "naa.5000c500a1b2c3d4"
NVME_WWID = "eui.0025388b71b3c0a1"
DATA_PATHS = ("sdb", "sdc", "sdd", "sde")
REDO_PATHS = ("sdf", "sdg")


# --- WWID spellings (all of them: test_wwid.py) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "naa.600a098038303634722b4d59614a6f31",  # sysfs device/wwid
        "3600a098038303634722b4d59614a6f31",  # multipath / scsi_id: NAA type 3 + 32 hex digits
        "600A098038303634722B4D59614A6F31",  # array GUI, upper case
        "NAA.600A098038303634722B4D59614A6F31",
        "mpath-3600a098038303634722b4d59614a6f31",  # dm uuid
        " 3600a098038303634722b4d59614a6f31\n",  # pasted with whitespace
    ],
)
def test_every_spelling_of_a_32_digit_naa_names_one_lun(spelling: str) -> None:
    assert same(spelling, "600a098038303634722b4d59614a6f31")
    assert same(spelling, "naa.600a098038303634722b4d59614a6f31")


@pytest.mark.parametrize("spelling", ["naa.5000c500a1b2c3d4", "35000c500a1b2c3d4", "5000C500A1B2C3D4"])
def test_every_spelling_of_a_16_digit_naa_names_one_lun(spelling: str) -> None:
    assert same(spelling, "naa.5000c500a1b2c3d4")


@pytest.mark.parametrize("spelling", ["eui.0025388b71b3c0a1", "EUI.0025388B71B3C0A1", "0025388b71b3c0a1"])
def test_every_spelling_of_an_eui64_names_one_lun(spelling: str) -> None:
    assert same(spelling, "eui.0025388b71b3c0a1")


def test_a_dm_multipath_nvme_uuid_names_its_namespace() -> None:
    # dm-multipath over NVMe names the map by the namespace's sysfs wwid: dm uuid "mpath-eui.…".
    assert key("mpath-eui.0025388b71b3c0a1") == key("eui.0025388b71b3c0a1")


def test_different_wwids_stay_apart() -> None:
    assert not same("naa.600a098038303634722b4d59614a6f31", "naa.600a098038303634722b4d59614a6f32")
    # A leading 3 is a scsi_id type only with 16 or 32 digits after it; an EUI-64 starting with 3
    # keeps its 3.
    assert key("eui.3000000000000001") == "eui.3000000000000001"
    assert not same("eui.3000000000000001", "000000000000001")


# --- naa -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wwid", "expected"),
    [
        ("3600a098038303053453f463045727a4e", "600a098038303053453f463045727a4e"),  # multipath
        ("mpath-3600a098038303053453f463045727a4e", "600a098038303053453f463045727a4e"),  # dm uuid
        ("naa.600A098038303053453F463045727A4E", "600a098038303053453f463045727a4e"),  # sysfs, any case
        ("naa.624a93706c1b16ce1c034d1c00024c6f", "624a93706c1b16ce1c034d1c00024c6f"),  # Pure FlashArray
        ("naa.5000c500a1b2c3d4", "5000c500a1b2c3d4"),  # an 8-byte NAA
        ("35000c500a1b2c3d4", "5000c500a1b2c3d4"),
    ],
)
def test_naa_is_the_lowercase_designator_without_prefix(wwid: str, expected: str) -> None:
    assert naa(wwid) == expected


@pytest.mark.parametrize(
    "wwid",
    [
        "eui.0025388b71b3c0a1",  # EUI-64 designator / NVMe EUI-64
        "mpath-eui.0025388b71b3c0a1",
        "t10.ATA     SAMSUNG MZ7LH960HAJR-00005              S45NNE0M123456",  # T10 vendor ID
        "nvme.144d-533547584e46-53616d73756e67-00000001",
        "iqn.2003-01.org.linux-iscsi.target:sn.0123",  # a SCSI name string
        "2000000000000001",  # scsi_id type 2 (EUI-64), not 3
        "3000000000000001",  # 16 digits: a 3 here is no type prefix (an 8-byte NAA has 16 after it)
        "naa.600a0980",  # too short to be an NAA
        "naa.zz0a098038303053453f463045727a4e",
        "",
        "vgora-oradata",
    ],
)
def test_naa_is_empty_for_what_is_no_naa(wwid: str) -> None:
    assert naa(wwid) == ""


# --- a host to match against -------------------------------------------------------------------


@dataclass
class Topology:
    devices: dict[str, BlockDevice]
    views: dict[str, LunView]
    mounts: MountTable

    def match(self, **key: str) -> list[str]:
        return matched_devices(LunMatch(**key), self.devices, self.views, self.mounts)

    def assign(self, *entries: LunEntry) -> tuple[dict[str, LunLabels], list[LunEntry]]:
        return assign(entries, self.devices, self.views, self.mounts)


def topology_of(host: FakeHost) -> Topology:
    host.write()
    names = [line.split()[2] for line in (host.procfs / "diskstats").read_text().splitlines()]
    devices = read_block_devices(host.sysfs, names)
    mounts, _ = read_mounts(host.procfs)
    return Topology(devices, resolve(devices, mounts), mounts)


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """An Oracle host: a local disk with / on LVM; data on an LV on a multipath map; redo on a
    kpartx partition of another map; scratch on NVMe."""
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid=LOCAL_WWID, vendor="SEAGATE", model="ST600MM0009")
    h.add_partition("sda", 1)
    h.add_partition("sda", 2)
    h.add_lvm("dm-0", vg="vgsys", lv="root", on=["sda2"])
    for path in DATA_PATHS:
        h.add_scsi_disk(path, wwid="naa." + DATA_WWID[1:])
    h.add_multipath("dm-3", alias="ora_data", wwid=DATA_WWID, paths=list(DATA_PATHS))
    h.add_lvm("dm-4", vg="vgora", lv="oradata", on=["dm-3"])
    for path in REDO_PATHS:
        h.add_scsi_disk(path, wwid="naa." + REDO_WWID[1:])
    h.add_multipath("dm-5", alias="ora_redo", wwid=REDO_WWID, paths=list(REDO_PATHS))
    h.add_kpartx("dm-6", map_name="dm-5", number=1)
    h.add_nvme("nvme0n1", wwid=NVME_WWID)
    h.mount("/", "dm-0")
    h.mount("/boot", "sda1", fstype="ext4")
    h.mount("/u02/oradata", "dm-4")
    h.mount("/u03/redo", "dm-6")
    h.mount("/scratch", "nvme0n1")
    return h


def entry(
    database: str | None = None, role: Role | None = None, workload: str | None = None, **match: str
) -> LunEntry:
    return LunEntry(match=LunMatch(**match), database=database, role=role, workload=workload)


# --- what a match names ------------------------------------------------------------------------


def test_match_by_alias(host: FakeHost) -> None:
    topo = topology_of(host)
    assert topo.match(alias="ora_data") == ["dm-3"]
    assert topo.match(alias="ora_redo") == ["dm-5"]
    assert topo.match(alias="vgora-oradata") == ["dm-4"]
    assert topo.match(alias="ora_nothing") == []


@pytest.mark.parametrize(
    "wwid", ["naa.600a098038303634722b4d59614a6f31", DATA_WWID, "600A098038303634722B4D59614A6F31"]
)
def test_match_by_wwid_in_any_spelling_names_the_map_and_its_paths(host: FakeHost, wwid: str) -> None:
    topo = topology_of(host)
    assert set(topo.match(wwid=wwid)) == {"dm-3", *DATA_PATHS}


def test_match_by_wwid_of_a_plain_disk_names_it_and_its_partitions(host: FakeHost) -> None:
    topo = topology_of(host)
    assert set(topo.match(wwid="35000c500a1b2c3d4")) == {"sda", "sda1", "sda2"}
    assert topo.match(wwid="eui.0025388B71B3C0A1") == ["nvme0n1"]
    assert topo.match(wwid="naa.600a0980383036347200000000000000") == []


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("sdb", ["sdb"]),
        ("/dev/sdb", ["sdb"]),
        ("dm-3", ["dm-3"]),
        ("/dev/mapper/ora_data", ["dm-3"]),
        ("/dev/mapper/vgora-oradata", ["dm-4"]),
        ("/dev/sdz", []),
        ("/dev/mapper/nothing", []),
    ],
)
def test_match_by_device(host: FakeHost, device: str, expected: list[str]) -> None:
    assert topology_of(host).match(device=device) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/u02/oradata/ORCL/system01.dbf", ["dm-4"]),  # under "/" and "/u02/oradata": the longer wins
        ("/u02/oradata", ["dm-4"]),  # the mountpoint itself
        ("/u02/oradata2/ORCL/x.dbf", ["dm-0"]),  # a sibling with a common string prefix is not inside
        ("/u03/redo/redo01.log", ["dm-6"]),
        ("/boot/vmlinuz", ["sda1"]),
        ("/etc/oratab", ["dm-0"]),
        ("/scratch/tmp/x", ["nvme0n1"]),
    ],
)
def test_match_by_mount_takes_the_longest_containing_mountpoint(
    host: FakeHost, path: str, expected: list[str]
) -> None:
    assert topology_of(host).match(mount=path) == expected


def test_match_by_mount_through_a_btrfs_source(host: FakeHost) -> None:
    host.add_scsi_disk("sdh", wwid="naa.5000c500a1b2c3e5")
    host.add_partition("sdh", 1)
    host.mount("/srv/btrfs", dev="0:45", source="/dev/sdh1", fstype="btrfs")
    assert topology_of(host).match(mount="/srv/btrfs/data/file") == ["sdh1"]


def test_match_by_mount_of_a_file_on_a_network_filesystem_names_no_device(host: FakeHost) -> None:
    # A file on NFS below a LUN's mountpoint is on no block device (its st_dev is 0:NN): the entry
    # must not label the LUN mounted above it.
    host.mount("/u02/oradata/nfs", dev="0:60", source="filer:/vol/ora", fstype="nfs4")
    assert topology_of(host).match(mount="/u02/oradata/nfs/ORCL/users01.dbf") == []


def test_match_by_mount_with_nothing_mounted_names_nothing(host: FakeHost) -> None:
    host.mounts.clear()
    assert topology_of(host).match(mount="/u02/oradata/ORCL/system01.dbf") == []


# --- assign: labels over the stack -------------------------------------------------------------


def test_labels_propagate_down_from_lv_to_map_and_paths(host: FakeHost) -> None:
    topo = topology_of(host)
    labels, unmatched = topo.assign(
        entry("ORCL", "data", "oltp", mount="/u02/oradata/ORCL/system01.dbf"),
    )
    assert unmatched == []
    want = LunLabels("ORCL", "data", "oltp")
    for name in ("dm-4", "dm-3", *DATA_PATHS):
        assert labels[name] == want, name
    # Nothing else: not the redo LUN, not the root disk.
    assert set(labels) == {"dm-4", "dm-3", *DATA_PATHS}


def test_first_matching_entry_wins_per_label_later_ones_fill_gaps(host: FakeHost) -> None:
    topo = topology_of(host)
    labels, unmatched = topo.assign(
        entry("ORCL", "data", alias="ora_data"),
        entry("OTHER", "log", "dss", wwid="naa.600a098038303634722b4d59614a6f31"),
        entry(workload="batch", device="sdb"),
    )
    assert unmatched == []
    # The map: database and role from the first entry, workload only from the second.
    assert labels["dm-3"] == LunLabels("ORCL", "data", "dss")
    # sdb is matched by all three; the third entry has nothing left to fill.
    assert labels["sdb"] == LunLabels("ORCL", "data", "dss")
    # The LV above the map is not below anything matched.
    assert "dm-4" not in labels


def test_later_entry_labels_what_the_first_did_not_match(host: FakeHost) -> None:
    topo = topology_of(host)
    labels, _ = topo.assign(
        entry("ORCL", "data", alias="ora_data"),
        entry("ORCL", "log", alias="ora_redo"),
    )
    assert labels["dm-3"].role == "data"
    assert labels["dm-5"].role == "log"
    assert all(labels[p].role == "log" for p in REDO_PATHS)


def test_partitions_inherit_their_luns_labels(host: FakeHost) -> None:
    topo = topology_of(host)
    labels, _ = topo.assign(
        entry("ORCL", "log", "oltp", alias="ora_redo"),
        entry(workload="system", device="/dev/sda"),
    )
    # dm-6 (kpartx partition) sits above the matched map: it inherits the map's labels.
    assert topo.views["dm-6"].kind == "partition"
    assert labels["dm-6"] == LunLabels("ORCL", "log", "oltp")
    # Partitions of the plain disk inherit the disk's labels.
    assert labels["sda1"] == labels["sda2"] == LunLabels("", "", "system")
    # An LV on a partition is a LUN of its own: it inherits nothing.
    assert labels.get("dm-0", NO_LABELS) == NO_LABELS


def test_partition_matched_itself_keeps_its_own_labels(host: FakeHost) -> None:
    topo = topology_of(host)
    labels, _ = topo.assign(entry(role="other", device="sda1"))
    assert labels["sda1"] == LunLabels("", "other", "")
    # What holds the partition holds its data too: the disk is labelled, and its other partition
    # inherits from it.
    assert labels["sda"] == LunLabels("", "other", "")
    assert labels["sda2"] == LunLabels("", "other", "")


def test_entries_matching_nothing_are_returned_unmatched(host: FakeHost) -> None:
    topo = topology_of(host)
    missing_alias = entry("ORCL", alias="ora_fra")
    missing_wwid = entry("ORCL", wwid="naa.600a0980383036347200000000000000")
    missing_device = entry("ORCL", device="/dev/sdz")
    found = entry("ORCL", alias="ora_data")
    labels, unmatched = topo.assign(missing_alias, found, missing_wwid, missing_device)
    assert unmatched == [missing_alias, missing_wwid, missing_device]
    assert labels["dm-3"] == LunLabels("ORCL", "", "")


def test_no_entries_no_labels(host: FakeHost) -> None:
    assert topology_of(host).assign() == ({}, [])
