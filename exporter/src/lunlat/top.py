"""`lunlat top`: a live per-LUN view like `iostat -x`, from /proc/diskstats or a running exporter.

Two places a sample can come from, one shape they end up in (`Snapshot`: the exporter's metric
names and labels):

- locally, the exporter's own diskstats source (parse, 32-bit unwrap, topology, `luns:` labels) is
  built from the config and collected: LUN names and labels are exactly what `serve` publishes;
- with `--url`, a running exporter's /metrics, parsed with prometheus_client's text parser; the
  per-I/O histograms (`lunlat_device_io_latency_seconds`) it may publish give the p99 columns;
- with `--url` and `--exporter.url`, where the goals' host layer is node_exporter's (lunlat runs
  with `--no-collector.diskstats.counters`): node_exporter's per-device counters, joined to lunlat's
  LUNs and roles by `device` as the rules' host layer joins them (`lunlat.layers`).

Locally top reads the kernel's counters itself whatever the goals' host layer: they are the ones
node_exporter reads. windows_exporter's volumes join SQL Server's files only in Prometheus (the
volume's `database` label comes from its scrape config): top says so and names the report.

A frame is the difference of two samples divided by the time measured between them. Latencies are
coloured against each LUN's goal from alerts/goals.yaml (`Goals.tier`): green below, red at or above.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from lunlat import averages, contract, logs
from lunlat.argtypes import non_negative_int
from lunlat.config import ConfigError, load_config
from lunlat.layers import NODE_EXPORTER_DISKSTATS
from lunlat.model import Family
from lunlat.sources.base import SourceError
from lunlat.sources.factory import BuildError, Context, Settings

if TYPE_CHECKING:
    from lunlat.goals import Goals
    from lunlat.sources.diskstats import DiskstatsSource

EXIT_USAGE = 2
MIB = 1024 * 1024  # MB/s as iostat prints it (sectors / 2048)
P99 = 0.99
URL_TIMEOUT = 10.0

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


@dataclass(slots=True)
class Snapshot:
    at: float  # time.monotonic() when taken
    counters: dict[Key, Counters]
    labels: dict[Key, tuple[str, str, str]]  # database, role, workload


_FIELDS: dict[str, str] = {
    contract.DEVICE_READS.name: "reads",
    contract.DEVICE_WRITES.name: "writes",
    contract.DEVICE_READ_TIME.name: "read_seconds",
    contract.DEVICE_WRITE_TIME.name: "write_seconds",
    contract.DEVICE_READ_BYTES.name: "read_bytes",
    contract.DEVICE_WRITE_BYTES.name: "write_bytes",
    contract.DEVICE_IO_WEIGHTED_TIME.name: "weighted_seconds",
}
_BUCKET = contract.DEVICE_IO_LATENCY.name + "_bucket"

# node_exporter's diskstats counters as lunlat names them (the rules' names, lunlat.layers), with
# the weighted I/O time for aqu-sz. Both in seconds and bytes, as lunlat's own.
_FROM_NODE_EXPORTER: dict[str, str] = {
    **{
        NODE_EXPORTER_DISKSTATS[key]: spec.name
        for op in averages.OPS
        for key, spec in (
            (f"{op}s", averages.ops_counter(op)),
            (f"{op}_time", averages.time_counter(op)),
            (f"{op}_bytes", averages.bytes_counter(op)),
        )
    },
    NODE_EXPORTER_DISKSTATS["queue"]: contract.DEVICE_IO_WEIGHTED_TIME.name,
}


def snapshot(samples: Iterable[Sample], at: float) -> Snapshot:
    """The per-LUN counters and labels in a set of the exporter's samples."""
    counters: dict[Key, Counters] = {}
    labels: dict[Key, tuple[str, str, str]] = {}
    for name, sample_labels, value in samples:
        key = (sample_labels.get("lun", ""), sample_labels.get("device", ""))
        attribute = _FIELDS.get(name)
        if attribute is not None:
            setattr(counters.setdefault(key, Counters()), attribute, value)
        elif name == _BUCKET:
            le = sample_labels.get("le", "")
            bound = math.inf if le == "+Inf" else float(le)
            op = counters.setdefault(key, Counters()).buckets.setdefault(sample_labels.get("op", ""), {})
            op[bound] = op.get(bound, 0.0) + value  # every size class of the op (contract.BIO_SIZES)
        elif name == contract.LUN_INFO.name:
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


class LocalReader:
    """The exporter's diskstats source, built from the config as `serve` builds it."""

    def __init__(self, config_file: Path | None, procfs: Path, sysfs: Path) -> None:
        from lunlat.sources import diskstats  # noqa: PLC0415

        try:
            config = load_config(config_file)
        except ConfigError as exc:
            raise TopError(f"config error: {'; '.join(map(str, exc.problems))}") from None
        # Counters on whatever the config says: `counters: false` hands the host layer to
        # node_exporter in Prometheus, but top reads the kernel's counters itself.
        settings = Settings(procfs, sysfs, "diskstats", counters=True)
        built = diskstats.build(Context.of(config, settings))
        if isinstance(built, BuildError):
            raise TopError(str(built))
        self._source: DiskstatsSource = built[0]
        self.where = str(procfs / "diskstats")

    def read(self) -> Snapshot:
        try:
            result = self._source.collect()
        except SourceError as exc:
            raise TopError(str(exc)) from None
        return snapshot(family_samples(result.families), time.monotonic())


class UrlReader:
    """A running exporter's /metrics."""

    def __init__(self, url: str) -> None:
        if "://" not in url:
            url = f"http://{url}"
        scheme, _, rest = url.partition("://")
        if scheme not in ("http", "https"):
            raise TopError(f"--url: not an http(s) URL: {url!r}")
        if "/" not in rest:
            url += "/metrics"
        self.url = url
        self.where = url

    def read(self) -> Snapshot:
        return snapshot(self.samples(), time.monotonic())

    def samples(self) -> list[Sample]:
        try:
            with urllib.request.urlopen(self.url, timeout=URL_TIMEOUT) as response:  # noqa: S310 - http(s) only
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            raise TopError(f"cannot read {self.url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise TopError(f"cannot read {self.url}: {reason}") from None
        try:
            return list(exposition_samples(text))
        except (ValueError, TypeError, IndexError) as exc:
            raise TopError(f"{self.url} is not the Prometheus text format: {exc}") from None


class NodeExporterReader:
    """lunlat's /metrics (names, roles, histograms) and node_exporter's (the counters), joined on
    `device` with lunlat_lun_info{kind="lun"} as the rules' node_exporter host layer joins them:
    a path or a device lunlat does not name is no LUN. Both URLs are one host's, so the host needs
    no join here."""

    def __init__(self, lunlat: UrlReader, exporter: UrlReader) -> None:
        self.lunlat, self.exporter = lunlat, exporter
        self.where = f"{lunlat.url} + {exporter.url}"

    def read(self) -> Snapshot:
        own = self.lunlat.samples()
        theirs = self.exporter.samples()
        at = time.monotonic()
        luns = {
            labels.get("device", ""): labels.get("lun", "")
            for name, labels, _ in own
            if name == contract.LUN_INFO.name and labels.get("kind") == "lun"
        }
        joined: list[Sample] = [s for s in own if s[0] not in _FIELDS]
        for name, labels, value in theirs:
            ours = _FROM_NODE_EXPORTER.get(name)
            lun = luns.get(labels.get("device", ""))
            if ours is not None and lun is not None:
                joined.append((ours, {"lun": lun, "device": labels["device"]}, value))
        if not any(s[0] in _FIELDS for s in joined) and any(s[0] in _FROM_NODE_EXPORTER for s in theirs):
            raise TopError(
                f"none of {self.exporter.url}'s devices is a LUN of {self.lunlat.url} "
                f"({contract.LUN_INFO.name}{{kind='lun'}} by device): give the node_exporter of "
                "the host lunlat runs on"
            )
        return snapshot(joined, at)


Reader = LocalReader | UrlReader | NodeExporterReader


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
    Column("rMB/s", 8, True),
    Column("wMB/s", 8, True),
    Column("aqu-sz", 7, True),
    Column("r_p99", 7, True),
    Column("w_p99", 7, True),
)
SORT_KEYS: tuple[str, ...] = tuple(c.name for c in COLUMNS)
LATENCY_COLUMNS = ("r_await", "w_await", "r_p99", "w_p99")
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

    def above_goal(self, column: str) -> bool | None:
        """Whether a latency column is at or above the LUN's goal; None when not a latency, empty, or
        the LUN is not judged."""
        value = self.values.get(column)
        if column not in LATENCY_COLUMNS or value is None or self.goal_ms is None:
            return None
        return value >= self.goal_ms

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
        tier = goals.judged({"database": database, "role": role, "workload": workload})
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


# --- running ------------------------------------------------------------------------------------


def frames(reader: Reader, first: Snapshot, goals: Goals, interval: float) -> Iterator[Frame]:
    """A frame every `interval` seconds after `first`, each over the time since the previous sample."""
    before = first
    number = 0
    deadline = before.at
    while True:
        deadline += interval
        time.sleep(max(0.0, deadline - time.monotonic()))
        after = reader.read()
        number += 1
        yield frame(number, before, after, goals)
        before = after


def run_batch(
    reader: Reader,
    first: Snapshot,
    goals: Goals,
    args: argparse.Namespace,
    pattern: re.Pattern[str] | None,
    out: TextIO,
) -> int:
    for view in frames(reader, first, goals, args.interval):
        out.write(text_frame(view, reader.where, args.sort, pattern))
        out.flush()
        if args.count and view.number >= args.count:
            break
    return 0


def _goals(path: Path | None) -> Goals:
    from lunlat.goals import goals_or_default  # noqa: PLC0415

    try:
        return goals_or_default(path)
    except ConfigError as exc:
        raise TopError(f"goals error: {'; '.join(map(str, exc.problems))}") from None


def compile_filter(text: str | None) -> re.Pattern[str] | None:
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise TopError(f"--filter: bad regular expression {text!r}: {exc}") from None


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`lunlat top`'s flags (cli.py registers the subcommand)."""
    top = commands.add_parser(
        "top",
        help="live per-LUN latency view (like iostat -x)",
        description=(
            "One row per LUN: IOPS, average latency coloured at the LUN's goal, MB/s, queue size and p99 "
            "(from a running exporter's histograms). Reads /proc/diskstats and the config itself, or a "
            "running exporter with --url. Keys: q quits, s cycles the sort key, / sets the filter."
        ),
    )
    top.add_argument("--url", metavar="URL", help="a running exporter's /metrics instead of the local host")
    top.add_argument(
        "--exporter.url",
        dest="exporter_url",
        metavar="URL",
        help="with --url: the same host's node_exporter /metrics, for the counters (goals host_layer node_exporter)",
    )
    top.add_argument("--config.file", dest="config_file", type=Path, metavar="FILE", help="as for serve")
    top.add_argument("--path.procfs", dest="procfs", type=Path, default=Path("/proc"), metavar="DIR")
    top.add_argument("--path.sysfs", dest="sysfs", type=Path, default=Path("/sys"), metavar="DIR")
    top.add_argument(
        "--goals",
        type=Path,
        metavar="FILE",
        help="latency goals (default alerts/goals.yaml if present, else 1 ms)",
    )
    top.add_argument("--interval", type=_interval, default=2.0, metavar="SECONDS", help="default 2")
    top.add_argument(
        "--count", type=non_negative_int, default=0, metavar="N", help="frames, then exit (0: no end)"
    )
    top.add_argument("--batch", action="store_true", help="plain text frames on stdout, like top -b")
    top.add_argument("--sort", choices=SORT_KEYS, default="LUN", metavar="KEY", help=", ".join(SORT_KEYS))
    top.add_argument("--filter", metavar="REGEX", help="rows whose LUN, database, role or workload match")


def _interval(text: str) -> float:
    """As cli's positive floats, and finite: an interval of inf would never show a frame."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number greater than 0")
    return value


_NO_COUNTERS = (
    "{url} names LUNs but publishes no device counters (lunlat --no-collector.diskstats.counters: "
    "the goals' host layer is node_exporter's): add --exporter.url http://HOST:9100/metrics, that "
    "host's node_exporter, or run lunlat top on the host itself"
)


def _reader(args: argparse.Namespace, goals: Goals) -> Reader:
    """Where the frames come from, as the goals' host layer (`host_layer.source`) and the flags say."""
    source = goals.host_layer.source
    if source == "windows_exporter":
        raise TopError(
            "the goals' host layer is windows_exporter's (host_layer.source): its volumes are joined "
            "to the database's files only in Prometheus, by the `database` label of its scrape job, so "
            "top has no per-LUN host latency to show; use lunlat report --goals (the host and "
            "database layers per LUN) or the Database I/O dashboard's Windows volumes row"
        )
    if args.exporter_url and not args.url:
        raise TopError(
            "--exporter.url joins node_exporter's counters to a running lunlat's LUNs: give lunlat's "
            "/metrics as --url too (without both, top reads /proc/diskstats itself)"
        )
    if args.url and args.exporter_url:
        return NodeExporterReader(UrlReader(args.url), UrlReader(args.exporter_url))
    if args.url:
        if source == "node_exporter":
            raise TopError(_NO_COUNTERS.format(url=UrlReader(args.url).url))
        return UrlReader(args.url)
    return LocalReader(args.config_file, args.procfs, args.sysfs)


def run(args: argparse.Namespace) -> int:
    """`lunlat top`: exit 0, or 2 with one line on bad input or an unreadable source."""
    # Warnings would write over the view; errors still reach stderr.
    logs.setup("error", "logfmt")
    try:
        pattern = compile_filter(args.filter)
        goals = _goals(args.goals)
        reader = _reader(args, goals)
        first = reader.read()  # an unreadable source is an error now, not after the first interval
        if isinstance(reader, UrlReader) and first.labels and not first.counters:
            raise TopError(_NO_COUNTERS.format(url=reader.url))
        if args.batch or not sys.stdout.isatty():
            return run_batch(reader, first, goals, args, pattern, sys.stdout)
        from lunlat import topview  # noqa: PLC0415 - curses only for the live view

        return topview.run(reader, first, goals, args, pattern)
    except TopError as exc:
        print(f"lunlat top: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # `lunlat top --batch | head`: stop quietly, and let the interpreter's final flush go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
