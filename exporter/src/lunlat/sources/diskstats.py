"""/proc/diskstats: parse every kernel format, undo the 32-bit wrap of the ms fields, detect resets.

Kernel facts (Documentation/admin-guide/iostats.rst, block/genhd.c diskstats_show):
- a line is `major minor name` + 11 (< 4.18), 15 (4.18+: discards) or 17 (5.5+: flushes) fields;
  the discard fields are 12-15 (completed, merged, sectors, ms), the flush fields 16-17 (completed, ms);
- the six time fields (read, write, I/O, weighted, discard and flush ms) are printed as 32-bit
  unsigned milliseconds (`%u`) and wrap after ~49.7 days of summed latency; the count fields are
  64-bit (`%lu`) on 64-bit kernels and do not wrap. A time field at 2**32 or more was printed wider
  than `%u` (a kernel that does): that field does not wrap at 2**32, and from then on its going down
  is a reset, never a wrap (Unwrapper);
- field 9 (I/Os in flight) is a gauge;
- the counts are `unsigned long` (struct disk_stats, include/linux/part_stat.h) printed `%lu`: 32
  bits on a 32-bit kernel, where they wrap at 2**32 too (Unwrapper);
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

import dataclasses
import json
import math
import operator
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from pathlib import Path

from lunlat import arrayid, ground, logs
from lunlat.config import DiskstatsConfig, LunEntry
from lunlat.dbfiles import DbLunLabels
from lunlat.luns import NO_LABELS, assign
from lunlat.model import Family, LabelList, LabelSet, Sample
from lunlat.pathhealth import DEFAULT_INTERVAL, PathWatcher
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.factory import BuildError, Context
from lunlat.sources.host import DeviceFilter, LunInfo, device_families
from lunlat.sources.published import PublishedDevice, PublishedDevices
from lunlat.topology import (
    BlockDevice,
    LunView,
    lower_chain,
    path_state_file,
    queue_limits,
    read_block_device,
    read_block_devices,
    read_mounts,
    related,
    resolve,
)
from lunlat.wwid import naa

log = logs.get(__name__)
NO_PATH_LABELS = LabelSet((), ())
# luns: entries that match no device named one by one in the log; past this, one line with the count.
UNMATCHED_NAMED = 20

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
WRAPPING_FIELDS: tuple[int, ...] = tuple(i for i in range(KEPT_FIELDS) if i != IN_FLIGHT)  # 32-bit: all
SECTOR_BYTES = 512  # diskstats sectors are always 512 bytes, whatever the device's block size
WRAP = 1 << 32
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


@dataclass(frozen=True, slots=True)
class _Memory:
    """What the unwrapper keeps of the last table: raw values and the wrap offsets per device."""

    table: Table
    offsets: dict[int, list[int]]  # ms field -> offset per device (aligned with table.names); absent = 0


class Unwrapper:
    """Turns raw tables into monotonic counters per device across calls.

    - A 32-bit ms field lower than last time while no 64-bit count went down: it wrapped, add 2**32.
    - Unless that field was ever seen at 2**32 or more, on any device: this kernel prints it wider
      than `%u` (diskstats_show prints every line with one format string), so it does not wrap at
      2**32 and going down is a reset, however long ago the wide value was.
    - A count lower than last time, on a kernel whose counts may be 32 bits wide (none was ever seen
      at 2**32 or more): it wrapped, add 2**32, when it went from the top half of the 32-bit range
      into the bottom half (less than 2**31 forward, modulo 2**32) while another count of the
      device that was not 0 did not go down. The wrap offsets of the other fields stay.
    - Any other count lower than last time, or a new major:minor: the device was re-created or its
      stats were reset; the raw values pass through so Prometheus sees a counter reset (a reset
      zeroes every count at once, a wrap takes one count across 2**32).
    - Devices that vanish are forgotten (no state grows with loop/dm churn).

    The usual case (same devices, nothing went down) is decided column-wise; anything else goes
    device by device through `_follow`, the reference logic.
    """

    def __init__(self) -> None:
        self._memory: _Memory | None = None
        self._wide: set[int] = set()  # ms fields seen at 2**32 or more: never unwrapped
        self._wide_counts = False  # a count seen at 2**32 or more: this kernel's counts are 64-bit

    def apply(self, table: Table) -> tuple[Table, list[str]]:
        """Return the unwrapped table and the names of the devices that were reset."""
        memory = self._memory
        if (
            memory is not None
            and memory.table.names == table.names
            and memory.table.majors == table.majors
            and memory.table.minors == table.minors
            and not any(
                any(map(operator.lt, new, old))
                for i, (new, old) in enumerate(zip(table.columns, memory.table.columns, strict=True))
                if i != IN_FLIGHT
            )
        ):
            self._memory = _Memory(table, memory.offsets)
            return _with_offsets(table, memory.offsets), []
        return self._by_device(table)

    def _note_wide(self, table: Table) -> None:
        """Remember the ms fields this table shows at 2**32 or more. Only the device-by-device path
        needs to look: the column-wise path takes a table only when nothing went down, so a wide
        value it passed on is still (at least as) wide in the table this path gets as the old one."""
        for i in MS_FIELDS:
            if i not in self._wide and max(table.columns[i], default=0) >= WRAP:
                self._wide.add(i)
        if not self._wide_counts:
            self._wide_counts = any(max(table.columns[i], default=0) >= WRAP for i in COUNT_FIELDS)

    def _by_device(self, table: Table) -> tuple[Table, list[str]]:
        previous: dict[str, tuple[int, int, tuple[int, ...], tuple[int, ...]]] = {}
        self._note_wide(table)
        if self._memory is not None:
            old = self._memory.table
            self._note_wide(old)
            old_offsets = [self._memory.offsets.get(i) for i in range(KEPT_FIELDS)]
            for j, (name, major, minor, raw) in enumerate(old.rows(every_column=True)):
                offs = tuple(o[j] if o is not None else 0 for o in old_offsets)
                previous[name] = (major, minor, raw, offs)
        resets: list[str] = []
        offset_rows: list[tuple[int, ...]] = []
        zero = (0,) * KEPT_FIELDS
        for name, major, minor, raw in table.rows(every_column=True):
            prev = previous.get(name)
            offsets = zero
            if prev is not None:
                if (prev[0], prev[1]) != (major, minor):
                    resets.append(name)
                else:
                    followed = _follow(prev[2], prev[3], raw, self._wide, self._wide_counts)
                    if followed is None:
                        resets.append(name)
                    else:
                        offsets = followed
            offset_rows.append(offsets)
        offsets_by_field = {
            i: column for i in WRAPPING_FIELDS if any(column := [row[i] for row in offset_rows])
        }
        self._memory = _Memory(table, offsets_by_field)
        return _with_offsets(table, offsets_by_field), resets


def _follow(
    old_raw: tuple[int, ...],
    old_offsets: tuple[int, ...],
    raw: tuple[int, ...],
    wide: set[int],
    wide_counts: bool,
) -> tuple[int, ...] | None:
    """New wrap offsets of one device, or None when its stats were reset. `wide`: the ms fields
    seen at 2**32 or more (old_raw's among them), which cannot wrap there; `wide_counts`: a count
    was, so counts are 64-bit and cannot wrap at all."""
    offsets = list(old_offsets)
    down = [i for i in COUNT_FIELDS if raw[i] < old_raw[i]]
    if down:
        if wide_counts or not _count_wrap(old_raw, raw, down):
            return None  # a count went down: the stats were reset
        for i in down:
            offsets[i] += WRAP
    for i in MS_FIELDS:
        if raw[i] < old_raw[i]:
            if i in wide:  # wider than 32 bits on this kernel: it cannot have wrapped
                return None
            offsets[i] += WRAP
    return tuple(offsets)


def _count_wrap(old_raw: tuple[int, ...], raw: tuple[int, ...], down: list[int]) -> bool:
    """Whether the counts in `down` (lower than last time) wrapped at 2**32 rather than being reset:
    each moved less than 2**31 forward modulo 2**32, and some other count that was not 0 did not go
    down (a reset zeroes them all)."""
    if any(raw[i] + WRAP - old_raw[i] >= WRAP // 2 for i in down):
        return False
    return any(old_raw[i] > 0 for i in COUNT_FIELDS if i not in down)


def _with_offsets(table: Table, offsets: dict[int, list[int]]) -> Table:
    if not offsets:
        return table
    columns = list(table.columns)
    for i, column in offsets.items():
        columns[i] = list(map(operator.add, columns[i], column))
    return dataclasses.replace(table, columns=columns)


# --- the source ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Published:
    """What the topology decided, kept until the device set, the mounts or the refresh interval change."""

    names: list[str]
    majors: list[int]
    minors: list[int]
    mount_text: str
    db_version: int  # of the labels the database sources published (DbLunLabels.version)
    labels: LabelList  # (lun, device) of each published device, in table order
    mask: list[bool] | None  # which table rows are published; None when all are
    info: list[Sample]
    # (lun, device) of each published multipath LUN and the state file of each of its paths: the
    # states are read on their own cadence (pathhealth.PathWatcher: a path fails without the device
    # set changing).
    multipaths: list[tuple[LabelSet, tuple[str, ...]]] = field(default_factory=list)
    # The host's queue limits of each published device that has them (topology.queue_limits).
    queue_limits: list[Family] = field(default_factory=list)


class DiskstatsSource:
    """Per-LUN counters from <procfs>/diskstats, named and labelled by the sysfs topology."""

    name = "diskstats"
    error_reasons: tuple[str, ...] = (
        "read_failed",
        "malformed_line",
        "duplicate_device",
        "extra_fields",
        "mixed_widths",
        "path_state_unknown",
    )
    timeout: float | None = None

    def __init__(
        self,
        procfs: Path,
        sysfs: Path,
        config: DiskstatsConfig,
        luns: Sequence[LunEntry] = (),
        refresh_interval: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        db_labels: DbLunLabels | None = None,
        published: PublishedDevices | None = None,
        path_state_interval: float = DEFAULT_INTERVAL,
        path_state_thread: bool = False,
    ) -> None:
        self._procfs = procfs
        # Path states off the scrape path; the thread only where `build` asks for it (a real serve),
        # so a test drives the readings with its clock.
        self._paths = PathWatcher(path_state_interval, clock, background=path_state_thread)
        self._board = published  # told which devices are published, for the biolatency source
        self._db_labels = db_labels
        self._sysfs = sysfs
        self._config = config
        self._filter = DeviceFilter.from_config(config)
        self._luns = list(luns)
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._unwrapper = Unwrapper()
        self._published: _Published | None = None
        self._devices: dict[str, BlockDevice] = {}
        self._sysfs_read_at = -math.inf
        self._warned_lines = logs.Once()
        self._warned_states = logs.Once()
        self._warned_format = logs.Once()
        self._warned_unmatched: set[str] = set()

    def close(self) -> None:
        """Stop reading path states (a reload retired this source)."""
        self._paths.close()

    def carry_over(self, previous: object) -> None:
        """After a reload: keep unwrapping from where the previous source was (base.CarriesState), and
        do not name again the unmatched luns: entries already named."""
        if isinstance(previous, DiskstatsSource):
            self._unwrapper = previous._unwrapper
            self._warned_unmatched = previous._warned_unmatched  # said once, not again per reload

    def collect(self) -> SourceResult:
        path = self._procfs / "diskstats"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SourceError("read_failed", f"cannot read {path}: {exc.strerror or exc}") from None
        table, bad = parse(data)
        errors: Counter[str] = Counter(b.reason for b in bad)
        for b in bad:
            self._warn_malformed(path, b)
        table, resets = self._unwrapper.apply(table)
        if resets:
            log.debug("device counters reset", devices=",".join(resets))
        published = self._topology(table)
        cols = table.columns
        if published.mask is not None:
            cols = [list(compress(column, published.mask)) for column in cols]
        columns: dict[ground.MetricSpec, list[int]] = {
            ground.DEVICE_READS: cols[READS],
            ground.DEVICE_WRITES: cols[WRITES],
            ground.DEVICE_READ_TIME: cols[READ_MS],
            ground.DEVICE_WRITE_TIME: cols[WRITE_MS],
            ground.DEVICE_READ_BYTES: list(map(operator.mul, cols[READ_SECTORS], repeat(SECTOR_BYTES))),
            ground.DEVICE_WRITE_BYTES: list(map(operator.mul, cols[WRITE_SECTORS], repeat(SECTOR_BYTES))),
            ground.DEVICE_IO_IN_PROGRESS: cols[IN_FLIGHT],
            ground.DEVICE_IO_TIME: cols[IO_MS],
            ground.DEVICE_IO_WEIGHTED_TIME: cols[WEIGHTED_MS],
        }
        # Only what this kernel prints: a 0 for a field it lacks would read as "no discards".
        # Without counters (node_exporter's are the host layer) the table is still read: it names
        # the devices the topology labels.
        families = []
        if self._config.counters:
            families = device_families(published.labels, columns)
            families.extend(_optional_families(table, cols, published))
        self._count_format(table, errors)
        families.append(Family(ground.LUN_INFO, published.info))
        families.extend(published.queue_limits)
        self._paths.watch(published.multipaths)
        reading = self._paths.reading()
        families.extend(reading.families)
        if published.multipaths:
            families.append(Family(ground.LUN_PATHS_AGE, [("", NO_PATH_LABELS, self._paths.age(reading))]))
        unknown = reading.unknown
        if unknown:
            errors["path_state_unknown"] += len(unknown)
            for state_file in unknown:
                if self._warned_states.first(state_file):
                    log.warning(
                        "path state cannot be read: not counted as failed",
                        file=state_file,
                        reason="path_state_unknown",
                    )
        return SourceResult(families, errors)

    def _count_format(self, table: Table, errors: Counter[str]) -> None:
        """Count (once per collection) and log (once) lines longer than any known format and lines
        of mixed widths: both are read, so neither is a malformed_line."""
        if table.extra:
            errors["extra_fields"] += 1
            if self._warned_format.first("extra_fields"):
                log.warning(
                    "diskstats lines longer than any known format: their first 20 fields are read, "
                    "the rest left unread (a newer kernel: an update of lunlat reads them)",
                    reason="extra_fields",
                    lines=table.extra,
                )
        if table.widths is not None:
            errors["mixed_widths"] += 1
            if self._warned_format.first("mixed_widths"):
                log.warning(
                    "diskstats lines of different widths (no kernel prints them): each device "
                    "publishes the fields its line has",
                    reason="mixed_widths",
                    widths=",".join(str(w + 3) for w in sorted(set(table.widths))),
                )

    def _warn_malformed(self, path: Path, bad: Malformed) -> None:
        # Counted every time; logged once per distinct line so a persistent oddity cannot flood the log.
        if not self._warned_lines.first(bad.line):
            return
        log.warning(
            "skipping diskstats line",
            file=str(path),
            line=bad.lineno,
            reason=bad.reason,
            detail=bad.detail,
            text=bad.line[:200],
        )

    def _shown(self, view: LunView) -> bool:
        if view.hidden or (view.kind != "lun" and not self._config.show_paths):
            return False
        return not self._filter.ignored(view.device)

    def _topology(self, table: Table) -> _Published:
        mounts, mount_text = read_mounts(self._procfs)
        now = self._clock()
        cached = self._published
        same_devices = (
            cached is not None
            and cached.names == table.names
            and cached.majors == table.majors
            and cached.minors == table.minors
        )
        stale = now - self._sysfs_read_at >= self._refresh_interval
        db_version = self._db_labels.version if self._db_labels is not None else 0
        if (
            cached is not None
            and same_devices
            and cached.mount_text == mount_text
            and cached.db_version == db_version
            and not stale
        ):
            return cached
        devices = self._block_devices(table, same_devices, stale)
        if stale:
            self._sysfs_read_at = now
        views = resolve(devices, mounts)
        lun_labels, unmatched = assign(self._luns, devices, views, mounts)
        self._warn_unmatched(unmatched)
        if self._db_labels is not None:
            # What the databases report fills in; an explicit `luns:` entry wins label by label.
            db_version, from_databases = self._db_labels.merged()
            for name, found in from_databases.items():
                lun_labels[name] = lun_labels.get(name, NO_LABELS).merge(found)
        labels: list[LabelSet] = []
        mask: list[bool] = []
        info: list[Sample] = []
        depths: list[Sample] = []
        requests: list[Sample] = []
        multipaths: list[tuple[LabelSet, tuple[str, ...]]] = []
        board: dict[tuple[int, int], PublishedDevice] = {}
        for name, major, minor in zip(table.names, table.majors, table.minors, strict=True):
            view = views.get(name) or LunView(name, name, "lun")
            shown = self._shown(view)
            mask.append(shown)
            if not shown:
                continue
            labels.append(LabelSet(ground.DEVICE_LABELS, (view.lun, view.device)))
            paths = view.paths.split(",") if view.paths else []
            depth, nr_requests = queue_limits(devices, name, paths if view.multipath else ())
            if depth is not None:
                depths.append(("", labels[-1], depth))
            if nr_requests is not None:
                requests.append(("", labels[-1], nr_requests))
            if view.multipath:
                files = tuple(path_state_file(self._sysfs, path) for path in paths)
                multipaths.append((labels[-1], files))
            extra = lun_labels.get(name, NO_LABELS)
            board[(major, minor)] = PublishedDevice(view.lun, view.device, extra.role or "")
            lun_info = LunInfo(
                lun=view.lun,
                device=view.device,
                wwid=view.wwid,
                naa=naa(view.wwid),
                array=arrayid.label(
                    extra.array,
                    view.wwid,
                    (views[n].wwid for n in lower_chain(devices, name)[1:] if n in views),
                ),
                vendor=view.vendor,
                model=view.model,
                paths=view.paths,
                database=extra.database,
                role=extra.role,
                workload=extra.workload,
                mountpoint=",".join(view.mountpoints),
                kind=view.kind,
            )
            info.append(lun_info.sample())
        self._published = _Published(
            table.names,
            table.majors,
            table.minors,
            mount_text,
            db_version,
            LabelList(labels),
            None if all(mask) else mask,
            info,
            multipaths,
            # No family where no device has the attribute (a device without it has no series).
            [
                Family(spec, samples)
                for spec, samples in (
                    (ground.DEVICE_QUEUE_DEPTH, depths),
                    (ground.DEVICE_NR_REQUESTS, requests),
                )
                if samples
            ],
        )
        if self._board is not None:
            self._board.publish(board)
        log.debug("topology refreshed", devices=len(table.names), shown=len(info))
        return self._published

    def _block_devices(self, table: Table, same_devices: bool, stale: bool) -> dict[str, BlockDevice]:
        """sysfs facts: all re-read when stale; else only what a device change concerns.

        A mount change needs no sysfs read at all; a new or vanished device re-reads itself and
        the devices stacked on or under it (a new multipath map changes its paths' holders).
        """
        if stale or not self._devices:
            self._devices = read_block_devices(self._sysfs, table.names)
            return self._devices
        if same_devices:
            return self._devices
        current = {
            f"{major}:{minor}": name
            for name, major, minor in zip(table.names, table.majors, table.minors, strict=True)
        }
        known = {n: d for n, d in self._devices.items() if current.get(d.dev) == n}
        appeared = set(table.names) - set(known)
        fresh = {name: read_block_device(self._sysfs, name) for name in appeared}
        # Devices the old facts or the new devices mention have new slaves or holders: re-read them.
        stale_names = related(self._devices, appeared | (set(self._devices) - set(known)))
        for device in fresh.values():
            stale_names.update(n for n in (*device.slaves, *device.holders, device.parent) if n)
        for name in stale_names:
            known.pop(name, None)
        known.update(fresh)
        self._devices = read_block_devices(self._sysfs, table.names, known)
        return self._devices

    def _warn_unmatched(self, unmatched: list[LunEntry]) -> None:
        """Name each newly unmatched entry once, at most UNMATCHED_NAMED of them, then one line with
        the count: a config of 24,000 entries that matched nothing logged 24,000 lines at start and
        again at every reload."""
        described = {e.match.describe() for e in unmatched}
        new = sorted(described - self._warned_unmatched)
        for what in new[:UNMATCHED_NAMED]:
            log.warning("config luns entry matches no device (yet)", match=what)
        if len(new) > UNMATCHED_NAMED:
            log.warning(
                "config luns entries match no device (yet), not named one by one",
                more=len(new) - UNMATCHED_NAMED,
                unmatched=len(described),
            )
        self._warned_unmatched = described


def _optional_families(table: Table, cols: list[list[int]], published: _Published) -> list[Family]:
    """The discard (kernel 4.18+) and flush (5.5+) families, for the devices whose line has them."""
    widths = table.widths
    if table.width < DISCARD_WIDTH and widths is None:
        return []  # a kernel before 4.18: nothing to publish, nothing to compute
    if widths is not None and published.mask is not None:
        widths = list(compress(widths, published.mask))
    families: list[Family] = []
    for needed, specs in (
        (
            DISCARD_WIDTH,
            (ground.DEVICE_DISCARDS, ground.DEVICE_DISCARD_TIME, ground.DEVICE_DISCARD_BYTES),
        ),
        (KEPT_FIELDS, (ground.DEVICE_FLUSHES, ground.DEVICE_FLUSH_TIME)),
    ):
        if table.width >= needed:  # every line has them (one kernel, one format)
            families.extend(device_families(published.labels, {s: _column(s, cols) for s in specs}))
        elif widths is not None and max(widths, default=0) >= needed:  # lines of mixed widths
            keep = [w >= needed for w in widths]
            labels = LabelList(list(compress(published.labels.sets, keep)))
            families.extend(
                device_families(labels, {s: list(compress(_column(s, cols), keep)) for s in specs})
            )
    return families


def _column(spec: ground.MetricSpec, cols: list[list[int]]) -> list[int]:
    """A discard or flush column in the metric's unit."""
    if spec is ground.DEVICE_DISCARD_BYTES:
        return list(map(operator.mul, cols[DISCARD_SECTORS], repeat(SECTOR_BYTES)))
    return cols[_OPTIONAL_FIELD[spec.name]]


_OPTIONAL_FIELD = {
    ground.DEVICE_DISCARDS.name: DISCARDS,
    ground.DEVICE_DISCARD_TIME.name: DISCARD_MS,
    ground.DEVICE_FLUSHES.name: FLUSHES,
    ground.DEVICE_FLUSH_TIME.name: FLUSH_MS,
}


def build(context: Context) -> list[DiskstatsSource] | BuildError:
    """The host layer from <procfs>/diskstats, unless psutil was chosen."""
    if context.platform != "diskstats":
        return []
    procfs = context.settings.procfs
    if not (procfs / "diskstats").is_file():
        return BuildError(f"--path.procfs: {procfs / 'diskstats'} does not exist")
    return [
        DiskstatsSource(
            procfs,
            context.settings.sysfs,
            context.diskstats(),
            context.config.luns,
            context.settings.refresh_interval,
            db_labels=context.db_labels,
            published=context.published,
            path_state_interval=context.settings.path_state_interval,
            path_state_thread=True,
        )
    ]
