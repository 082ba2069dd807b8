"""The quantiles tail.test.yml checks are the dashboards' own query: no quantile is recorded (issue 41,
lunlat.promql.layers.io_latency_quantile), so promtool runs the expression the overview's p50/p99
panels and the tail alert's p99 are made of, and this test holds the YAML's copies to it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from lunlat.promql.layers import LUN_LABELS, io_latency_quantile

TAIL = Path(__file__).resolve().parent / "tail.test.yml"


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_quantiles_promtool_checks_are_the_dashboards_query() -> None:
    tests = yaml.safe_load(TAIL.read_text(encoding="utf-8"))["tests"]
    exprs = [
        c["expr"] for t in tests for c in t.get("promql_expr_test", []) if "histogram_quantile" in c["expr"]
    ]
    found = []
    for expr in exprs:
        for q, lun in re.findall(r'histogram_quantile\(([0-9.]+),.*?lun="([^"]+)"', expr):
            want = _flat(
                io_latency_quantile(q, f'lun="{lun}", op="read"', f'lun="{lun}"', "1m", by=LUN_LABELS)
            )
            assert want in _flat(expr), (q, lun, expr)
            found.append((q, lun))
    assert sorted(found) == sorted(
        [
            ("0.99", "sql1_data"),
            ("0.5", "sql1_data"),
            ("0.5", "idle"),
            ("0.5", "stopped"),
            ("0.5", "stopped"),
            ("0.99", "stopped"),
        ]
    )
