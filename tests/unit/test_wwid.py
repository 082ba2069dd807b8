"""One reading of every WWID spelling the host's tools print (lunlat.wwid), used by `luns:` entries
and the topology alike. Spellings and their sources: the table in lunlat/wwid.py."""

from __future__ import annotations

import pytest

from lunlat import wwid

NAA6 = "600a098038303634722b4d59614a6f31"  # NetApp, NAA IEEE Registered Extended (16 bytes)
NAA5 = "5000c500a1b2c3d4"  # Seagate SAS disk, NAA IEEE Registered (8 bytes)
EUI64 = "0025388b71b3c0a1"
EUI128 = "6479a776f1b0e8a2002538e900000001"  # an NVMe NGUID, printed as eui. + 32 digits
T10 = "ATA     SAMSUNG MZ7LH960HAJR-00005              S45NNE0M123456"

# (spelling, the tool that prints it, the one key)
SPELLINGS = [
    # NAA 6 and 5: kernel sysfs, multipath/scsi_id/sg3_utils ID_SERIAL, udev ID_WWN_WITH_EXTENSION,
    # by-id link, dm uuid, array GUI, a SCSI name string with its NUL padding (kernel memcpy)
    (f"naa.{NAA6}", "kernel scsi_vpd_lun_id", f"naa.{NAA6}"),
    (f"3{NAA6}", "multipath parse_vpd_pg83, scsi_id", f"naa.{NAA6}"),
    (f"0x{NAA6}", "udev ID_WWN_WITH_EXTENSION", f"naa.{NAA6}"),
    (f"wwn-0x{NAA6}", "udev by-id link", f"naa.{NAA6}"),
    (f"/dev/disk/by-id/wwn-0x{NAA6}", "udev by-id path", f"naa.{NAA6}"),
    (f"mpath-3{NAA6}", "dm uuid of a multipath map", f"naa.{NAA6}"),
    (f"naa.{NAA6.upper()}\x00\x00\x00\x00", "kernel, SCSI name string designator", f"naa.{NAA6}"),
    (f"8naa.{NAA6.upper()}", "scsi_id, SCSI name string", f"naa.{NAA6}"),
    (
        f"8naa.{NAA6.upper()}\\x00\\x00\\x00\\x00",
        "sg3_utils 55-scsi-sg3_id.rules, name string",
        f"naa.{NAA6}",
    ),
    (f" 3{NAA6.upper()}\n", "pasted", f"naa.{NAA6}"),
    (f"naa.{NAA5}", "kernel", f"naa.{NAA5}"),
    (f"3{NAA5}", "multipath, scsi_id", f"naa.{NAA5}"),
    (f"0x{NAA5}", "udev ID_WWN", f"naa.{NAA5}"),
    (f"wwn-0x{NAA5}", "udev by-id link", f"naa.{NAA5}"),
    # EUI-64 both ways, 8 and 16 bytes
    (f"eui.{EUI64}", "kernel scsi_vpd_lun_id / NVMe wwid_show", f"eui.{EUI64}"),
    (f"2{EUI64}", "multipath, scsi_id, sg3_utils", f"eui.{EUI64}"),
    (f"mpath-2{EUI64}", "dm uuid", f"eui.{EUI64}"),
    (f"EUI.{EUI64.upper()}", "SCSI name string, upper case", f"eui.{EUI64}"),
    (f"eui.{EUI128}", "NVMe NGUID", f"eui.{EUI128}"),
    (f"2{EUI128}", "multipath", f"eui.{EUI128}"),
    (f"mpath-eui.{EUI128}", "dm uuid of dm-multipath over NVMe", f"eui.{EUI128}"),
    # T10 vendor ID: kernel keeps the blanks, multipath and udev make each run one "_"
    (f"t10.{T10}", "kernel", "t10.ata_samsung_mz7lh960hajr-00005_s45nne0m123456"),
    (
        "1ATA_SAMSUNG_MZ7LH960HAJR-00005_S45NNE0M123456",
        "multipath",
        "t10.ata_samsung_mz7lh960hajr-00005_s45nne0m123456",
    ),
    # NVMe without a unique id, and with a UUID
    (
        "nvme.144d-533547584e46-53616d73756e67-00000001",
        "NVMe wwid_show",
        "nvme.144d-533547584e46-53616d73756e67-00000001",
    ),
    (
        "uuid.4a0b6f7c-2c52-4d2e-9c6e-1f2a3b4c5d6e",
        "NVMe wwid_show",
        "uuid.4a0b6f7c-2c52-4d2e-9c6e-1f2a3b4c5d6e",
    ),
    # an iSCSI target's name string
    ("iqn.2001-05.com.equallogic:0-af1ff6-01", "kernel", "iqn.2001-05.com.equallogic:0-af1ff6-01"),
    (
        "8iqn.2001-05.com.equallogic:0-af1ff6-01",
        "multipath, scsi_id",
        "iqn.2001-05.com.equallogic:0-af1ff6-01",
    ),
]


@pytest.mark.parametrize(("spelling", "tool", "key"), SPELLINGS, ids=[f"{t}:{s!r}" for s, t, _ in SPELLINGS])
def test_every_spelling_reads_as_its_one_key(spelling: str, tool: str, key: str) -> None:
    assert wwid.key(spelling) == key, tool
    assert "\x00" not in wwid.key(spelling)


def test_bare_hex_from_an_array_gui_matches_naa_or_eui_by_its_digits() -> None:
    assert wwid.same(NAA6.upper(), f"naa.{NAA6}")
    assert wwid.same(NAA6, f"3{NAA6}")
    assert wwid.same(EUI64, f"eui.{EUI64}")
    assert not wwid.same(NAA6, f"t10.{NAA6}")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (f"naa.{NAA6}", f"naa.{NAA6[:-1]}2"),  # another LUN
        (f"eui.{EUI64}", f"naa.{EUI64}"),  # the same digits, another designator type
        (f"3{NAA5}", NAA5[1:]),  # a leading 3 is a type only before 16 or 32 digits
        ("eui.3000000000000001", "000000000000001"),
        ("t10.ATA     X", "t10.ATA     Y"),
    ],
)
def test_different_designators_stay_apart(a: str, b: str) -> None:
    assert not wwid.same(a, b)


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        (f"3{NAA6}", NAA6),
        (f"naa.{NAA6.upper()}", NAA6),
        (f"0x{NAA5}", NAA5),
        (f"naa.{NAA6.upper()}\x00\x00\x00\x00", NAA6),
        (f"eui.{EUI64}", ""),
        (f"2{EUI64}", ""),
        ("naa.600a0980", ""),  # the kernel prints 8 or 16 bytes only
    ],
)
def test_naa(spelling: str, expected: str) -> None:
    assert wwid.naa(spelling) == expected


def test_clean_cuts_the_nul_padding_the_kernel_copies() -> None:
    assert wwid.clean(f"naa.{NAA6.upper()}\x00\x00\x00\x00") == f"naa.{NAA6.upper()}"
    assert wwid.clean(f" eui.{EUI64}\n") == f"eui.{EUI64}"
