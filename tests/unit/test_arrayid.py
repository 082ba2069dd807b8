"""lunlat_lun_info's `array`: read from the WWID where the vendor's format names the array (formats and
their sources: lunlat/arrayid.py), from a `luns:` entry's `array:`, else "unknown"."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import pytest
from pydantic import ValidationError

from lunlat import arrayid, contract
from lunlat.config import DiskstatsConfig, LunEntry, LunMatch
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.psutil_disks import PsutilDisksSource
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

# Pure FlashArray. A volume's serial as Purity prints it (upper case): its NAA is "naa.624a9370" + the
# serial in lower case (Pure's Ansible collection, purefa_volume.py `page83_naa`); the NAA is the one
# in blog.psustevens.com/2025/12/07/identifying-pure-scsi-volumes-in-vcenter.
PURE_SERIAL = "730D187406C14775007B3AB1"
PURE_NAA = "624a9370" + PURE_SERIAL.lower()
# Its NVMe NGUID (purefa_volume.py `_create_nguid`): "00" + the serial's first 14 digits + OUI + last 10.
PURE_NGUID = "00" + PURE_SERIAL[:14].lower() + "24a937" + PURE_SERIAL[-10:].lower()
# The array the serial names: its first 7 bytes are the FlashArray ID's (Pure, "How To: Identify
# Pure Storage Namespaces on ESXi").
PURE_ARRAY = "purefa:" + PURE_SERIAL[:14].lower()
# The namespace of that article, and the FlashArray ID bytes it reads from it.
KB_NGUID = "003b7b308d98f94224a9375e00018816"
KB_ARRAY_ID_BYTES = "3b7b308d98f942"

# NetApp, from the community thread arrayid.py cites: clustered ONTAP LUN serial 'RLIta+DhqCVk', and a
# 7-Mode LUN's 'P3Ku/JlVTFX3', each NAA = the prefix + the serial's ASCII bytes in hex.
NETAPP_CDOT_NAA = "600a0980" + b"RLIta+DhqCVk".hex()
NETAPP_7MODE_NAA = "60a98000" + b"P3Ku/JlVTFX3".hex()


@pytest.mark.parametrize(
    "spelling",
    [
        f"naa.{PURE_NAA}",  # the kernel's sysfs wwid
        f"3{PURE_NAA}",  # multipath, scsi_id
        f"mpath-3{PURE_NAA}",  # the map's dm uuid
        f"wwn-0x{PURE_NAA}",  # udev's by-id link
        f"NAA.{PURE_NAA.upper()}",
    ],
)
def test_a_flasharray_naa_names_the_array_by_its_serials_first_seven_bytes(spelling: str) -> None:
    assert arrayid.from_wwid(spelling) == PURE_ARRAY


def test_a_flasharray_nvme_namespace_names_the_same_array_as_its_scsi_volume() -> None:
    assert arrayid.from_wwid(f"eui.{PURE_NGUID}") == arrayid.from_wwid(f"naa.{PURE_NAA}") == PURE_ARRAY


def test_the_pure_articles_namespace_names_its_flasharray_id() -> None:
    assert arrayid.from_wwid(f"eui.{KB_NGUID}") == f"purefa:{KB_ARRAY_ID_BYTES}"


@pytest.mark.parametrize(
    "spelling",
    [
        f"naa.{NETAPP_CDOT_NAA}",  # NetApp: the serial names the LUN only
        f"3{NETAPP_7MODE_NAA}",
        f"naa.{PURE_NAA[:-2]}",  # Pure's prefix, a serial of the wrong length
        "naa.5000c500a1b2c3d4",  # a local disk's NAA type 5
        "eui.0025388b71b3c0a1",  # a local NVMe SSD's EUI-64
        "eui." + KB_NGUID.replace("24a937", "000000"),  # an NGUID without Pure's OUI in its place
        "t10.ATA     Samsung SSD",
        "",
    ],
)
def test_a_wwid_whose_format_names_no_array_gives_none(spelling: str) -> None:
    assert arrayid.from_wwid(spelling) == ""
    assert arrayid.label("", spelling) == contract.ARRAY_UNKNOWN


def test_the_configured_array_wins_over_the_wwid() -> None:
    assert arrayid.label("fa-prod-2", f"naa.{PURE_NAA}") == "fa-prod-2"
    assert arrayid.label("aff-a400", f"naa.{NETAPP_CDOT_NAA}") == "aff-a400"


def test_a_device_without_its_own_wwid_takes_the_one_array_of_the_devices_below() -> None:
    below = [f"3{PURE_NAA}", f"naa.{PURE_NAA}", f"naa.{PURE_NAA}"]  # the map and its paths
    assert arrayid.label("", "", below) == PURE_ARRAY
    other = "624a9370" + "0" * 14 + PURE_SERIAL[14:].lower()  # another array's volume
    assert arrayid.label("", "", [*below, f"naa.{other}"]) == contract.ARRAY_UNKNOWN
    assert arrayid.label("", "", [*below, "naa.5000c500a1b2c3d4"]) == contract.ARRAY_UNKNOWN
    assert arrayid.label("", "", []) == contract.ARRAY_UNKNOWN


# --- config --------------------------------------------------------------------------------------


def test_an_entry_may_name_only_the_array() -> None:
    entry = LunEntry(match=LunMatch(alias="ora_data"), array=" fa-prod-2 ")
    assert entry.array == "fa-prod-2"


@pytest.mark.parametrize("value", ["", "  ", contract.ARRAY_UNKNOWN, "x" * 129])
def test_an_entry_cannot_name_an_array_empty_unknown_or_too_long(value: str) -> None:
    with pytest.raises(ValidationError, match="array"):
        LunEntry(match=LunMatch(alias="ora_data"), array=value)


# --- published -----------------------------------------------------------------------------------


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """A FlashArray volume on two paths under an LV, a NetApp LUN on two paths, a local NVMe SSD."""
    h = FakeHost(tmp_path)
    for path in ("sdb", "sdc"):
        h.add_scsi_disk(path, wwid=f"naa.{PURE_NAA}", vendor="PURE", model="FlashArray")
    h.add_multipath("dm-0", alias="ora_data", wwid=f"3{PURE_NAA}", paths=["sdb", "sdc"])
    h.add_lvm("dm-1", vg="vgora", lv="oradata", on=["dm-0"])
    for path in ("sdd", "sde"):
        h.add_scsi_disk(path, wwid=f"naa.{NETAPP_CDOT_NAA}", vendor="NETAPP", model="LUN C-Mode")
    h.add_multipath("dm-2", alias="ora_redo", wwid=f"3{NETAPP_CDOT_NAA}", paths=["sdd", "sde"])
    h.add_nvme("nvme0n1")
    h.write()
    return h


def arrays(host: FakeHost, luns: list[LunEntry]) -> dict[str, str]:
    source = DiskstatsSource(
        host.procfs,
        host.sysfs,
        DiskstatsConfig(show_paths=True),
        luns=luns,
        refresh_interval=300.0,
        clock=FakeClock(),
    )
    (family,) = [f for f in source.collect().families if f.spec.name == contract.LUN_INFO.name]
    return {labels.as_dict()["device"]: labels.as_dict()["array"] for _, labels, _ in family.all_samples()}


def test_published_array_per_device(host: FakeHost) -> None:
    got = arrays(host, [])
    assert {name: got[name] for name in ("dm-0", "sdb", "sdc", "dm-1")} == dict.fromkeys(
        ("dm-0", "sdb", "sdc", "dm-1"), PURE_ARRAY
    )  # the map, its paths, and the LV on it
    assert got["dm-2"] == got["sdd"] == contract.ARRAY_UNKNOWN  # NetApp's NAA names no array
    assert got["nvme0n1"] == contract.ARRAY_UNKNOWN


def test_a_luns_entry_names_the_array_of_its_lun_and_what_is_below(host: FakeHost) -> None:
    luns = [
        LunEntry(match=LunMatch(alias="ora_redo"), array="aff-a400", role="log"),
        LunEntry(match=LunMatch(mount="/nowhere"), array="never-matched"),
        LunEntry(match=LunMatch(alias="ora_data"), array="fa-prod-2"),  # stretched: the user knows
    ]
    got = arrays(host, luns)
    assert got["dm-2"] == got["sdd"] == got["sde"] == "aff-a400"
    assert got["dm-0"] == got["sdb"] == "fa-prod-2"
    assert got["dm-1"] == PURE_ARRAY  # the LV above the entry's map is not matched: its paths' array


PsutilRow = namedtuple("PsutilRow", "read_count write_count read_bytes write_bytes read_time write_time")


def test_psutil_has_no_wwid_so_only_a_device_entry_names_the_array() -> None:
    disks = {n: PsutilRow(1, 1, 1, 1, 1, 1) for n in ("disk0", "disk1")}
    luns = [LunEntry(match=LunMatch(device="disk1"), array="fa-prod-2")]
    (family,) = [
        f
        for f in PsutilDisksSource(DiskstatsConfig(), luns, counters=lambda: disks).collect().families
        if f.spec.name == contract.LUN_INFO.name
    ]
    got = {s[1].as_dict()["device"]: s[1].as_dict()["array"] for s in family.samples}
    assert got == {"disk0": contract.ARRAY_UNKNOWN, "disk1": "fa-prod-2"}
