"""Which array serves a LUN, read from the LUN's world-wide identifier where the vendor's format says.

lunlat_lun_info's `array` (docs/metrics.md, "Array identity") is, in this order: the `array:` of the
LUN's `luns:` entry (the user knows their arrays, and names them as they like); else what this
module reads from the LUN's WWID; else ground.ARRAY_UNKNOWN. Only formats a vendor documents are
read, each cited beside its code; any other designator gives "" here (unknown), never a guess.

The designators:
- SCSI NAA type 6, "IEEE Registered Extended" (SPC-4, Device Identification VPD page, NAA designator
  format): 4 bits NAA = 6, 24 bits IEEE company_id (the vendor's OUI), 36 bits vendor specific
  identifier, 64 bits vendor specific identifier extension: 16 bytes, 32 hex digits. The same
  layout is written by the kernel's SCSI target (torvalds/linux drivers/target/target_core_spc.c,
  spc_gen_naa_6h_vendor_specific: "36 bits of VENDOR SPECIFIC IDENTIFIER starting on byte 3 bit
  3-0 … followed by 64 bits of VENDOR SPECIFIC IDENTIFIER EXTENSION") and decoded by sg3_utils'
  sg_inq/sg_vpd ("NAA 6, IEEE Company_id … Vendor Specific Identifier … Extension"). The OUI alone
  names the vendor; whether the rest names the array is each vendor's choice.
- An NVMe namespace's NGUID (16 bytes, the kernel's `eui.` + 32 hex digits: wwid.py), laid out by
  the vendor around its IEEE company_id.

Vendors read:
- Pure Storage FlashArray, SCSI: NAA = `624a9370` + the volume's serial (24 hex digits): Pure's own
  Ansible collection, github.com/Pure-Storage-Ansible/FlashArray-Collection
  plugins/modules/purefa_volume.py (`PURE_OUI = "naa.624a9370"`, `page83_naa = PURE_OUI +
  serial.lower()`); `6` + Pure's OUI 24a937 + `0`. NVMe: NGUID = `00` + the serial's first 14 hex
  digits + `24a937` + its last 10 (same file, `_create_nguid`; OpenStack Cinder's Pure NVMe driver,
  `_get_nguid`, "octets 1 - 7: first 7 octets of volume serial number"). Pure's support article
  "How To: Identify Pure Storage Namespaces on ESXi" (support.purestorage.com, VMware Platform Guide,
  NVMe over Fabrics) says those 7 bytes are the "first 7 bytes of the FlashArray ID" (as `purearray
  list` reports it) and the last 5 the volume's: so the serial's first 14 hex digits name the array,
  and every volume of one array, SCSI or NVMe, gives the same `purefa:<14 hex digits>`. Limitation:
  the serial is the volume's for life, so a volume stretched over two arrays (ActiveCluster pod)
  names the array that created it; an `array:` in its `luns:` entry says otherwise.
- NetApp ONTAP: NAA = `600a0980` (clustered ONTAP; `60a98000` for 7-Mode and LUNs transitioned from
  it) + the LUN serial's 12 ASCII characters in hex (NetApp community, "How to get NAA PREFIX for
  LUNs in Cluster and 7 mode", community.netapp.com/t5/Software-Development-Kit-SDK-and-API-Discussions/
  How-to-get-NAA-PREFIX-for-LUNs-in-Cluster-and-7-mode/td-p/108005; alerts/goals.yaml `arrays:`).
  NetApp documents no part of the serial as the cluster's or the SVM's, so the NAA names the vendor
  only: `array` stays unknown unless the `luns:` entry names it (the `vendor` label already says
  NETAPP).
"""

from __future__ import annotations

from collections.abc import Iterable

from lunlat import ground, wwid

# The NAA of a FlashArray volume before its serial: NAA type 6 + Pure's OUI 24a937 + 0 (module doc).
PURE_NAA_PREFIX = "624a9370"
PURE_OUI = "24a937"
PURE_SERIAL_DIGITS = 24  # 12 bytes: 7 of the FlashArray ID, 5 of the volume
PURE_ARRAY_DIGITS = 14  # the serial's part that is the FlashArray ID's first 7 bytes
PURE = "purefa"  # the name alerts/goals.yaml gives Pure's exporter in `arrays:`
_NGUID_DIGITS = 32


def _pure_from_naa(naa: str) -> str:
    serial = naa.removeprefix(PURE_NAA_PREFIX)
    if naa.startswith(PURE_NAA_PREFIX) and len(serial) == PURE_SERIAL_DIGITS:
        return f"{PURE}:{serial[:PURE_ARRAY_DIGITS]}"
    return ""


def _pure_from_nguid(nguid: str) -> str:
    # 00 | the serial's first 7 bytes | OUI 24a937 | the serial's last 5 bytes (module doc).
    array_end = 2 + PURE_ARRAY_DIGITS
    if (
        len(nguid) == _NGUID_DIGITS
        and nguid.startswith("00")
        and nguid[array_end : array_end + len(PURE_OUI)] == PURE_OUI
    ):
        return f"{PURE}:{nguid[2:array_end]}"
    return ""


def from_wwid(spelling: str) -> str:
    """The array a LUN's WWID names, "" when its format names none (any spelling wwid.parse reads)."""
    if not spelling:
        return ""
    naa = wwid.naa(spelling)
    if naa:
        return _pure_from_naa(naa)
    parsed = wwid.parse(spelling)
    if parsed.kind == "eui":
        return _pure_from_nguid(parsed.value)
    return ""


def label(configured: str, spelling: str, below: Iterable[str] = ()) -> str:
    """lunlat_lun_info's `array`: the `luns:` entry's, else the WWID's, else the one array the WWIDs
    of the devices it is built on (`below`: an LV's multipath maps and paths) all name, else
    ground.ARRAY_UNKNOWN. An LV spanning two arrays, or an array and a local disk, is unknown:
    no one value is true of it."""
    found = configured or from_wwid(spelling)
    if not found:
        arrays = {from_wwid(spelling) for spelling in below}
        if len(arrays) == 1:
            found = arrays.pop()
    return found or ground.ARRAY_UNKNOWN
