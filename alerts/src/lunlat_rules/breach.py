"""The breach alerts (alerts/tests/latency.test.yml, judged.test.yml): the judged latency above its
goal per role group and op (groups lunlat-latency-{read,write}), the average above goal while the
judged I/Os are within it (flagged, never paged) and the throughput below a floor (both once a
minute, group lunlat-context), and the hints their descriptions give (what a slow LUN of this role
means for the database, which layer measured it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lunlat import contract
from lunlat.engines.engine import WaitLayer
from lunlat.engines.registry import ENGINES
from lunlat.goals import Goals
from lunlat.promql.layers import LUN_LABELS
from lunlat.promql.recorded import (
    BREACH_WINDOW,
    GOAL,
    IOPS,
    JUDGED_ABOVE_GOAL,
    JUDGED_LATENCY,
    LATENCY,
    OPS,
    THROUGHPUT,
    THROUGHPUT_FLOOR,
)
from lunlat_rules import cause
from lunlat_rules.annotations import OWNER, named_wait, ratio_query, series_query, template_value, where_text
from lunlat_rules.histogram import HOST_LAYER
from lunlat_rules.latency import ON_HOST_LAYER, floor_series, idle_guard, rule_host_layer
from lunlat_rules.promqltext import indent as _indent
from lunlat_rules.promqltext import number as _promql_number
from lunlat_rules.promqltext import on as _on
from lunlat_rules.rulefmt import alert
from lunlat_rules.tiers import JUDGE_LABEL, MIB, SMALL, judged_kinds

# Role groups judged separately: data and log are the reference's LUNs; everything else (temp,
# control, other, unlabelled LUNs) shares one pair of alerts.
ROLE_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("Data", 'role="data"', "data"),
    ("Log", 'role="log"', "log"),
    ("", 'role!~"data|log"', "other"),
)


def breach_alerts(goals: Goals, ops: Sequence[str] = OPS) -> list[dict[str, Any]]:
    """The judged latency (JUDGED_LATENCY: the I/Os the LUN's tier judges) above its goal, per role
    group and op, at the tier's severity; the alert's `judged` label says which I/Os."""
    rules = []
    for role_name, role_selector, role_anchor in ROLE_GROUPS:
        for op in ops:
            name = f"LunLatency{role_name}{op.capitalize()}High"
            # The judged latency above goal, recorded just before with the goal's severity and engine
            # (latency.above_goal): a selector of the few LUNs above it, where each alert matched
            # every LUN of its role against the goal (issue 41).
            expr = f'1000 * {JUDGED_ABOVE_GOAL}{{{role_selector}, op="{op}"}}'
            goal_ms = template_value(series_query(GOAL, scale="1000 * "), '"%.2f"')
            iops = template_value(series_query(IOPS.format(window=BREACH_WINDOW), f'op="{op}"'), '"%.0f"')
            average = template_value(
                series_query(LATENCY.format(op=op, window=BREACH_WINDOW), scale="1000 * "), '"%.2f"'
            )
            # The I/O size the average is made of, where the layer counts bytes (diskstats, SQL
            # Server's file stats, PostgreSQL 16+; not Oracle's whole megabytes): the hint where
            # the layer cannot split by size.
            size_query = ratio_query(THROUGHPUT, IOPS, f'op="{op}"', scale="1 / 1024 * ")
            size = (
                f"{{{{ with {size_query} | query }}}}"
                f', {{{{ . | first | value | printf "%.0f" }}}} KiB each on average{{{{ end }}}}'
            )
            where = where_text()
            rules.append(
                {
                    "alert": name,
                    "expr": expr,
                    "for": goals.breach.for_,
                    "labels": {"op": op},
                    "annotations": {
                        "summary": f"{op.capitalize()} latency of LUN {{{{ $labels.lun }}}}{OWNER} above goal: "
                        '{{ printf "%.2f" $value }} ms',
                        "description": f"The {BREACH_WINDOW} average latency of {_judged_words(op)} of {where} is "
                        f'{{{{ printf "%.2f" $value }}}} ms, above its goal of {goal_ms} ms ({op}s of every size: '
                        f"{average} ms at {iops} {op}s/s{size}).{ROLE_HINT[role_anchor][op]}{_LAYER_HINT}",
                        # Why (cause.py): the LUNs beside it on its array, and which part of the time grew.
                        "neighbours": cause.neighbours(goals.selector),
                        "cause": cause.cause(op, rule_host_layer(goals), goals.selector),
                        "runbook_url": f"{goals.runbook_base_url}/latency-high.md#{name.lower()}",
                    },
                }
            )
    return rules


def average_alerts(goals: Goals) -> list[dict[str, Any]]:
    """Every breach of a LUN's average (host layer, every I/O) flagged, never paged: above its goal
    while the judged I/Os are not (those page through the breach alerts), e.g. large scans beside
    small OLTP reads that stay within goal. At the tier's severity, page lowered to warning."""
    rules = []
    for op in OPS:
        if SMALL not in judged_kinds(goals, op):
            # Every tier judges every I/O of this op: the judged latency is the host's average
            # under the same idle guard, so it breaches (and pages) exactly when the average does,
            # and "the average above goal while the judged latency is not" can never fire. Not
            # written, as PromQL would read its five operands every 15 s for nothing (issue 41).
            continue
        latency = LATENCY.format(op=op, window=BREACH_WINDOW)
        judged = JUDGED_LATENCY.format(op=op, window=BREACH_WINDOW)
        host = f'{{layer="{HOST_LAYER}"}}'
        expr = (
            "label_replace(\n"
            "  1000 * (\n"
            f"      {latency}{host}\n"
            f"    > {_on()} group_left (severity, engine)\n"
            f"      {GOAL}{host}\n"
            "  )\n"
            f"  {_indent(idle_guard(op, ON_HOST_LAYER), 2)}\n"
            # Judged above goal: recorded before, only for the LUNs above it.
            f"  unless {_on()}\n"
            f'    {JUDGED_ABOVE_GOAL}{{{ON_HOST_LAYER}, op="{op}"}},\n'
            '  "severity", "warning", "severity", "page"\n'
            ")"
        )
        goal_ms = template_value(series_query(GOAL, scale="1000 * "), '"%.2f"')
        small = (
            f"{{{{ with {series_query(judged, scale='1000 * ')} | query }}}} "
            '({{ . | first | value | printf "%.2f" }} ms){{ else }}, or too few to judge '
            "(below the idle guard){{ end }}"
        )
        size = template_value(ratio_query(THROUGHPUT, IOPS, f'op="{op}"', scale="1 / 1024 * "), '"%.0f"')
        name = "LunLatencyAverageHigh"
        rules.append(
            {
                "alert": name,
                "expr": expr,
                "for": goals.breach.for_,
                "labels": {"op": op},
                "annotations": {
                    "summary": f"{op.capitalize()} average of LUN {{{{ $labels.lun }}}}{OWNER} above goal: "
                    '{{ printf "%.2f" $value }} ms, the judged I/Os within it',
                    "description": f"The {BREACH_WINDOW} average of every {op} of {where_text()} is "
                    f'{{{{ printf "%.2f" $value }}}} ms, above the goal of {goal_ms} ms, at {size} KiB per {op} '
                    f"on average. The I/Os its goal judges are within it{small}: bigger I/Os take longer "
                    "each without anything being broken. Flagged, not paged (docs/alerting.md, "
                    '"What is judged").',
                    "runbook_url": f"{goals.runbook_base_url}/latency-high.md#{name.lower()}",
                },
            }
        )
    return rules


def throughput_alerts(goals: Goals) -> list[dict[str, Any]]:
    """A LUN whose tier sets a throughput floor (DSS: judged by MiB/s, not latency) moving less
    than it while I/O waited on it the whole window (the workload wanted more), for `for`."""
    if not floor_series(goals):
        return []
    throughput = goals.throughput
    queue = rule_host_layer(goals).queue(throughput.window)
    if queue is None:
        return []
    moved = f'{THROUGHPUT.format(window=BREACH_WINDOW)}{{layer="{HOST_LAYER}"}}'
    expr = (
        "(\n"
        f"    sum without (op) (avg_over_time({moved}[{throughput.window}]))\n"
        f"  < {_on()} group_left ()\n"
        f"    {THROUGHPUT_FLOOR}\n"
        f") / {MIB}\n"
        f"and {_on(LUN_LABELS)}\n"
        f"  ({_indent(queue, 2)} >= {_promql_number(throughput.queue_min)})"
    )
    floor = template_value(series_query(THROUGHPUT_FLOOR, scale=f"1 / {MIB} * "), '"%.0f"')
    name = "LunLatencyThroughputLow"
    return [
        alert(
            name,
            expr,
            throughput.for_,
            throughput.severity,
            "LUN {{ $labels.lun }}" + OWNER + ' moves {{ printf "%.0f" $value }} MiB/s, below its floor',
            f'{where_text()} moved {{{{ printf "%.1f" $value }}}} MiB/s over the last {throughput.window}, '
            f"below its floor of {floor} MiB/s, while at least {_promql_number(throughput.queue_min)} I/O "
            "waited on it on average the whole time: the workload asked for more than the storage "
            "gave. Throughput is what a DSS scan is judged by, not its latency.",
            f"{goals.runbook_base_url}/throughput-low.md#{name.lower()}",
        )
    ]


def _judged_words(op: str) -> str:
    """Which I/Os a judged-latency alert judged, from its `judged` label (JUDGED_KINDS) and, for
    `all`, whether the LUN's goal asked for the small ones (then the host has no histogram of it)."""
    small_max = contract.BIO_SMALL_MAX // 1024
    wanted_small = series_query(GOAL, f'{JUDGE_LABEL.format(op=op)}="small"')
    return (
        f'{{{{ if eq $labels.judged "small" }}}}its small {op}s (up to {small_max} KiB, from the per-I/O '
        f'histogram){{{{ else if eq $labels.judged "database" }}}}the {op}s the database counts as its own'
        f"{{{{ else }}}}every {op}{{{{ with {wanted_small} | query }}}} (no per-I/O histogram of this LUN to "
        f"judge its small {op}s by){{{{ end }}}}{{{{ end }}}}"
    )


# A synchronous replica's share of the database's log-write waits (role="replica", each engine's
# WaitLayer.replica), so the log hint says "replica" when that is where commit time goes. Beside it only
# the local log write's own wait of the same measure (WaitLayer.log_write): Oracle's are LGWR's per-I/O
# waits, SQL Server's a commit's (WRITELOG, HADR_SYNC_COMMIT); summed `by (measure)`, so a per-commit
# wait is never added to a per-I/O one, and only the alert's own job, instance and database count.

_WAITS: tuple[WaitLayer, ...] = tuple(engine.waits for engine in ENGINES if engine.waits is not None)
_TITLES: dict[str, str] = {
    engine.waits.time.name: engine.title for engine in ENGINES if engine.waits is not None
}


def _log_waits() -> str:
    """The selector of every engine's log-write waits (its local log write's and a replica's) of the
    measure they share. An engine's series lack the other engines' wait label, which the trailing `|`
    alternative lets through ("" matches an absent label)."""
    names = "|".join(waits.time.name for waits in _WAITS)
    by_label: dict[str, list[str]] = {}
    for waits in _WAITS:
        by_label.setdefault(waits.label, []).extend((waits.log_write, waits.replica))
    matchers = "".join(f', {label}=~"{"|".join(values)}|"' for label, values in by_label.items())
    measures = "|".join(sorted({waits.measure_of(waits.log_write) for waits in _WAITS}))
    return (
        f'{{__name__=~"{names}", job=%q, instance=%q, database=%q, role=~"log|replica"{matchers}, '
        f'measure=~"{measures}"}}'
    )


_MEASURE_WORDS = {"per_io": "per I/O", "per_commit": "per commit"}


_LOG_WAITS = _log_waits()
_REPLICA_SHARE = (
    f'sum by (measure) (rate({_LOG_WAITS[:-1]}, role="replica"}}[{BREACH_WINDOW}]))'
    f" / sum by (measure) (rate({_LOG_WAITS}[{BREACH_WINDOW}])) > 0"
)
_ALERT_DATABASE = "$labels.job $labels.instance $labels.database"
_REPLICA_HINT = (
    f"{{{{ with printf `{_REPLICA_SHARE}` {_ALERT_DATABASE} {_ALERT_DATABASE} | query }}}} "
    "{{ . | first | value | humanizePercentage }} of this database's log-write wait time is a "
    "synchronous replica's (role replica, beside the log wait of the same measure: "
    + "; ".join(
        f"{_TITLES[waits.time.name]} {named_wait(waits.replica)} beside {named_wait(waits.log_write)}, "
        f"{_MEASURE_WORDS.get(m := waits.measure_of(waits.log_write), m)}"
        for waits in _WAITS
    )
    + "): "
    "the replica's network and remote log write, not this LUN; look at the replica.{{ end }}"
)


# Waits of a service tier holding the log rate back carry role="throttle": said beside the log hint so a
# throttled database is not read as a slow log LUN (each engine's hints.log_throttle).
_THROTTLES = [hint for engine in ENGINES if (hint := engine.hints.log_throttle)]
_THROTTLE_HINT = (
    " If commits are slow while this LUN is not, look at the log rate governance waits (role throttle: "
    + "; ".join(_THROTTLES)
    + "): the service tier's log rate limit, not the storage."
    if _THROTTLES
    else ""
)


# The data-vs-log hint: what a slow LUN of this role means for the database.
ROLE_HINT: dict[str, dict[str, str]] = {
    "data": {
        "read": " Data reads stall queries that miss the buffer cache ("
        + ", ".join(hint for engine in ENGINES if (hint := engine.hints.data_read))
        + ").",
        "write": " Data writes are mostly asynchronous (DBWR, checkpoints); sustained, they hold back "
        "checkpoints and free buffers.",
    },
    "log": {
        "read": " Log reads serve archiving, backups and log shipping, not commits.",
        # Each engine names its wait of this write and what one wait is (Oracle's per I/O, SQL Server's
        # per commit: WaitLayer.measure_of).
        "write": " Every commit waits for the log write ("
        + "; ".join(hint for engine in ENGINES if (hint := engine.hints.log_write))
        + ")."
        + _THROTTLE_HINT
        + _REPLICA_HINT,
    },
    "other": {"read": "", "write": ""},
}


# The host-vs-db hint: where the time goes when the two layers disagree.
_LAYER_HINT = (
    '{{ if eq $labels.layer "db" }} Measured by the database: if layer host of this LUN is below goal, '
    "the time is spent above the block layer (host CPU, I/O scheduling, HBA queueing); if both are "
    "high, look at the array and fabric.{{ else }} Measured at the host's block layer (the array, "
    "fabric and HBA queue below the database).{{ end }}"
)
