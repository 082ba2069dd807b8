"""The generated rules and the committed dashboards read for what Prometheus 3 changed in PromQL and
in what it stores (its docs/migration.md at the module version the tests build, v0.316.0; the
published guide: https://prometheus.io/docs/prometheus/latest/migration/). Each change, and what
was checked for it:

- `holt_winters` renamed `double_exponential_smoothing` and put behind a feature flag: no rule or
  query calls either (test below).
- Range selectors and the lookback are left-open: a subquery whose range is one step (`[1m:1m]`)
  keeps one point, too few for a rate. Every subquery here spans at least two of its steps (test
  below). The rules' own windows ([1m] at 15 s scrapes) keep 4 samples instead of 4 or 5: their
  ratios (sum_over_time of bad over all, count_over_time against count_over_time) lose a sample
  from both sides alike, and alerts/tests (promtool on both lines) pin their values. The drift
  rule reads a 5-minute record a week back with last_over_time[10m] rather than the 5-minute
  lookback for this reason (alerts/src/lunlat_rules/drift.py); the dashboards' drift panels read
  that record with `offset 1w` and are evaluated on a week of history by test_drift_panel.py.
- Regular expressions' `.` matches a newline: the regex matchers with a `.` (`snapshot.*` on
  `workload`, `LunLatency.*` on `alertname`, `PAGEIOLATCH_.*` on SQL Server's wait type, the
  variables' `.*`/`.+` at All) test label values that come from lunlat's config, the kernel or the
  engines' wait names; one holding a newline would match on 3.x where 2.x did not. Not tested.
- `le` and `quantile` normalised on ingestion (tests/support/prometheus3.py says how): every `le`
  or `quantile` a rule or query names is already in the spelling 3.x stores, which is also the
  exporter's (so 2.42, which stores the exporter's spelling, finds it too); the exporter's own
  bucket spellings that 3.x stores differently are listed (test below), and none is named by a rule
  or query. dashboards/tests/test_queries.py checks the same on the two real servers.
- UTF-8 metric and label names: lunlat's names are all in the legacy character set (the exporter's
  contract), and no query uses the quoted-name syntax, so nothing here depends on it.
"""

from __future__ import annotations

import re
from functools import cache

import yaml

from dashboards.tests import boards
from lunlat import contract
from lunlat.engines.registry import ENGINES
from lunlat.sources import biolatency
from tests.support.prometheus3 import stored_float_label

RULES = boards.REPO / "alerts" / "lunlat.rules.yml"
_SUBQUERY = re.compile(r"\[(\w+):(\w+)\]")
_FLOAT_LABEL = re.compile(r'\b(le|quantile)\s*(?:=~|!~|!=|=)\s*"([^"]*)"')
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


@cache
def _expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every rule, every templated annotation and every dashboard query."""
    found = []
    for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            found.append((f"rule {name}", rule["expr"]))
            found += [
                (f"rule {name} annotation {key}", text)
                for key, text in (rule.get("annotations") or {}).items()
                if "query" in text
            ]
    found += [(str(q), q.expr) for name, board in boards.load().items() for q in boards.queries(name, board)]
    return found


def _seconds(duration: str) -> float:
    parts = _DURATION.findall(duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * _SECONDS[u] for n, u in parts)


def test_the_expressions_are_read() -> None:
    where = {w.split(" ", 1)[0] for w, _ in _expressions()}
    assert {"rule"} <= where and any(w.endswith(".json:") for w in where), where


def test_no_holt_winters() -> None:
    """Renamed double_exponential_smoothing in 3.x, and experimental (migration.md)."""
    assert [w for w, e in _expressions() if re.search(r"holt_winters|double_exponential_smoothing", e)] == []


def test_every_subquery_spans_at_least_two_of_its_steps() -> None:
    """Left-open ranges: `[r:s]` keeps r/s points on 3.x (migration.md), one when r equals s."""
    subqueries = [(w, m) for w, e in _expressions() for m in _SUBQUERY.finditer(e)]
    assert subqueries, "no subquery found: the pattern or the rules changed"
    short = [(w, m[0]) for w, m in subqueries if _seconds(m[1]) < 2 * _seconds(m[2])]
    assert short == [], short


def test_every_le_and_quantile_named_is_spelled_as_both_lines_store_it() -> None:
    named = [(w, m[1], m[2]) for w, e in _expressions() for m in _FLOAT_LABEL.finditer(e)]
    assert any(label == "le" for _, label, _ in named), (
        "no le matcher found: the pattern or the rules changed"
    )
    respelled = [(w, label, value) for w, label, value in named if stored_float_label(value) != value]
    assert respelled == [], respelled


def _exporter_bucket_spellings() -> dict[str, set[str]]:
    """Histogram name → every `le` the exporter prints for it."""
    found = {f"{contract.DEVICE_IO_LATENCY.name}_bucket": {*biolatency.LE_VALUES, "+Inf"}}
    for engine in ENGINES:
        if engine.waits is not None and engine.waits.histogram is not None:
            les = {le for _, le in engine.waits.histogram_buckets}
            found[f"{engine.waits.histogram.name}_bucket"] = {*les, "+Inf"}
    return found


def test_every_bucket_is_stored_by_prometheus_3_as_the_exporter_prints_it() -> None:
    """So 2.x and 3.x store the same `le`, and no bucket series starts anew across an upgrade (Oracle's
    wait histogram printed its bounds under 100 µs as 0.000001 … 0.000064 until 2026-11-29)."""
    respelled = {
        (name, le, stored_float_label(le))
        for name, les in _exporter_bucket_spellings().items()
        for le in les
        if stored_float_label(le) != le
    }
    assert respelled == set(), respelled
    either = {spelling for _, le, new in respelled for spelling in (le, new)}
    named = [(w, m[2]) for w, e in _expressions() for m in _FLOAT_LABEL.finditer(e) if m[2] in either]
    assert named == [], named
