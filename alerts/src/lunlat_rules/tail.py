"""The tail the average hides (group lunlat-slo, beside the SLO events it reads;
alerts/tests/tail.test.yml): from the host's per-I/O histogram, the share of the judged I/Os above
each LUN's goal, and LunLatencyTailHigh, which reads it (and names the LUN's p99)."""

from __future__ import annotations

from typing import Any

from lunlat.goals import Goals
from lunlat.promql.layers import io_latency_quantile
from lunlat.promql.recorded import (
    ABOVE_GOAL,
    BREACH_WINDOW,
    GOAL,
    IO_ABOVE_GOAL_RATIO,
    IOPS,
    JUDGED_LATENCY,
    OPS,
    SLO_BAD_EVENTS,
    SLO_EVENTS,
)
from lunlat_rules.annotations import OWNER, series_query, template_value, where_text
from lunlat_rules.promqltext import number as _promql_number
from lunlat_rules.promqltext import on as _on
from lunlat_rules.rulefmt import record


def io_histogram(goals: Goals) -> list[dict[str, Any]]:
    """The share of the judged I/Os above each LUN's goal (the SLO's own events, indicator io: the
    small class or every size, as the goal judges; only while judged), from the per-I/O histogram
    of the host layer. Its quantiles are not recorded: the dashboards and the tail alert compute
    them for the LUNs they show (lunlat.promql.layers.io_latency_quantile says why)."""
    io = '{indicator="io"}'
    # Without the SLO's own labels: one share per LUN and op, as the tail alert and dashboards read it.
    share = f"sum without (indicator, severity) (\n  {SLO_BAD_EVENTS}{io}\n  /\n  ({SLO_EVENTS}{io} > 0)\n)"
    return [record(IO_ABOVE_GOAL_RATIO.format(window=BREACH_WINDOW), share)]


def _p99_query(selector: str, op: str) -> str:
    """A template query: the p99 of every `op` of the alert's LUN in the breach window, in ms."""
    lun = "job=%q, instance=%q, lun=%q"
    quantile = io_latency_quantile(
        "0.99", f'{selector}, op="{op}", {lun}', f"{selector}, {lun}", BREACH_WINDOW, by=()
    )
    args = " ".join(f"$labels.{label}" for label in ("job", "instance", "lun"))
    return f"printf `1000 * {' '.join(quantile.split())}` {args} {args}"


def tail_alerts(goals: Goals) -> list[dict[str, Any]]:
    """A tail the average hides: the average at or below goal (the breach alert silent) while more
    than `tail.above_percent` % of the I/Os were slower than the goal, for `tail.for`."""
    tail = goals.tail
    share = IO_ABOVE_GOAL_RATIO.format(window=BREACH_WINDOW)
    rules = []
    for op in OPS:
        latency = JUDGED_LATENCY.format(op=op, window=BREACH_WINDOW)
        # Judged at or below goal: the bool recorded before is 0 (one read where `judged <= goal` was
        # two: PromQL reads both operands whatever the share holds, latency.idle_guard).
        expr = (
            f'100 * {share}{{op="{op}"}} > {_promql_number(tail.above_percent)}\n'
            f"and {_on()}\n"
            f'  ({ABOVE_GOAL}{{op="{op}"}} == 0)'
        )
        goal_ms = template_value(series_query(GOAL, scale="1000 * "), '"%.2f"')
        average = template_value(series_query(latency, scale="1000 * "), '"%.2f"')
        p99 = template_value(_p99_query(goals.selector, op), '"%.2f"')
        iops = template_value(series_query(IOPS.format(window=BREACH_WINDOW), f'op="{op}"'), '"%.0f"')
        name = "LunLatencyTailHigh"
        rules.append(
            {
                "alert": name,
                "expr": expr,
                "for": tail.for_,
                "labels": {"op": op, "severity": tail.severity},
                "annotations": {
                    "summary": f'{{{{ printf "%.1f" $value }}}}% of the {op}s of LUN {{{{ $labels.lun }}}}{OWNER} '
                    "slower than goal, the average within it",
                    "description": f'{{{{ printf "%.1f" $value }}}}% of the judged {op}s of {where_text()} took longer '
                    f"than its goal of {goal_ms} ms in the last {BREACH_WINDOW} (more than "
                    f"{_promql_number(tail.above_percent)}% for {tail.for_}), while their average, {average} ms, "
                    f"stayed within it: a tail the average hides. p99 of every {op} {p99} ms at {iops} {op}s/s. Per-I/O "
                    "latency from the block layer (lunlat_device_io_latency_seconds): a slow path, a slow "
                    "disk behind the LUN or bursts of queueing show here before they move the average.",
                    "runbook_url": f"{goals.runbook_base_url}/tail-latency.md#{name.lower()}",
                },
            }
        )
    return rules
