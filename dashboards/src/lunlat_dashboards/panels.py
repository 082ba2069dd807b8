"""What every lunlat dashboard shares: the datasource and filter variables, the selectors built from
them, the goal thresholds, and panel constructors that refuse a panel without a description or unit.

The dashboard lint (dashboards/tests) checks the generated JSON for what grafana's dashboard-linter
checks; building every selector and panel here is how the generator meets it by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import heatmap, prometheus, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import heatmap as heatmap_model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from lunlat import contract
from lunlat.goals import Goals
from lunlat.promql import recorded
from lunlat_rules.rules import RuleSet

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
# Grafana's $__rate_interval: max(4 x scrape interval, $__interval + scrape interval), so a rate
# over raw counters always spans enough samples however far the user zooms out.
RATE = "$__rate_interval"
TAGS = ["lunlat"]

# Units Grafana scales itself: seconds show as ms or µs, bytes/s as KiB/s … (binary prefixes).
SECONDS = "s"
# An age, not a latency: Grafana's "duration (s)" (packages/grafana-data/src/valueFormats/categories.ts,
# id dtdurations) shows it as "1 hour, 2 minutes"; unlike SECONDS, no goal threshold is drawn on it.
DURATION = "dtdurations"
IOPS = "iops"
BYTES_PER_SECOND = "binBps"
BYTES = "bytes"
COUNT = "short"
PER_SECOND = "ops"
RATIO = "percentunit"


@dataclass(frozen=True, slots=True)
class Var:
    """A filter variable: the label it filters and what its "All" means as a regex.

    "All" of database, role, workload and lun is `.*`, not `.+`: a LUN no database or config
    labels has `database=""`, and "All" must still show it.
    """

    label: str
    all_value: str = ".*"

    @property
    def matcher(self) -> str:
        return f'{self.label}=~"${self.label}"'


JOB = Var("job", ".+")
INSTANCE = Var("instance", ".+")
DATABASE = Var("database")
ROLE = Var("role")
WORKLOAD = Var("workload")
LUN = Var("lun")
# The filters of a LUN series, in the order the variables appear on a dashboard.
LUN_FILTERS: tuple[Var, ...] = (DATABASE, ROLE, WORKLOAD, LUN)


def matchers(filters: Sequence[Var] = (), **fixed: str) -> str:
    """`job=~"$job", instance=~"$instance", <filters>, <fixed>`. A fixed value is a PromQL matcher
    body without the label name: `'="data"'`, `'=~"data|log"'`; a bare word means `="word"`."""
    found = [JOB.matcher, INSTANCE.matcher, *(f.matcher for f in filters)]
    for label, value in fixed.items():
        found.append(f"{label}{value}" if value[:1] in "=!" else f'{label}="{value}"')
    return ", ".join(found)


def selector(metric: str, filters: Sequence[Var] = (), **fixed: str) -> str:
    """`metric{job=~"$job", instance=~"$instance", <filters>, <fixed>}` (matchers)."""
    return f"{metric}{{{matchers(filters, **fixed)}}}"


def rate(metric: str, filters: Sequence[Var] = (), **fixed: str) -> str:
    return f"rate({selector(metric, filters, **fixed)}[{RATE}])"


def latency(op: str, window: str = recorded.BREACH_WINDOW) -> str:
    """The recorded average latency of `op` (the series the alerts judge)."""
    return recorded.LATENCY.format(op=op, window=window)


def judged_latency(op: str, window: str = recorded.BREACH_WINDOW) -> str:
    """The latency the goal judges for `op` (label `judged`: which I/Os, recorded.JUDGED_KINDS)."""
    return recorded.JUDGED_LATENCY.format(op=op, window=window)


IOPS_RECORDED = recorded.IOPS.format(window=recorded.BREACH_WINDOW)
THROUGHPUT_RECORDED = recorded.THROUGHPUT.format(window=recorded.BREACH_WINDOW)


def rules_record(goals: Goals) -> frozenset[str]:
    """The series the rules generated from the same goals record. Some are recorded only for some
    goals (the throughput floor where a tier sets one) or only once their rules exist: a panel
    reading one is drawn where it is recorded, never as a panel that can only stay empty, and the
    dashboards' lint holds every drawn query to the rules of the same goals."""
    return frozenset(
        rule["record"] for group in RuleSet(goals).groups() for rule in group["rules"] if "record" in rule
    )


# --- variables ----------------------------------------------------------------------------------


def datasource_variable() -> dash.DatasourceVariable:
    return (
        dash.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .description("The Prometheus (or compatible store) that scrapes lunlat and runs its rules.")
    )


def _query_variable(var: Var, query: str, label: str, description: str) -> dash.QueryVariable:
    return (
        dash.QueryVariable(var.label)
        .label(label)
        .description(description)
        .datasource(DATASOURCE)
        .query({"query": query, "refId": f"{var.label}-values", "qryType": 1})
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
        .multi(True)
        .include_all(True)
        .all_value(var.all_value)
        .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def standard_variables(
    source: str = contract.LUN_INFO.name,
    source_filters: str = 'kind="lun"',
    filters: Sequence[Var] = LUN_FILTERS,
) -> list[cogbuilder.Builder[model.VariableModel]]:
    """datasource, job, instance, then the `filters` (database, role, workload, lun) read from
    `source` (by default lunlat_lun_info: every LUN the exporter publishes, labelled or not), each
    filtered by the ones before it."""
    build = contract.BUILD_INFO.name
    variables: list[cogbuilder.Builder[model.VariableModel]] = [
        datasource_variable(),
        _query_variable(
            JOB,
            f"label_values({build}, job)",
            "Job",
            "Scrape job(s) of the lunlat exporters.",
        ),
        _query_variable(
            INSTANCE,
            f"label_values({build}{{{JOB.matcher}}}, instance)",
            # "Instance", as Grafana's dashboard-linter wants it (template-instance-rule: the
            # variable's name title-cased); the description says it is the database host.
            "Instance",
            "Exporter instance(s): one per database host.",
        ),
    ]
    before: list[Var] = []
    texts = {
        "database": (
            "Database",
            "Configured database (a database target of the exporter's config) using the LUN.",
        ),
        "role": ("Role", "What the LUN holds for its database: data, log, temp, control or other."),
        "workload": ("Workload", "Workload label from the config: oltp, dss, snapshot_oltp …"),
        "lun": ("LUN", "The LUN as the storage admin knows it: multipath alias, WWID or device."),
    }
    for var in filters:
        sel = selector(source, before, **_fixed(source_filters))
        label, description = texts[var.label]
        variables.append(_query_variable(var, f"label_values({sel}, {var.label})", label, description))
        before.append(var)
    return variables


def _fixed(matchers: str) -> dict[str, str]:
    """'kind="lun", layer="db"' → {"kind": '="lun"', "layer": '="db"'} for `selector`."""
    fixed: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in matchers.split(","))):
        for op in ("=~", "!~", "!=", "="):
            if op in part:
                name, value = part.split(op, 1)
                fixed[name.strip()] = op + value.strip()
                break
    return fixed


# --- queries ------------------------------------------------------------------------------------


def query(expr: str, legend: str = "__auto", ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE).range()


def instant(expr: str, ref: str = "A", fmt: PromQueryFormat = PromQueryFormat.TABLE) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE).instant().format(fmt)


# --- goal thresholds ----------------------------------------------------------------------------


def goal_seconds(goals: Goals) -> float:
    return goals.default.goal_ms / 1000


def goal_thresholds(goals: Goals) -> dash.ThresholdsConfig:
    """Green below the default goal, red at and above it (the goal itself breaches: `>` in the
    rules means exactly-at-goal is fine, but a display threshold is inclusive; the difference is
    below any clock's resolution)."""
    return (
        dash.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps(
            [
                model.Threshold(value=None, color="green"),
                model.Threshold(value=goal_seconds(goals), color="red"),
            ]
        )
    )


def count_thresholds() -> dash.ThresholdsConfig:
    """For counts of breaching LUNs: zero is green, any is red."""
    return (
        dash.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=None, color="green"), model.Threshold(value=1, color="red")])
    )


# A count or rate with no goal: Grafana's palette blue, neither good (green) nor bad (red). Not the
# theme's "text": Grafana resolves it from the theme at draw time (grafana/grafana
# packages/grafana-data/src/themes/createVisualizationColors.ts), other renderers refuse it.
NEUTRAL = "blue"


def neutral_thresholds() -> dash.ThresholdsConfig:
    return (
        dash.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(value=None, color=NEUTRAL)])
    )


def goal_line_override(name: str = "goal") -> tuple[model.MatcherConfig, list[model.DynamicConfigValue]]:
    """A series named `name` drawn as a dashed red line without fill: each LUN's own goal."""
    return (
        model.MatcherConfig(id_val="byName", options=name),
        [
            model.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": "red"}),
            model.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
            model.DynamicConfigValue(id_val="custom.fillOpacity", value=0),
            model.DynamicConfigValue(id_val="custom.lineWidth", value=2),
        ],
    )


# --- panels -------------------------------------------------------------------------------------


def _timeseries(
    title: str,
    description: str,
    unit: str,
    targets: Sequence[prometheus.Dataquery],
    calcs: list[str],
    sort_by: str,
) -> timeseries.Panel:
    """A time series with its legend as a table on the right, sorted by `sort_by` (worst first),
    and a tooltip listing every series, largest first."""
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.RIGHT)
            .show_legend(True)
            .calcs(calcs)
            .sort_by(sort_by)
            .sort_desc(True)
        )
        .tooltip(
            common_builders.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING)
        )
        .targets(list(targets))
    )


def latency_timeseries(
    title: str, description: str, goals: Goals, targets: Sequence[prometheus.Dataquery]
) -> timeseries.Panel:
    """Latency over time with the goal as a red threshold line (and area above it)."""
    matcher, properties = goal_line_override()
    return (
        _timeseries(title, description, SECONDS, targets, ["mean", "max", "lastNotNull"], "Max")
        .thresholds(goal_thresholds(goals))
        .thresholds_style(
            common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.LINE_AND_AREA)
        )
        .with_override(matcher, properties)
    )


def rate_timeseries(
    title: str, description: str, unit: str, targets: Sequence[prometheus.Dataquery], stacked: bool = False
) -> timeseries.Panel:
    panel = _timeseries(title, description, unit, targets, ["mean", "max"], "Mean").thresholds(
        neutral_thresholds()
    )
    if stacked:
        panel = panel.stacking(
            common_builders.StackingConfig().mode(common.StackingMode.NORMAL)
        ).fill_opacity(30)
    return panel


def latency_heatmap(title: str, description: str, buckets_by_le: str) -> heatmap.Panel:
    """A latency histogram's buckets over time (`buckets_by_le`: a rate summed by le): each cell a
    bucket, its colour the operations per second that fell in it; latency on the y axis."""
    return (
        heatmap.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(PER_SECOND)
        .calculate(False)
        .y_axis(heatmap.YAxisConfig().unit(SECONDS))
        .color(
            heatmap.HeatmapColorOptions()
            .mode(heatmap_model.HeatmapColorMode.SCHEME)
            .scheme("Oranges")
            .scale(heatmap_model.HeatmapColorScale.EXPONENTIAL)
            .exponent(0.5)
            .steps(64)
        )
        .cell_values(heatmap.CellValues().unit(PER_SECOND))
        .rows_frame(heatmap.RowsHeatmapOptions().layout(common.HeatmapCellLayout.LE))
        .with_target(query(buckets_by_le, "{{le}}").format(PromQueryFormat.HEATMAP))
    )


def dashboard(uid: str, title: str, description: str) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        # Generated and provisioned: edits in the UI would be lost at the next deploy.
        .readonly()
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .link(
            dash.DashboardLink("lunlat dashboards")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(TAGS)
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )


def alerts_annotation(filters: Sequence[Var] = ()) -> dash.AnnotationQuery:
    """lunlat's alerts firing on the selected hosts, as red regions on every time series."""
    alerts = selector("ALERTS", filters, alertname='=~"LunLatency.*"', alertstate="firing")
    return (
        dash.AnnotationQuery()
        .name("lunlat alerts firing")
        .datasource(DATASOURCE)
        .enable(True)
        .icon_color("red")
        .expr(alerts)
    )
