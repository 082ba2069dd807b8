"""`lunlat top`'s frames: the samples both places give (the exporter's metric names and labels),
one LUN's counters at an instant, and the rates and averages between two instants, as rows of text.

Latency is judged as the alert rules judge it (docs/alerting.md, "What is judged"): `r_judged` and
`w_judged` are the I/Os the LUN's goal judges (the per-I/O histogram's small class for a `small`
goal where the LUN has a histogram, else every I/O), absent below the idle guard, and only they are
coloured at the goal; an average above goal while the judged I/Os are within it is only flagged.

No terminal and no I/O here: `readers` takes the samples, `command` and `view` show the frames.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from lunlat import ground
from lunlat.model import Family

if TYPE_CHECKING:
    from lunlat.goals import Goals

MIB = 1024 * 1024  # MB/s as iostat prints it (sectors / 2048)
P99 = 0.99

# (metric name, labels, value in the metric's base unit): what both places give.
Sample = tuple[str, dict[str, str], float]
Key = tuple[str, str]  # (lun, device)


class TopError(Exception):
    """Bad input or an unreadable source: one line, exit 2."""


# --- samples ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Counters:
    """One LUN's counters at one instant (seconds and bytes, as the exporter publishes them)."""

    reads: float = 0.0
    writes: float = 0.0
    read_seconds: float = 0.0
    write_seconds: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    weighted_seconds: float = 0.0
    # op -> {upper bound: cumulative count} of lunlat_device_io_latency_seconds
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    # op -> (seconds, count) of the histogram's small size class: what a `small` goal judges
    small: dict[str, tuple[float, float]] = field(default_factory=dict)

    def every_io(self, op: str) -> tuple[float, float]:
        """(seconds, count) of every I/O of `op` ("read" or "write"), as `small` holds its class's."""
        if op == "read":
            return self.read_seconds, self.reads
        if op == "write":
            return self.write_seconds, self.writes
        raise ValueError(f"op {op!r}: read or write")


@dataclass(slots=True)
class Snapshot:
    at: float  # time.monotonic() when taken
    counters: dict[Key, Counters]
    labels: dict[Key, tuple[str, str, str]]  # database, role, workload


COUNTER_FIELDS: dict[str, str] = {
    ground.DEVICE_READS.name: "reads",
    ground.DEVICE_WRITES.name: "writes",
    ground.DEVICE_READ_TIME.name: "read_seconds",
    ground.DEVICE_WRITE_TIME.name: "write_seconds",
    ground.DEVICE_READ_BYTES.name: "read_bytes",
    ground.DEVICE_WRITE_BYTES.name: "write_bytes",
    ground.DEVICE_IO_WEIGHTED_TIME.name: "weighted_seconds",
}
_BUCKET = ground.DEVICE_IO_LATENCY.name + "_bucket"
_SMALL_PARTS = {ground.DEVICE_IO_LATENCY.name + "_sum": 0, ground.DEVICE_IO_LATENCY.name + "_count": 1}
SMALL = ground.BIO_SIZES[0]  # the size class a `small` goal judges (goals.Judged)


def snapshot(samples: Iterable[Sample], at: float) -> Snapshot:
    """The per-LUN counters and labels in a set of the exporter's samples."""
    counters: dict[Key, Counters] = {}
    labels: dict[Key, tuple[str, str, str]] = {}
    for name, sample_labels, value in samples:
        key = (sample_labels.get("lun", ""), sample_labels.get("device", ""))
        attribute = COUNTER_FIELDS.get(name)
        if attribute is not None:
            setattr(counters.setdefault(key, Counters()), attribute, value)
        elif name == _BUCKET:
            le = sample_labels.get("le", "")
            bound = math.inf if le == "+Inf" else float(le)
            op = counters.setdefault(key, Counters()).buckets.setdefault(sample_labels.get("op", ""), {})
            op[bound] = op.get(bound, 0.0) + value  # every size class of the op (ground.BIO_SIZES)
        elif name in _SMALL_PARTS and sample_labels.get("size") == SMALL:
            small = counters.setdefault(key, Counters()).small
            parts = list(small.get(sample_labels.get("op", ""), (0.0, 0.0)))
            parts[_SMALL_PARTS[name]] = value
            small[sample_labels.get("op", "")] = (parts[0], parts[1])
        elif name == ground.LUN_INFO.name:
            get = sample_labels.get
            labels[key] = (get("database", ""), get("role", ""), get("workload", ""))
    return Snapshot(at, counters, labels)


def family_samples(families: Iterable[Family]) -> Iterator[Sample]:
    """A source's families as samples, values in base units (as the exposition would print them)."""
    for family in families:
        for sample in family.all_samples():
            yield family.spec.name + sample[0], sample[1].as_dict(), family.value(sample)


def exposition_samples(text: str) -> Iterator[Sample]:
    """An exporter's /metrics text as samples (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, dict(sample.labels), float(sample.value)


# --- frames -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    width: int
    numeric: bool
    decimals: int = 2


COLUMNS: tuple[Column, ...] = (
    Column("LUN", 20, False),
    Column("database", 10, False),
    Column("role", 8, False),
    Column("workload", 10, False),
    Column("r/s", 9, True, 1),
    Column("w/s", 9, True, 1),
    Column("r_await", 8, True),
    Column("w_await", 8, True),
    Column("r_judged", 8, True),
    Column("w_judged", 8, True),
    Column("rMB/s", 8, True),
    Column("wMB/s", 8, True),
    Column("aqu-sz", 7, True),
    Column("r_p99", 7, True),
    Column("w_p99", 7, True),
)
SORT_KEYS: tuple[str, ...] = tuple(c.name for c in COLUMNS)
JUDGED_COLUMNS = {"r_judged": "read", "w_judged": "write"}
AVERAGE_COLUMNS = {"r_await": "read", "w_await": "write"}
# How a latency cell is shown against the LUN's goal: the judged I/Os above or within it, or the
# average of every I/O above it while the judged ones are not (flagged, as LunLatencyAverageHigh).
Mark = Literal["above", "within", "flagged"]
NOT_AVAILABLE = "n/a"  # no histogram for this LUN: none locally, or an exporter without biolatency
NO_VALUE = "-"  # no I/O in the interval (no average), or a counter reset


@dataclass(frozen=True, slots=True)
class Row:
    lun: str
    device: str
    database: str
    role: str
    workload: str
    values: dict[str, float | None]  # numeric columns; None: nothing to show
    goal_ms: float | None  # None: the goals do not judge this LUN (no database uses it)
    histogram: bool  # whether the source publishes this LUN's per-I/O histogram

    def text(self, column: Column) -> str:
        if not column.numeric:
            value = {"LUN": self.lun, "database": self.database, "role": self.role, "workload": self.workload}
            return value[column.name] or NO_VALUE
        number = self.values.get(column.name)
        if number is None:
            return NOT_AVAILABLE if column.name.endswith("_p99") and not self.histogram else NO_VALUE
        return f"{number:.{column.decimals}f}"

    def mark(self, column: str) -> Mark | None:
        """A judged column above or within the LUN's goal (above: more than the goal, as the rules'
        `> bool`); an average column above the goal while its op's judged latency is not, flagged;
        None for any other column, an empty cell, or a LUN that is not judged."""
        value, goal = self.values.get(column), self.goal_ms
        if value is None or goal is None:
            return None
        if column in JUDGED_COLUMNS:
            return "above" if value > goal else "within"
        if column in AVERAGE_COLUMNS and value > goal:
            judged = self.values.get(f"{column[0]}_judged")
            return "flagged" if judged is None or judged <= goal else None
        return None

    def matches(self, pattern: re.Pattern[str] | None) -> bool:
        return pattern is None or any(
            pattern.search(text) for text in (self.lun, self.database, self.role, self.workload)
        )


@dataclass(frozen=True, slots=True)
class Frame:
    number: int
    seconds: float
    rows: list[Row]


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """histogram_quantile over the increase of cumulative buckets (upper bound -> count), in the
    bound's unit; None without observations or with a reset."""
    bounds = sorted(after)
    increase = [after[b] - before.get(b, 0.0) for b in bounds]
    if not bounds or bounds[-1] != math.inf or min(increase) < 0 or increase[-1] <= 0:
        return None
    rank = q * increase[-1]
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, increase, strict=True):
        if count >= rank:  # count > below: the previous bucket held fewer than rank
            return lower if bound == math.inf else lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower  # not reached: the +Inf bucket holds every observation


def _rate(after: float, before: float, seconds: float) -> float | None:
    delta = after - before
    return None if delta < 0 or seconds <= 0 else delta / seconds


def _average_ms(time_after: float, time_before: float, ops_after: float, ops_before: float) -> float | None:
    ops, spent = ops_after - ops_before, time_after - time_before
    if ops <= 0 or spent < 0:
        return None
    return spent / ops * 1000.0


def _judged_ms(
    then: Counters, now: Counters, op: str, small: bool, seconds: float, min_iops: float
) -> float | None:
    """The op's judged latency over the interval, as the rules' judged latency: the small I/Os'
    average where the goal judges them and the LUN has a histogram (any op: the rules' `has
    histogram` is per LUN), else every I/O's; None below the idle guard (judged I/Os per second)."""
    if small and now.buckets:
        before, after = then.small.get(op, (0.0, 0.0)), now.small.get(op, (0.0, 0.0))
    else:
        before, after = then.every_io(op), now.every_io(op)
    spent, ops = after[0] - before[0], after[1] - before[1]
    if seconds <= 0 or ops <= 0 or spent < 0 or ops / seconds < min_iops:
        return None
    return spent / ops * 1000.0


def frame(number: int, before: Snapshot, after: Snapshot, goals: Goals) -> Frame:
    """Rates and averages of every LUN in both snapshots (a LUN that appeared shows next frame)."""
    seconds = after.at - before.at
    rows = []
    for key, now in after.counters.items():
        then = before.counters.get(key)
        if then is None:
            continue
        database, role, workload = after.labels.get(key, ("", "", ""))
        # As the rules judge it: a LUN no database uses by the goals' `unowned` section.
        named = {"database": database, "role": role, "workload": workload}
        tier = goals.judged(named)
        values: dict[str, float | None] = {
            "r/s": _rate(now.reads, then.reads, seconds),
            "w/s": _rate(now.writes, then.writes, seconds),
            "r_await": _average_ms(now.read_seconds, then.read_seconds, now.reads, then.reads),
            "w_await": _average_ms(now.write_seconds, then.write_seconds, now.writes, then.writes),
            "rMB/s": _scaled(_rate(now.read_bytes, then.read_bytes, seconds), 1 / MIB),
            "wMB/s": _scaled(_rate(now.write_bytes, then.write_bytes, seconds), 1 / MIB),
            "aqu-sz": _rate(now.weighted_seconds, then.weighted_seconds, seconds),
        }
        for op, column in (("read", "r_p99"), ("write", "w_p99")):
            p99 = quantile(P99, then.buckets.get(op, {}), now.buckets.get(op, {}))
            values[column] = _scaled(p99, 1000.0)
        for column, op in JUDGED_COLUMNS.items():
            small = goals.judged_io(named, op) == SMALL
            values[column] = None if tier is None else _judged_ms(then, now, op, small, seconds, tier[1])
        rows.append(
            Row(
                key[0],
                key[1],
                database,
                role,
                workload,
                values,
                None if tier is None else tier[0],
                bool(now.buckets),
            )
        )
    return Frame(number, seconds, rows)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def ordered(rows: list[Row], key: str, pattern: re.Pattern[str] | None) -> list[Row]:
    """Rows matching the filter, numbers largest first (empty last), names in order."""
    kept = [r for r in rows if r.matches(pattern)]
    by_name = sorted(kept, key=lambda r: (r.lun, r.device))
    if key == "LUN":
        return by_name
    column = next(c for c in COLUMNS if c.name == key)
    if not column.numeric:
        return sorted(by_name, key=lambda r: r.text(column))

    def largest_first(row: Row) -> float:
        value = row.values.get(key)
        return math.inf if value is None else -value

    return sorted(by_name, key=largest_first)


def header_line() -> str:
    return " ".join(_cell(c.name, c) for c in COLUMNS).rstrip()


def _cell(text: str, column: Column) -> str:
    if not column.numeric:
        return f"{text:<{column.width}}"
    return f"{text:>{column.width}}"


def row_cells(row: Row) -> list[tuple[Column, str]]:
    """Each column's padded text (a name longer than its column widens the line, never cut)."""
    return [(c, _cell(row.text(c), c)) for c in COLUMNS]


def title(view: Frame, where: str, sort: str, pattern: re.Pattern[str] | None, shown: int) -> str:
    """Frame number, clock, the interval measured, LUNs shown/all, sort, filter, then the source."""
    return (
        f"lunlat top #{view.number} {time.strftime('%H:%M:%S')} interval {view.seconds:.3f}s "
        f"luns {shown}/{len(view.rows)} sort {sort}"
        + (f" filter {pattern.pattern}" if pattern is not None else "")
        + f" from {where}"
    )


def text_frame(view: Frame, where: str, sort: str, pattern: re.Pattern[str] | None) -> str:
    """A frame as plain text: title, column header, one line per LUN, a blank line."""
    rows = ordered(view.rows, sort, pattern)
    lines = [title(view, where, sort, pattern, len(rows)), header_line()]
    lines.extend(" ".join(cell for _, cell in row_cells(row)).rstrip() for row in rows)
    return "\n".join(lines) + "\n\n"


def compile_filter(text: str | None) -> re.Pattern[str] | None:
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise TopError(f"--filter: bad regular expression {text!r}: {exc}") from None
