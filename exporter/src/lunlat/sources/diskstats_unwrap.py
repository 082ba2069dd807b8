"""Counters that only go up from one read of /proc/diskstats to the next: the 32-bit wraps undone,
resets told apart and passed on.

Kernel facts (Documentation/admin-guide/iostats.rst, block/genhd.c diskstats_show; the fields and
their printed types: diskstats_format.py):
- the six time fields are printed as 32-bit unsigned milliseconds (`%u`) and wrap after ~49.7 days
  of summed latency; the count fields are 64-bit (`%lu`) on 64-bit kernels and do not wrap. A time
  field at 2**32 or more was printed wider than `%u` (a kernel that does): that field does not wrap
  at 2**32, and from then on its going down is a reset, never a wrap (Unwrapper);
- the counts are `unsigned long` (struct disk_stats, include/linux/part_stat.h) printed `%lu`: 32
  bits on a 32-bit kernel, where they wrap at 2**32 too (Unwrapper);
- diskstats_show prints every line with one format string, so a field seen wide on one device is
  wide on every device.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

from lunlat.sources.diskstats_format import COUNT_FIELDS, IN_FLIGHT, KEPT_FIELDS, MS_FIELDS, Table

WRAP = 1 << 32
WRAPPING_FIELDS: tuple[int, ...] = tuple(i for i in range(KEPT_FIELDS) if i != IN_FLIGHT)  # 32-bit: all


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
