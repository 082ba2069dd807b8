"""No rule reads a series recorded by another group (issue 42; what Cloudflare's pint reports as
`rule/dependency`, which cannot be installed here from a registry).

Prometheus evaluates the groups of a rule file concurrently, each on its own timer, and the rules of
one group in order (prometheus.io/docs/prometheus/latest/configuration/recording_rules: "Recording
and alerting rules exist in a rule group. Rules within a group are run sequentially at a regular
interval"). A rule reading a record of its own group, written before it, sees this evaluation's
value; one reading another group's record sees whatever that group last wrote, one of its
evaluations ago or more. Checked on the rules of every goals file the repository generates from,
and on goals with an array, whose host-minus-array difference reads the host's averages. The one
exception is declared: series recorded for history in a slow group (recorded.HISTORY), whose
readers look back hours.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser as pp
import pytest

from lunlat import recorded
from lunlat.goals import Goals, load_goals, parse_goals
from lunlat_rules.rules import RuleSet

ALERTS = Path(__file__).resolve().parents[1]
ARRAY = (
    "arrays:\n"
    "  - name: acme\n"
    "    read: {metric: acme_volume_latency_ms, match: 'op=\"read\"'}\n"
    "    write: {metric: acme_volume_latency_ms, match: 'op=\"write\"'}\n"
    "    unit: milliseconds\n"
)


def _selected(node: Any) -> Iterator[str]:
    """The metric names a PromQL tree selects."""
    if isinstance(node, pp.VectorSelector):
        if node.name:
            yield node.name
    elif isinstance(node, pp.MatrixSelector):
        yield from _selected(node.vector_selector)
    elif isinstance(node, pp.BinaryExpr):
        yield from _selected(node.lhs)
        yield from _selected(node.rhs)
    elif isinstance(node, pp.AggregateExpr):
        yield from _selected(node.expr)
        if node.param is not None:
            yield from _selected(node.param)
    elif isinstance(node, pp.Call):
        for arg in node.args:
            yield from _selected(arg)
    elif isinstance(node, pp.ParenExpr | pp.UnaryExpr | pp.SubqueryExpr):
        yield from _selected(node.expr)


def cross_group_reads(groups: list[dict[str, Any]]) -> list[str]:
    """`group/rule reads name (recorded by group)` for every such read."""
    recorded_in: dict[str, set[str]] = {}
    for group in groups:
        for rule in group["rules"]:
            if "record" in rule:
                recorded_in.setdefault(rule["record"], set()).add(group["name"])
    found = []
    for group in groups:
        for rule in group["rules"]:
            for name in sorted(set(_selected(pp.parse(rule["expr"])))):
                elsewhere = recorded_in.get(name, set()) - {group["name"]}
                if elsewhere and name not in recorded.HISTORY:
                    rule_name = rule.get("record") or rule["alert"]
                    found.append(
                        f"{group['name']}/{rule_name} reads {name} (recorded by {', '.join(sorted(elsewhere))})"
                    )
    return found


GOALS = {
    "goals.yaml": lambda: load_goals(ALERTS / "goals.yaml"),
    "built-in goals": Goals,
    "node_exporter": lambda: load_goals(ALERTS / "tests" / "host_layers" / "node_exporter.goals.yaml"),
    "windows_exporter": lambda: load_goals(ALERTS / "tests" / "host_layers" / "windows_exporter.goals.yaml"),
    "an array": lambda: parse_goals(ARRAY, "goals.yaml"),
}


@pytest.mark.parametrize("goals", GOALS.values(), ids=GOALS.keys())
def test_no_rule_reads_a_series_recorded_by_another_group(goals: Any) -> None:
    assert cross_group_reads(RuleSet(goals()).groups()) == []


def test_a_read_across_groups_is_found() -> None:
    """The check is live: the array side's difference, in a group of its own, is named."""
    groups = RuleSet(parse_goals(ARRAY, "goals.yaml")).groups()
    latency = next(g for g in groups if g["name"] == "lunlat-latency")
    moved = [
        r for r in latency["rules"] if r.get("record") == "lunlat:host_minus_array_latency_seconds:diff1m"
    ]
    assert len(moved) == 2
    apart = [
        {"name": "lunlat-latency", "rules": [r for r in latency["rules"] if r not in moved]},
        {"name": "elsewhere", "rules": moved},
    ]
    found = cross_group_reads(apart)
    assert (
        "elsewhere/lunlat:host_minus_array_latency_seconds:diff1m reads lunlat:read_latency_seconds:avg1m"
        in (" ".join(found))
    )
