"""What grafana's dashboard-linter checks, as functions over the dashboard JSON (the linter itself,
a Go tool, cannot be installed here), plus lunlat's own rules. Each returns the problems it found,
so a test can show both that the committed dashboards pass and that a broken one fails.

dashboard-linter rules covered: template-datasource-rule, template-job-rule, template-instance-rule,
template-on-time-change-reload-rule, panel-datasource-rule, panel-title-description-rule,
panel-units-rule, target-promql-rule, target-rate-interval-rule, target-job-rule,
target-instance-rule, target-counter-agg-rule. lunlat's: no hard-coded LUNs, every metric from the
contract or the recorded rules, latency shown in seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import promql_parser as pp
import yaml

from dashboards.tests import boards
from lunlat import contract

DATASOURCE_UID = "${datasource}"
# Sentinels Grafana's variables are replaced with before parsing (as the linter does), so the
# parsed tree tells which matcher and which range came from which variable.
RATE_INTERVAL = timedelta(seconds=4321)
RANGE = timedelta(seconds=8765)
SENTINELS = {
    "__rate_interval": f"{RATE_INTERVAL.seconds}s",
    "__range": f"{RANGE.seconds}s",
    "__interval": "1234s",
    "datasource": "prometheus",
}
RATE_FUNCTIONS = {"rate", "irate", "increase"}
# dtdurations: an age in seconds shown as a duration (Grafana's "duration (s)", id dtdurations,
# packages/grafana-data/src/valueFormats/categories.ts), apart from "s", which marks a latency panel.
UNITS = {"s", "dtdurations", "iops", "binBps", "bytes", "short", "ops", "percentunit"}
# Names that would be a hard-coded LUN or device: multipath aliases of the lab and the kernel's.
DEVICE_NAME = re.compile(r"\b(loop\d+|sd[a-z]{1,2}\d*|dm-\d+|nvme\d+n\d+|mpath[a-z]+)\b")


def sentinel(name: str) -> str:
    return f"__var_{name}__"


def expand_for_parsing(board: Mapping[str, Any], expr: str) -> str:
    values = {var.name: sentinel(var.name) for var in boards.variables(board)}
    return boards.expand(expr, {**SENTINELS, **values})


def walk(node: Any, parents: tuple[Any, ...] = ()) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """Every node of a parsed PromQL tree with its ancestors (nearest last)."""
    yield node, parents
    inner = (*parents, node)
    if isinstance(node, pp.BinaryExpr):
        yield from walk(node.lhs, inner)
        yield from walk(node.rhs, inner)
    elif isinstance(node, pp.AggregateExpr):
        yield from walk(node.expr, inner)
        if node.param is not None:
            yield from walk(node.param, inner)
    elif isinstance(node, pp.Call):
        for arg in node.args:
            yield from walk(arg, inner)
    elif isinstance(node, pp.ParenExpr | pp.UnaryExpr | pp.SubqueryExpr):
        yield from walk(node.expr, inner)
    elif isinstance(node, pp.MatrixSelector):
        yield from walk(node.vector_selector, inner)


def parse(board: Mapping[str, Any], query: boards.Query) -> tuple[Any | None, str | None]:
    """(tree, None) or (None, the parse error)."""
    try:
        return pp.parse(expand_for_parsing(board, query.expr)), None
    except (ValueError, KeyError) as exc:
        return None, f"{query}: not valid PromQL ({exc})"


def _matchers(selector: Any) -> dict[str, tuple[str, str]]:
    return {m.name: (str(m.op), m.value) for m in selector.matchers.matchers}


# --- template variables ---------------------------------------------------------------------


def variable_problems(name: str, board: Mapping[str, Any]) -> list[str]:
    problems = []
    listed = board.get("templating", {}).get("list", [])
    by_name = {v["name"]: v for v in listed}
    ds = by_name.get("datasource")
    if ds is None or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append(f"{name}: no `datasource` variable of type datasource for prometheus")
    for required in ("job", "instance"):
        var = by_name.get(required)
        if var is None or var.get("type") != "query" or not var.get("multi") or not var.get("includeAll"):
            problems.append(f"{name}: no multi-value `{required}` query variable with All")
        # template-job-rule and template-instance-rule (lint/rule_template_job.go, checkTemplate):
        # the variable's label is its name title-cased, "Job", "Instance".
        elif var.get("label") != required.title():
            problems.append(
                f"{name}: variable `{required}` is labelled {var.get('label')!r}, not {required.title()!r}"
            )
    for var in listed:
        if var.get("type") != "query":
            continue
        if var.get("datasource", {}).get("uid") != DATASOURCE_UID:
            problems.append(f"{name}: variable {var['name']} does not use ${{datasource}}")
        if var.get("refresh") != 2:
            problems.append(f"{name}: variable {var['name']} is not refreshed on time range change")
    return problems


# --- panels ---------------------------------------------------------------------------------


def panel_problems(name: str, board: Mapping[str, Any]) -> list[str]:
    problems = []
    seen_ids: set[int] = set()
    for panel in boards.panels(board):
        where = f"{name}: panel {panel.get('title')!r}"
        if panel.get("id") in seen_ids:
            problems.append(f"{where}: duplicate id {panel.get('id')}")
        seen_ids.add(panel.get("id", -1))
        if not panel.get("title"):
            problems.append(f"{where}: no title")
        description = panel.get("description") or ""
        if len(description) < 80 or description == panel.get("title"):
            problems.append(f"{where}: no description saying what it shows and what to do")
        if panel.get("datasource", {}).get("uid") != DATASOURCE_UID:
            problems.append(f"{where}: datasource is not ${{datasource}}")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"{where}: no targets")
        for target in targets:
            if target.get("datasource", {}).get("uid") != DATASOURCE_UID:
                problems.append(f"{where} {target.get('refId')}: datasource is not ${{datasource}}")
        problems += _unit_problems(where, panel)
        # A repeat direction says how a repeated panel's copies are laid out: without `repeat`
        # it is noise Grafana's dashboard-linter reports (issue 42: 50 panels).
        if "repeatDirection" in panel and not panel.get("repeat"):
            problems.append(f"{where}: repeatDirection without repeat")
        pos = panel.get("gridPos", {})
        if pos.get("x", 0) + pos.get("w", 0) > 24:
            problems.append(f"{where}: wider than the grid")
    for annotation in board.get("annotations", {}).get("list", []):
        if annotation.get("datasource", {}).get("uid") != DATASOURCE_UID:
            problems.append(
                f"{name}: annotation {annotation.get('name')!r} datasource is not ${{datasource}}"
            )
    return problems


def _unit_problems(where: str, panel: Mapping[str, Any]) -> list[str]:
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if unit not in UNITS:
        return [f"{where}: unit {unit!r} is not one of {sorted(UNITS)}"]
    # A heatmap's values are counts per bucket; its latency is the y axis.
    shown = panel.get("options", {}).get("yAxis", {}).get("unit") if panel.get("type") == "heatmap" else unit
    if _shows_latency(panel) and shown != "s":
        return [f"{where}: latency shown in {shown!r}, not seconds (Grafana scales s to ms/µs)"]
    return []


_LATENCY_NAMES = re.compile(r"latency_seconds|_duration_seconds|goal_seconds")
# Summed time counters are a latency once divided by their operations; alone, their rate is time
# spent per second (Oracle's batched wait events), a count of waiters, not a latency.
_TIME_COUNTERS = re.compile(r"_time_seconds_total|_stall_seconds_total")
_HISTOGRAM_COUNT = re.compile(r"\b\w*_seconds_count\b")
_COUNT_OF_SERIES = re.compile(r"[(\s]*count\s*\(")


def _shows_latency(panel: Mapping[str, Any]) -> bool:
    """A panel whose first query is about time per I/O (a latency, a stall, a wait, a histogram)."""
    targets = panel.get("targets", [])
    if not targets or panel.get("type") == "xychart":
        return False
    # A latency histogram's _count alone is a count of I/Os (IOPS by size class), not a latency; a
    # count() of series is a count of LUNs, whatever latency selected them.
    expr = _HISTOGRAM_COUNT.sub("", targets[0].get("expr", ""))
    if _COUNT_OF_SERIES.match(expr):
        return False
    # A share drawn as a percentage (time over time, or I/Os in flight over a queue limit: the overview's
    # why row) is a ratio of two measures, not a latency, whatever time it divides.
    if panel.get("fieldConfig", {}).get("defaults", {}).get("unit") == "percentunit" and "/" in expr:
        return False
    return bool(_LATENCY_NAMES.search(expr)) or (bool(_TIME_COUNTERS.search(expr)) and "/" in expr)


# --- queries --------------------------------------------------------------------------------


def known_metrics(rules_text: str) -> set[str]:
    """Metric names a dashboard may read: the contract's (histogram series included), the recorded
    rules' and Prometheus' ALERTS."""
    names = {"ALERTS"}
    for spec in contract.ALL_METRICS:
        names.add(spec.name)
        if spec.type == "histogram":
            names |= {f"{spec.name}_bucket", f"{spec.name}_sum", f"{spec.name}_count"}
    for group in yaml.safe_load(rules_text)["groups"]:
        names |= {rule["record"] for rule in group["rules"] if "record" in rule}
    return names


def _required_filters(board: Mapping[str, Any], query: boards.Query) -> tuple[str, ...]:
    """job and instance, except in a variable's own query: job's lists jobs, instance's is
    filtered by job only."""
    if not query.where.startswith("variable "):
        return ("job", "instance")
    order = [v.name for v in boards.variables(board)]
    own = order.index(query.where.removeprefix("variable "))
    return tuple(v for v in ("job", "instance") if v in order[:own])


def _selector_problems(
    query: boards.Query, node: Any, parents: tuple[Any, ...], required: tuple[str, ...], metrics: set[str]
) -> list[str]:
    problems = []
    matchers = _matchers(node)
    for label in required:
        if matchers.get(label, ("", ""))[1] != sentinel(label):
            problems.append(f'{query}: {node.name} is not filtered by {label}=~"${label}"')
    lun = matchers.get("lun")
    if lun is not None and lun[1] != sentinel("lun"):
        problems.append(f"{query}: hard-coded lun matcher {lun[1]!r}")
    if node.name not in metrics:
        problems.append(f"{query}: {node.name} is neither in the contract nor a recorded rule")
    counter = (node.name or "").endswith(("_total", "_bucket"))
    in_rate = any(isinstance(p, pp.Call) and p.func.name in RATE_FUNCTIONS for p in parents)
    if counter and not in_rate:
        problems.append(f"{query}: counter {node.name} used without rate()/increase()")
    return problems


def _range_problem(query: boards.Query, node: Any, parents: tuple[Any, ...]) -> str | None:
    # A rate spans $__rate_interval; a table over the selected range (instant) may take the whole
    # $__range; *_over_time of a recorded series spans the range shown.
    in_rate = bool(parents) and isinstance(parents[-1], pp.Call) and parents[-1].func.name in RATE_FUNCTIONS
    allowed = {RANGE}
    if in_rate:
        allowed = {RATE_INTERVAL, RANGE} if query.instant else {RATE_INTERVAL}
    if node.range in allowed:
        return None
    want = " or ".join(sorted("$__rate_interval" if r == RATE_INTERVAL else "$__range" for r in allowed))
    return f"{query}: range [{node.range}] should be {want}"


def query_problems(name: str, board: Mapping[str, Any], metrics: set[str]) -> list[str]:
    problems = []
    for query in boards.queries(name, board):
        tree, error = parse(board, query)
        if tree is None:
            problems.append(str(error))
            continue
        required = _required_filters(board, query)
        for node, parents in walk(tree):
            if isinstance(node, pp.VectorSelector):
                problems += _selector_problems(query, node, parents, required, metrics)
            elif isinstance(node, pp.MatrixSelector):
                problem = _range_problem(query, node, parents)
                if problem:
                    problems.append(problem)
        device = DEVICE_NAME.search(query.expr)
        if device:
            problems.append(f"{query}: names a device ({device.group(0)})")
    return problems


def hard_coded_names(name: str, board: Mapping[str, Any], lun_names: set[str]) -> list[str]:
    """Any configured LUN name or device name anywhere in the dashboard's text."""
    text = repr(board)
    found = sorted({n for n in lun_names if re.search(rf"\b{re.escape(n)}\b", text)})
    return [f"{name}: hard-coded LUN name(s) {found}"] if found else []
