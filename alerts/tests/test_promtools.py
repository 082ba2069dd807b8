"""The rules each promtool unit test file is run with (promtools.rules_read_by): every rule it reads,
every rule those read in turn, and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .promtools import rule_reads, rules_fed_by, rules_read_by

RULES = Path(__file__).resolve().parents[1] / "lunlat.rules.yml"
TESTS = Path(__file__).resolve().parent


def shipped() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return groups


def names(groups: list[dict[str, Any]]) -> list[str]:
    return [rule.get("record") or rule["alert"] for group in groups for rule in group["rules"]]


def test_each_test_file_keeps_what_its_rules_read_in_their_order() -> None:
    groups = shipped()
    recorded = set(names(groups))
    for file in sorted(TESTS.glob("*.test.yml")):
        kept = rules_read_by(yaml.safe_load(file.read_text(encoding="utf-8")), groups)
        kept_names = names(kept)
        # closed: a record any kept rule reads is kept
        missing = {n for g in kept for r in g["rules"] for n in set(rule_reads(r, [])) & recorded} - set(
            kept_names
        )
        assert not missing, (file.name, missing)
        # in the shipped order, with each group's own settings (its interval)
        assert kept_names == [n for n in names(groups) if n in set(kept_names)], file.name
        settings = {(g["name"], g.get("interval")) for g in groups}
        assert {(g["name"], g.get("interval")) for g in kept} <= settings, file.name


def test_an_alert_test_keeps_its_alert_and_what_it_reads_and_drops_the_rest() -> None:
    groups = shipped()
    test = {"tests": [{"alert_rule_test": [{"alertname": "LunLatencyDrift"}]}]}
    kept = names(rules_read_by(test, groups))
    assert "LunLatencyDrift" in kept
    assert "LunLatencyLogWriteHigh" not in kept
    assert len(kept) < len(names(groups)) / 2, kept


def test_alerts_read_without_a_name_keep_every_alert() -> None:
    groups = shipped()
    every = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    test = {"tests": [{"promql_expr_test": [{"expr": 'ALERTS{alertstate="firing"}'}]}]}
    assert every <= set(names(rules_read_by(test, groups)))
    named = {"tests": [{"promql_expr_test": [{"expr": 'ALERTS{alertname="LunLatencyDrift"}'}]}]}
    assert every & set(names(rules_read_by(named, groups))) == {"LunLatencyDrift"}


def _group(*rules: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": "g", "rules": list(rules)}]


def test_rules_the_test_cannot_feed_are_dropped_and_the_rest_kept() -> None:
    """rules_fed_by: a rule is kept when it reads an input series or a kept rule's result (however
    far down the chain), or gives a result from nothing; the rest select nothing and are dropped."""
    groups = _group(
        {"record": "b", "expr": "sum(a)"},  # reads an input: kept
        {"record": "c", "expr": "rate(b[1m])"},  # reads b: kept
        {"record": "orphan", "expr": "sum(never_fed)"},  # reads nothing fed: dropped
        {"record": "orphan_child", "expr": "orphan * 2"},  # reads only the dropped one: dropped
        {"alert": "Missing", "expr": "absent(never_fed)"},  # from nothing: kept
        {"alert": "Late", "expr": "never_fed > time()"},  # a scalar function: kept (conservative)
        {"record": "constant", "expr": "1"},  # a scalar result: one sample, kept
        {"record": "hour_now", "expr": "hour()"},  # of vector(time()) by default: kept
        {"alert": "Named", "expr": "never_fed > 1"},  # named by an alert test: kept
        {"record": "firing", "expr": 'count(ALERTS{alertstate="firing"})'},  # alerts are kept: kept
    )
    test = {
        "tests": [
            {
                "input_series": [{"series": 'a{lun="x"}', "values": "1x5"}],
                "alert_rule_test": [{"alertname": "Named"}],
            }
        ]
    }
    kept = names(rules_fed_by(test, groups))
    assert kept == ["b", "c", "Missing", "Late", "constant", "hour_now", "Named", "firing"]
    # A series named by `__name__` feeds its rules too; with no input at all only what gives a
    # result from nothing is left.
    by_name = {"tests": [{"input_series": [{"series": '{__name__="never_fed", lun="x"}', "values": "1"}]}]}
    assert "orphan_child" in names(rules_fed_by(by_name, groups))
    assert names(rules_fed_by({"tests": []}, groups)) == ["Missing", "Late", "constant", "hour_now", "firing"]


def test_the_drift_test_runs_without_the_groups_it_never_feeds() -> None:
    test = yaml.safe_load((TESTS / "drift.test.yml").read_text(encoding="utf-8"))
    kept = names(rules_read_by(test, rules_fed_by(test, shipped())))
    assert "LunLatencyDrift" in kept
    # It feeds recorded series, not the exporter's: the rules over the raw counters, the per-I/O
    # histogram and the path counts go.
    assert "lunlat:iops:rate1m" not in kept
    assert "lunlat:lun_paths:max1h" not in kept
    assert "LunLatencyExporterDown" not in kept
    # What it feeds stays: the SLO over the judged minutes, which its fed latencies make.
    assert "lunlat:slo_error:ratio3d" in kept
