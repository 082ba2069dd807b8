"""`lunlat top`'s command: its flags, where the frames come from, batch frames or the live view."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from lunlat import logs
from lunlat.argtypes import non_negative_int, positive_float
from lunlat.config import ConfigError
from lunlat.top.frames import SORT_KEYS, Frame, Snapshot, TopError, compile_filter, frame, text_frame
from lunlat.top.readers import LocalReader, NodeExporterReader, Reader, UrlReader

if TYPE_CHECKING:
    from lunlat.goals import Goals

EXIT_USAGE = 2

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
    top.add_argument("--interval", type=positive_float, default=2.0, metavar="SECONDS", help="default 2")
    top.add_argument(
        "--count", type=non_negative_int, default=0, metavar="N", help="frames, then exit (0: no end)"
    )
    top.add_argument("--batch", action="store_true", help="plain text frames on stdout, like top -b")
    top.add_argument("--sort", choices=SORT_KEYS, default="LUN", metavar="KEY", help=", ".join(SORT_KEYS))
    top.add_argument("--filter", metavar="REGEX", help="rows whose LUN, database, role or workload match")


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
        from lunlat.top import view  # noqa: PLC0415 - curses only for the live view

        return view.run(reader, first, goals, args, pattern)
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
