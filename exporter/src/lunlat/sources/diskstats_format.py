"""The /proc/diskstats format: every kernel's line parsed into a table of columns, odd lines set apart.

Kernel facts (Documentation/admin-guide/iostats.rst, block/genhd.c diskstats_show):
- a line is `major minor name` + 11 (< 4.18), 15 (4.18+: discards) or 17 (5.5+: flushes) fields;
  the discard fields are 12-15 (completed, merged, sectors, ms), the flush fields 16-17 (completed, ms);
- the six time fields (read, write, I/O, weighted, discard and flush ms) are printed as 32-bit
  unsigned milliseconds (`%u`); the counts are `unsigned long` (struct disk_stats,
  include/linux/part_stat.h) printed `%lu`, 64 bits on a 64-bit kernel and 32 on a 32-bit one
  (what that means from one read to the next: diskstats_unwrap.py);
- field 9 (I/Os in flight) is a gauge;
- each kernel that added fields appended them (4.18, 5.5), so a line longer than 20 fields is read
  for the 17 fields known and the surplus counted (`extra_fields`), as node_exporter 1.12.1 reads
  the first 20 (prometheus/procfs v0.21.1 blockdevice/stats.go parseProcDiskstats: fmt.Sscanf);
- diskstats_show prints every line with one format string, so lines of different widths (procfs'
  test fixtures mix 14-, 18- and 20-field lines) are no kernel's: each device keeps the fields its
  line has (node_exporter publishes per device as many as it read: collector/diskstats_linux.go
  statCount) and the mix is counted (`mixed_widths`).

Nothing the kernel does not print is believed: diskstats_show (torvalds/linux, block/genhd.c)
prints `"%4d %7d %pg "` then `%lu` counts and `%u` times, so a sign, a number wider than 64 bits
(among the fields lunlat reads) or a name with a control character, NUL or non-ASCII byte makes a
malformed line, counted and skipped alone; the other lines are published.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Indexes into the stats fields (0-based, after major, minor and name). A table always has all 17
# columns; a kernel that prints fewer (11 before 4.18, 15 before 5.5) leaves the rest 0 and the
# table's `width` says how many are real, so only those are published.
READS, READS_MERGED, READ_SECTORS, READ_MS = 0, 1, 2, 3
WRITES, WRITES_MERGED, WRITE_SECTORS, WRITE_MS = 4, 5, 6, 7
IN_FLIGHT, IO_MS, WEIGHTED_MS = 8, 9, 10
DISCARDS, DISCARDS_MERGED, DISCARD_SECTORS, DISCARD_MS = 11, 12, 13, 14
FLUSHES, FLUSH_MS = 15, 16
BASE_FIELDS, DISCARD_WIDTH, KEPT_FIELDS = 11, 15, 17  # the three formats' stats field counts

MS_FIELDS: tuple[int, ...] = (READ_MS, WRITE_MS, IO_MS, WEIGHTED_MS, DISCARD_MS, FLUSH_MS)
COUNT_FIELDS: tuple[int, ...] = tuple(i for i in range(KEPT_FIELDS) if i not in MS_FIELDS and i != IN_FLIGHT)
SECTOR_BYTES = 512  # diskstats sectors are always 512 bytes, whatever the device's block size
FIELD_COUNTS = (14, 18, 20)  # whole-line field counts of the three kernel formats
WIDEST = FIELD_COUNTS[-1]  # a longer line keeps this many fields (a kernel that appended more)
# The widest number the kernel prints (`%lu` on a 64-bit kernel); lunlat refuses a line whose kept
# fields (major, minor and the first eleven) are wider. As digits, for the line-by-line path:
# equal-length digit strings compare as their numbers do.
U64_MAX = (1 << 64) - 1
U64_MAX_DIGITS = str(U64_MAX).encode()
# A device name as the kernel prints it (sda, nvme0n1p2, dm-3, cciss/c0d0): visible ASCII. A NUL
# would make the sysfs lookup raise, and "." or ".." would name a sysfs directory that is no device.
_DEVICE_NAME = re.compile(rb"(?!\.\.?\Z)[!-~]+\Z")
_VISIBLE_ASCII = re.compile(rb"[!-~]*")


@dataclass(frozen=True, slots=True)
class Table:
    """/proc/diskstats in columns: `columns[i][j]` is stats field i of device `names[j]`; all
    KEPT_FIELDS columns always, the first `width` of them printed by the kernel."""

    names: list[str]
    majors: list[int]
    minors: list[int]
    columns: list[list[int]]
    width: int = KEPT_FIELDS  # fields every line printed (the fewest, when widths differ)
    # Stats fields each device's line printed, when lines differ in width (no kernel prints that);
    # None when every line printed `width`.
    widths: list[int] | None = None
    extra: int = 0  # lines longer than the widest known format (their surplus fields left unread)

    def rows(self, every_column: bool = False) -> list[tuple[str, int, int, tuple[int, ...]]]:
        """(name, major, minor, the `width` real fields, or all columns) per device."""
        values = zip(*(self.columns if every_column else self.columns[: self.width]), strict=False)
        return list(zip(self.names, self.majors, self.minors, values, strict=True))

    @classmethod
    def from_rows(cls, rows: list[tuple[str, int, int, tuple[int, ...]]], extra: int = 0) -> Table:
        """From rows of 11, 15 or 17 fields; in a mix (no kernel prints one) each row keeps its own
        fields (the others 0) and `widths` says which are real."""
        widths = [len(r[3]) for r in rows]
        width = min(widths, default=KEPT_FIELDS)
        padded = [r[3] + (0,) * (KEPT_FIELDS - len(r[3])) for r in rows]
        columns = [list(c) for c in zip(*padded, strict=True)] if rows else [[] for _ in range(KEPT_FIELDS)]
        return cls(
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            columns,
            width,
            widths if len(set(widths)) > 1 else None,
            extra,
        )


@dataclass(frozen=True, slots=True)
class Malformed:
    lineno: int
    line: str
    reason: str  # counted reason: malformed_line | duplicate_device
    detail: str


def _all_digits(tokens: Sequence[bytes]) -> bool:
    # int() would also take "-1", "+1" and "1_0"; the kernel prints none of them.
    return b"".join(tokens).isdigit()  # bytes.isdigit is ASCII-only


def _in_range(tokens: Sequence[bytes]) -> bool:
    """Every token (all digits) is at most 2**64 - 1."""
    width = len(U64_MAX_DIGITS)
    if max(map(len, tokens), default=0) < width:
        return True
    return all(len(t) < width or (len(t) == width and t <= U64_MAX_DIGITS) for t in tokens)


def parse(data: bytes) -> tuple[Table, list[Malformed]]:
    """Parse /proc/diskstats; lines that are not one of the kernel formats are returned apart.

    Bytes, not str: splitting and int() on bytes make half the objects, and this is the scrape's
    hot path (see bench/).
    """
    rows = list(map(bytes.split, data.splitlines()))
    table = _parse_uniform(rows)
    if table is not None:
        return table, []
    return _parse_lines(rows)


def _parse_uniform(rows: list[list[bytes]]) -> Table | None:
    """The usual case, checked and converted column by column: every line in one format, no oddity.

    Returns None for anything else, which _parse_lines then handles (and explains) line by line.
    """
    widths = set(map(len, rows))
    if len(widths) != 1:
        return None
    line_width = widths.pop()
    extra = 0
    if line_width > WIDEST:  # a kernel that appended fields: read the known ones
        rows = [r[:WIDEST] for r in rows]
        extra = len(rows)
    elif line_width not in FIELD_COUNTS:
        return None
    columns = list(zip(*rows, strict=True))
    names = columns[2]
    unique = set(names)
    if (
        len(unique) != len(names)
        or not all(map(_all_digits, (columns[0], columns[1], *columns[3:])))
        or not _VISIBLE_ASCII.fullmatch(b"".join(names))  # one regex call for every name
        or b"." in unique
        or b".." in unique
    ):
        return None
    converted = _ints(columns[0], columns[1], *columns[3:])
    if converted is None or max(map(max, converted)) > U64_MAX:
        return None
    width = len(converted) - 2
    missing = [[0] * len(names) for _ in range(KEPT_FIELDS - width)]
    return Table(
        [n.decode("ascii") for n in names],
        converted[0],
        converted[1],
        converted[2:] + missing,
        width,
        extra=extra,
    )


def _ints(*columns: Sequence[bytes]) -> list[list[int]] | None:
    """Columns of digit strings (checked by the caller: ASCII digits only) as ints.

    Hand-written because it is the hottest step of a scrape: 190,000 numbers on the 10,000-device
    host of bench/, where `list(map(int, column))` took ~60 % of parsing (cProfile). The columns go
    through the json module's C parser in one call instead, ~half the time; a JSON integer is
    decimal digits (RFC 8259 §6, `int = zero / ( digit1-9 *DIGIT )`), so for digit-only tokens it
    gives exactly int(token). A leading zero, which JSON refuses and the kernel never prints
    (`%lu`, `%u`), returns None: the line-by-line path takes the file then.
    """
    try:
        rows: list[list[int]] = json.loads(b"[[" + b"],[".join(b",".join(c) for c in columns) + b"]]")
    except ValueError:
        return None
    return rows


def _parse_lines(rows: list[list[bytes]]) -> tuple[Table, list[Malformed]]:
    parsed: list[tuple[str, int, int, tuple[int, ...]]] = []
    bad: list[Malformed] = []
    seen: set[str] = set()
    extra = 0
    for lineno, parts in enumerate(rows, 1):
        if not parts:
            continue
        # For the log: control and non-ASCII bytes as \xNN (bytes' repr), never raw on a terminal.
        line = repr(b" ".join(parts))[2:-1]
        if len(parts) > WIDEST:  # a kernel that appended fields: read the known ones
            parts = parts[:WIDEST]  # noqa: PLW2901 - the rest of the loop reads the known fields only
            extra += 1
        elif len(parts) not in FIELD_COUNTS:
            bad.append(
                Malformed(lineno, line, "malformed_line", f"{len(parts)} fields, expected 14, 18, 20 or more")
            )
            continue
        numbers = [parts[0], parts[1], *parts[3:]]
        if not _all_digits(numbers):
            bad.append(
                Malformed(lineno, line, "malformed_line", "a number field is not a non-negative integer")
            )
            continue
        if not _in_range(numbers):
            bad.append(Malformed(lineno, line, "malformed_line", "a number is wider than 64 bits"))
            continue
        if not _DEVICE_NAME.match(parts[2]):
            bad.append(Malformed(lineno, line, "malformed_line", "the device name is not printable ASCII"))
            continue
        name = parts[2].decode("ascii", "replace")
        if name in seen:
            bad.append(Malformed(lineno, line, "duplicate_device", f"device {name} listed twice"))
            continue
        seen.add(name)
        parsed.append((name, int(parts[0]), int(parts[1]), tuple(map(int, parts[3:]))))
    return Table.from_rows(parsed, extra), bad
