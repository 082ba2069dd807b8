"""`lunlat-rules generate`: the recording and alert rules, and the same rules as a Kubernetes
PrometheusRule, from a goals file. Runs from any directory: the goals default to the file this
package ships, the outputs to the current directory."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lunlat.files import write_generated
from lunlat_rules import goals_for
from lunlat_rules.rules import RuleSet

EXIT_USAGE = 2
DEFAULT_OUTPUT = Path("lunlat.rules.yml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lunlat-rules", description="lunlat's Prometheus rules, generated from a goals file."
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    generate = actions.add_parser(
        "generate",
        help="write the rules file (or, with --check, compare it)",
        description=(
            "Write the recording and alert rules generated from the goals file (and, with "
            "--kubernetes-output, the same rules as a Kubernetes PrometheusRule). With --check, write "
            "nothing and exit 1 when a file is stale (CI runs this). A bad goals file exits 2 naming "
            "the key and line."
        ),
    )
    generate.add_argument(
        "--goals",
        type=Path,
        metavar="FILE",
        help="the goals file (default: the one shipped with lunlat-rules)",
    )
    generate.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, metavar="FILE", help=f"default ./{DEFAULT_OUTPUT}"
    )
    generate.add_argument(
        "--kubernetes-output",
        type=Path,
        metavar="FILE",
        help="also write the rules as a PrometheusRule resource",
    )
    generate.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a file differs from what would be written",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    found = goals_for(args.goals, "lunlat-rules")
    if found is None:
        return EXIT_USAGE
    goals, rule_set = found[0], RuleSet(found[1])
    files = {args.output: rule_set.render()}
    if args.kubernetes_output is not None:
        files[args.kubernetes_output] = rule_set.render_prometheus_rule()
    return write_generated(files, goals, args.check, "lunlat-rules generate")
