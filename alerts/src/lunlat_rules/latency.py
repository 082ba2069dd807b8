"""The latency records every alert reads (groups lunlat-latency-{read,write}, one per op;
alerts/tests/latency.test.yml, judged.test.yml): per LUN and layer the IOPS, throughput and average
latency of each op, which engine each database is, each LUN's goal and idle guard (and throughput
floor), the latency the goal judges, and whether it is above goal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lunlat import contract
from lunlat.exposition import format_value
from lunlat.goals import Goals
from lunlat.promql.layers import (
    LUN_LABELS,
    SERIES_LABELS,
    DbLayer,
    ExporterHostLayer,
    HostLayer,
    Layer,
    db_layers,
    host_layer,
    unlabelled_luns,
)
from lunlat.promql.recorded import (
    ABOVE_GOAL,
    BREACH_WINDOW,
    GOAL,
    GOAL_MIN_IOPS,
    IOPS,
    JUDGED_ABOVE_GOAL,
    JUDGED_LATENCY,
    LATENCY,
    LUN_LAYER,
    OPS,
    RATE_WINDOWS,
    THROUGHPUT,
    THROUGHPUT_FLOOR,
    UNLABELLED_LUNS,
)
from lunlat_rules.histogram import HOST_LAYER, IoHistogram
from lunlat_rules.promqltext import indent as _indent
from lunlat_rules.promqltext import labelled
from lunlat_rules.promqltext import number as _promql_number
from lunlat_rules.promqltext import on as _on
from lunlat_rules.rulefmt import record
from lunlat_rules.tiers import ALL, DATABASE, JUDGE_LABEL, MIB, SMALL, goal_tiers, judged_kinds

# Which engine each database (a source's `database` label) is: one series per job, instance and
# database, `engine` a rule label. Joined on `database`, it gives the host layer of a LUN a database
# uses the same `engine` as the database's own layer: the engine is known only through a database
# source (its file map or a `luns:` entry naming one of its databases); a LUN no source names has none.
ENGINE_INFO = "lunlat:database_engine:info"


# Matchers on the recorded series' `layer`: the host's, and the databases' own.
ON_HOST_LAYER = f'layer="{HOST_LAYER}"'
OFF_HOST_LAYER = f'layer!="{HOST_LAYER}"'


def rule_host_layer(goals: Goals) -> HostLayer | ExporterHostLayer:
    """The host layer as the rules read it: lunlat's joins an old exporter's series to the recorded
    UNLABELLED_LUNS (unlabelled_luns), not to every LUN's lunlat_lun_info."""
    layer = host_layer(goals)
    return replace(layer, unlabelled=UNLABELLED_LUNS) if isinstance(layer, HostLayer) else layer


def rule_layers(goals: Goals) -> list[Layer]:
    """The layers the rules record: the host's (goals host_layer), then each engine's own."""
    return [rule_host_layer(goals), *db_layers(goals.selector)]


def unlabelled(goals: Goals) -> list[dict[str, Any]]:
    """UNLABELLED_LUNS, where the host layer is lunlat's own (recorded.py says why)."""
    if not isinstance(host_layer(goals), HostLayer):
        return []
    return [record(UNLABELLED_LUNS, unlabelled_luns(goals.selector))]


def layer_labels(layer: Layer) -> dict[str, str]:
    """The static labels of a layer's recorded series."""
    if isinstance(layer, DbLayer) and layer.engine:
        return {"layer": layer.name, "engine": layer.engine}
    return {"layer": layer.name}


def with_engine(vector: str) -> str:
    """`vector` with the `engine` of its database where a database source names it, as it is
    elsewhere (no database, or one no source reports)."""
    return (
        "(\n"
        f"    {vector}\n"
        "  * on (job, instance, database) group_left (engine)\n"
        f"    {ENGINE_INFO}\n"
        f"  or {_on()}\n"
        f"    {vector}\n"
        ")"
    )


def rates(goals: Goals, ops: Sequence[str] = OPS) -> list[dict[str, Any]]:
    """Per LUN and layer the IOPS, throughput and average latency of each of `ops`."""
    rules: list[dict[str, Any]] = []
    for layer in rule_layers(goals):
        labels = layer_labels(layer)
        for window in RATE_WINDOWS:
            for op in ops:
                rules.append(
                    record(IOPS.format(window=window), layer.operations(op, window), **labels, op=op)
                )
            for op in ops:
                throughput = layer.bytes(op, window)
                if throughput is not None:
                    rules.append(record(THROUGHPUT.format(window=window), throughput, **labels, op=op))
            for op in ops:
                # The operations are counted again here, not read from the IOPS just recorded:
                # vmalert (fleets) writes recorded series back asynchronously, so a rule that
                # reads one recorded in the same evaluation gets an older value, and the
                # average would mix two instants (off by the load's change in between).
                expr = (
                    f"{layer.time(op, window)}\n/ {_on(LUN_LABELS)}\n  ({layer.operations(op, window)} > 0)"
                )
                rules.append(record(LATENCY.format(op=op, window=window), expr, **labels))
    return rules


def lun_layers(goals: Goals) -> list[dict[str, Any]]:
    """LUN_LAYER: each LUN of each layer (Layer.luns: the LUNs its series are labelled with, from
    the raw series, no rate), for the goal tiers to select from (GOAL_GROUP: recorded.py says why)."""
    return [record(LUN_LAYER, layer.luns(), **layer_labels(layer)) for layer in rule_layers(goals)]


def engines(goals: Goals) -> list[dict[str, Any]]:
    """ENGINE_INFO: which engine each database reporting files is."""
    return [
        record(
            ENGINE_INFO,
            f"group by (job, instance, database) (\n"
            f"    {layer.files.reads.name}{{{goals.selector}}}\n"
            f"  or {layer.files.writes.name}{{{goals.selector}}}\n"
            ")",
            engine=layer.engine,
        )
        for layer in rule_layers(goals)
        if isinstance(layer, DbLayer) and layer.engine
    ]


def goal_series(goals: Goals) -> list[dict[str, Any]]:
    """Each LUN's goal and idle guard, `severity` and (where known) `engine` as labels: one `or`
    branch per tier, first match wins. `or on (…)` keeps `engine`: it adds right-hand series
    whose on (…) labels match none on the left and drops no label of either side (Prometheus
    docs, querying/operators); pint 0.87's promql/impossible says otherwise, wrongly
    (alerts/tests/latency.test.yml asserts the goal's and the alert's `engine`)."""
    base = LUN_LAYER
    grouped = f"group by ({', '.join(SERIES_LABELS)}, engine)"
    tiers = [(t, f"{{{m}}}" if m else "") for t, m in goal_tiers(goals)]
    goal_branches = [
        labelled(
            f"{_promql_number(t.goal_ms / 1000)} * {grouped} {_indent(with_engine(base + sel), 2)}",
            severity=t.severity,
            **{JUDGE_LABEL.format(op=op): t.judged(op) for op in OPS},
        )
        for t, sel in tiers
    ]
    guard_branches = [f"{_promql_number(t.min_iops)} * {grouped} ({base}{sel})" for t, sel in tiers]
    join = f"\nor {_on()}\n"
    return [record(GOAL, join.join(goal_branches)), record(GOAL_MIN_IOPS, join.join(guard_branches))]


def floor_series(goals: Goals) -> list[dict[str, Any]]:
    """THROUGHPUT_FLOOR of the host layer's LUNs whose tier sets one; none when no tier does. Every
    tier has a branch (0 where it sets no floor), so the first match wins as for the goal; the
    zeros are then dropped."""
    tiers = goal_tiers(goals)
    if all(t.floor_mib_s is None for t, _ in tiers):
        return []
    base = f'{LUN_LAYER}{{layer="{HOST_LAYER}"'
    branches = [
        f"{format_value((t.floor_mib_s or 0) * MIB)} * group by ({', '.join(SERIES_LABELS)}) "
        f"({base}{', ' + m if m else ''}}})"
        for t, m in tiers
    ]
    join = f"\n  or {_on()}\n  "
    return [record(THROUGHPUT_FLOOR, f"(\n  {join.join(branches)}\n) > 0")]


def judged_latency(goals: Goals, ops: Sequence[str] = OPS) -> list[dict[str, Any]]:
    """JUDGED_LATENCY per op: for the host layer, the average of the I/Os the LUN's tier judges
    (its goal series' judge label): the per-I/O histogram's small class (`small`), or every I/O
    (`all`: the tier says so, or the host has no histogram for the LUN); for a database layer, its
    own average (`database`: what the engine counts as the database's I/O). Absent below the idle
    guard, counted over the judged I/Os."""
    window, sel = BREACH_WINDOW, goals.selector
    histogram = IoHistogram(sel)
    host_goal = f'{GOAL}{{layer="{HOST_LAYER}"'
    rules = []
    for op in ops:
        # Whether the host has a histogram of the LUN's `op`, from that op's series only (its three
        # size classes per device, not both ops' six): a LUN measured with no small I/O still has one
        # (judged.test.yml, a LUN of only large reads), whichever classes an exporter publishes.
        has_histogram = (
            f'group by (job, instance, lun) ({contract.DEVICE_IO_LATENCY.name}_count{{{sel}, op="{op}"}})'
        )
        judge = JUDGE_LABEL.format(op=op)
        latency = LATENCY.format(op=op, window=window)
        # Only the kinds some tier judges are written (tiers.judged_kinds). With one kind, the goal
        # has nothing to choose: the idle guard (GOAL_MIN_IOPS), which each branch reads, exists
        # exactly where the goal does (goal_series: the same tiers over the same series), so the
        # branches read no goal (issue 41).
        kinds = judged_kinds(goals, op)
        one_kind = len(kinds) == 1
        small = (
            f"{histogram.small(op, 'sum', window)}\n"
            f"/ {_on(LUN_LABELS)}\n"
            f"  (\n    {_indent(histogram.small(op, 'count', window), 4)}\n"
            f"  >= {_on(LUN_LABELS)}\n"
            f'    {GOAL_MIN_IOPS}{{layer="{HOST_LAYER}"}}\n  )'
            + ("" if one_kind else f'\nand {_on(LUN_LABELS)}\n  {host_goal}, {judge}="{SMALL}"}}')
        )
        # Every I/O is judged where the tier says so, and where it says small but the host has no
        # histogram of the LUN.
        no_histogram = f"unless on (job, instance, lun) {has_histogram}"
        if kinds == (ALL,):
            every_where = ""
        elif kinds == (SMALL,):
            every_where = f"{no_histogram}\n"
        else:
            every_where = (
                f"and {_on(LUN_LABELS)}\n"
                f'  (\n    {host_goal}, {judge}="{ALL}"}}\n'
                f"  or {_on(LUN_LABELS)}\n"
                f'    ({host_goal}, {judge}="{SMALL}"}} {no_histogram})\n'
                "  )\n"
            )
        every = f'{latency}{{layer="{HOST_LAYER}"}}\n{every_where}{idle_guard(op, ON_HOST_LAYER)}'
        branches = [*([labelled(small, judged=SMALL)] if SMALL in kinds else []), labelled(every, judged=ALL)]
        host = f"\nor {_on(LUN_LABELS)}\n".join(branches)
        name = JUDGED_LATENCY.format(op=op, window=window)
        rules.append(record(name, host, layer=HOST_LAYER, op=op))
        if any(isinstance(layer, DbLayer) for layer in rule_layers(goals)):
            database = f'{latency}{{layer!="{HOST_LAYER}"}}\n{idle_guard(op, OFF_HOST_LAYER)}'
            rules.append(record(name, labelled(database, judged=DATABASE), op=op))
    return rules


def idle_guard(op: str, layer: str) -> str:
    """`and` clause keeping series whose operations reach the idle guard, both sides narrowed to
    `layer` (a matcher on it, the layer of the series guarded). Narrowed because PromQL evaluates
    both operands of a binary operator whatever the other holds (prometheus/prometheus
    promql/engine.go, `evaluator.eval`, case `*parser.BinaryExpr`: `rangeEval(…, e.LHS, e.RHS)`), so
    a guard costs every series its selectors match: unnarrowed, the database layer's guard read every
    LUN's IOPS and idle guard each evaluation on hosts with no database layer (issue 41)."""
    iops = IOPS.format(window=BREACH_WINDOW)
    return f'and {_on()}\n  ({iops}{{op="{op}", {layer}}} >= {_on()} {GOAL_MIN_IOPS}{{{layer}}})'


def above_goal(goals: Goals, ops: Sequence[str] = OPS) -> list[dict[str, Any]]:
    """JUDGED_ABOVE_GOAL: the judged latency where it is above goal, with the goal's severity and
    engine, for the breach alerts beside it."""
    return [
        record(
            JUDGED_ABOVE_GOAL,
            f"{JUDGED_LATENCY.format(op=op, window=BREACH_WINDOW)} > {_on()} group_left (severity, engine) {GOAL}",
            op=op,
        )
        for op in ops
    ]


def above_goal_bool(goals: Goals) -> list[dict[str, Any]]:
    """ABOVE_GOAL: 1 where the judged latency is above goal, 0 at or below; absent where it is not
    judged (the idle guard is in the judged latency). Recorded first in SLO_GROUP, whose minutes it
    judges, once a minute: no page reads it (issue 41: every 15 s the read bool alone took 14 ms of
    lunlat-latency's 352-411 ms at 50 hosts, for readers that run once a minute)."""
    return [record(ABOVE_GOAL, above_goal_expr(op), op=op) for op in OPS]


def above_goal_expr(op: str, matchers: str = "") -> str:
    """ABOVE_GOAL's expression, both sides narrowed to `matchers` when given: the bool rule's, and
    the breach alerts' cause, which needs this evaluation's and not the once-a-minute record."""
    narrowed = f"{{{matchers}}}" if matchers else ""
    return f"{JUDGED_LATENCY.format(op=op, window=BREACH_WINDOW)}{narrowed} > bool {_on()} {GOAL}{narrowed}"
