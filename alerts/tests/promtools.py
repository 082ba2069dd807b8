"""The promtool binaries the rule tests run under: Debian's (Prometheus 2.x) and Prometheus 3's.

Prometheus 3 is built from source (`go install github.com/prometheus/prometheus/cmd/promtool@…`, the
module's tag of the 3.x release line, tests/support/prometheus_server.py): `.ci/run` installs it into
PROMETHEUS3_DIR, or LUNLAT_PROMTOOL3 names one. Where neither exists, the Prometheus 3 cases skip, saying so.

The unit test files are the same for both. Two differences of Prometheus 3 they meet, each from its
docs (docs/migration.md and docs/configuration/unit_testing_rules.md of the v0.316.0 module):

- Range selectors are "left-open and right-closed": a 1-minute rate over 15 s scrapes sees 4 samples,
  not 5, and its float arithmetic differs from 2.x's in the last bit (99.99999999999999 for 100).
  Prometheus 3's promtool offers `fuzzy_compare: true` for that ("will very slightly weaken floating
  point comparisons": one ULP, cmd/promtool/unittest.go); Prometheus 2.42's refuses the field (its
  test files are read strictly), so only the copies made for Prometheus 3 get it.
- What a window counts can move by one sample at its left edge: where a test depends on that, its
  comparison says so (alerts/tests/slo.test.yml, the short breach).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prometheus_server import PROMETHEUS3_DIR, PROMETHEUS3_MODULE_VERSION

PROMTOOLS = (
    pytest.param("2", id="prometheus2"),
    pytest.param("3", id="prometheus3", marks=pytest.mark.prometheus3),
)


def promtool(major: str) -> str:
    """The promtool of Prometheus `major` ("2": Debian's on PATH, "3": the build), or skip."""
    if major == "2":
        path = shutil.which("promtool")
        if path is None:
            pytest.skip("promtool not installed (Debian: prometheus)")
        return path
    named = os.environ.get("LUNLAT_PROMTOOL3")
    built = Path(named) if named else PROMETHEUS3_DIR / "promtool"
    if not built.is_file():
        pytest.skip(
            f"no Prometheus 3 promtool at {built}: .ci/run builds it "
            f"(go install github.com/prometheus/prometheus/cmd/promtool@{PROMETHEUS3_MODULE_VERSION}), "
            "or set LUNLAT_PROMTOOL3"
        )
    return str(built)


def unit_test_files(major: str, files: list[Path], into: Path) -> list[Path]:
    """The unit test files as `major`'s promtool reads them: copies in `into`, each with its rule
    files replaced by one holding only the rules it reads (`rules_read_by`), absolute (the copies
    live elsewhere), evaluated in the file's group order unless the test says otherwise; for 3, with
    `fuzzy_compare: true` too."""
    copies = []
    for index, file in enumerate(files):
        test = yaml.safe_load(file.read_text(encoding="utf-8"))
        groups = [
            group
            for rule_file in test["rule_files"]
            for group in yaml.safe_load((file.parent / rule_file).read_text(encoding="utf-8"))["groups"]
        ]
        rules = into / f"{index:02d}-{file.stem}.rules.yml"
        kept = rules_read_by(test, rules_fed_by(test, groups))
        rules.write_text(yaml.safe_dump({"groups": kept}, sort_keys=False), encoding="utf-8")
        test["rule_files"] = [str(rules.resolve())]
        # promtool evaluates a step's groups in a map's order, sorted only by group_eval_order
        # (cmd/promtool/unittest.go, orderedGroups, v0.316.0): the file's order, so lunlat-goal's
        # goal is there before the judgement reads it, as a running Prometheus has it from a minute
        # before (lunlat_rules.rules).
        test.setdefault("group_eval_order", [group["name"] for group in kept])
        if major == "3":
            test["fuzzy_compare"] = True
        copy = into / f"{index:02d}-{file.name}"
        copy.write_text(yaml.safe_dump(test, sort_keys=False, allow_unicode=True), encoding="utf-8")
        copies.append(copy)
    return copies


# A PromQL name: a metric's, a label's or a function's. Every one an expression holds is taken as a
# series it may read (a superset: a label named like a record only keeps one rule too many).
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_ALERT_NAMED = re.compile(r'alertname\s*=\s*"([^"]+)"')


# What gives a result from no input at all: absent and absent_over_time a 1-valued series when
# their argument is empty, vector a series from a scalar (promql/functions.go), the date functions
# (hour() and its kin), whose argument defaults to vector(time()) (docs/querying/functions.md), and
# a scalar expression (time(), scalar(), pi(), a number) one sample, as a rule's scalar result
# becomes one (rules/manager.go, EngineQueryFunc). A rule holding one is kept however little the
# test feeds.
_FROM_NOTHING = re.compile(
    r"\b(absent|absent_over_time|vector|time|scalar|pi|day_of_month|day_of_week|day_of_year"
    r"|days_in_month|hour|minute|month|year)\s*\("
)


def rules_fed_by(test: dict[str, Any], groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules of `groups` that can produce a result from what `test` feeds: a rule reading
    only series that are neither an input series of the test file nor produced by such a rule
    selects nothing, and an expression over empty selections is empty (PromQL: every operator and
    function maps no series to none), unless it holds one of _FROM_NOTHING. An alert the test
    names is kept whatever it reads (its empty result is what the test may check). Groups left
    empty are dropped.

    Why: the drift test feeds two recorded series of a week, and reading ALERTS it reads every
    alert, so every group was evaluated at each of its 2,600 steps, the SLO windows of days with
    them, for series that were never there (52 s of Debian promtool's 85 s over all the files)."""
    fed = {_series_name(s["series"]) for case in test.get("tests", []) for s in case.get("input_series", [])}
    named = {
        check["alertname"] for case in test.get("tests", []) for check in case.get("alert_rule_test", [])
    }
    alerts = [name for group in groups for rule in group["rules"] if (name := rule.get("alert"))]
    live: set[int] = set()
    grew = True
    while grew:  # until no rule joins: a rule fed by another's result joins after it
        grew = False
        for rule in (rule for group in groups for rule in group["rules"] if id(rule) not in live):
            reads = rule_reads(rule, alerts)
            if (
                rule.get("alert") in named
                or _FROM_NOTHING.search(rule["expr"])
                or not reads
                or not fed.isdisjoint(reads)
            ):
                live.add(id(rule))
                fed.add(rule.get("record") or rule["alert"])
                if "alert" in rule:
                    fed.update(("ALERTS", "ALERTS_FOR_STATE"))
                grew = True
    trimmed = [{**group, "rules": [r for r in group["rules"] if id(r) in live]} for group in groups]
    return [group for group in trimmed if group["rules"]]


def _series_name(series: str) -> str:
    """The metric name of an input series in promtool's notation: `name{labels}` or `{__name__="name", ...}`."""
    if found := re.search(r'__name__\s*=\s*"([^"]+)"', series):
        return found[1]
    return series.split("{", 1)[0].strip()


def rules_read_by(test: dict[str, Any], groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules of `groups` whose results the unit test file `test` reads, with every rule they
    read in turn, in their groups and order (what a rule reads: its expression and its labels' and annotations' templates);
    groups left empty are dropped.

    Why: promtool evaluates every rule of its rule files at every step of a test, and lunlat's tests
    read a few of them each; the rules they do not read cost the CI's longest tests most of their time
    and change nothing they check. A rule's result depends only on the series it reads and on its
    place in its group (a record read later in the same group is this evaluation's), both kept."""
    producers: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        for rule in group["rules"]:
            producers.setdefault(rule.get("record") or rule["alert"], []).append(rule)
    alerts = [name for group in groups for rule in group["rules"] if (name := rule.get("alert"))]
    wanted: list[str] = []
    for case in test.get("tests", []):
        wanted += [check["alertname"] for check in case.get("alert_rule_test", [])]
        for check in case.get("promql_expr_test", []):
            wanted += _read(check["expr"], alerts)
    kept: set[int] = set()
    while wanted:
        for rule in producers.get(wanted.pop(), []):
            if id(rule) not in kept:
                kept.add(id(rule))
                wanted += rule_reads(rule, alerts)
    trimmed = [{**group, "rules": [r for r in group["rules"] if id(r) in kept]} for group in groups]
    return [group for group in trimmed if group["rules"]]


def rule_reads(rule: dict[str, Any], alerts: list[str]) -> list[str]:
    """The names `rule` may read: its expression's, and its labels' and annotations' (their
    templates query series, `query "…"`)."""
    texts = [rule["expr"], *rule.get("labels", {}).values(), *rule.get("annotations", {}).values()]
    return _read(" ".join(map(str, texts)), alerts)


def _read(expr: str, alerts: list[str]) -> list[str]:
    """The names `expr` may read; through ALERTS (or ALERTS_FOR_STATE), the alerts it names by
    equality, or every alert."""
    names = _NAME.findall(expr)
    if "ALERTS" in names or "ALERTS_FOR_STATE" in names:
        names += _ALERT_NAMED.findall(expr) or alerts
    return names
