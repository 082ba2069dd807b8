"""`lunlat report`: the reference architecture's tables, per phase, from a Prometheus holding lunlat's
series: DIR/tables.csv (one row per phase x layer x LUN x op) and DIR/index.html (self-contained).

Bad input (Prometheus unreachable, no lunlat series, a phase outside the range, an unparsable time)
is one line on stderr and exit 2; DIR is written whole or not at all (a temporary directory renamed).
The command line is parsed in lunlat.cli, which imports this package only when `report` runs.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import sys
from pathlib import Path
from typing import TextIO

from lunlat import reference_architecture
from lunlat.config import ConfigError
from lunlat.goals import Goals, goals_or_default
from lunlat.report.api import Prometheus, ReportError
from lunlat.report.collect import CSV_COLUMNS, Collected, Collector, parse_phases, parse_time
from lunlat.report.page import cells, render

EXIT_USAGE = 2
DEFAULT_TITLE = "lunlat report: average and judged latency per LUN against the goal"


class Progress:
    """A progress bar on stderr when it is a terminal; silent otherwise (logs, CI)."""

    def __init__(self, total: int, stream: TextIO = sys.stderr) -> None:
        self.total, self.done, self.stream = max(1, total), 0, stream
        self.enabled = stream.isatty()

    def step(self, _what: str = "") -> None:
        self.done = min(self.total, self.done + 1)
        if self.enabled:
            filled = 30 * self.done // self.total
            self.stream.write(
                f"\rquerying Prometheus [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}"
            )
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def tables_csv(data: Collected) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    order = {p.name: i for i, p in enumerate(data.phases)}
    rows = sorted(
        data.rows,
        key=lambda r: (
            order[r.phase.name],
            r.layer != "host",
            r.layer,
            r.labels.get("instance", ""),
            r.labels.get("database", ""),
            r.labels.get("role", ""),
            r.labels.get("lun", ""),
            r.op,
        ),
    )
    for row in rows:
        writer.writerow(row.csv())
    return out.getvalue()


def write_dir(output: Path, files: dict[str, str]) -> None:
    """All of `files` in `output`, or nothing: written in a sibling temporary directory, renamed."""
    output = output.absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    old = output.with_name(f".{output.name}.{os.getpid()}.old")
    try:
        temporary.mkdir()
        for name, text in files.items():
            (temporary / name).write_text(text, encoding="utf-8")
        if output.exists():
            output.rename(old)
        temporary.rename(output)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    return write(
        args.prometheus_url,
        args.start,
        args.end,
        args.phases,
        args.goals,
        args.output,
        DEFAULT_TITLE if args.title is None else args.title,
        args.reference,
    )


def write(
    prometheus_url: str,
    start_text: str,
    end_text: str,
    phase_specs: list[str],
    goals_file: Path | None,
    output: Path,
    title: str = DEFAULT_TITLE,
    reference: Path | None = None,
) -> int:
    """The report of `--from start_text --to end_text --phase SPEC...` into `output`: 0, or 2 with one
    line on stderr. `lunlat report` and `lunlat-lab scenario --prometheus.url` both run it. With
    `reference`, DIR/reference.csv and the page put each reference cell beside the measured one."""
    try:
        goals = _goals(goals_file)
        reference_cells = _reference(reference)
        if not prometheus_url.startswith(("http://", "https://")):
            raise ReportError(f"--prometheus.url must be an http(s) URL, got {prometheus_url!r}")
        start, end = parse_time(start_text), parse_time(end_text)
        phases = parse_phases(phase_specs, start, end)
        collector = Collector(Prometheus(prometheus_url), goals, lambda _q: None)
        progress = Progress(collector.queries(phases))
        collector.progress = progress.step
        try:
            data = collector.collect(start, end, phases)
        finally:
            progress.close()
        comparisons = None
        if reference_cells is not None:
            measured = {
                key: None if row.avg is None else row.avg * 1000 for key, row in cells(data.rows).items()
            }
            comparisons = reference_architecture.compare(reference_cells, measured)
        files = {
            "tables.csv": tables_csv(data),
            "index.html": render(data, title, prometheus_url, comparisons),
        }
        if comparisons is not None:
            files["reference.csv"] = reference_architecture.csv_text(comparisons)
        write_dir(output, files)
    except ReportError as exc:
        print(f"lunlat report: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"lunlat report: error: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{output / 'index.html'}, {output / 'tables.csv'}: {len(data.rows)} rows")
    return 0


def _reference(path: Path | None) -> list[reference_architecture.ReferenceCell] | None:
    if path is None:
        return None
    try:
        return reference_architecture.load(path)
    except reference_architecture.ReferenceError as exc:
        raise ReportError(str(exc)) from None


def _goals(path: Path | None) -> Goals:
    try:
        return goals_or_default(path)
    except ConfigError as exc:
        raise ReportError(f"goals: {exc.problems[0] if exc.problems else exc}") from None
