"""Topology on fake sysfs/procfs trees: which kernel device is which LUN, of which kind, mounted where."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat.topology import (
    BlockDevice,
    LunView,
    MountTable,
    parse_mountinfo,
    read_block_device,
    read_block_devices,
    read_mounts,
    resolve,
)
from tests.support.fake_host import FakeHost

ORA_WWID = "3600a098038303634722b4d59614a6f31"  # as multipath spells it (scsi_id: NAA type 3 + 32 hex)
ORA_SYSFS_WWID = "naa.600a098038303634722b4d59614a6f31"  # as the paths' device/wwid spells it
REDO_WWID = "3600a098038303634722b4d59614a6f32"
LOCAL_WWID = "naa.5000c500a1b2c3d4"
NVME_WWID = "eui.0025388b71b3c0a1"
PATHS = ["sdb", "sdc", "sdd", "sde"]


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def add_ora_data(host: FakeHost) -> None:
    """Multipath map dm-3 `ora_data` over four paths, added in an order that is not sorted."""
    for name in ("sdd", "sdb", "sde", "sdc"):
        host.add_scsi_disk(name, wwid=ORA_SYSFS_WWID, vendor="NETAPP", model="LUN C-Mode")
    host.add_multipath("dm-3", alias="ora_data", wwid=ORA_WWID, paths=["sdd", "sdb", "sde", "sdc"])


def diskstats_names(host: FakeHost) -> list[str]:
    return [line.split()[2] for line in (host.procfs / "diskstats").read_text().splitlines()]


def views_of(host: FakeHost) -> dict[str, LunView]:
    """What lunlat resolves for every device /proc/diskstats lists (as the source does)."""
    host.write()
    devices = read_block_devices(host.sysfs, diskstats_names(host))
    mounts, _ = read_mounts(host.procfs)
    return resolve(devices, mounts)


# --- multipath ---------------------------------------------------------------------------------


def test_multipath_map_is_one_lun_named_by_alias_with_wwid_from_dm_uuid(host: FakeHost) -> None:
    add_ora_data(host)
    views = views_of(host)
    lun = views["dm-3"]
    assert lun.kind == "lun"
    assert lun.lun == "ora_data"
    assert lun.wwid == ORA_WWID  # the dm uuid without "mpath-", not a path's naa. spelling
    assert lun.paths == "sdb,sdc,sdd,sde"
    assert (lun.vendor, lun.model) == ("NETAPP", "LUN C-Mode")  # padding stripped
    assert not lun.hidden


def test_multipath_paths_are_kind_path_of_the_alias(host: FakeHost) -> None:
    add_ora_data(host)
    views = views_of(host)
    for path in PATHS:
        view = views[path]
        assert (view.kind, view.lun, view.wwid) == ("path", "ora_data", ORA_WWID)
        assert view.paths == ""  # only the LUN lists its paths
    # One LUN in all: every view names the same LUN.
    assert {v.lun for v in views.values()} == {"ora_data"}
    assert [v.device for v in views.values() if v.kind == "lun"] == ["dm-3"]


def test_multipath_without_alias_is_named_by_its_dm_name(host: FakeHost) -> None:
    # user_friendly_names off: multipath names the map by its WWID.
    host.add_scsi_disk("sdb", wwid=ORA_SYSFS_WWID)
    host.add_multipath("dm-0", alias=ORA_WWID, wwid=ORA_WWID, paths=["sdb"])
    views = views_of(host)
    assert views["dm-0"].lun == ORA_WWID
    assert views["sdb"].lun == ORA_WWID


def test_vendor_and_model_of_a_map_come_from_its_paths(host: FakeHost) -> None:
    host.add_scsi_disk("sdb", wwid="naa.624a9370aabbccdd0011223300000001", vendor="PURE", model="FlashArray")
    host.add_scsi_disk("sdc", wwid="naa.624a9370aabbccdd0011223300000001", vendor="PURE", model="FlashArray")
    host.add_multipath("dm-1", alias="pure01", wwid="3624a9370aabbccdd0011223300000001", paths=["sdb", "sdc"])
    view = views_of(host)["dm-1"]
    assert (view.vendor, view.model, view.paths) == ("PURE", "FlashArray", "sdb,sdc")


# --- partitions --------------------------------------------------------------------------------


def test_partition_of_a_plain_disk_is_kind_partition_of_its_lun(host: FakeHost) -> None:
    host.add_scsi_disk("sda", wwid=LOCAL_WWID, vendor="SEAGATE", model="ST600MM0009")
    host.add_partition("sda", 1)
    host.add_partition("sda", 2)
    views = views_of(host)
    assert (views["sda"].kind, views["sda"].lun) == ("lun", LOCAL_WWID)
    for part in ("sda1", "sda2"):
        assert (views[part].kind, views[part].lun, views[part].wwid) == ("partition", LOCAL_WWID, LOCAL_WWID)
        assert (views[part].vendor, views[part].model) == ("SEAGATE", "ST600MM0009")


def test_partition_of_a_multipath_path_is_a_partition_of_the_map(host: FakeHost) -> None:
    add_ora_data(host)
    host.add_partition("sdb", 1)
    views = views_of(host)
    assert (views["sdb1"].kind, views["sdb1"].lun) == ("partition", "ora_data")
    assert views["sdb1"].paths == ""


def test_partition_parent_comes_from_the_resolved_sysfs_path(host: FakeHost) -> None:
    host.add_scsi_disk("sdb", wwid=ORA_SYSFS_WWID)
    part = host.add_partition("sdb", 3)
    device = read_block_device(host.sysfs, part)
    assert (device.partition, device.parent, device.dev) == (True, "sdb", host.dev_of(part))
    whole = read_block_device(host.sysfs, "sdb")
    assert (whole.partition, whole.parent) == (False, "")


def test_kpartx_partition_of_a_map_is_kind_partition_of_the_map(host: FakeHost) -> None:
    add_ora_data(host)
    host.add_kpartx("dm-6", map_name="dm-3", number=1)
    views = views_of(host)
    part = views["dm-6"]
    assert (part.kind, part.lun, part.wwid) == ("partition", "ora_data", ORA_WWID)
    assert part.paths == ""
    # The map stays the LUN: its kpartx holder is no multipath holder.
    assert (views["dm-3"].kind, views["dm-3"].lun) == ("lun", "ora_data")


# --- other device types ------------------------------------------------------------------------


def test_nvme_namespace_and_partition_are_named_by_eui_wwid(host: FakeHost) -> None:
    host.add_nvme("nvme0n1", wwid=NVME_WWID, model="Samsung SSD 980 PRO 1TB")
    host.add_partition("nvme0n1", 1)
    views = views_of(host)
    ns = views["nvme0n1"]
    assert (ns.kind, ns.lun, ns.wwid) == ("lun", NVME_WWID, NVME_WWID)
    assert ns.model == "Samsung SSD 980 PRO 1TB"  # from the controller, padding stripped
    part = views["nvme0n1p1"]
    assert (part.kind, part.lun, part.wwid) == ("partition", NVME_WWID, NVME_WWID)


def test_plain_scsi_disk_is_named_by_its_device_wwid(host: FakeHost) -> None:
    host.add_scsi_disk("sda", wwid=LOCAL_WWID, vendor="SEAGATE", model="ST600MM0009")
    view = views_of(host)["sda"]
    assert (view.kind, view.lun, view.wwid, view.paths) == ("lun", LOCAL_WWID, LOCAL_WWID, "")
    assert (view.vendor, view.model) == ("SEAGATE", "ST600MM0009")


def test_disk_without_wwid_is_named_by_its_kernel_name(host: FakeHost) -> None:
    host.add_virtio("vda")
    host.add_partition("vda", 1)
    views = views_of(host)
    assert (views["vda"].kind, views["vda"].lun, views["vda"].wwid) == ("lun", "vda", "")
    assert (views["vda1"].kind, views["vda1"].lun) == ("partition", "vda")


def test_lvm_volume_on_a_map_is_its_own_lun_and_carries_its_mount_down(host: FakeHost) -> None:
    add_ora_data(host)
    host.add_lvm("dm-4", vg="vgora", lv="oradata", on=["dm-3"])
    host.add_scsi_disk("sda", wwid=LOCAL_WWID)
    host.mount("/", "sda")
    host.mount("/u02/oradata", "dm-4")
    views = views_of(host)
    assert (views["dm-4"].kind, views["dm-4"].lun, views["dm-4"].wwid) == ("lun", "vgora-oradata", "")
    assert (views["dm-3"].kind, views["dm-3"].lun) == ("lun", "ora_data")  # an LV holder is no multipath
    for name in ("dm-4", "dm-3", *PATHS):
        assert views[name].mountpoints == ("/u02/oradata",), name
    assert views["sda"].mountpoints == ("/",)


def test_unattached_loop_is_hidden_attached_loop_is_shown(host: FakeHost) -> None:
    host.add_loop("loop0")
    host.add_loop("loop1", backing_file="/srv/lab/lun1.img")
    views = views_of(host)
    assert views["loop0"].hidden
    assert not views["loop1"].hidden
    assert (views["loop1"].kind, views["loop1"].lun) == ("lun", "loop1")
    # Detaching it hides it again.
    host.set_loop_backing("loop1", None)
    assert views_of(host)["loop1"].hidden


def test_partition_of_an_attached_loop_device_is_not_hidden(host: FakeHost) -> None:
    # `losetup -P` on a partitioned image: loop0p1 holds data of an attached loop device, so it is
    # a partition like any other (shown with show_paths), not an unattached loop device.
    host.add_loop("loop0", backing_file="/srv/lab/disk.img")
    host.add_partition("loop0", 1)
    views = views_of(host)
    part = views["loop0p1"]
    assert (part.kind, part.lun) == ("partition", "loop0")
    assert not part.hidden


def test_device_name_with_slash_is_found_in_sysfs_with_bang(host: FakeHost) -> None:
    host.add_scsi_disk("cciss/c0d0", wwid=None, vendor="HP", model="LOGICAL VOLUME")
    part = host.add_partition("cciss/c0d0", 1)
    assert part == "cciss/c0d0p1"
    host.write()
    assert "cciss/c0d0" in diskstats_names(host)
    disk = read_block_device(host.sysfs, "cciss/c0d0")
    assert (disk.dev, disk.vendor, disk.model) == (host.dev_of("cciss/c0d0"), "HP", "LOGICAL VOLUME")
    partition = read_block_device(host.sysfs, part)
    assert (partition.partition, partition.parent) == (True, "cciss/c0d0")
    views = views_of(host)
    assert (views["cciss/c0d0"].kind, views["cciss/c0d0"].lun) == ("lun", "cciss/c0d0")
    assert (views[part].kind, views[part].lun) == ("partition", "cciss/c0d0")


def test_unknown_device_reads_as_empty_facts(host: FakeHost) -> None:
    assert read_block_device(host.sysfs, "sdzz") == BlockDevice("sdzz")


# --- read_block_devices ------------------------------------------------------------------------


def test_read_block_devices_follows_slaves_and_holders(host: FakeHost) -> None:
    add_ora_data(host)
    host.add_lvm("dm-4", vg="vgora", lv="oradata", on=["dm-3"])
    host.add_scsi_disk("sda", wwid=LOCAL_WWID)
    stack = {"dm-4", "dm-3", *PATHS}
    # Asked for the LV only: its map (slave) and the map's paths (slaves of the slave).
    assert set(read_block_devices(host.sysfs, ["dm-4"])) == stack
    # Asked for one path: its map (holder), the other paths and the LV above the map.
    assert set(read_block_devices(host.sysfs, ["sdc"])) == stack
    devices = read_block_devices(host.sysfs, ["sdc"])
    assert devices["dm-3"].slaves == tuple(PATHS)
    assert devices["dm-3"].holders == ("dm-4",)
    assert devices["sdb"].holders == ("dm-3",)
    assert (devices["dm-3"].dm_name, devices["dm-3"].dm_uuid) == ("ora_data", f"mpath-{ORA_WWID}")
    assert devices["dm-3"].multipath and not devices["dm-4"].multipath
    # The unrelated disk is not pulled in.
    assert "sda" not in devices


def test_read_block_devices_follows_a_partition_to_its_disk(host: FakeHost) -> None:
    add_ora_data(host)
    host.add_partition("sdb", 1)
    devices = read_block_devices(host.sysfs, ["sdb1"])
    assert {"sdb1", "sdb", "dm-3", *PATHS} <= set(devices)
    assert devices["sdb"].holders == ("dm-3",)


# --- mounts ------------------------------------------------------------------------------------


def test_parse_mountinfo_reads_dev_and_mountpoint() -> None:
    table = parse_mountinfo(
        "36 25 253:4 / /u02/oradata rw,relatime shared:1 - xfs /dev/mapper/vg-ora rw\n"
        "37 25 8:1 / /boot rw,relatime - ext4 /dev/sda1 rw\n"  # no optional fields
        "38 25 8:1 /images /srv/images rw,relatime shared:4 master:2 - ext4 /dev/sda1 rw\n"  # bind mount
        "not a mountinfo line\n"
    )
    assert table.by_dev == {"253:4": ["/u02/oradata"], "8:1": ["/boot", "/srv/images"]}
    assert table.by_source == {}


def test_mountinfo_octal_escapes_are_undone() -> None:
    table = parse_mountinfo(
        r"40 25 8:17 / /u02/my\040data rw - xfs /dev/sdb1 rw" + "\n"
        r"41 25 8:18 / /mnt/tab\011and\134back\134040slash rw - xfs /dev/sdb2 rw" + "\n"
    )
    assert table.by_dev["8:17"] == ["/u02/my data"]
    # \134 is a backslash; the "040" after it is literal text, not a second escape.
    assert table.by_dev["8:18"] == ["/mnt/tab\tand\\back\\040slash"]


def test_mountpoint_with_space_reaches_the_device(host: FakeHost) -> None:
    host.add_scsi_disk("sdb", wwid=ORA_SYSFS_WWID)
    host.mount("/u02/ora data", "sdb")
    assert r"/u02/ora\040data" in host.mountinfo_text()
    assert views_of(host)["sdb"].mountpoints == ("/u02/ora data",)


def test_btrfs_mount_with_anonymous_dev_is_mapped_through_its_source(host: FakeHost) -> None:
    host.add_scsi_disk("sdh", wwid="naa.5000c500a1b2c3e5")
    host.add_partition("sdh", 1)
    add_ora_data(host)
    host.add_lvm("dm-4", vg="vgora", lv="arch", on=["dm-3"])
    host.mount("/srv/btrfs", dev="0:45", source="/dev/sdh1", fstype="btrfs")
    host.mount("/u04/arch", dev="0:46", source="/dev/mapper/vgora-arch", fstype="btrfs")
    host.mount("/var/lib/containers/merged", dev="0:50", source="overlay", fstype="overlay")
    host.write()
    mounts, _ = read_mounts(host.procfs)
    # The overlay mount is kept (a path under it must match no LUN) but names no device.
    assert mounts.by_source == {
        "/dev/sdh1": ["/srv/btrfs"],
        "/dev/mapper/vgora-arch": ["/u04/arch"],
        "overlay": ["/var/lib/containers/merged"],
    }
    assert mounts.by_dev == {}
    views = views_of(host)
    assert all("/var/lib/containers/merged" not in v.mountpoints for v in views.values())
    assert views["sdh1"].mountpoints == ("/srv/btrfs",)
    assert views["sdh"].mountpoints == ("/srv/btrfs",)  # carried down to the disk
    for name in ("dm-4", "dm-3", *PATHS):
        assert views[name].mountpoints == ("/u04/arch",), name


def test_read_mounts_falls_back_to_self_when_pid_1_is_not_visible(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    line = "22 1 8:2 / / rw,relatime - ext4 /dev/sda2 rw\n"
    (tmp_path / "self" / "mountinfo").write_text(line)
    table, text = read_mounts(tmp_path)
    assert table.by_dev == {"8:2": ["/"]}
    assert text == line.strip()


def test_no_mount_table_means_no_mountpoints(host: FakeHost) -> None:
    host.add_scsi_disk("sda", wwid=LOCAL_WWID)
    devices = read_block_devices(host.sysfs, ["sda"])
    assert resolve(devices, MountTable())["sda"].mountpoints == ()
