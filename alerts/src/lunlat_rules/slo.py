"""SLOs per I/O (group lunlat-slo, once a minute: recorded.SLO_GROUP; alerts/tests/slo*.test.yml;
docs/alerting.md, "SLOs per I/O"): the judged events and the bad ones (per LUN the I/Os of the
per-I/O histogram where the host has one, per database and role its waits from its own wait
histogram), summed per database and role each minute with the judged minutes of everything else,
their error ratio over each burn window, since when judged, and the multiwindow, multi-burn-rate
alerts that read them."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from lunlat import contract
from lunlat.engines.engine import WaitLayer
from lunlat.engines.registry import ENGINES
from lunlat.goals import Goals, duration_seconds
from lunlat.promql.layers import LUN_LABELS, SERIES_LABELS, DbLayer
from lunlat.promql.recorded import (
    ABOVE_GOAL,
    BREACH_WINDOW,
    GOAL,
    OPS,
    SLO_BAD_EVENTS,
    SLO_BAD_EVENTS_SUM,
    SLO_ERROR_RATIO,
    SLO_EVENTS,
    SLO_EVENTS_SUM,
    SLO_JUDGED_SINCE,
    SLO_LABELS,
    SLO_SUM_WINDOW,
    SLO_TICKET_GROUP,
    SLO_TICKET_INTERVAL,
)
from lunlat_rules.annotations import named_wait
from lunlat_rules.histogram import (
    HISTOGRAM_LABELS,
    HOST_LAYER,
    IoHistogram,
    bad_per_device,
    events_at_or_below,
)
from lunlat_rules.latency import rule_layers
from lunlat_rules.promqltext import indent as _indent
from lunlat_rules.promqltext import labelled
from lunlat_rules.promqltext import number as _promql_number
from lunlat_rules.promqltext import on as _on
from lunlat_rules.rulefmt import record
from lunlat_rules.tiers import ALL, JUDGE_LABEL, SMALL, goal_tiers, judged_kinds

# The database layer's recorded series (layers.DbLayer.name), and the labels a database's wait SLO
# events are summed by (the waits are per database and role, not per LUN).
DB = "db"
WAIT_SLO_BY: tuple[str, ...] = ("job", "instance", "database", "role")


def wait_selector(
    selector: str, waits: WaitLayer, event: str, role: str, *extra: str, bucket: bool = False
) -> str:
    """The selector of one event's wait histogram series (its `_bucket`s with `bucket`, else its
    `_count`) within the goals' `selector`."""
    assert waits.histogram is not None
    suffix = "_bucket" if bucket else "_count"
    matchers = ", ".join((selector, f'{waits.label}="{event}"', f'role="{role}"', *extra))
    return f"{waits.histogram.name}{suffix}{{{matchers}}}"


def io_events(goals: Goals, op: str, bad: bool) -> str:
    """The judged I/Os per second of each LUN with a per-I/O histogram (`bad`: those slower than
    its goal), for the host layer: the small size class or every size, as the goal series' judge
    label says. The goal series has already chosen each LUN's tier (first match), so the I/Os are
    read once per judged kind and, for the bad ones, once per goal the tiers set (the slow share
    read from the buckets at that goal, kept where the LUN's goal is that one), not once per tier:
    goals of equal value share a branch, as wait_slo_events' do; the kinds of one goal share one
    sum per LUN (lunlat.promql.layers.lun_sum)."""
    judge = JUDGE_LABEL.format(op=op)
    window = BREACH_WINDOW
    goal_values = sorted({t.goal_ms / 1000 for t, _ in goal_tiers(goals)})
    branches = []
    for goal_s in goal_values if bad else [None]:
        # The judged kinds' rates per device, each labelled with its kind (as the goal's judge
        # label names it), summed per LUN once (each sum with its branch for old exporters,
        # lunlat.promql.layers.lun_sum; histogram.bad_per_device), so one sum per goal instead of
        # one per kind.
        rates: dict[str, Callable[[str], str]] = {}
        for kind, size in ((SMALL, contract.BIO_SIZES[0]), (ALL, None)):
            if kind not in judged_kinds(goals, op):
                continue  # no tier judges it: a branch that can match nothing (tiers.judged_kinds)
            rates[kind] = partial(
                _device_events, IoHistogram(goals.selector, size=size, op=op), goal_s, window
            )
        by_goal = goal_s is not None and len(goal_values) > 1
        if len(rates) == 1 and not by_goal:
            # One kind judged, one goal: the LUN's goal has nothing to choose, and slo_events keeps
            # the judged LUNs (`and` the above-goal bool, which only a LUN with a goal has), so no
            # read of the goal here.
            (rate,) = rates.values()
            branches.append(IoHistogram(goals.selector, op=op).per_lun(rate))
            continue
        joined = IoHistogram(goals.selector, op=op).per_lun(
            partial(_labelled_union, rates, judge), by=(judge,)
        )
        goal = f'{GOAL}{{layer="{HOST_LAYER}"}}'
        if goal_s is not None and by_goal:
            goal = f"({goal} == {_promql_number(goal_s)})"
        # The kind the LUN's goal judges kept (one per LUN: the goal's first matching tier), then
        # summed without the kind label.
        branches.append(
            f"sum by ({', '.join(HISTOGRAM_LABELS)}) (\n  {_indent(joined, 2)}\n"
            f"  and {_on((*LUN_LABELS, judge))}\n    {goal}\n)"
        )
    return labelled(f"\nor {_on(LUN_LABELS)}\n".join(branches), layer=HOST_LAYER, indicator="io")


def _device_events(histogram: IoHistogram, goal_s: float | None, window: str, kind: str) -> str:
    """Each device's I/Os per second in `histogram` (of the devices of `kind`), the slower than
    `goal_s` only when given."""
    if goal_s is None:
        return histogram.device_rate(window, "+Inf", kind)
    return bad_per_device(histogram, goal_s, window, kind)


def _labelled_union(rates: dict[str, Callable[[str], str]], judge: str, kind: str) -> str:
    """The judged kinds' rates per device (of the devices of `kind`), each labelled `judge` with the
    judged kind it counts, as one operand."""
    labelled_rates = [labelled(rate(kind), **{judge: judged}) for judged, rate in rates.items()]
    return "(\n  " + _indent("\nor\n".join(labelled_rates), 2) + "\n)"


def slo_events(goals: Goals) -> list[dict[str, Any]]:
    """SLO_EVENTS and SLO_BAD_EVENTS per LUN, op and layer where the host has a per-I/O histogram:
    its judged I/Os (indicator io), only while judged (ABOVE_GOAL exists), with the goal's severity
    and engine. A LUN without one counts judged minutes, summed straight into SLO_EVENTS_SUM
    (minute_events), not recorded per LUN: they would only copy its above-goal bool (issue 41: four
    series per LUN, which put the recorded series above the raw ones)."""
    rules = []
    for op in OPS:
        judged = f'{ABOVE_GOAL}{{op="{op}"}}'
        for name, bad in ((SLO_EVENTS, False), (SLO_BAD_EVENTS, True)):
            expr = f"(\n    {_indent(io_events(goals, op, bad), 4)}\n  and {_on()}\n    {judged}\n)\n* {_weight()}"
            rules.append(record(name, expr, op=op))
    return rules


def _weight() -> str:
    """What a per-LUN event is multiplied by: 1, with its goal's severity and engine."""
    return f"{_on()} group_left (severity, engine)\n  ({GOAL} * 0 + 1)"


def minute_events(goals: Goals, bad: bool) -> str:
    """Per LUN, op and layer, the judged minutes (indicator minute) of what has no per-I/O events:
    1 a minute while judged (`bad`: when the judged average was above goal: the above-goal bool),
    with the goal's severity and engine. The group runs once a minute, so each of its evaluations
    counts one. A database whose engine keeps a wait histogram counts its waits instead
    (wait_slo_events): its minutes would count the same I/Os twice; so does a LUN with SLO_EVENTS
    of its own (slo_events, recorded earlier in the group)."""
    branches = []
    for op in OPS:
        judged = f'{ABOVE_GOAL}{{op="{op}"}}'
        minute = judged if bad else f"({judged} * 0 + 1)"
        counted = [
            labelled(
                f"group by ({', '.join(WAIT_SLO_BY)}) ({wait_selector(goals.selector, waits, event, role)})",
                layer=DB,
            )
            for _, waits, role, event in wait_slo_events_of(goals, op)
        ]
        if counted:
            minute = f"{minute}\nunless on ({', '.join((*WAIT_SLO_BY, 'layer'))})\n  " + _indent(
                "\nor\n".join(counted), 2
            )
        branches.append(f"(\n  {_indent(minute, 2)}\n)")
    minutes = labelled("(\n  " + _indent("\nor\n".join(branches), 2) + "\n)", indicator="minute")
    per_io = _on((*SERIES_LABELS, "op"))
    return f"(\n  {_indent(minutes, 2)}\n  unless {per_io}\n    {SLO_EVENTS}\n)\n* {_weight()}"


def wait_slo_events_of(goals: Goals, op: str) -> list[tuple[str, WaitLayer, str, str]]:
    """(engine key, its waits, role, event) of the waits counted per I/O for `op` in the SLO:
    engines with a wait histogram (and its buckets) among the layers; reads are the data wait a
    query feels (`data_read`), writes the log's own write (`log_write`), each only where one wait
    is one I/O (measure per_io: Oracle's 'db file sequential read', 'log file parallel write';
    events.py)."""
    engines = {layer.engine for layer in rule_layers(goals) if isinstance(layer, DbLayer)}
    found = []
    for engine in ENGINES:
        waits = engine.waits
        if (
            engine.key not in engines
            or waits is None
            or waits.histogram is None
            or not waits.histogram_buckets
        ):
            continue
        role, event = ("data", waits.data_read) if op == "read" else ("log", waits.log_write)
        if waits.measure_of(event) == "per_io":
            found.append((engine.key, waits, role, event))
    return found


def wait_histogram_words(goals: Goals) -> str:
    """The burn alerts' sentence for a database layer counted per I/O: which waits, from what."""
    waits = [(engine, role, event) for op in OPS for engine, _, role, event in wait_slo_events_of(goals, op)]
    if not waits:
        return ""
    named = ", ".join(f"{role} {named_wait(event)} ({engine})" for engine, role, event in waits)
    return (
        '{{ if and (eq $labels.indicator "io") (eq $labels.layer "db") }} Counted from the '
        f"database's own wait histogram ({named}): its buckets are powers of two, read at the "
        "goal by linear interpolation.{{ end }}"
    )


def wait_slo_events(goals: Goals) -> list[dict[str, Any]]:
    """SLO_EVENTS and SLO_BAD_EVENTS of a database layer from its engine's wait histogram
    (indicator io, layer db, no `lun`: the waits are the database's, not a LUN's), per database
    and role: the judged waits per second (`bad`: slower than the goal of the role's LUNs at
    that layer, read from the buckets as IoHistogram reads the host's). Only while that layer is
    judged for the role (ABOVE_GOAL: the idle guard), with the goal's workload and severity."""
    rules = []
    by = ", ".join(WAIT_SLO_BY)
    for op in OPS:
        for engine, waits, role, event in wait_slo_events_of(goals, op):
            assert waits.histogram is not None  # wait_slo_events_of keeps only those with one
            goal = f'{GOAL}{{layer="{DB}", engine="{engine}", role="{role}"}}'

            def bucket(le: str, waits: WaitLayer = waits, event: str = event, role: str = role) -> str:
                selector = wait_selector(goals.selector, waits, event, role, f'le="{le}"', bucket=True)
                return f"sum by ({by}) (\n    rate({selector}[{BREACH_WINDOW}])\n)"

            for name, bad in ((SLO_EVENTS, False), (SLO_BAD_EVENTS, True)):
                branches = []
                # One branch per goal the tiers set (a number in the expression, as the host's).
                for goal_s in sorted({t.goal_ms / 1000 for t, _ in goal_tiers(goals)}):
                    events = bucket("+Inf")
                    if bad:
                        below = events_at_or_below(goal_s, waits.histogram_buckets, bucket)
                        events = f"(\n  {_indent(events, 2)}\n- {_indent(below, 2)}\n)"
                    # One workload and severity per database and role (topk: a database whose
                    # LUNs of one role sit in tiers of different severities takes one of them,
                    # where a duplicate on the right of group_left would fail the whole rule).
                    tier = (
                        f"topk by ({by}) (1,\n    group by ({by}, workload, severity) "
                        f"({goal} == {_promql_number(goal_s)})\n  )"
                    )
                    branches.append(f"{events}\n* on ({by}) group_left (workload, severity)\n  {tier}")
                expr = (
                    "(\n  "
                    + _indent("\nor\n".join(f"(\n  {_indent(b, 2)}\n)" for b in branches), 2)
                    + f'\n)\nand on ({by})\n  {ABOVE_GOAL}{{layer="{DB}", op="{op}"}}'
                )
                rules.append(record(name, labelled(expr, layer=DB, indicator="io"), op=op, engine=engine))
    return rules


def slo_ratios(goals: Goals) -> list[dict[str, Any]]:
    """Per database and role (SLO_LABELS, with severity and engine): the events of SLO_SUM_WINDOW
    (group SLO_GROUP runs once per SLO_SUM_WINDOW, so the per-LUN events recorded just before are
    that minute's: summed as they are, no range over them, which would reach the minute before too),
    since when judged, and the error ratio over each window a fast burn reads (the others:
    ticket_group)."""
    by = f"sum by ({', '.join(SLO_LABELS)}, severity, engine)"

    def summed(per_io: str, bad: bool) -> str:
        return f"{by} (\n    {per_io}\n  or\n    {_indent(minute_events(goals, bad), 4)}\n)"

    sums = [
        record(SLO_EVENTS_SUM, summed(SLO_EVENTS, False)),
        record(SLO_BAD_EVENTS_SUM, summed(SLO_BAD_EVENTS, True)),
        # Its own previous value while it lasts (a gap longer than Prometheus' 5-minute lookback
        # starts it again), else now.
        record(SLO_JUDGED_SINCE, f"{SLO_JUDGED_SINCE}\nor\ntimestamp({SLO_EVENTS_SUM})"),
    ]
    return [*sums, *(error_ratio(w) for w in paged_windows(goals))]


def error_ratio(window: str) -> dict[str, Any]:
    """SLO_ERROR_RATIO over `window`: every burn window sums the per-minute sums once a minute (a
    subquery, per database and role, not per LUN): 60 points an hour instead of 240 per LUN."""
    bad = f"sum_over_time({SLO_BAD_EVENTS_SUM}[{window}:{SLO_SUM_WINDOW}])"
    events = f"sum_over_time({SLO_EVENTS_SUM}[{window}:{SLO_SUM_WINDOW}])"
    return record(SLO_ERROR_RATIO.format(window=window), f"{bad}\n/\n({events} > 0)")


def paged_windows(goals: Goals) -> list[str]:
    """The windows a fast burn (a page) reads, shortest first: recorded every evaluation."""
    fast = {w for pair in goals.slo.fast for w in (pair.long, pair.short)}
    return [w for w in goals.slo.windows() if w in fast]


def ticket_group(goals: Goals) -> dict[str, Any] | None:
    """Group SLO_TICKET_GROUP (recorded.py says why): the error ratios over the windows only the
    slow burn reads, and the slow burn itself, every SLO_TICKET_INTERVAL. Its reads of
    SLO_GROUP's per-minute sums, since-when and shorter ratios are at most one of its 1-minute
    evaluations late, a group 5 times slower than the one it reads
    (alerts/tests/test_rule_groups.py). None without a slow burn."""
    if not goals.slo.slow:
        return None
    paged = set(paged_windows(goals))
    ratios = [error_ratio(w) for w in goals.slo.windows() if w not in paged]
    return {
        "name": SLO_TICKET_GROUP,
        "interval": SLO_TICKET_INTERVAL,
        "rules": [*ratios, *slow_burn_alerts(goals)],
    }


def objective_branches(goals: Goals) -> list[tuple[float, str]]:
    """(error budget, PromQL `unless`/matcher suffix) per objective, first match wins: each
    `slo.objectives` entry's series, less those an earlier entry took, then every other series at
    `slo.objective`."""
    slo = goals.slo
    branches: list[tuple[float, str]] = []
    taken: list[str] = []
    for entry in slo.objectives:
        matchers = ", ".join(f"{label}=~{json.dumps(pattern)}" for label, pattern in entry.match.items())
        branches.append((entry.error_budget, matchers + "".join(f"\x00{t}" for t in taken)))
        taken.append(matchers)
    branches.append((slo.error_budget, "".join(f"\x00{t}" for t in taken)))
    return branches


def fast_burn_alerts(goals: Goals) -> list[dict[str, Any]]:
    """The fast burn (a page): group SLO_GROUP, beside the ratios it reads."""
    return burn_alerts(goals, fast=True)


def slow_burn_alerts(goals: Goals) -> list[dict[str, Any]]:
    """The slow burn (a ticket): group SLO_TICKET_GROUP, beside the ratios only it reads."""
    return burn_alerts(goals, fast=False)


def burn_alerts(goals: Goals, fast: bool) -> list[dict[str, Any]]:
    """Multiwindow, multi-burn-rate alerts per database and role (SLO_LABELS): the error ratio of
    both windows of a pair above burn_rate x the budget of the series' objective, half the long
    window judged."""
    slo = goals.slo
    rules = []
    for speed, pairs in (("Fast", slo.fast),) if fast else (("Slow", slo.slow),):
        branches = []
        for budget, spec in objective_branches(goals):
            matchers, *excluded = spec.split("\x00")
            for pair in pairs:
                threshold = _promql_number(pair.burn_rate * budget)
                long = (
                    f"{SLO_ERROR_RATIO.format(window=pair.long)}{{{matchers}}}"
                    if matchers
                    else SLO_ERROR_RATIO.format(window=pair.long)
                )
                short = SLO_ERROR_RATIO.format(window=pair.short)
                unless = "".join(
                    f"\n  unless\n   {SLO_ERROR_RATIO.format(window=pair.long)}{{{m}}}" for m in excluded
                )
                branches.append(
                    f"  ({long} > {threshold}\n  and\n   {short} > {threshold}\n  and\n"
                    f"   {covered(pair.long)}{unless})"
                )
        expr = "(\n" + "\nor\n".join(branches) + "\n)"
        # A fast burn pages like the breach alert of the database's LUNs (snapshot copies only
        # warn): its `severity` is the goal's; a slow burn opens a ticket.
        labels = {} if speed == "Fast" else {"severity": "ticket"}
        windows = " or ".join(f"{p.long}/{p.short} above {_promql_number(p.burn_rate)}x" for p in pairs)
        name = f"LunLatencyBudgetBurn{speed}"
        events = '{{ if eq $labels.indicator "io" }}I/Os{{ else }}minutes{{ end }}'
        objectives = "; ".join(
            [
                *(
                    f"{_promql_number(o.objective * 100)}% for "
                    + ", ".join(f"{k} {v}" for k, v in o.match.items())
                    for o in slo.objectives
                ),
                f"{_promql_number(slo.objective * 100)}%" + (" otherwise" if slo.objectives else ""),
            ]
        )
        rule: dict[str, Any] = {"alert": name, "expr": expr}
        if labels:
            rule["labels"] = labels
        rule["annotations"] = {
            "summary": f"{{{{ $labels.database }}}} {{{{ $labels.role }}}} is burning its "
            f"{{{{ $labels.op }}}} latency error budget {speed.lower()}",
            "description": f"{{{{ $value | humanizePercentage }}}} of the judged {events} of the "
            "{{ $labels.role }} LUNs of database {{ $labels.database }} on {{ $labels.instance }} "
            "(workload {{ $labels.workload }}, layer {{ $labels.layer }}) were slower than goal for "
            f"{{{{ $labels.op }}}}s (burn windows {windows}; objective over {slo.period}: {objectives}, "
            f"of the judged {events} at or below goal)."
            '{{ if eq $labels.indicator "minute" }} Judged per minute: no per-I/O histogram of these '
            "LUNs (--collector.biolatency), or a database layer without a wait histogram.{{ end }}"
            + wait_histogram_words(goals),
            "runbook_url": f"{goals.runbook_base_url}/budget-burn.md#{name.lower()}",
        }
        rules.append(rule)
    return rules


def covered(window: str) -> str:
    """Half the long window must hold judged data before a burn alert fires, fast or slow: on a
    young Prometheus or a new LUN the ratio averages only the minutes there are, and a few slow
    ones would read as an hour's or a day's burn (the partial-window false positive Kibana's
    burn-rate rule also guards against, there by counting missing slices as good:
    github.com/elastic/kibana/pull/203279). SLO_JUDGED_SINCE keeps its own previous value, so a
    LUN idle for a while keeps its history; only a gap in the rules' evaluation longer than
    Prometheus' 5-minute lookback starts it again."""
    return f"(time() - {SLO_JUDGED_SINCE}) >= {_promql_number(duration_seconds(window) / 2)}"
