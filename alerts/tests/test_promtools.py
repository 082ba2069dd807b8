"""The rules each promtool unit test file is run with (promtools.rules_read_by): every rule it reads,
every rule those read in turn, and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .promtools import rule_reads, rules_read_by

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
