"""Database I/O: what each database engine sees, beside what the host sees for the same LUN.

The database layer (each engine's per-file counters and waits) measures from the database's side of
the I/O stack; the host layer (diskstats) from the block device. Their difference is time spent
above the array: the host's queues, the HBA, the fabric. A DBA and a storage admin look at the same
LUN here and see whose side the time is on. Each engine's own rows are data its package declares
(`engine_rows`, by engine key); this module draws them.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import dashboard as model

from lunlat import contract
from lunlat.engines.registry import ENGINES
from lunlat.goals import Goals
from lunlat.promql import recorded
from lunlat_dashboards import panels as p
from lunlat_dashboards.engine_rows import ROWS
from lunlat_dashboards.engine_rows.spec import Expression, Panel, PerFile, PerWait, Quantile, SumRate

UID = "lunlat-database-io"
# Series of the database layer carry these labels (the engines' wait series only database and role:
# they are per instance, not per file).
WAIT_FILTERS: tuple[p.Var, ...] = (p.DATABASE, p.ROLE)
# A synchronous replica's or standby's waits carry role="replica" (each engine's WaitLayer.replica):
# the log panels show them as their own series, so a slow replica reads as "replica", never as the
# log LUN.
REPLICA_ROLE = "replica"

GAP_DESCRIPTION = (
    "Database layer minus host layer for the same LUN, database and role: the database's average I/O "
    "time minus the block device's. The gap is time spent above the array: the database's own I/O "
    "queue, the host's block layer and multipath queues, the HBA and the fabric. Near zero: the host "
    "adds nothing, the time is the array's. Growing while the host layer stays green: look at the host "
    "and the path (queue depth, multipath path failures, HBA errors, fabric congestion), not the "
    "array. Negative values are rounding of the databases' millisecond counters at low IOPS."
)


def _layers(op: str, role: str) -> str:
    return p.selector(p.latency(op), p.LUN_FILTERS, layer='=~"db|host"', role=role)


def _gap(op: str) -> str:
    db = p.selector(p.latency(op), p.LUN_FILTERS, layer="db")
    host = p.selector(p.latency(op), p.LUN_FILTERS, layer="host")
    # The db layer's series carry the rules' `engine` label, the host layer's do not.
    return f"{db}\n- ignoring (layer, engine)\n{host}"


def _ratio(time_rate: str, count_rate: str, by: str) -> str:
    return f"sum by ({by}) ({time_rate})\n/\n(sum by ({by}) ({count_rate}) > 0)"


def promql(expression: Expression) -> str:
    """The PromQL of an engine's panel query, with the dashboard's variables in every selector."""
    if isinstance(expression, PerWait):
        fixed = dict(expression.fixed)
        if expression.replica:
            # Filtered by database only: the role variable lists LUN roles, and a replica wait has
            # none of them (its role is fixed here).
            fixed["role"] = REPLICA_ROLE
            filters: tuple[p.Var, ...] = (p.DATABASE,)
        else:
            filters = WAIT_FILTERS
        return _ratio(
            p.rate(expression.time.name, filters, **fixed),
            p.rate(expression.waits.name, filters, **fixed),
            expression.by,
        )
    if isinstance(expression, PerFile):
        return _ratio(
            p.rate(expression.time.name, p.LUN_FILTERS),
            p.rate(expression.operations.name, p.LUN_FILTERS),
            "job, instance, database, db, file, role, lun",
        )
    if isinstance(expression, SumRate):
        return (
            f"sum by ({expression.by}) ("
            + p.rate(expression.metric.name, WAIT_FILTERS, **dict(expression.fixed))
            + ")"
        )
    if isinstance(expression, Quantile):
        buckets = p.rate(expression.histogram.name + "_bucket", WAIT_FILTERS, **dict(expression.fixed))
        return f"histogram_quantile({expression.quantile:g}, sum by ({expression.by}, le) ({buckets}))"
    buckets = p.rate(expression.histogram.name + "_bucket", WAIT_FILTERS, **dict(expression.fixed))
    return f"sum by (le) ({buckets})"


def _panel(panel: Panel, goals: Goals) -> cogbuilder.Builder[model.Panel]:
    queries = [
        p.query(promql(q.expression), q.legend, chr(ord("A") + i)) for i, q in enumerate(panel.queries)
    ]
    if panel.kind == "heatmap":
        (query,) = panel.queries
        return (
            p.latency_heatmap(panel.title, panel.description, promql(query.expression))
            .span(panel.span)
            .height(panel.height)
        )
    if panel.kind == "rate":
        return (
            p.rate_timeseries(panel.title, panel.description, p.COUNT, queries)
            .span(panel.span)
            .height(panel.height)
        )
    return (
        p.latency_timeseries(panel.title, panel.description, goals, queries)
        .span(panel.span)
        .height(panel.height)
    )


def build(goals: Goals) -> dash.Dashboard:
    board = (
        p.dashboard(
            UID,
            "lunlat / Database I/O",
            "I/O latency as the databases see it, beside the host layer of the same LUNs.",
        )
        .variables(p.standard_variables(p.IOPS_RECORDED, 'layer="db"'))
        .annotation(p.alerts_annotation())
        .with_row(dash.Row("Database layer beside host layer"))
    )
    layer_legend = "{{database}} {{role}} {{layer}} · {{lun}}"
    for role, op, what in (
        ("data", "read", "data file reads"),
        ("data", "write", "data file writes (checkpoints, the database writer, lazy writer)"),
        ("log", "write", "log writes (every commit waits for them)"),
    ):
        board = board.with_panel(
            p.latency_timeseries(
                f"{role.capitalize()} {op} latency: database vs host",
                f"1-minute average latency of {what}: `layer=db` is the database's own counter (each "
                "engine's per-file view), `layer=host` the LUN's block device. "
                "The database's value includes everything the host's does plus the queueing above the "
                "array (host, HBA, fabric): when both are red, the array is slow; when only the database "
                "layer is, see the gap panel. Red line: the goal.",
                goals,
                [p.query(_layers(op, role), layer_legend)],
            )
            .span(8)
            .height(9)
        )
    board = board.with_panel(
        p.latency_timeseries(
            "Gap: database minus host",
            GAP_DESCRIPTION,
            goals,
            [
                p.query(_gap("read"), "read {{database}} {{role}} · {{lun}}", "A"),
                p.query(_gap("write"), "write {{database}} {{role}} · {{lun}}", "B"),
            ],
        )
        .min(-0.001)
        .span(24)
        .height(8)
    ).with_panel(
        p.rate_timeseries(
            "Database I/O per second",
            "Operations per second each database issues per LUN and direction (database layer). Read "
            "beside the latency: a latency rise with a jump here is the database's own load.",
            p.IOPS,
            [
                p.query(
                    p.selector(p.IOPS_RECORDED, p.LUN_FILTERS, layer="db"),
                    "{{database}} {{role}} {{op}} · {{lun}}",
                )
            ],
        )
        .span(24)
        .height(8)
    )
    board = board.with_panel(
        p.rate_timeseries(
            "File map age",
            "Seconds since each database source last read where its files are (its file map: the `file` "
            "and `lun` of its series, the roles of its LUNs), beside its limit (file_map_max_age_seconds). "
            "Near 0 while the lookups answer; a growing line is a source using its last map (a missing "
            "grant, a lost session: its error counters say which); a source with a limit and no age line has "
            "no map, so its series have no LUN and LunLatencyFileMapStale is open (runbook file-map-stale.md).",
            p.DURATION,
            [
                p.query(p.selector(contract.DB_FILE_MAP_AGE.name), "{{source}} · {{instance}}", "A"),
                p.query(
                    p.selector(contract.DB_FILE_MAP_MAX_AGE.name), "limit {{source}} · {{instance}}", "B"
                ),
            ],
        )
        .span(24)
        .height(6)
    )
    for engine in ENGINES:
        for row in ROWS.get(engine.key, ()):
            board = board.with_row(dash.Row(row.title))
            for panel in row.panels:
                board = board.with_panel(_panel(panel, goals))
    if goals.host_layer.source == "windows_exporter":
        board = _windows_disks(_windows_volumes(board, goals), goals)
    return board


# The row only where the goals read the host layer from windows_exporter (docs/host-layer.md): the
# other choices' host layer is drawn by the panels above and the overview.
WINDOWS_ROW = "Windows volumes: host layer from windows_exporter"
WINDOWS_DISK_ROW = "Windows physical disks under the database volumes"


def _windows_volumes(board: dash.Dashboard, goals: Goals) -> dash.Dashboard:
    """Each database volume's latency and I/O as Windows measured them (windows_exporter's
    logical_disk, joined to the database files on each volume by the rules)."""
    legend = "{{database}} {{role}} · {{lun}}"
    return (
        board.with_row(dash.Row(WINDOWS_ROW))
        .with_panel(
            p.latency_timeseries(
                "Volume latency on the Windows database host",
                "1-minute average read and write latency of each volume holding the selected "
                "databases' files, from windows_exporter's logical_disk counters (the sums behind "
                "Windows' Avg. Disk sec/Read and sec/Write) on the database host: the host layer "
                "(`layer=host`) the alerts judge. `lun` is the volume the database names for its files. "
                "Red line: the goal.",
                goals,
                [
                    p.query(p.selector(p.latency(op), p.LUN_FILTERS, layer="host"), f"{op} {legend}", ref)
                    for op, ref in (("read", "A"), ("write", "B"))
                ],
            )
            .span(12)
            .height(9)
        )
        .with_panel(
            p.rate_timeseries(
                "Volume I/O per second on the Windows database host",
                "Reads and writes per second of each volume holding the selected databases' files, "
                "as windows_exporter counts them (the whole volume: every process's I/O, not only the "
                "database's). Beside the database layer's own rate above, the difference is other I/O on "
                "the same volume.",
                p.IOPS,
                [p.query(p.selector(p.IOPS_RECORDED, p.LUN_FILTERS, layer="host"), "{{op}} " + legend)],
            )
            .span(12)
            .height(9)
        )
    )


def _windows_disks(board: dash.Dashboard, goals: Goals) -> dash.Dashboard:
    """The physical disk under each database volume (windows_exporter's physical_disk, joined through
    windows_logical_disk_info by the rules: recorded.PHYSICAL_DISK_*): shown, never judged."""
    legend = "{{database}} {{role}} · {{lun}} on disk {{disk}}"
    latency = recorded.PHYSICAL_DISK_LATENCY
    iops = recorded.PHYSICAL_DISK_IOPS.format(window=recorded.BREACH_WINDOW)
    return (
        board.with_row(dash.Row(WINDOWS_DISK_ROW))
        .with_panel(
            p.latency_timeseries(
                "Physical disk latency under each volume",
                "1-minute average read and write latency of the physical disk each volume above is on "
                "(windows_exporter's physical_disk: Avg. Disk sec/Read and sec/Write of the whole disk, "
                "the LUN a SAN presents, every volume on it). A volume on several disks (striped, "
                "spanned) has no line: which disk its I/O went to is not knowable; nor has one whose disk "
                "windows_exporter could not look up. Volume red and disk green: the time is above the disk "
                "(the volume stack, a filter driver); both red: the disk or below it. Not judged by the "
                "alerts: the volumes are.",
                goals,
                [
                    p.query(
                        p.selector(latency.format(op=op, window=recorded.BREACH_WINDOW), p.LUN_FILTERS),
                        f"{op} {legend}",
                        ref,
                    )
                    for op, ref in (("read", "A"), ("write", "B"))
                ],
            )
            .span(12)
            .height(9)
        )
        .with_panel(
            p.rate_timeseries(
                "Physical disk I/O per second under each volume",
                "Reads and writes per second of the physical disk under each database volume: the disk's "
                "whole load, other volumes' included. Above the volume's own rate: other volumes share "
                "the disk.",
                p.IOPS,
                [p.query(p.selector(iops, p.LUN_FILTERS), "{{op}} " + legend)],
            )
            .span(12)
            .height(9)
        )
    )
