"""Database file paths → devices → LUNs, and the labels database sources give the host layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig, LunEntry, LunMatch
from lunlat.dbfiles import DbLunLabels, FileLocator, Location, device_labels, pick_role
from lunlat.luns import LunLabels
from lunlat.sources.diskstats import DiskstatsSource
from tests.support.fake_host import FakeHost

DATA_WWID = "3600a098038303634722b4d59614a6f31"
REDO_WWID = "3600a098038303634722b4d59614a6f32"
ASM_WWID = "3600a098038303634722b4d59614a6f33"
ASM2_WWID = "3600a098038303634722b4d59614a6f34"


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """Data on an LV on a multipath map; redo on a kpartx partition of another map; temp on a
    striped LV over two plain disks; two ASM disks as multipath maps; root on a local partition."""
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.add_partition("sda", 1)
    for p in ("sdb", "sdc"):
        h.add_scsi_disk(p, wwid="naa." + DATA_WWID[1:])
    h.add_multipath("dm-3", alias="ora_data", wwid=DATA_WWID, paths=["sdb", "sdc"])
    h.add_lvm("dm-4", vg="vgora", lv="oradata", on=["dm-3"])
    for p in ("sdd", "sde"):
        h.add_scsi_disk(p, wwid="naa." + REDO_WWID[1:])
    h.add_multipath("dm-5", alias="ora_redo", wwid=REDO_WWID, paths=["sdd", "sde"])
    h.add_kpartx("dm-6", map_name="dm-5", number=1)
    h.add_virtio("vda")
    h.add_virtio("vdb")
    h.add_lvm("dm-7", vg="vgtemp", lv="temp", on=["vda", "vdb"])
    h.add_scsi_disk("sdf", wwid="naa." + ASM_WWID[1:])
    h.add_multipath("dm-8", alias="asm_data1", wwid=ASM_WWID, paths=["sdf"])
    h.add_scsi_disk("sdg", wwid="naa." + ASM2_WWID[1:])
    h.add_multipath("dm-9", alias="asm_data2", wwid=ASM2_WWID, paths=["sdg"])
    h.mount("/", "sda1")
    h.mount("/u02/oradata", "dm-4")
    h.mount("/u03/redo", "dm-6")
    h.mount("/u04/temp", "dm-7")
    h.write()
    return h


def locator(host: FakeHost) -> FileLocator:
    found = FileLocator(host.procfs, host.sysfs)
    found.refresh()
    return found


def test_a_datafile_on_an_lv_on_multipath_is_on_the_map_not_its_paths(host: FakeHost) -> None:
    where = locator(host).locate("/u02/oradata/ORCL/users01.dbf")
    assert where.luns == ("ora_data",)
    assert where.devices[0] == "dm-4"
    assert set(where.devices) == {"dm-4", "dm-3", "sdb", "sdc"}


def test_a_redo_member_on_a_kpartx_partition_names_the_map(host: FakeHost) -> None:
    assert locator(host).locate("/u03/redo/redo01a.log").lun == "ora_redo"


def test_a_striped_volume_names_every_lun_it_rests_on(host: FakeHost) -> None:
    assert locator(host).locate("/u04/temp/temp01.dbf").lun == "vda,vdb"


def test_the_longest_mountpoint_wins_and_root_files_land_on_the_root_disk(host: FakeHost) -> None:
    loc = locator(host)
    assert loc.locate("/u02/oradata").lun == "ora_data"
    assert loc.locate("/u02/oradata_old/x.dbf").lun == "naa.5000c500a1b2c3d4"  # a sibling, not inside
    assert loc.locate("/u01/app/oracle/control01.ctl").lun == "naa.5000c500a1b2c3d4"


def test_asm_device_paths_by_mapper_name_and_kernel_name(host: FakeHost) -> None:
    loc = locator(host)
    assert loc.locate("/dev/mapper/asm_data1").lun == "asm_data1"
    assert loc.locate("/dev/dm-9").lun == "asm_data2"
    assert loc.locate("/dev/sdf").lun == "asm_data1"  # a path device belongs to its map


@pytest.mark.parametrize(
    "path", ["ORCL:DATA1", "AFD:DATA1", "+DATA/ORCL/DATAFILE/users.259.1", "/dev/mapper/gone", ""]
)
def test_paths_that_lead_to_no_device_give_no_lun(host: FakeHost, path: str) -> None:
    assert locator(host).locate(path) == Location()


def test_a_refresh_sees_a_new_mount(host: FakeHost) -> None:
    loc = locator(host)
    assert loc.locate("/u05/fra/arch1.arc").lun == "naa.5000c500a1b2c3d4"
    host.mount("/u05/fra", "dm-9")
    host.write()
    assert loc.locate("/u05/fra/arch1.arc").lun == "naa.5000c500a1b2c3d4"  # cached until refresh
    loc.refresh()
    assert loc.locate("/u05/fra/arch1.arc").lun == "asm_data2"


def test_role_priority_data_beats_log_beats_temp_and_control_decides_last() -> None:
    assert pick_role(["control", "log"]) == "log"
    assert pick_role(["control", "data", "log"]) == "data"
    assert pick_role(["temp", "control"]) == "temp"
    assert pick_role(["control"]) == "control"
    assert pick_role([]) == ""


def test_device_labels_cover_the_whole_stack(host: FakeHost) -> None:
    loc = locator(host)
    labels = device_labels(
        [(loc.locate("/u02/oradata/a.dbf"), "data"), (loc.locate("/u02/oradata/c.ctl"), "control")],
        "Oracle",
        "oltp",
    )
    assert labels == {d: LunLabels("Oracle", "data", "oltp") for d in ("dm-4", "dm-3", "sdb", "sdc")}


def test_registry_first_registered_source_wins_and_version_changes_only_on_change() -> None:
    registry = DbLunLabels()
    registry.register("oracle:A")
    registry.register("oracle:B")
    registry.publish("oracle:B", {"dm-3": LunLabels("B", "log", "dss")})
    version = registry.version
    registry.publish("oracle:B", {"dm-3": LunLabels("B", "log", "dss")})
    assert registry.version == version
    registry.publish("oracle:A", {"dm-3": LunLabels("A", "data", "")})
    _, merged = registry.merged()
    assert merged == {"dm-3": LunLabels("A", "data", "dss")}
    assert registry.version == version + 1


def _lun_info(source: DiskstatsSource) -> dict[str, dict[str, str]]:
    result = source.collect()
    (info,) = [f for f in result.families if f.spec is contract.LUN_INFO]
    return {s[1].as_dict()["lun"]: s[1].as_dict() for s in info.all_samples()}


def test_diskstats_takes_database_labels_and_a_config_entry_still_wins(host: FakeHost) -> None:
    registry = DbLunLabels()
    entry = LunEntry(match=LunMatch(alias="ora_redo"), role="other", workload="batch")
    source = DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig(), [entry], db_labels=registry)
    before = _lun_info(source)
    assert before["ora_data"]["database"] == ""
    loc = locator(host)
    registry.publish(
        "oracle:Oracle",
        device_labels(
            [(loc.locate("/u02/oradata/a.dbf"), "data"), (loc.locate("/u03/redo/r1.log"), "log")],
            "Oracle",
            "oltp",
        ),
    )
    after = _lun_info(source)  # same devices, same mounts: the new version alone re-labels
    assert (after["ora_data"]["database"], after["ora_data"]["role"], after["ora_data"]["workload"]) == (
        "Oracle",
        "data",
        "oltp",
    )
    # The config entry set role and workload for ora_redo; the database fills only what it left empty.
    assert (after["ora_redo"]["database"], after["ora_redo"]["role"], after["ora_redo"]["workload"]) == (
        "Oracle",
        "other",
        "batch",
    )
    assert after["asm_data1"]["database"] == ""


def test_after_a_reload_kept_sources_keep_their_labels_and_removed_ones_are_ignored() -> None:
    labels = DbLunLabels()
    for name in ("oracle:A", "oracle:B"):
        labels.register(name)
    labels.publish("oracle:A", {"dm-3": LunLabels("A", "data", "")})
    labels.publish("oracle:B", {"dm-4": LunLabels("B", "log", "")})
    version, _ = labels.merged()
    labels.keep(["diskstats", "oracle:A"])  # B left the config
    after, merged = labels.merged()
    assert merged == {"dm-3": LunLabels("A", "data", "")} and after != version
    labels.publish("oracle:B", {"dm-4": LunLabels("B", "log", "")})  # its last collection ends late
    assert labels.merged() == (after, merged)
    labels.register("oracle:B")  # back in a later config
    labels.publish("oracle:B", {"dm-4": LunLabels("B", "log", "")})
    assert labels.merged()[1]["dm-4"] == LunLabels("B", "log", "")
