"""One reading of every spelling of a LUN's world-wide identifier the host's tools print.

The same SCSI designator (SPC VPD page 0x83; its designator type picks the spelling) or NVMe
namespace identifier is spelled differently by each tool:

| designator | kernel sysfs `wwid` | multipath, scsi_id, sg3_utils | udev `ID_WWN*`, by-id |
| --- | --- | --- | --- |
| NAA (type 3) | `naa.<hex>` | `3<hex>` | `0x<hex>`, `wwn-0x<hex>` |
| EUI-64 (type 2) | `eui.<hex>` | `2<hex>` | - |
| T10 vendor ID (type 1) | `t10.<text>` | `1<text>`, blanks as `_` | - |
| SCSI name string (type 8) | the string, NUL-padded | `3`/`2` + hex (naa./eui. names), else `8<string>` | - |
| NVMe namespace | `eui.<hex>`, `uuid.<uuid>`, `nvme.<…>` | the sysfs `wwid` | `ID_WWN` = the sysfs `wwid` |

Sources, each read for its spelling:
- kernel, SCSI: torvalds/linux drivers/scsi/scsi_lib.c scsi_vpd_lun_id: `t10.%*pE`, `eui.%8phN`
  (12, 16 bytes likewise), `naa.%8phN` / `naa.%16phN` (lowercase hex), and for a SCSI name string
  a memcpy of the whole designator, its NUL padding included (the designator is padded to a
  multiple of 4 bytes); drivers/scsi/scsi_sysfs.c sdev_show_wwid prints that and a newline.
- kernel, NVMe: drivers/nvme/host/sysfs.c (core.c before 6.1) wwid_show: `uuid.%pU`, then
  `eui.%16phN` (NGUID), then `eui.%8phN` (EUI-64), else `nvme.%04x-%*phN-%*phN-%08x`.
- multipath-tools libmultipath/discovery.c parse_vpd_pg83: designator type as one digit, then
  lowercase hex (types 2, 3); a name string starting `eui.`/`naa.` becomes `2`/`3` + the rest
  lowercased (NUL padding cut), any other `8` + the string; T10 `1` + the text with each run of
  blanks as one `_`. For NVMe it takes the sysfs `wwid` (get_uid, SYSFS_BUS_NVME). A map's dm
  uuid is `mpath-` + that WWID.
- systemd src/udev/scsi_id/scsi_serial.c check_fill_0x83_id: `serial[0] = hex_str[id_type]`, then
  lowercase hex (binary code set) or the text; scsi_id.c prints `ID_WWN=0x…` and
  `ID_WWN_WITH_EXTENSION=0x…` (NAA designators only), rules.d/60-persistent-storage.rules links
  `disk/by-id/wwn-$env{ID_WWN_WITH_EXTENSION}`.
- sg3_utils scripts/55-scsi-sg3_id.rules: `ID_SERIAL` = `3`/`2`/`8`/`1` + sg_inq's
  `SCSI_IDENT_LUN_NAA_*`/`_EUI64`/`_NAME`/`_T10`, `ID_WWN_WITH_EXTENSION` = `0x` + the NAA;
  src/sg_inq.c prints a name string's bytes outside `[0-9A-Za-z#+-.:=@_]` as `\\xNN`, so its
  NUL padding shows as literal `\\x00`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_HEX = frozenset("0123456789abcdef")
# Byte lengths the kernel prints (scsi_vpd_lun_id, wwid_show), as hex digits.
_NAA_DIGITS = (16, 32)
_EUI_DIGITS = (16, 24, 32)
_KERNEL_PREFIXES = ("naa.", "eui.", "t10.", "nvme.", "uuid.")
_BLANKS = re.compile(r"\s+")
_SG_INQ_NUL = re.compile(r"(\\x00)+$")


@dataclass(frozen=True, slots=True)
class Wwid:
    """A designator read from any spelling: `kind` naa, eui, t10, nvme, uuid, name (a SCSI name
    string that is no NAA or EUI), hex (bare hex digits, type unsaid) or text (none of these)."""

    kind: str
    value: str  # lowercase; hex digits for naa, eui and hex

    def key(self) -> str:
        """One spelling per designator (the kernel's, lowercase): equal keys, one LUN."""
        if self.kind in ("hex", "text", "name"):
            return self.value
        return f"{self.kind}.{self.value}"

    def same(self, other: Wwid) -> bool:
        """Whether the two name one LUN; bare hex digits (an array's GUI) match NAA or EUI alike."""
        if "hex" in (self.kind, other.kind):
            return self.value == other.value and {self.kind, other.kind} <= {"hex", "naa", "eui"}
        return self.key() == other.key()


def clean(raw: str) -> str:
    """A WWID as read from sysfs, fit for a label: cut at the first NUL (a SCSI name string's
    padding, copied by the kernel), surrounding whitespace stripped."""
    return raw.split("\x00", 1)[0].strip()


def _is_hex(text: str) -> bool:
    return bool(text) and _HEX.issuperset(text)


def _name_string(text: str) -> Wwid:
    """A SCSI name string (`naa.…`, `eui.…` or `iqn.…`: SPC), as the kernel or scsi_id copy it."""
    for prefix, kind in (("naa.", "naa"), ("eui.", "eui")):
        if text.startswith(prefix) and _is_hex(text[len(prefix) :]):
            return Wwid(kind, text[len(prefix) :])
    return Wwid("name", text)


# Cached: `luns:` matching reads every device's WWID once per entry (4,096 entries, 10,000 devices).
@functools.lru_cache(maxsize=1 << 16)
def parse(spelling: str) -> Wwid:  # noqa: PLR0911 - one return per spelling
    """Read any spelling in the module's table (case, surrounding blanks and NULs ignored)."""
    w = _SG_INQ_NUL.sub("", clean(spelling)).lower()
    w = w.removeprefix("/dev/disk/by-id/").removeprefix("wwn-")
    while w.startswith("mpath-"):  # dm uuid; "mpath-eui.…" for dm-multipath over NVMe
        w = w.removeprefix("mpath-")
    if w.startswith("0x") and _is_hex(w[2:]):  # udev ID_WWN*: NAA designators only
        return Wwid("naa", w[2:])
    for prefix in _KERNEL_PREFIXES:
        if w.startswith(prefix):
            kind, value = prefix[:-1], w[len(prefix) :]
            if kind == "t10":
                value = _BLANKS.sub("_", value.strip())
            return Wwid(kind, value)
    if _is_hex(w) and len(w) % 2 == 0:  # bytes as hex; a type digit before them makes the length odd
        return Wwid("hex", w)
    head, rest = w[:1], w[1:]
    if head == "3" and len(rest) in _NAA_DIGITS and _is_hex(rest):
        return Wwid("naa", rest)
    if head == "2" and len(rest) in _EUI_DIGITS and _is_hex(rest):
        return Wwid("eui", rest)
    if head == "8" and rest.startswith(("naa.", "eui.", "iqn.")):
        return _name_string(rest)
    if head == "1" and len(rest) >= 8 and not _is_hex(rest):  # a T10 vendor ID is 8 bytes or more
        return Wwid("t10", _BLANKS.sub("_", rest.strip()))
    if w.startswith("iqn."):
        return _name_string(w)
    return Wwid("text", w)


def key(spelling: str) -> str:
    """The one spelling of `spelling` (Wwid.key)."""
    return parse(spelling).key()


def same(a: str, b: str) -> bool:
    return parse(a).same(parse(b))


def naa(spelling: str) -> str:
    """The NAA designator as lowercase hex without any prefix, "" when the WWID is no NAA (the
    kernel prints an NAA of 8 or 16 bytes only: scsi_vpd_lun_id)."""
    w = parse(spelling)
    if w.kind == "naa" and len(w.value) in _NAA_DIGITS and _is_hex(w.value):
        return w.value
    return ""
