"""Workload interference: how the other workloads' load moves the protected workload's latency.

The reference architecture runs OLTP alone, then with DSS scans, then with snapshot copies running
OLTP too, on one array. Here the protected workload's latency ("the blue") shares its time axis with
the others' throughput ("the red"), each LUN's latency is plotted against its IOPS (the "petal":
latency flat until the array saturates, then climbing), and the periods in which each workload ran
are marked as annotations.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import timeseries, xychart
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import xychart as xychart_model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from lunlat.goals import Goals
from lunlat.promql import recorded
from lunlat.promql.layers import SERIES_LABELS
from lunlat_dashboards import panels as p

UID = "lunlat-workload-interference"
VICTIM = p.Var("victim", ".*")
HOST = {"layer": "host"}
# Average read size above which a LUN's reads are scans (DSS, backups, snapshot copies): OLTP
# reads single blocks of 8-16 KiB; a multiblock read is 128 KiB and more (Oracle's default
# db_file_multiblock_read_count x 8 KiB = 1 MiB; SQL Server read-ahead up to 512 KiB).
SCAN_READ_BYTES = 128 * 1024
FLOOR_ROW = "DSS throughput against its floor"


def _victim_variable() -> dash.QueryVariable:
    workloads = p.selector(p.IOPS_RECORDED, (), **HOST)
    return (
        dash.QueryVariable(VICTIM.label)
        .label("Protected workload")
        .description("The workload whose latency is protected (the blue): usually the production OLTP.")
        .datasource(p.DATASOURCE)
        .query({"query": f"label_values({workloads}, workload)", "refId": "victim-values", "qryType": 1})
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
        .multi(False)
        .include_all(False)
        .current(model.VariableOption(selected=True, text="oltp", value="oltp"))
    )


def _victim(metric: str, **fixed: str) -> str:
    return p.selector(metric, (p.DATABASE,), **HOST, workload=f'=~"${VICTIM.label}"', **fixed)


def _others(metric: str, **fixed: str) -> str:
    return p.selector(metric, (p.DATABASE,), **HOST, workload=f'!~"${VICTIM.label}"', **fixed)


def _read_size() -> str:
    """Bytes per read of each protected LUN."""
    throughput = _victim(p.THROUGHPUT_RECORDED, op="read")
    iops = _victim(p.IOPS_RECORDED, op="read")
    return f"sum by (job, instance, lun) ({throughput})\n/\n(sum by (job, instance, lun) ({iops}) > 0)"


def _activity_annotation() -> dash.AnnotationQuery:
    busy = p.selector(p.IOPS_RECORDED, (p.DATABASE,), **HOST)
    return (
        dash.AnnotationQuery()
        .name("Workload running")
        .datasource(p.DATASOURCE)
        .enable(True)
        .icon_color("blue")
        .expr(f"sum by (workload) ({busy}) > 1")
    )


def _scan_annotation() -> dash.AnnotationQuery:
    return (
        dash.AnnotationQuery()
        .name("Scans on the protected workload's LUNs")
        .datasource(p.DATASOURCE)
        .enable(True)
        .icon_color("orange")
        .expr(f"{_read_size()} > {SCAN_READ_BYTES}")
    )


def _petal(goals: Goals, op: str) -> xychart.Panel:
    iops = f"sum by (job, instance, lun) ({_victim(p.IOPS_RECORDED, op=op)})"
    latency = f"max by (job, instance, lun) ({_victim(p.latency(op))})"
    return (
        xychart.Panel()
        .title(f"{op.capitalize()} latency vs IOPS per LUN (the petal)")
        .description(
            f"Each point is one LUN of the protected workload at one time step: x its {op} IOPS, y its "
            f"1-minute average {op} latency. A healthy array draws a flat band well under the "
            f"{goals.default.goal_ms:g} ms goal (red threshold) however IOPS grow; the curve bending upward "
            "at some IOPS is where the array (or the LUN's queue) saturates: that IOPS is the LUN's real "
            "capacity with the current neighbours. Points red at low IOPS: not load, something else "
            "(a neighbour's scans, a path problem)."
        )
        .datasource(p.DATASOURCE)
        .unit(p.SECONDS)
        .thresholds(p.goal_thresholds(goals))
        .mapping(xychart_model.SeriesMapping.AUTO)
        .show(xychart_model.XYShowMode.POINTS)
        .point_size(xychart.XychartFieldConfigPointSize().fixed(5))
        .legend(  # one series per LUN: the legend names them
            common_builders.VizLegendOptions()
            .show_legend(True)
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
        )
        .with_target(p.query(iops, "IOPS", "A").format(PromQueryFormat.TABLE))
        .with_target(p.query(latency, "latency", "B").format(PromQueryFormat.TABLE))
        # One frame per LUN with its IOPS (x) and latency (y) side by side at each time step.
        .with_transformation(model.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            model.DataTransformerConfig(
                id_val="partitionByValues", options={"fields": ["lun"], "keepFields": False}
            )
        )
        .override_by_name(
            "Value #A",
            [
                model.DynamicConfigValue(id_val="unit", value=p.IOPS),
                model.DynamicConfigValue(id_val="displayName", value="IOPS"),
            ],
        )
        .span(12)
        .height(10)
    )


def _floor_panel(goals: Goals) -> timeseries.Panel:
    """Throughput of each LUN whose goal tier sets a floor (recorded.THROUGHPUT_FLOOR), reads and
    writes together as LunLatencyThroughputLow adds them, with its floor beside it."""
    floor = p.selector(recorded.THROUGHPUT_FLOOR, (p.DATABASE,), **HOST)
    moved = p.selector(p.THROUGHPUT_RECORDED, (p.DATABASE,), **HOST)
    on = f"on ({', '.join(SERIES_LABELS)})"
    throughput = goals.throughput
    return (
        p.rate_timeseries(
            "Throughput against its floor",
            "Bytes per second each LUN with a throughput floor moved (reads and writes together, 1-minute "
            "rate), solid, and its floor, dashed: the floor of the first goal tier matching the LUN that sets "
            "throughput_floor_mib_s (alerts/goals.yaml; DSS: 'throughput is the key performance metric'). "
            "LUNs without a floor are not drawn. LunLatencyThroughputLow "
            f"({throughput.severity}) opens when a LUN's {throughput.window} average stays below its floor for "
            f"{throughput.for_} while at least {throughput.queue_min:g} I/O waited on it on average (the scan "
            "asked for more): below the floor with no queue is a workload that asked for less, not judged. "
            "Below it while OLTP latency rises above: the array is shared; look at who loads it.",
            p.BYTES_PER_SECOND,
            [
                p.query(
                    f"sum without (op) ({moved})\nand {on}\n{floor}",
                    "{{lun}} {{database}} moved · {{instance}}",
                    "A",
                ),
                p.query(floor, "{{lun}} {{database}} floor · {{instance}}", "B"),
            ],
        )
        .override_by_query(
            "B",
            [
                model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
                model.DynamicConfigValue(id_val="custom.fillOpacity", value=0),
            ],
        )
        .span(24)
        .height(9)
    )


def build(goals: Goals, records: frozenset[str] | None = None) -> dash.Dashboard:
    """The interference dashboard for `goals`; `records`: the series the rules record (default: those
    of the rules generated from the same goals): the floor row only where a tier sets a floor."""
    records = p.rules_record(goals) if records is None else records
    victim_legend = "{{lun}} {{database}} {{role}} · {{instance}}"
    combined = (
        p.latency_timeseries(
            "Protected latency vs the others' throughput",
            "The protected workload's worst 1-minute read and write latency (left axis, red line = goal) on the "
            "same time axis as the throughput of every other workload by workload and direction and the "
            "protected LUNs' own throughput (right axis). The red workload affects the blue when the blue's "
            "latency rises as the red's throughput does: DSS scans and snapshot copies share the array's "
            "cache, ports and back end. Latency up with the others flat: not interference; look at the "
            "protected workload's own IOPS and the path.",
            goals,
            [
                p.query(f"max({_victim(p.latency('read'))})", "worst read latency ($victim)", "A"),
                p.query(f"max({_victim(p.latency('write'))})", "worst write latency ($victim)", "B"),
                p.query(
                    f"sum by (workload, op) ({_others(p.THROUGHPUT_RECORDED)})",
                    "{{workload}} {{op}} throughput",
                    "C",
                ),
                p.query(f"sum by (op) ({_victim(p.THROUGHPUT_RECORDED)})", "$victim {{op}} throughput", "D"),
            ],
        )
        .override_by_query(
            "C",
            [
                model.DynamicConfigValue(id_val="unit", value=p.BYTES_PER_SECOND),
                model.DynamicConfigValue(id_val="custom.axisPlacement", value=common.AxisPlacement.RIGHT),
                model.DynamicConfigValue(id_val="custom.fillOpacity", value=20),
            ],
        )
        .override_by_query(
            "D",
            [
                model.DynamicConfigValue(id_val="unit", value=p.BYTES_PER_SECOND),
                model.DynamicConfigValue(id_val="custom.axisPlacement", value=common.AxisPlacement.RIGHT),
                model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dot"}),
            ],
        )
        .span(24)
        .height(10)
    )
    board = (
        p.dashboard(
            UID,
            "lunlat / Workload interference",
            "The protected workload's latency against the other workloads' load on the same array.",
        )
        .variables(
            [
                *p.standard_variables(filters=()),  # datasource, job, instance
                _victim_variable(),
                *p.standard_variables(filters=(p.DATABASE,))[3:],
            ]
        )
        .annotation(p.alerts_annotation())
        .annotation(_activity_annotation())
        .annotation(_scan_annotation())
        .with_row(dash.Row("The red workload affects the blue"))
        .with_panel(combined)
        .with_panel(
            p.latency_timeseries(
                "Protected read latency per LUN",
                "1-minute average read latency of each LUN of the protected workload, red line = goal. "
                "Compare its rises with the annotations (when each workload ran, when scans hit these LUNs).",
                goals,
                [p.query(_victim(p.latency("read")), victim_legend)],
            )
            .span(12)
            .height(9)
        )
        .with_panel(
            p.latency_timeseries(
                "Protected write latency per LUN",
                "1-minute average write latency of each LUN of the protected workload, red line = goal. Log "
                "LUN writes here are commit latency; snapshot copies writing to the same array show up here.",
                goals,
                [p.query(_victim(p.latency("write")), victim_legend)],
            )
            .span(12)
            .height(9)
        )
        .with_row(dash.Row("Who is loading the array"))
        .with_panel(
            p.rate_timeseries(
                "Throughput by workload",
                "Bytes per second of every workload, reads and writes stacked. DSS scans and snapshot "
                "copies are the large contributors; when their share grows, watch the protected latency above.",
                p.BYTES_PER_SECOND,
                [
                    p.query(
                        f"sum by (workload, op) ({p.selector(p.THROUGHPUT_RECORDED, (p.DATABASE,), **HOST)})",
                        "{{workload}} {{op}}",
                    )
                ],
                stacked=True,
            )
            .span(12)
            .height(9)
        )
        .with_panel(
            p.rate_timeseries(
                "Average read size on the protected LUNs",
                "Bytes per read on each protected LUN. OLTP reads single blocks (8-16 KiB); scans (DSS "
                f"queries, backups) read 128 KiB and more: above {SCAN_READ_BYTES // 1024} KiB (the orange "
                "annotation) large reads share these very LUNs, even when they carry the same workload label.",
                p.BYTES,
                [p.query(_read_size(), "{{lun}} · {{instance}}")],
            )
            .span(12)
            .height(9)
        )
        .with_row(dash.Row("Latency against load"))
        .with_panel(_petal(goals, "read"))
        .with_panel(_petal(goals, "write"))
    )
    if recorded.THROUGHPUT_FLOOR in records:
        board = board.with_row(dash.Row(FLOOR_ROW)).with_panel(_floor_panel(goals))
    return board
