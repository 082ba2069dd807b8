"""No rule reads a series recorded by another group (issue 42; what Cloudflare's pint reports as
`rule/dependency`, which cannot be installed here from a registry).

Prometheus evaluates the groups of a rule file concurrently, each on its own timer, and the rules of
one group in order (prometheus.io/docs/prometheus/latest/configuration/recording_rules: "Recording
and alerting rules exist in a rule group. Rules within a group are run sequentially at a regular
interval"). A rule reading a record of its own group, written before it, sees this evaluation's
value; one reading another group's record sees whatever that group last wrote, one of its
evaluations ago or more. Checked on the rules of every goals file the repository generates from,
and on goals with an array, whose host-minus-array difference reads the host's averages. A read is
matched to a record by name and by the labels the recording rule sets: the judgement's two groups,
one per op (recorded.LATENCY_GROUP), record the same names, and a read of op="read" is not one of
the write group's records.

Two kinds of read across groups are allowed: a group evaluated at least SLOWER times less often than
the group whose records it reads (lunlat-drift, every 5 minutes, reading the 1-minute judged latency
the judgement's groups record every 15 s; lunlat-slo, every minute, reading the judged latency for
its bool). It sees them at most one of the faster group's evaluations late, a quarter of its own
interval or less: for an hourly average read every 5 minutes nothing, for a minute judged by the
bool of 15 s before it a quarter of that minute (issue 41, recorded.SLO_GROUP). The other way (a fast group
reading a slow one's record, up to its interval late) stays a finding, but for the series declared
history (recorded.HISTORY: recorded in a slow group for readers that look back hours, as the
path-loss alert reads a day of hourly maxima).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser as pp
import pytest

from lunlat.goals import Goals, duration_seconds, load_goals, parse_goals
from lunlat.promql import recorded
from lunlat_rules import breach
from lunlat_rules.rules import RuleSet

ALERTS = Path(__file__).resolve().parents[1]
ARRAY = (
    "arrays:\n"
    "  - name: acme\n"
    "    read: {metric: acme_volume_latency_ms, match: 'op=\"read\"'}\n"
    "    write: {metric: acme_volume_latency_ms, match: 'op=\"write\"'}\n"
    "    unit: milliseconds\n"
)


def _selectors(node: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """The metric names a PromQL tree selects, each with its selector's equality matchers."""
    if isinstance(node, pp.VectorSelector):
        if node.name:
            equal = {m.name: m.value for m in node.matchers.matchers if m.op == pp.MatchOp.Equal}
            yield node.name, equal
    elif isinstance(node, pp.MatrixSelector):
        yield from _selectors(node.vector_selector)
    elif isinstance(node, pp.BinaryExpr):
        yield from _selectors(node.lhs)
        yield from _selectors(node.rhs)
    elif isinstance(node, pp.AggregateExpr):
        yield from _selectors(node.expr)
        if node.param is not None:
            yield from _selectors(node.param)
    elif isinstance(node, pp.Call):
        for arg in node.args:
            yield from _selectors(arg)
    elif isinstance(node, pp.ParenExpr | pp.UnaryExpr | pp.SubqueryExpr):
        yield from _selectors(node.expr)


def _selected(node: Any) -> Iterator[str]:
    """The metric names a PromQL tree selects."""
    for name, _ in _selectors(node):
        yield name


def _may_select(matchers: dict[str, str], rule: dict[str, Any]) -> bool:
    """Whether a selector with these equality matchers can select what `rule` records: not when the
    rule sets one of their labels to another value (the read group's op="read" against the write
    group's records, op="write")."""
    labels = rule.get("labels", {})
    return all(labels.get(name, value) == value for name, value in matchers.items())


# How many times less often a group must run to read another group's records (module docstring).
SLOWER = 4


def _interval(group: dict[str, Any]) -> float:
    return duration_seconds(group.get("interval", recorded.EVALUATION_INTERVAL))


def cross_group_reads(groups: list[dict[str, Any]]) -> list[str]:
    """`group/rule reads name (recorded by group)` for every such read, but a read by a group
    evaluated at least SLOWER times less often than the recording one."""
    recorded_in: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    interval = {group["name"]: _interval(group) for group in groups}
    for group in groups:
        for rule in group["rules"]:
            if "record" in rule:
                recorded_in.setdefault(rule["record"], []).append((group["name"], rule))
    found = []
    for group in groups:
        for rule in group["rules"]:
            for name, matchers in sorted(_selectors(pp.parse(rule["expr"])), key=lambda s: s[0]):
                elsewhere = {
                    other
                    for other, recording in recorded_in.get(name, [])
                    if other != group["name"]
                    and interval[group["name"]] < SLOWER * interval[other]
                    and _may_select(matchers, recording)
                }
                if elsewhere and name not in recorded.HISTORY | recorded.CONFIGURED:
                    rule_name = rule.get("record") or rule["alert"]
                    read = f"{group['name']}/{rule_name} reads {name} (recorded by {', '.join(sorted(elsewhere))})"
                    if read not in found:
                        found.append(read)
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
    """The check is live: the array side's difference, in CONTEXT_GROUP once a minute, reads the
    host's averages of lunlat-latency; run as often as that group, the read is named."""
    groups = RuleSet(parse_goals(ARRAY, "goals.yaml")).groups()
    context = next(g for g in groups if g["name"] == recorded.CONTEXT_GROUP)
    assert context["interval"] == recorded.CONTEXT_INTERVAL == "1m"
    assert [
        r["labels"]["op"]
        for r in context["rules"]
        if r.get("record") == recorded.HOST_MINUS_ARRAY.format(window="1m")
    ] == ["read", "write"]
    assert cross_group_reads(groups) == []
    as_often = [g if g is not context else {**context, "interval": "15s"} for g in groups]
    found = cross_group_reads(as_often)
    assert (
        "lunlat-context/lunlat:host_minus_array_latency_seconds:diff1m reads lunlat:read_latency_seconds:avg1m"
        in (" ".join(found))
    )


def test_a_slow_group_reads_a_fast_one_but_not_the_other_way() -> None:
    """The allowance is one-way: lunlat-drift (5m) reads the judgement's 1-minute judged latency;
    the same drift record read by a rule of a 15 s group is a finding, and so is the drift group's
    read once it runs as often as the groups it reads."""
    groups = RuleSet(load_goals(ALERTS / "goals.yaml")).groups()
    drift = next(g for g in groups if g["name"] == "lunlat-drift")
    assert cross_group_reads(groups) == []
    reader = {"record": "x", "expr": "lunlat:judged_write_latency_seconds:avg1h"}
    fast_reader = [*groups, {"name": "fast", "rules": [reader]}]
    assert cross_group_reads(fast_reader) == [
        "fast/x reads lunlat:judged_write_latency_seconds:avg1h (recorded by lunlat-drift)"
    ]
    as_often = [g if g is not drift else {**drift, "interval": "15s"} for g in groups]
    assert any(
        f.startswith("lunlat-drift/") and "(recorded by lunlat-latency-read)" in f
        for f in cross_group_reads(as_often)
    )


def test_the_slo_group_records_the_bool_it_reads_because_it_runs_four_times_slower() -> None:
    """Issue 41: lunlat-slo (1m) records the bool first and judges each minute by it, from
    the judgement's judged latency (15 s); at twice the judgement's interval instead, those reads
    are findings."""
    groups = RuleSet(load_goals(ALERTS / "goals.yaml")).groups()
    slo = next(g for g in groups if g["name"] == recorded.SLO_GROUP)
    assert slo["interval"] == recorded.SLO_INTERVAL == "1m"
    assert [r.get("record") for r in slo["rules"][:2]] == [recorded.ABOVE_GOAL] * 2
    assert not any(r.get("record") == recorded.ABOVE_GOAL for g in groups if g is not slo for r in g["rules"])
    assert cross_group_reads(groups) == []
    twice = [g if g is not slo else {**slo, "interval": "30s"} for g in groups]
    found = cross_group_reads(twice)
    for op in recorded.OPS:
        judged = recorded.JUDGED_LATENCY.format(op=op, window="1m")
        group = recorded.LATENCY_GROUP.format(op=op)
        assert f"{recorded.SLO_GROUP}/{recorded.ABOVE_GOAL} reads {judged} (recorded by {group})" in found


@pytest.mark.parametrize("goals", GOALS.values(), ids=GOALS.keys())
def test_the_goal_is_recorded_once_a_minute_from_the_raw_series(goals: Any) -> None:
    """Issue 41: each LUN's goal, idle guard and floor are recorded in GOAL_GROUP once a minute, by
    no other group, and from no other group's records (only its own, in order), so the judgement
    every 15 s computes none of them and reads a goal that depends on nothing it records."""
    groups = RuleSet(goals()).groups()
    goal = next(g for g in groups if g["name"] == recorded.GOAL_GROUP)
    assert goal["interval"] == recorded.GOAL_INTERVAL == "1m"
    assert groups[0] is goal  # first: the promtool tests evaluate the groups in file order (promtools.py)
    own = {r["record"] for r in goal["rules"]}
    assert {recorded.LUN_LAYER, recorded.GOAL, recorded.GOAL_MIN_IOPS} <= own
    elsewhere = {r.get("record") for g in groups if g is not goal for r in g["rules"]}
    assert not (elsewhere & recorded.CONFIGURED)
    recorded_anywhere = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    for rule in goal["rules"]:
        read = set(_selected(pp.parse(rule["expr"]))) & recorded_anywhere
        assert read <= own, (rule["record"], read)


@pytest.mark.parametrize("goals", GOALS.values(), ids=GOALS.keys())
def test_the_breach_alerts_select_the_few_luns_above_goal(goals: Any) -> None:
    """Issue 41: each breach alert selects the judged latency above goal, recorded before it in its
    group, and reads nothing else: no alert matches every LUN of its role against the goal."""
    shipped = goals()
    names = {rule["alert"] for rule in breach.breach_alerts(shipped)}
    found = set()
    for op in recorded.OPS:
        latency = next(
            g for g in RuleSet(shipped).groups() if g["name"] == recorded.LATENCY_GROUP.format(op=op)
        )
        recorded_before: set[str] = set()
        for rule in latency["rules"]:
            if "record" in rule:
                recorded_before.add(rule["record"])
            elif rule["alert"] in names:
                found.add(rule["alert"])
                assert rule["labels"]["op"] == op
                assert set(_selected(pp.parse(rule["expr"]))) == {recorded.JUDGED_ABOVE_GOAL}, rule["alert"]
                assert recorded.JUDGED_ABOVE_GOAL in recorded_before
    assert found == names and len(names) == 6


@pytest.mark.parametrize("goals", GOALS.values(), ids=GOALS.keys())
def test_the_judgement_of_each_op_runs_in_a_group_of_its_own(goals: Any) -> None:
    """Issue 41: the judgement every 15 s is one group per op, so Prometheus runs the two
    concurrently; each records only its op (the averages by name, the rest by their `op` label),
    and neither reads the other's records (test_no_rule_reads_a_series_recorded_by_another_group;
    live: the read group's judged latency recorded by the write group is named)."""
    groups = RuleSet(goals()).groups()
    for op in recorded.OPS:
        group = next(g for g in groups if g["name"] == recorded.LATENCY_GROUP.format(op=op))
        assert "interval" not in group  # Prometheus' evaluation_interval, 15 s
        other = next(o for o in recorded.OPS if o != op)
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            assert rule.get("labels", {}).get("op", op) == op, name
            assert other not in name.lower(), name
    read, write = (
        next(g for g in groups if g["name"] == recorded.LATENCY_GROUP.format(op=o)) for o in recorded.OPS
    )
    judged = recorded.JUDGED_LATENCY.format(op="read", window="1m")
    swapped = [
        {**read, "rules": [r for r in read["rules"] if r.get("record") != judged]},
        {**write, "rules": [*write["rules"], *(r for r in read["rules"] if r.get("record") == judged)]},
    ]
    assert any(
        f.startswith(f"{read['name']}/") and f"reads {judged} (recorded by {write['name']})" in f
        for f in cross_group_reads(swapped)
    )
