"""LUN latency overview: every LUN's read and write average against the goal, worst first.

The wall dashboard of a storage admin: how many LUNs breach now and in the range, the worst LUNs,
data and log LUNs over time against the goal line, the per-I/O distribution the averages hide (the
block layer's histogram: heatmaps, p50 and p99, the share of I/Os above goal), and the IOPS and
throughput beside them (a latency rise with flat IOPS is the array; with IOPS climbing it may be
the workload).
"""

from __future__ import annotations

import json

from grafana_foundation_sdk.builders import bargauge, heatmap, stat, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from lunlat import contract
from lunlat.goals import Goals
from lunlat.promql import recorded
from lunlat.promql.layers import LUN_LABELS, SERIES_LABELS, io_latency_quantile
from lunlat.promql.recorded import DRIFT_INTERVAL
from lunlat_dashboards import panels as p
from lunlat_dashboards import why
from lunlat_rules.drift import baseline, window_average

UID = "lunlat-overview"
HOST = {"layer": "host"}
LUN_LEGEND = "{{lun}} {{database}} {{role}} · {{instance}}"
# One recorded series per LUN and layer carries these labels (lunlat.promql.layers); the goal adds
# severity, engine and its judge labels, so joins with it name them.
ON_SERIES = f"on ({', '.join(SERIES_LABELS)})"
# The per-I/O SLO sums cover recorded.SLO_SUM_WINDOW each: one sample per window, summed over the SLO
# period, counts each event once.
SLO_SUM_STEP = recorded.SLO_SUM_WINDOW
BUDGET_ROW = "Error budget (SLOs per I/O)"


def _lun_latency(op: str, **fixed: str) -> str:
    return p.selector(p.latency(op), p.LUN_FILTERS, **HOST, **fixed)


def _goal(**fixed: str) -> str:
    """The strictest goal among the shown LUNs (overrides may give some a looser one)."""
    return f"min({p.selector(recorded.GOAL, p.LUN_FILTERS, **HOST, **fixed)})"


def _stat(
    title: str, description: str, expr: str, unit: str, thresholds: dash.ThresholdsConfig, span: int = 4
) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(p.DATASOURCE)
        .unit(unit)
        .thresholds(thresholds)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.AREA)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        .with_target(p.query(expr, legend=title))
        .span(span)
        .height(4)
    )


def _worst(op: str, goals: Goals) -> bargauge.Panel:
    expr = f"sort_desc(topk(10, {_lun_latency(op)}))"
    return (
        bargauge.Panel()
        .title(f"Worst LUNs now: {op}")
        .description(
            f"The ten LUNs with the highest 1-minute average {op} latency now (every {op}, whatever its size), "
            f"worst first, against the {goals.default.goal_ms:g} ms goal (red at and above it). Red: a breach, "
            "or an average flagged while the judged I/Os are within the goal ('Judged latency beside the LUN's "
            "average' below tells which). Open the LUN's row below and check "
            "whether its IOPS or throughput rose (workload) or stayed flat (the array or the path to it); "
            "the Database I/O dashboard shows whether the database sees the same."
        )
        .datasource(p.DATASOURCE)
        .unit(p.SECONDS)
        .min(0)
        .thresholds(p.goal_thresholds(goals))
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        .with_target(p.instant(expr, fmt=PromQueryFormat.TIME_SERIES).legend_format(LUN_LEGEND))
        .span(12)
        .height(8)
    )


def _latency_panel(role_title: str, role: str, op: str, goals: Goals) -> timeseries.Panel:
    fixed = {"role": role}
    hint = {
        "data": "Data LUNs carry the database's reads (index lookups, scans) and its checkpoint writes",
        "log": "Log LUNs carry the transaction log: every commit waits for its write, so log write latency is "
        "commit latency",
    }[role if role in ("data", "log") else "data"]
    return (
        p.latency_timeseries(
            f"{role_title} LUNs: {op} latency",
            f"1-minute average {op} latency (Δ time / Δ operations, kernel counters) of each {role_title.lower()} "
            f"LUN; the red line is the goal ({goals.default.goal_ms:g} ms unless an override in "
            f"alerts/goals.yaml sets another). {hint}. This is the average of every {op}; the breach alerts "
            "judge the I/Os the goal judges ('What is judged' above) and flag an average alone above the line. "
            "Minutes with fewer operations than the idle guard are drawn but not judged. Above the line: "
            "compare IOPS and throughput below, then the Workload interference dashboard for a neighbour's load.",
            goals,
            [
                p.query(_lun_latency(op, **fixed), LUN_LEGEND, "A"),
                p.query(_goal(**fixed), "goal", "B"),
            ],
        )
        .span(12)
        .height(9)
    )


def _per_lun(expr: str) -> str:
    """A per-device expression with each LUN's database, role and workload, filtered by the
    dashboard's variables (lunlat_lun_info, as the recording rules join it)."""
    info = p.selector(contract.LUN_INFO.name, p.LUN_FILTERS, kind="lun")
    return f"{expr}\n* on (job, instance, lun, device) group_left (database, role, workload)\n{info}"


def _queue_panel() -> timeseries.Panel:
    """Average queue size (the weighted I/O time's rate) and I/Os in flight per LUN."""
    weighted = p.rate(contract.DEVICE_IO_WEIGHTED_TIME.name)
    in_flight = p.selector(contract.DEVICE_IO_IN_PROGRESS.name)
    return (
        p.rate_timeseries(
            "Queue per LUN",
            "Average number of I/Os queued or in service at the LUN over the rate window (diskstats' "
            "weighted I/O time per second: Little's law, IOPS x latency) and the I/Os in flight at each "
            "scrape. A queue that grows with flat IOPS is latency arriving from below (array, fabric, a "
            "lost path); a queue that grows with IOPS is load. Not a saturation measure: an array LUN "
            "serves many I/Os at once.",
            p.COUNT,
            [
                p.query(_per_lun(weighted), "{{lun}} avg queue · {{instance}}"),
                p.query(_per_lun(in_flight), "{{lun}} in flight · {{instance}}", ref="B"),
            ],
        )
        .span(12)
        .height(8)
    )


def _flush_panel(goals: Goals) -> timeseries.Panel:
    """Flush latency per LUN: a log writer's fsync reaches a write-back-cache LUN as a flush."""
    latency = f"{p.rate(contract.DEVICE_FLUSH_TIME.name)}\n/ ({p.rate(contract.DEVICE_FLUSHES.name)} > 0)"
    return (
        p.latency_timeseries(
            "Flush latency per LUN",
            "Average time of a flush request (diskstats fields 16-17, kernel 5.5+): a log writer's fsync "
            "or O_DSYNC write on a file system reaches a LUN with a write-back cache as a flush, so a log "
            "LUN's commit latency is its write latency plus this. LUNs without flushes in the window are "
            "not drawn; empty: the LUNs report a write-through cache (the kernel sends no flush) or the "
            "kernel is older than 5.5.",
            goals,
            [p.query(_per_lun(f"({latency})"), "{{lun}} {{role}} · {{instance}}")],
        )
        .span(12)
        .height(8)
    )


def _paths_panel() -> timeseries.Panel:
    """Working and failed paths of each multipath LUN (docs/metrics.md, "Path health")."""
    paths = p.selector(contract.LUN_PATHS.name, (p.LUN,))
    failed = p.selector(contract.LUN_PATHS_FAILED.name, (p.LUN,))
    return (
        p.rate_timeseries(
            "Multipath paths",
            "Working paths (paths minus failed) and failed paths of each multipath LUN. A lost path shows "
            "up as latency first: a latency step above at the minute the working paths drop is the path "
            "(HBA, cable, switch or array port), not the workload; LunLatencyPathLost warns after 1m. "
            "Empty: no multipath LUN on the shown hosts.",
            p.COUNT,
            [
                p.query(f"{paths} - {failed}", "{{lun}} working · {{instance}}"),
                p.query(f"{failed} > 0", "{{lun}} failed · {{instance}}", ref="B"),
            ],
        )
        .span(12)
        .height(8)
    )


def _array_names(goals: Goals) -> str:
    """The array exporters the goals join, as the panel's help names them."""
    return ", ".join(array.name for array in goals.arrays) or "none configured"


def _host_minus_array_panel(goals: Goals) -> timeseries.Panel:
    """Host latency minus the array's own for the same volume, where an array exporter is joined."""
    diff = p.selector(recorded.HOST_MINUS_ARRAY.format(window=recorded.BREACH_WINDOW), p.LUN_FILTERS)
    return (
        p.rate_timeseries(
            "Host minus array latency",
            "The host's 1-minute average latency minus the array's latency for the same volume (joined on "
            "the LUN's NAA: docs/metrics.md, 'The array side'). Near zero: the time is spent in the array. Large: "
            "in the host's queue, multipath, HBA or fabric, or a lost path. Empty: no array exporter joined "
            f"(alerts/goals.yaml `arrays`: {_array_names(goals)}).",
            p.SECONDS,
            [p.query(diff, "{{lun}} {{op}} · {{instance}}")],
        )
        .thresholds(p.goal_thresholds(goals))  # the host's share alone above goal: not the array
        .span(12)
        .height(8)
    )


def _io_heatmap(op: str) -> heatmap.Panel:
    """The block layer's per-I/O latency buckets of the selected LUNs (database, role and workload
    through lunlat_lun_info, as the recording rules join them)."""
    buckets = p.rate(contract.DEVICE_IO_LATENCY.name + "_bucket", (p.LUN,), op=op)
    luns = p.selector(contract.LUN_INFO.name, p.LUN_FILTERS, kind="lun")
    return (
        p.latency_heatmap(
            f"{op.capitalize()} latency distribution per I/O",
            f"Every {op} of the selected LUNs, from its insertion into the host's block layer to its "
            "completion (lunlat_device_io_latency_seconds, --collector.biolatency): each column a time step, "
            "each cell a power-of-two latency bucket (… 512 µs-1 ms, 1-2 ms …, an edge exactly at the 1 ms "
            f"goal), its colour the {op}s per second in it. Pick one LUN in the LUN variable to see its own "
            "distribution (at All it is every shown LUN's I/Os together). A second band above the goal "
            "while the average is green is a tail: a slow path or disk behind the LUN, or queueing; see "
            "the tail runbook (alerts/runbooks/tail-latency.md).",
            f"sum by (le) (\n  {buckets}\n  and on (job, instance, lun, device)\n  {luns}\n)",
        )
        .span(12)
        .height(9)
    )


def _percentiles(op: str, goals: Goals) -> timeseries.Panel:
    targets = [p.query(_lun_latency(op), f"avg {LUN_LEGEND}", "A")]
    # Computed here for the shown LUNs, not recorded for every LUN (layers.io_latency_quantile).
    buckets, luns = p.matchers((p.LUN,), op=op), p.matchers(p.LUN_FILTERS)
    for ref, q, name in (("B", "0.5", "p50"), ("C", "0.99", "p99")):
        expr = io_latency_quantile(q, buckets, luns, p.RATE, by=LUN_LABELS)
        targets.append(p.query(expr, f"{name} {LUN_LEGEND}", ref))
    targets.append(p.query(_goal(), "goal", "D"))
    return (
        p.latency_timeseries(
            f"{op.capitalize()} latency per I/O: average, p50 and p99 against the goal",
            f"The LUN's 1-minute average of every {op} (kernel counters) beside the median and the "
            f"99th percentile of its single {op}s over the panel's rate interval, a minute when zoomed in "
            "(the block layer's histogram, interpolated "
            "inside a power-of-two bucket: read a p99 of 1.4 ms as 'between 1 and 2 ms'). p99 above the "
            f"red goal line with the average below it: more than 1 % of the {op}s are slower than the goal, "
            f"a tail the average hides; above {goals.tail.above_percent:g} % for {goals.tail.for_} the "
            "LunLatencyTailHigh ticket opens. Compare p50 and p99: both up is the whole LUN, p99 alone "
            "a part of its I/Os (a path, a disk, bursts).",
            goals,
            targets,
        )
        .span(12)
        .height(9)
    )


def _share_above_goal(goals: Goals) -> timeseries.Panel:
    share = p.selector(
        recorded.IO_ABOVE_GOAL_RATIO.format(window=recorded.BREACH_WINDOW), p.LUN_FILTERS, **HOST
    )
    limit = goals.tail.above_percent / 100
    return (
        p.rate_timeseries(
            "I/Os slower than the goal",
            "Share of each LUN's reads and writes of the last minute that took longer than the LUN's goal, "
            "from the block layer's histogram (exact at the 1 ms goal, a bucket edge; interpolated inside "
            f"a bucket for another goal). The red line is the tail alert's limit ({goals.tail.above_percent:g} %, "
            "alerts/goals.yaml tail.above_percent): a LUN above it for "
            f"{goals.tail.for_} with its average within the goal opens LunLatencyTailHigh. Idle LUNs are drawn "
            "but not judged. Find the LUN, then look at its heatmap and percentiles above.",
            p.RATIO,
            [p.query(share, "{{lun}} {{op}} · {{instance}}")],
        )
        .thresholds(
            dash.ThresholdsConfig()
            .mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=None, color="green"), model.Threshold(value=limit, color="red")])
        )
        .thresholds_style(
            common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.LINE_AND_AREA)
        )
        .max(1)
        .span(24)
        .height(8)
    )


# --- what is judged (docs/alerting.md, "What is judged") ---------------------------------------


def _judged(op: str) -> str:
    return p.selector(p.judged_latency(op), p.LUN_FILTERS, **HOST)


def _judged_beside_average(op: str, goals: Goals) -> timeseries.Panel:
    """The latency the goal judges beside the LUN's average of every I/O, per LUN: "average 1.9 ms,
    small reads 0.4 ms" reads off the legend."""
    return (
        p.latency_timeseries(
            f"Judged {op} latency beside the LUN's average",
            f"Per LUN (host layer), solid: the 1-minute average of the {op}s its goal judges, the legend "
            f"naming which (label `judged`): `small` = the I/Os of up to {contract.BIO_SMALL_MAX // 1024} KiB "
            "(the per-I/O histogram's small class, --collector.biolatency), `all` = every I/O (the goal judges "
            f"every one, or the host has no histogram for the LUN). Dotted: the LUN's average of every {op} "
            "(kernel counters), whatever its size. The red line is the goal. Judged above it: the LUN latency "
            "alert of its role fires at the tier's severity. The average alone above it, the judged within it "
            "or too few to judge: LunLatencyAverageHigh, a warning (a ticket for a ticket tier), never a page "
            "(bigger I/Os take longer each without anything being broken; the average I/O size below says "
            "how big). No judged line: fewer judged I/Os than "
            f"the idle guard ({goals.default.min_iops:g}/s unless an override sets another).",
            goals,
            [
                p.query(_judged(op), f"{{{{lun}}}} judged {{{{judged}}}} {op}s · {{{{instance}}}}", "A"),
                p.query(_lun_latency(op), f"{{{{lun}}}} average of every {op} · {{{{instance}}}}", "B"),
                p.query(_goal(), "goal", "C"),
            ],
        )
        .override_by_query("B", [model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dot"})])
        .span(12)
        .height(9)
    )


def _drift(op: str, goals: Goals) -> timeseries.Panel:
    """The judged latency's hourly average beside its same-hour-of-week baseline: what LunLatencyDrift
    compares (lunlat_rules.drift; docs/alerting.md, "Drift before the breach"), the baseline built by
    the same function as the alert's."""
    drift = goals.drift
    average = p.selector(window_average(op, drift), p.LUN_FILTERS, **HOST)
    weeks = "last week" if drift.weeks == 1 else f"last {drift.weeks} weeks"
    return (
        p.latency_timeseries(
            f"Judged {op} latency beside its usual for the hour of the week (drift)",
            f"Per LUN (host layer), solid: the {drift.window} average of the {op}s its goal judges (label "
            f"`judged`), recorded every {DRIFT_INTERVAL} where the LUN was judged for half the window. Dashed: "
            f"its baseline, the same average at the same time of the week, the median over the {weeks} "
            f"(no line: the LUN's first week, or idle then). Solid at {drift.ratio:g}x dashed or more and "
            f"{drift.min_rise_ms:g} ms above it, within the goal (red line), for {drift.for_}: the "
            f"LunLatencyDrift {drift.severity} opens before any breach. Widen the time range to days to "
            "see when the rise started (alerts/runbooks/drift.md).",
            goals,
            [
                p.query(
                    average,
                    f"{{{{lun}}}} judged {{{{judged}}}} {op}s, {drift.window} · {{{{instance}}}}",
                    "A",
                ),
                p.query(baseline(average, drift, bridged=False), "{{lun}} usual · {{instance}}", "B"),
                p.query(_goal(), "goal", "C"),
            ],
        )
        .override_by_query(
            "B",
            [model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]})],
        )
        .span(12)
        .height(9)
    )


def _flagged(op: str) -> str:
    """LUNs whose average of every `op` is above goal while its judged I/Os are within it or too few
    to judge, busy enough to be judged (every I/O at or above the idle guard): what
    LunLatencyAverageHigh fires on (lunlat_rules.breach.average_alerts), without its `for`."""
    goal = p.selector(recorded.GOAL, p.LUN_FILTERS, **HOST)
    iops = p.selector(p.IOPS_RECORDED, p.LUN_FILTERS, **HOST, op=op)
    guard = p.selector(recorded.GOAL_MIN_IOPS, p.LUN_FILTERS, **HOST)
    return (
        "(\n"
        f"    {_lun_latency(op)} > {ON_SERIES} {goal}\n"
        f"  and {ON_SERIES} ({iops} >= {ON_SERIES} {guard})\n"
        ")\n"
        f"unless {ON_SERIES} ({_judged(op)} > {ON_SERIES} {goal})"
    )


def _flagged_stat(goals: Goals) -> stat.Panel:
    counts = " + ".join(f"(count({_flagged(op)}) or vector(0))" for op in recorded.OPS)
    return _stat(
        "Averages above goal, judged within it (flagged)",
        "LUNs (and directions) whose 1-minute average of every I/O is above their goal now while the I/Os "
        "the goal judges are within it, or too few to judge (e.g. small OLTP reads fine beside 1 MiB scan "
        "reads, or a LUN of scans alone), busy enough to be judged. Flagged, never paged: "
        f"LunLatencyAverageHigh warns (a ticket for a ticket tier) after {goals.breach.for_}, at its next "
        "evaluation, within a minute. Above zero: see "
        "'Judged latency beside the LUN's average' and the average I/O size below: the I/Os the goal judges "
        "were not the slow ones.",
        counts,
        p.COUNT,
        # Orange, not red: a warning (LunLatencyAverageHigh), the breach stat beside it is the page.
        dash.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=None, color="green"), model.Threshold(value=1, color="orange")]),
        span=3,
    )


def _io_size() -> timeseries.Panel:
    throughput = p.selector(p.THROUGHPUT_RECORDED, p.LUN_FILTERS, **HOST)
    iops = p.selector(p.IOPS_RECORDED, p.LUN_FILTERS, **HOST)
    return (
        p.rate_timeseries(
            "Average I/O size per LUN",
            "Bytes per read and per write of each LUN over the last minute (throughput / IOPS, from the kernel "
            "counters: every LUN, with or without the per-I/O histogram). A database page is 8 KiB: OLTP reads "
            "and writes of one or two pages are 8-16 KiB; a scan, a backup or a snapshot copy reads 128 KiB and "
            "more. An average latency above the goal at a large average size is the size, not the storage: "
            "compare the judged latency above.",
            p.BYTES,
            [p.query(f"{throughput}\n/\n({iops} > 0)", "{{lun}} {{op}} · {{instance}}")],
        )
        .span(24)
        .height(8)
    )


def _size_class(part: str) -> str:
    """rate() of the per-I/O histogram's `part` (sum, count) per LUN, op and size class."""
    return p.rate(f"{contract.DEVICE_IO_LATENCY.name}_{part}", (p.LUN,))


def _size_class_latency(goals: Goals) -> timeseries.Panel:
    ratio = f"(\n  {_size_class('sum')}\n  /\n  ({_size_class('count')} > 0)\n)"
    small, large = contract.BIO_SMALL_MAX // 1024, contract.BIO_LARGE_MIN // 1024
    return (
        p.latency_timeseries(
            "Latency by I/O size class",
            "Average latency of each LUN's reads and writes per size class, from the block layer's per-I/O "
            f"histogram (--collector.biolatency: its sum / its count): small up to {small} KiB (the one- and "
            f"two-page I/O a transaction waits for), large from {large} KiB (scans, the kernel's read-ahead), "
            "middle between. The red line is the default goal; reads are judged on the small class where the "
            "goal says `judge: small` (alerts/goals.yaml). A large class far above the small one is transfer "
            "time, expected; the small class rising with it is contention. Empty: no LUN shown has the "
            "histogram (see 'Average I/O size per LUN' for every LUN).",
            goals,
            [p.query(_per_lun(ratio), "{{lun}} {{op}} {{size}} · {{instance}}")],
        )
        .span(12)
        .height(9)
    )


def _size_class_iops() -> timeseries.Panel:
    return (
        p.rate_timeseries(
            "IOPS by I/O size class",
            f"Reads and writes per second of each LUN per size class (small up to "
            f"{contract.BIO_SMALL_MAX // 1024} KiB, large from {contract.BIO_LARGE_MIN // 1024} KiB, middle "
            "between), from the per-I/O histogram's count (--collector.biolatency). The mix beside the latency "
            "by size class: a few large I/Os per second raise a LUN's average far more than many small ones. "
            "Fewer small reads per second than the idle guard: the small reads are not judged.",
            p.IOPS,
            [p.query(_per_lun(_size_class("count")), "{{lun}} {{op}} {{size}} · {{instance}}")],
        )
        .span(12)
        .height(9)
    )


# --- SLOs per I/O (docs/alerting.md, "SLOs per I/O") -------------------------------------------


def _over_period(sum5m: str, goals: Goals) -> str:
    """The events of `sum5m` over the SLO period, per database and role (recorded.SLO_LABELS). The
    subquery sums one 5-minute sum per 5 minutes; a series younger than the last 5-minute step has no
    point in it yet, and its own latest 5-minute sum (every event it has) stands in."""
    selector = p.selector(sum5m, (p.DATABASE, p.ROLE, p.WORKLOAD))
    by = ", ".join(recorded.SLO_LABELS)
    return (
        f"sum by ({by}) (sum_over_time({selector}[{goals.slo.period}:{SLO_SUM_STEP}]))\n"
        f"or\nsum by ({by}) ({selector})"
    )


def budget_query(goals: Goals) -> str:
    """Remaining error budget: 1 - (bad events / events over the period) / (1 - objective), the
    objective of the first `slo.objectives` entry matching the series (as the burn alerts), else
    `slo.objective`."""
    bad = _over_period(recorded.SLO_BAD_EVENTS_SUM, goals)
    events = _over_period(recorded.SLO_EVENTS_SUM, goals)
    ratio = f"(\n  (\n{bad}\n  )\n  /\n  (\n{events}\n  ) > 0\n)"
    by = ", ".join(recorded.SLO_LABELS)
    branches = []
    for entry in goals.slo.objectives:
        matching = p.selector(
            recorded.SLO_EVENTS_SUM,
            (p.DATABASE, p.ROLE, p.WORKLOAD),
            **{label: f"=~{json.dumps(pattern)}" for label, pattern in entry.match.items()},
        )
        branches.append(f"{ratio} / {entry.error_budget:.6g}\nand on ({by}) group by ({by}) ({matching})")
    branches.append(f"{ratio} / {goals.slo.error_budget:.6g}")
    # `or` keeps the first branch's series: the first matching objective wins.
    return "1 - (\n" + "\nor\n".join(f"(\n{b}\n)" for b in branches) + "\n)"


def _budget(goals: Goals) -> bargauge.Panel:
    objective = f"{goals.slo.objective * 100:g} %"
    return (
        bargauge.Panel()
        .title("Remaining error budget per database and role")
        .description(
            f"Share of the error budget left over the SLO period ({goals.slo.period}): 1 - (bad events / "
            f"events) / (1 - objective), objective {objective} within goal unless an `slo.objectives` entry "
            "matches (log writes: 99.9 % shipped; alerts/goals.yaml slo). 100 %: "
            "nothing spent; 0: the objective just met; below zero (red): missed over the period. Per "
            "database, role, op and layer, labelled by indicator: `io` counts I/Os (each judged I/O an "
            "event, bad when slower than the LUN's goal, from the host's per-I/O histogram); `minute` counts "
            "judged minutes (bad when the judged 1-minute average is above goal), where no histogram exists "
            "(biolatency off, or a database layer). Series younger than the period count what they have. "
            "A budget falling fast: the budget-burn alerts page or open a ticket."
        )
        .datasource(p.DATASOURCE)
        .unit(p.RATIO)
        .max(1)
        .thresholds(
            # Red below zero: the objective is missed over the period; at and above zero it is met.
            dash.ThresholdsConfig()
            .mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=None, color="red"), model.Threshold(value=0, color="green")])
        )
        .orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        .with_target(
            p.instant(budget_query(goals), fmt=PromQueryFormat.TIME_SERIES).legend_format(
                "{{database}} {{role}} {{op}} {{layer}} · {{indicator}} · {{instance}}"
            )
        )
        .span(24)
        .height(8)
    )


def build(goals: Goals, records: frozenset[str] | None = None) -> dash.Dashboard:
    """The overview for `goals`; `records`: the series the rules record (default: those of the
    rules generated from the same goals), which decide whether the error budget row is drawn."""
    records = p.rules_record(goals) if records is None else records
    above = p.selector(recorded.ABOVE_GOAL, p.LUN_FILTERS, **HOST)
    # "Now" from the judgement the pages read, every 15 s; the bool is recorded once a minute
    # (recorded.SLO_GROUP), enough for a range or for which LUNs are judged.
    breaching = p.selector(recorded.JUDGED_ABOVE_GOAL, p.LUN_FILTERS, **HOST)
    judged_iops = p.selector(p.IOPS_RECORDED, p.LUN_FILTERS, **HOST)
    board = (
        p.dashboard(
            UID,
            "lunlat / LUN latency overview",
            f"Per-LUN read and write latency of the database hosts against the {goals.default.goal_ms:g} ms goal.",
        )
        .variables(p.standard_variables())
        .annotation(p.alerts_annotation())
        .with_row(dash.Row("Now"))
        .with_panel(
            _stat(
                "LUNs breaching now",
                "LUNs (and directions) whose judged latency is above their goal now: the 1-minute average of "
                "the I/Os the goal judges (small reads where the host has the per-I/O histogram, every write; "
                "docs/alerting.md, 'What is judged'), busy enough to be judged (idle guard). Above zero: the "
                "LUN latency alerts fire within their `for` time; see the judged latency below and the "
                "runbook linked from the alert.",
                f"count({breaching}) or vector(0)",
                p.COUNT,
                p.count_thresholds(),
                span=3,
            )
        )
        .with_panel(_flagged_stat(goals))
        .with_panel(
            _stat(
                "LUNs breached in range",
                "Distinct LUNs that were above goal in at least one judged minute of the selected time range. "
                "Above zero with none breaching now: a past episode; find it in the time series below.",
                f"count(count by (job, instance, lun) (max_over_time({above}[$__range]) == 1)) or vector(0)",
                p.COUNT,
                p.count_thresholds(),
                span=3,
            )
        )
        .with_panel(
            _stat(
                "LUNs judged",
                "LUNs (and directions) whose judged I/Os are busy enough now to be judged against the goal "
                "(at or above the idle guard). Zero while the databases run: the exporter or the recording "
                "rules are not working; check the exporter health alerts.",
                f"count({above}) or vector(0)",
                p.COUNT,
                p.neutral_thresholds(),
                span=3,
            )
        )
        .with_panel(
            _stat(
                "Worst read latency",
                f"Highest 1-minute average of every read of the shown LUNs now, whatever its size. Red: at or "
                f"above the {goals.default.goal_ms:g} ms goal, a breach or a flagged average; find the LUN in "
                "'Worst LUNs now' and its judged latency below.",
                f"max({_lun_latency('read')})",
                p.SECONDS,
                p.goal_thresholds(goals),
                span=3,
            )
        )
        .with_panel(
            _stat(
                "Worst write latency",
                f"Highest 1-minute average write latency of the shown LUNs now. Red: at or above the "
                f"{goals.default.goal_ms:g} ms goal; a log LUN here slows every commit.",
                f"max({_lun_latency('write')})",
                p.SECONDS,
                p.goal_thresholds(goals),
                span=3,
            )
        )
        .with_panel(
            _stat(
                "Total IOPS",
                "Operations per second of the shown LUNs, reads and writes. Context for the latency: a "
                "breach with IOPS far above the usual points at load, with IOPS as usual at the array.",
                f"sum({judged_iops})",
                p.IOPS,
                p.neutral_thresholds(),
                span=6,
            )
        )
        .with_panel(_worst("read", goals))
        .with_panel(_worst("write", goals))
    )
    # Right under the breaches: why they happen (the breach alerts' neighbours and cause).
    board = why.row(board)
    board = (
        board.with_row(dash.Row("What is judged: the I/Os the database waits for"))
        .with_panel(_judged_beside_average("read", goals))
        .with_panel(_judged_beside_average("write", goals))
        .with_panel(_drift("read", goals))
        .with_panel(_drift("write", goals))
        .with_panel(_io_size())
        .with_row(dash.Row("Data and log LUNs against the goal"))
        .with_panel(_latency_panel("Data", "data", "read", goals))
        .with_panel(_latency_panel("Data", "data", "write", goals))
        .with_panel(_latency_panel("Log", "log", "write", goals))
        .with_panel(_latency_panel("Log", "log", "read", goals))
        .with_row(dash.Row("Per-I/O latency (host layer)"))
        .with_panel(_io_heatmap("read"))
        .with_panel(_io_heatmap("write"))
        .with_panel(_percentiles("read", goals))
        .with_panel(_percentiles("write", goals))
        .with_panel(_share_above_goal(goals))
        .with_panel(_size_class_latency(goals))
        .with_panel(_size_class_iops())
        .with_row(dash.Row("Load beside the latency"))
        .with_panel(
            p.rate_timeseries(
                "IOPS per LUN",
                "Reads and writes per second of each LUN (1-minute rate). Read it beside the latency above: "
                "latency rising with IOPS is load (the workload or a neighbour); latency rising at steady IOPS "
                "is the array, the fabric or the host's queue.",
                p.IOPS,
                [p.query(judged_iops, "{{lun}} {{op}} · {{instance}}")],
            )
            .span(12)
            .height(8)
        )
        .with_panel(
            p.rate_timeseries(
                "Throughput per LUN",
                "Bytes per second read and written per LUN (1-minute rate). Large scans (DSS) and snapshot "
                "copies show here first: throughput up with IOPS flat means large I/Os, which hold the array's "
                "resources longer and raise everyone's latency.",
                p.BYTES_PER_SECOND,
                [
                    p.query(
                        p.selector(p.THROUGHPUT_RECORDED, p.LUN_FILTERS, **HOST),
                        "{{lun}} {{op}} · {{instance}}",
                    )
                ],
            )
            .span(12)
            .height(8)
        )
        .with_panel(_queue_panel())
        .with_panel(_flush_panel(goals))
        .with_row(dash.Row("Paths and the array"))
        .with_panel(_paths_panel())
        .with_panel(_host_minus_array_panel(goals))
    )
    if {recorded.SLO_EVENTS_SUM, recorded.SLO_BAD_EVENTS_SUM} <= records:
        board = board.with_row(dash.Row(BUDGET_ROW)).with_panel(_budget(goals))
    return board
