"""WWID spellings on fixture trees: `luns:` entries and the published labels read every spelling the
host's tools print (the table and its sources: lunlat/wwid.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat.config import DiskstatsConfig, LunEntry, LunMatch
from lunlat.luns import matched_devices
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.topology import read_block_devices, read_mounts, resolve
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

NAA6 = "600a098038303634722b4d59614a6f31"
NAA5 = "5000c500a1b2c3d4"
EUI64 = "0025388b71b3c0a1"


# --- on fixture trees: config and topology use the one reading -------------------------------------


def matches(host: FakeHost, spelling: str) -> set[str]:
    host.write()
    names = [line.split()[2] for line in (host.procfs / "diskstats").read_text().splitlines()]
    devices = read_block_devices(host.sysfs, names)
    mounts, _ = read_mounts(host.procfs)
    return set(matched_devices(LunMatch(wwid=spelling), devices, resolve(devices, mounts), mounts))


@pytest.mark.parametrize("spelling", [f"2{EUI64}", f"eui.{EUI64}", f"EUI.{EUI64.upper()}"])
def test_an_eui64_scsi_lun_in_either_spelling_names_the_map_and_its_paths(
    tmp_path: Path, spelling: str
) -> None:
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sdb", wwid=f"eui.{EUI64}")  # the kernel's spelling in device/wwid
    h.add_scsi_disk("sdc", wwid=f"eui.{EUI64}")
    h.add_multipath("dm-0", alias="data", wwid=f"2{EUI64}", paths=["sdb", "sdc"])  # multipath's
    assert matches(h, spelling) == {"dm-0", "sdb", "sdc"}


@pytest.mark.parametrize("spelling", [f"0x{NAA5}", f"wwn-0x{NAA5}", f"/dev/disk/by-id/wwn-0x{NAA5}"])
def test_udev_wwn_spellings_name_the_disk(tmp_path: Path, spelling: str) -> None:
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid=f"naa.{NAA5}")
    h.add_partition("sda", 1)
    assert matches(h, spelling) == {"sda", "sda1"}


def test_a_name_string_wwid_publishes_no_nul_and_joins_by_naa(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    padded = f"naa.{NAA6.upper()}\x00\x00\x00\x00"  # SCSI name string designator, as the kernel copies it
    h.add_scsi_disk("sdb", wwid=padded)
    h.add_partition("sdb", 1)
    h.write()
    entry = LunEntry(match=LunMatch(wwid=f"3{NAA6}"), database="ORCL", role="data")
    src = DiskstatsSource(h.procfs, h.sysfs, DiskstatsConfig(), luns=[entry], clock=FakeClock())
    result = src.collect()
    for family in result.families:
        for _, labels, _ in family.all_samples():
            assert not any("\x00" in value for value in labels.values), family.spec.name
    (info,) = [f for f in result.families if f.spec.name == "lunlat_lun_info"]
    by_device = {labels.as_dict()["device"]: labels.as_dict() for _, labels, _ in info.all_samples()}
    assert by_device["sdb"]["lun"] == f"naa.{NAA6.upper()}"
    assert by_device["sdb"]["wwid"] == f"naa.{NAA6.upper()}"
    assert by_device["sdb"]["naa"] == NAA6
    assert by_device["sdb"]["database"] == "ORCL"
