"""Reference tables: the storage vendor's reference-architecture tables, live, for any time range.

The reference (`lunlat's reference.csv`: its Tables 12-17 and their source) reports one average per
workload x database x data/log LUNs, separately for reads and writes, per test phase. Selecting a phase's time range here
gives the same table from the host's counters: Δ time / Δ operations over the whole range, weighted
by operations like the reference's averages (not an average of per-minute averages).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import table
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from lunlat import contract
from lunlat.goals import Goals
from lunlat.promql import averages
from lunlat_dashboards import panels as p

UID = "lunlat-reference-tables"
# The reference's columns: data LUNs and log LUNs.
ROLES = '=~"data|log"'
BY = averages.ROLE_LABELS
ROW_LABEL = "row"
ROW_TITLE = "Workload · database"
# The selected range, whole: the reference reports one number per phase, not a time series.
RANGE = "$__range"


def average_latency(op: str) -> str:
    """The table's query: Δ time / Δ operations per workload x database x role over the range
    (lunlat.promql.averages, shared with `lunlat report`), with a `row` label "workload · database" to pivot on."""
    info = p.selector(contract.LUN_INFO.name, (p.DATABASE, p.WORKLOAD), kind="lun", role=ROLES)
    ratio = averages.average_latency(op, p.selector, info, RANGE, BY)
    return f'label_join(\n{ratio},\n"{ROW_LABEL}", " · ", "workload", "database"\n)'


def _table(op: str, goals: Goals) -> table.Panel:
    return (
        table.Panel()
        .title(f"Average {op} latency: data and log LUNs")
        .description(
            f"The reference architecture's {op} table for the selected time range: one row per workload and "
            f"database, one column for its data LUNs and one for its log LUNs, each cell the average {op} "
            "latency over the whole range (Δ time / Δ operations of the LUNs' kernel counters, weighted by "
            f"operations as the reference's averages are). Cells at or above the {goals.default.goal_ms:g} ms "
            "goal are red. Select one phase's time range (OLTP alone, with DSS, with snapshots) to compare "
            "with the reference's tables; a red cell names the database and LUN role to look at in the "
            "overview. Empty: no I/O of that role in the range."
        )
        .datasource(p.DATASOURCE)
        .unit(p.SECONDS)
        .thresholds(p.goal_thresholds(goals))
        .cell_options(
            common.TableColoredBackgroundCellOptions(mode=common.TableCellBackgroundDisplayMode.BASIC)
        )
        .with_target(p.instant(average_latency(op)))
        # One row per workload · database, one column per role: the reference's layout.
        .with_transformation(
            model.DataTransformerConfig(
                id_val="groupingToMatrix",
                options={
                    "columnField": "role",
                    "rowField": ROW_LABEL,
                    "valueField": "Value",
                    "emptyValue": "null",
                },
            )
        )
        .with_transformation(
            model.DataTransformerConfig(
                id_val="organize",
                options={
                    "renameByName": {f"{ROW_LABEL}\\role": ROW_TITLE},
                    "indexByName": {},
                    "excludeByName": {},
                },
            )
        )
        .override_by_name(
            ROW_TITLE,
            [
                model.DynamicConfigValue(id_val="unit", value="string"),
                model.DynamicConfigValue(id_val="custom.cellOptions", value={"type": "auto"}),
            ],
        )
        .sort_by([common_builders.TableSortByFieldState().display_name(ROW_TITLE)])
        .span(12)
        .height(10)
    )


def build(goals: Goals) -> dash.Dashboard:
    return (
        p.dashboard(
            UID,
            "lunlat / Reference tables",
            "Average latency per workload x database x data/log LUNs over the selected range, laid out like "
            "the reference architecture's tables.",
        )
        .variables(p.standard_variables(filters=(p.DATABASE, p.WORKLOAD)))
        .with_panel(_table("read", goals))
        .with_panel(_table("write", goals))
    )
