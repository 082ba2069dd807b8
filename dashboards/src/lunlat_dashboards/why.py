"""The overview's "why" row: what the breach alerts' `neighbours` and `cause` annotations say
(alerts/src/lunlat_rules/cause.py; docs/alerting.md, "Why: the cause in the alert"), over time, for
the LUNs the dashboard shows: the load on their arrays, the share of time in the host's queue, the
I/Os in flight against the queue limit, and the array's share of the host's latency. Each ratio
panel draws the verdict's threshold as its red line, from the same constants the alerts use.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, timeseries
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from lunlat import contract
from lunlat.promql import recorded
from lunlat_dashboards import panels as p
from lunlat_rules import cause

WHY_ROW = "Why: the cause of a breach"
# The most LUNs drawn on the arrays' load panel at each step.
ARRAY_LUNS = 10
# The labels naming a LUN on the shown LUNs' arrays, as that panel's series carry them.
NEIGHBOUR_LABELS = {"lun": "array_lun", "database": "array_lun_database", "workload": "array_lun_workload"}
_ON_DEVICE = "on (job, instance, lun, device)"


def _info(filters: tuple[p.Var, ...] = p.LUN_FILTERS, **fixed: str) -> str:
    return p.selector(contract.LUN_INFO.name, filters, kind="lun", **fixed)


def _threshold(value: float) -> dash.ThresholdsConfig:
    """Neutral below the verdict's threshold, red at and above it, drawn as a line."""
    return (
        dash.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=None, color=p.NEUTRAL), model.Threshold(value=value, color="red")])
    )


def _ratio_panel(
    title: str, description: str, targets: list[prometheus.Dataquery], value: float
) -> timeseries.Panel:
    return (
        p.rate_timeseries(title, description, p.RATIO, targets)
        .thresholds(_threshold(value))
        .thresholds_style(
            common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.LINE)
        )
        .span(12)
        .height(8)
    )


def _array_load() -> timeseries.Panel:
    """Throughput of every LUN on the arrays of the shown LUNs (the `neighbours` annotation's)."""
    throughput = p.selector(p.THROUGHPUT_RECORDED, layer="host")
    known = f'!="{contract.ARRAY_UNKNOWN}"'
    same_arrays = f"{p.selector(contract.LUN_INFO.name, kind='lun', array=known)}\n  and on (array) {_info()}"
    busiest = (
        f"topk({ARRAY_LUNS}, sum by (job, instance, lun, database, workload) (\n"
        f"  {throughput}\n  and on (job, instance, lun) ({same_arrays})\n))"
    )
    # The series are the arrays' LUNs, not the LUNs the filters chose: their names move to labels of
    # their own (NEIGHBOUR_LABELS), so no series carries a filtered label with another value.
    for label, renamed in NEIGHBOUR_LABELS.items():
        # label_join of one label copies it (no `$1`: Grafana would read it as a variable).
        busiest = f'label_join(\n{busiest},\n"{renamed}", "", "{label}")'
    expr = f"sum without ({', '.join(NEIGHBOUR_LABELS)}) (\n{busiest}\n)"
    return (
        p.rate_timeseries(
            "Throughput on the shown LUNs' arrays",
            f"Bytes per second (reads and writes) of the {ARRAY_LUNS} busiest LUNs on the arrays of the LUNs "
            "shown (lunlat_lun_info's `array`), the shown LUNs among them: what a breach alert's `neighbours` "
            "annotation lists at one instant. A scan or copy on another LUN of the array climbing as the "
            "latency of the shown LUN rises is the neighbour. LUNs on other hosts are drawn when the "
            "instance filter is All; LUNs whose array is unknown have no neighbours to draw.",
            p.BYTES_PER_SECOND,
            [p.query(expr, "{{array_lun}} {{array_lun_database}} {{array_lun_workload}} · {{instance}}")],
        )
        .span(24)
        .height(8)
    )


def _queue_share() -> timeseries.Panel:
    """The share of each op's time its I/Os waited in the host's queue (per-I/O histogram)."""
    info = f"{_ON_DEVICE} group_left (database, role, workload) {_info()}"
    by = "sum by (job, instance, lun, database, role, workload, op)"
    queue = f"{by} (\n  {p.rate(contract.DEVICE_IO_QUEUE_TIME.name)}\n  * {info}\n)"
    total = f"{by} (\n  {p.rate(contract.DEVICE_IO_LATENCY.name + '_sum')}\n  * {info}\n)"
    return _ratio_panel(
        "Time in the host's queue",
        "Share of each LUN's read and write time spent waiting in the host's queue before issue (the per-I/O "
        "histogram's queue time over its sum, --collector.biolatency). At or above the red line "
        f"({cause.QUEUE_SHARE:.0%}) a breach alert's `cause` says Host queue. Empty: no per-I/O histogram.",
        [p.query(f"{queue}\n/\n({total} > 0)", "{{lun}} {{op}} · {{instance}}")],
        cause.QUEUE_SHARE,
    )


def _in_flight_share() -> timeseries.Panel:
    """Average I/Os in flight over the smaller queue limit of each LUN's device."""
    weighted = p.rate(contract.DEVICE_IO_WEIGHTED_TIME.name)
    # Each limit labelled apart first: `or` matches label sets without the metric name, so it would
    # keep only one of two series of the same device.
    limit = (
        "min by (job, instance, lun, device) (\n  "
        + "\n  or ".join(
            f'label_replace({p.selector(spec.name)}, "limit", "{name}", "", "")'
            for spec, name in (
                (contract.DEVICE_QUEUE_DEPTH, "queue_depth"),
                (contract.DEVICE_NR_REQUESTS, "nr_requests"),
            )
        )
        + "\n)"
    )
    expr = (
        f"({weighted}\n/ {_ON_DEVICE}\n  {limit})\n"
        f"* {_ON_DEVICE} group_left (database, role, workload) {_info()}"
    )
    return _ratio_panel(
        "In flight against the queue limit",
        "Each LUN's average I/Os in flight (diskstats' weighted time per second) over the smaller of its "
        "device's queue_depth and nr_requests (sysfs, lunlat_device_queue_depth, lunlat_device_nr_requests). "
        f"At or above the red line ({cause.IN_FLIGHT_OF_LIMIT:.0%}) the queue is at its limit most of the time and "
        "a breach alert's `cause` says Host queue. Empty: no queue limit published (NVMe namespaces have "
        "nr_requests, loop and virtio disks no queue_depth).",
        [p.query(expr, "{{lun}} · {{instance}}")],
        cause.IN_FLIGHT_OF_LIMIT,
    )


def _array_share() -> timeseries.Panel:
    """The array's own latency as a share of the host's, per LUN and op, where an array is joined."""
    diff = recorded.HOST_MINUS_ARRAY.format(window=recorded.BREACH_WINDOW)
    targets = [
        p.query(
            f"1 - (\n  {p.selector(diff, p.LUN_FILTERS, op=op)}\n"
            f"  / ignoring (naa, op) group_left ()\n  ({p.selector(p.latency(op), p.LUN_FILTERS, layer='host')} > 0)\n)",
            f"{{{{lun}}}} {op} · {{{{instance}}}}",
            ref=ref,
        )
        for op, ref in (("read", "A"), ("write", "B"))
    ]
    return _ratio_panel(
        "The array's share of the host's latency",
        "The array's own latency (its exporter's, joined on the LUN's NAA) over the host's average, per LUN "
        f"and op. At or above the red line ({cause.ARRAY_SHARE:.0%}) a breach alert's `cause` says The array; "
        "below it, the rest is between the host and the array (HBA, fabric, multipath). Empty: no array "
        "exporter joined (alerts/goals.yaml `arrays`).",
        targets,
        cause.ARRAY_SHARE,
    )


def row(board: dash.Dashboard) -> dash.Dashboard:
    """`board` with the why row appended."""
    return (
        board.with_row(dash.Row(WHY_ROW))
        .with_panel(_array_load())
        .with_panel(_queue_share())
        .with_panel(_in_flight_share())
        .with_panel(_array_share())
    )
