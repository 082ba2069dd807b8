"""Paths and partitions recognised where `holders/` or the `partition` file are missing, from what
else the kernel's sysfs layout says:

- a multipath map lists its paths in its own `slaves/` (block/holder.c bd_link_disk_holder makes the
  two links together, so a tree that kept one still names the pair);
- a partition's directory is inside its disk's (block/partitions/core.c add_partition: the
  partition device's parent is the disk's device), and is named after the disk (block/genhd.c
  disk_name / bdevname: the disk name, a `p` when it ends in a digit, the partition number).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lunlat.topology import LunView, read_block_devices, read_mounts, resolve
from tests.support.fake_host import FakeHost

ORA_WWID = "3600a098038303634722b4d59614a6f31"
PATHS = ["sdb", "sdc", "sdd", "sde"]


def views_of(host: FakeHost) -> dict[str, LunView]:
    host.write()
    names = [line.split()[2] for line in (host.procfs / "diskstats").read_text().splitlines()]
    devices = read_block_devices(host.sysfs, names)
    mounts, _ = read_mounts(host.procfs)
    return resolve(devices, mounts)


def kinds(views: dict[str, LunView]) -> dict[str, tuple[str, str]]:
    return {name: (v.kind, v.lun) for name, v in views.items()}


def test_paths_without_holders_are_paths_of_the_map_that_lists_them(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    for name in PATHS:
        h.add_scsi_disk(name, wwid="naa." + ORA_WWID[1:])
    h.add_multipath("dm-3", alias="ora_data", wwid=ORA_WWID, paths=PATHS)
    h.add_partition("sdb", 1)
    for name in PATHS:
        shutil.rmtree(h.dir_of(name) / "holders")
    got = kinds(views_of(h))
    assert got == {
        **{name: ("path", "ora_data") for name in PATHS},
        "sdb1": ("partition", "ora_data"),
        "dm-3": ("lun", "ora_data"),
    }


def test_a_partition_without_a_partition_file_is_a_partition_of_its_disk(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.add_partition("sda", 1)
    h.add_nvme("nvme0n1")
    h.add_partition("nvme0n1", 2)
    for name in ("sda1", "nvme0n1p2"):
        (h.dir_of(name) / "partition").unlink()
    for name in ("sda", "nvme0n1"):  # nor slaves/ on the disks: only where the directories sit tells
        shutil.rmtree(h.dir_of(name) / "slaves")
    got = kinds(views_of(h))
    assert got["sda1"] == ("partition", "naa.5000c500a1b2c3d4")
    assert got["nvme0n1p2"] == ("partition", "eui.0025388b71b3c0a1")
    # A namespace inside its NVMe controller's directory is no partition of the controller.
    assert got["nvme0n1"] == ("lun", "eui.0025388b71b3c0a1")
    assert got["sda"][0] == "lun"


def test_a_tree_without_class_block_finds_partitions_inside_their_disks(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.add_partition("sda", 1)
    h.add_nvme("nvme0n1")
    h.add_partition("nvme0n1", 1)
    h.add_scsi_disk("sdb", wwid="naa.5000c500a1b2c3d5")
    h.add_partition("sdb", 1)
    h.add_lvm("dm-0", vg="vg", lv="lv", on=["sdb1"])
    h.write()
    shutil.rmtree(h.sysfs / "class")  # /sys/block lists whole devices only
    got = kinds(views_of(h))
    assert got["sda1"] == ("partition", "naa.5000c500a1b2c3d4")
    assert got["nvme0n1p1"] == ("partition", "eui.0025388b71b3c0a1")
    assert got["sdb1"] == ("partition", "naa.5000c500a1b2c3d5")
    assert got["dm-0"] == ("lun", "vg-lv")
    assert {n for n, (kind, _) in got.items() if kind == "lun"} == {"sda", "nvme0n1", "sdb", "dm-0"}
