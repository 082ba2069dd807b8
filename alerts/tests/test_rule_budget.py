"""What the rules record per LUN stays within budget: the judgement by size, kind and I/O replaced
what it outgrew instead of stacking on it. Issue 41 measured 32 recorded series per LUN (host layer,
no per-I/O histogram) with a real Prometheus; the budget is now what the rules record (below), so a
record added per LUN fails here until it replaces one or the budget is raised on purpose.
Per database and role the SLO records its sums, coverage and one ratio per burn window, shared by
the role's LUNs. Counted by promtool on one LUN with reads, writes and, optionally, the histogram:
15 per LUN without the histogram, 25 with it (2026-11-30; 18 without it before a LUN's judged
minutes went straight into the SLO's sums instead of four records per LUN), of which the drift
group's window averages (docs/alerting.md, "Drift before the breach") are 2, one per op, every 5
minutes, and the goal group's LUN (recorded.LUN_LAYER), the goal and the idle guard 3, every minute
(the LUN was added on purpose: with it the goal is built once a minute from the raw series instead
of every 15 s from the IOPS, issue 41). The series are what the exporter publishes today; an
exporter from before the device series carried their roles adds its LUN's
recorded.UNLABELLED_LUNS (16 and 26)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.engines.mssql import metrics as mssql
from lunlat.engines.oracle import metrics as oracle
from lunlat.exposition import format_value
from lunlat.goals import load_goals
from lunlat.ground import MetricSpec
from lunlat.promql import recorded

ALERTS = Path(__file__).resolve().parents[1]
# Recorded series per LUN, without and with the per-I/O histogram: at most what they are today.
PER_LUN_BUDGET = {False: 15, True: 25}
LUN = 'job="lunlat",instance="h:1",lun="x",device="sdb"'
# The LUN's kind and roles, on lunlat_lun_info and, as the exporter publishes them, on its device series.
ROLES = 'kind="lun",database="D",role="data",workload="oltp"'


def _series(histogram: bool) -> str:
    lines = [f"lunlat_lun_info{{{LUN},{ROLES}}}|1x40"]
    for op in recorded.OPS:
        lines += [
            f"lunlat_device_{op}s_completed_total{{{LUN},{ROLES}}}|0+1500x40",
            f"lunlat_device_{op}_time_seconds_total{{{LUN},{ROLES}}}|0+0.6x40",
            f"lunlat_device_{op}_bytes_total{{{LUN},{ROLES}}}|0+12288000x40",
        ]
        if histogram:
            name, labels = contract.DEVICE_IO_LATENCY.name, f'{LUN},{ROLES},op="{op}",size="small"'
            for bound in (*contract.BIO_BUCKETS, float("inf")):
                le = "+Inf" if bound == float("inf") else format_value(bound)
                lines.append(f'{name}_bucket{{{labels},le="{le}"}}|0+{1500 if bound >= 0.0005 else 0}x40')
            lines += [f"{name}_count{{{labels}}}|0+1500x40", f"{name}_sum{{{labels}}}|0+0.6x40"]
    return "\n".join(
        f"      - series: '{series}'\n        values: '{values}'"
        for series, values in (line.split("|") for line in lines)
    )


def _promtool_counts(tmp_path: Path, series: str, counts: list[tuple[str, int]]) -> None:
    """promtool's unit test of the generated rules over `series` (input_series lines): each PromQL
    expression of `counts` at 9 minutes equals its count. Skips without promtool."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian: prometheus)")
    exprs = "".join(
        f"      - expr: {expr}\n        eval_time: 9m\n        exp_samples: [{{labels: '{{}}', value: {count}}}]\n"
        for expr, count in counts
    )
    shutil.copy(ALERTS / "lunlat.rules.yml", tmp_path)
    (tmp_path / "budget.test.yml").write_text(
        "rule_files: [lunlat.rules.yml]\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n"
        f"    input_series:\n{series}\n    promql_expr_test:\n{exprs}",
        encoding="utf-8",
    )
    result = subprocess.run(
        [promtool, "test", "rules", "budget.test.yml"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("histogram", [False, True], ids=["diskstats", "histogram"])
def test_recorded_series_per_lun_and_per_database_role_stay_within_budget(
    tmp_path: Path, histogram: bool
) -> None:
    goals = load_goals(ALERTS / "goals.yaml")
    windows = goals.slo.windows()
    drift = recorded.JUDGED_LATENCY.format(op=".+", window=goals.drift.window)
    # Per database and role and op: two sums, the coverage timestamp, one ratio per window.
    per_role = len(recorded.OPS) * (3 + len(windows))
    _promtool_counts(
        tmp_path,
        _series(histogram),
        [
            (f'count({{__name__=~"lunlat:.+", lun="x"}}) <= bool {PER_LUN_BUDGET[histogram]}', 1),
            # the drift's window average: one per op
            (f'count({{__name__=~"{drift}", lun="x"}})', len(recorded.OPS)),
            # every series recorded for the LUN's database and role, not per LUN: the SLO's
            ('count({__name__=~"lunlat:.+", lun=""})', per_role),
            ('count({__name__=~"lunlat:.+", lun="", database="D", role="data"})', per_role),
        ],
    )


# The database layer, per (LUN, database, role): what docs/deploy/fleet.md's "Series and bytes" table
# says, held here as the host layer's is. One data file on the LUN with reads and writes, each engine's
# counters as its metrics module names and labels them.
DB_LABEL_VALUES = {"database": "D", "workload": "oltp", "db": "P", "db_instance": "I", "file": "/f"}
DB_LAYER_COUNTERS: dict[str, tuple[MetricSpec, ...]] = {
    "oracle": (
        oracle.ORACLE_FILE_READS,
        oracle.ORACLE_FILE_WRITES,
        oracle.ORACLE_FILE_READ_TIME,
        oracle.ORACLE_FILE_WRITE_TIME,
        oracle.ORACLE_FILE_SYNC_READS,
        oracle.ORACLE_FILE_SYNC_READ_TIME,
    ),
    "mssql": (
        mssql.MSSQL_FILE_READS,
        mssql.MSSQL_FILE_WRITES,
        mssql.MSSQL_FILE_READ_STALL,
        mssql.MSSQL_FILE_WRITE_STALL,
        mssql.MSSQL_FILE_READ_BYTES,
        mssql.MSSQL_FILE_WRITE_BYTES,
    ),
}
PER_DB_LUN_BUDGET = {"oracle": 13, "mssql": 15}


def _db_series(spec: MetricSpec) -> str:
    values = {**DB_LABEL_VALUES, "role": "data", "lun": "x"}
    labels = ",".join(f'{label}="{values[label]}"' for label in spec.labels)
    step = 0.6 if spec.name.endswith("_seconds_total") else 1500
    return f"      - series: '{spec.name}{{job=\"lunlat\",instance=\"h:1\",{labels}}}'\n        values: '0+{step}x40'"


@pytest.mark.parametrize("engine", sorted(PER_DB_LUN_BUDGET))
def test_recorded_series_per_lun_of_the_database_layer_stay_within_budget(
    tmp_path: Path, engine: str
) -> None:
    _promtool_counts(
        tmp_path,
        "\n".join(map(_db_series, DB_LAYER_COUNTERS[engine])),
        [('count({__name__=~"lunlat:.+", lun="x", layer="db"})', PER_DB_LUN_BUDGET[engine])],
    )
