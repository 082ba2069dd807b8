"""The overview's drift panels (docs/alerting.md, "Drift before the breach") against a week of history.

The lab's data holds minutes, not the week a baseline needs (dashboards/tests/test_queries.py leaves
these queries out and lists them). Here promtool (Prometheus 2's and 3's: alerts/tests/promtools.py)
runs the shipped rules over a week and three hours of one log LUN's 1-minute recordings at the drift
group's 5-minute steps (alerts/tests/drift.test.yml's redo_drift: 0.18 ms, then 0.6 ms from 170h)
and evaluates each committed query of the two panels,
every variable at "All" as Grafana expands it: the hourly average now, its baseline (the same average
a week before), the goal line; and no baseline before the LUN has a week of history.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from alerts.tests.promtools import PROMTOOLS, promtool, unit_test_files
from dashboards.tests import boards

OVERVIEW = "lunlat-overview.json"
TITLE = "Judged {op} latency beside its usual for the hour of the week (drift)"
RULES = boards.REPO / "alerts" / "lunlat.rules.yml"
LUN = (
    'job="lunlat",instance="db2:10431",lun="redo_drift",layer="host",'
    'database="Oracle",role="log",workload="oltp"'
)
# Grafana's own variables as a range query would set them (only their presence matters here).
BUILTINS = {"__rate_interval": "1m", "__range": "1h", "__interval": "5m", "datasource": "prometheus"}


def _queries(op: str) -> dict[str, str]:
    """refId → the panel's query, every variable expanded at "All"."""
    board = boards.load()[OVERVIEW]
    values = {v.name: v.all_value or v.current or "" for v in boards.variables(board)}
    panel = next(p for p in boards.panels(board) if p["title"] == TITLE.format(op=op))
    return {t["refId"]: boards.expand(t["expr"], {**BUILTINS, **values}) for t in panel["targets"]}


def _case(expr: str, at: str, samples: list[tuple[str, float]]) -> dict[str, object]:
    return {
        "expr": expr,
        "eval_time": at,
        "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
    }


@pytest.mark.parametrize("major", PROMTOOLS)
def test_the_drift_panels_draw_the_hourly_average_beside_last_weeks(tmp_path: Path, major: str) -> None:
    """On Prometheus 2's promtool and 3's: the baseline is read `offset 1w` from a record made
    every 5 minutes, which the left-open lookback of 3.x could miss at the edge (alerts/tests/promtools.py)."""
    tool = promtool(major)
    write, read = _queries("write"), _queries("read")
    assert sorted(write) == ["A", "B", "C"]
    labels = f'{LUN},op="write",judged="all"'
    now = f"lunlat:judged_write_latency_seconds:avg1h{{{labels}}}"
    cases = [
        _case(write["A"], "171h30m", [(now, 0.0006)]),
        _case(write["B"], "171h30m", [(f"{{{labels}}}", 0.00018)]),
        _case(write["C"], "171h30m", [("{}", 0.001)]),
        # in the LUN's first week: the hourly average, no baseline
        _case(write["A"], "30h", [(now, 0.00018)]),
        _case(write["B"], "30h", []),
        # no judged reads: nothing drawn for them
        _case(read["A"], "171h30m", []),
        _case(read["B"], "171h30m", []),
    ]
    test = {
        "rule_files": [RULES.name],
        "evaluation_interval": "5m",
        "tests": [
            {
                "interval": "5m",
                "input_series": [
                    {"series": f'lunlat:iops:rate1m{{{LUN},op="write"}}', "values": "200x2075"},
                    # the LUN as group lunlat-goal records it from the counters, which the goal reads
                    {"series": f"lunlat:lun_layer:info{{{LUN}}}", "values": "1x2075"},
                    {
                        "series": f"lunlat:write_latency_seconds:avg1m{{{LUN}}}",
                        "values": "0.00018x2039 0.0006x35",
                    },
                ],
                "promql_expr_test": cases,
            }
        ],
    }
    shutil.copy(RULES, tmp_path)
    # JSON is YAML: promtool reads the test file as YAML.
    (tmp_path / "drift_panel.test.yml").write_text(json.dumps(test), encoding="utf-8")
    (file,) = unit_test_files(major, [tmp_path / "drift_panel.test.yml"], tmp_path)
    result = subprocess.run(
        [tool, "test", "rules", str(file)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
