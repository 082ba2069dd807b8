"""`lunlat-dashboards generate`: the Grafana dashboards' JSON from a goals file. Runs from any
directory: the goals default to the file lunlat-rules ships, the output to the current directory."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lunlat.files import write_generated
from lunlat_dashboards import render_all
from lunlat_rules import goals_for

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lunlat-dashboards", description="lunlat's Grafana dashboards, generated as code."
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    generate = actions.add_parser(
        "generate",
        help="write the dashboards' JSON (or, with --check, compare it)",
        description=(
            "Write one JSON file per dashboard, generated from the goals file and the metric contract. With "
            "--check, write nothing and exit 1 when a committed file is stale or missing (CI runs this)."
        ),
    )
    generate.add_argument(
        "--goals",
        type=Path,
        metavar="FILE",
        help="the goals file (default: the one shipped with lunlat-rules)",
    )
    generate.add_argument(
        "--output-dir", type=Path, default=Path(), metavar="DIR", help="default: the current directory"
    )
    generate.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a file differs from what would be written",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    found = goals_for(args.goals, "lunlat-dashboards")
    if found is None:
        return EXIT_USAGE
    goals, rendered = found[0], render_all(found[1])
    files = {args.output_dir / name: text for name, text in rendered.items()}
    return write_generated(files, goals, args.check, "lunlat-dashboards generate")
