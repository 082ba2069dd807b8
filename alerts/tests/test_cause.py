"""Every breach alert says why (alerts/src/lunlat_rules/cause.py): its `neighbours` and `cause`
annotations, in the committed rules and for every host layer a goals file can choose; the thresholds
the verdict uses are the ones docs/alerting.md states; the runbook reads both annotations. What the
annotations say for each cause is checked by promtool (alerts/tests/cause.test.yml)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from lunlat.goals import load_goals
from lunlat_rules import cause
from lunlat_rules.breach import ROLE_GROUPS
from lunlat_rules.rules import render

ALERTS = Path(__file__).resolve().parents[1]
REPO = ALERTS.parent
BREACH = re.compile(r"LunLatency(Data|Log|)(Read|Write)High")
HOST_LAYERS = ALERTS / "tests" / "host_layers"


def _breach_alerts(rules_text: str) -> list[dict[str, Any]]:
    groups = yaml.safe_load(rules_text)["groups"]
    return [rule for group in groups for rule in group["rules"] if BREACH.fullmatch(rule.get("alert", ""))]


@pytest.mark.parametrize(
    "goals_file",
    [ALERTS / "goals.yaml", *sorted(HOST_LAYERS.glob("*.goals.yaml"))],
    ids=lambda path: path.name,
)
def test_every_breach_alert_names_its_neighbours_and_its_cause(goals_file: Path) -> None:
    alerts = _breach_alerts(render(load_goals(goals_file)))
    assert len(alerts) == len(ROLE_GROUPS) * 2, "a breach alert per role group and op"
    for alert in alerts:
        annotations = alert["annotations"]
        op = alert["labels"]["op"]
        neighbours, verdict = annotations["neighbours"], annotations["cause"]
        # Neighbours: the LUN's array from lunlat_lun_info, the other LUNs on it by both measures.
        assert 'label "array"' in neighbours and "array=%q" in neighbours, alert["alert"]
        assert "lunlat:throughput_bytes:rate1m" in neighbours and "lunlat:iops:rate1m" in neighbours
        assert f"topk({cause.NEIGHBOURS}," in neighbours
        assert "cannot be named" in neighbours, "an unknown array says so"
        # The cause: the op's own measures, each verdict reachable.
        assert f'op="{op}"' in verdict and f"{op} latency" in verdict, alert["alert"]
        for words in (
            "Host queue:",
            "The array:",
            "Between the host and the array",
            "The device:",
            "The database layer alone",
        ):
            assert words in verdict, (alert["alert"], words)


def test_the_committed_rules_carry_them() -> None:
    alerts = _breach_alerts((ALERTS / "lunlat.rules.yml").read_text(encoding="utf-8"))
    assert {a["alert"] for a in alerts} == {
        f"LunLatency{role}{op.capitalize()}High" for role, _, _ in ROLE_GROUPS for op in ("read", "write")
    }
    assert all({"neighbours", "cause"} <= set(a["annotations"]) for a in alerts)


def test_without_a_weighted_time_the_cause_never_reads_one() -> None:
    """windows_exporter counts no weighted time (layers.WINDOWS_LOGICAL_DISK): no in-flight verdict."""
    goals = load_goals(HOST_LAYERS / "windows_exporter.goals.yaml")
    for alert in _breach_alerts(render(goals)):
        verdict = alert["annotations"]["cause"]
        assert "weighted" not in verdict, "no query of a weighted time"
        assert "{{ $inflight := -1.0 }}{{ $limit := -1.0 }}" in verdict, "in flight: absent, not queried"


def test_the_thresholds_are_the_ones_the_docs_state() -> None:
    text = " ".join((REPO / "docs" / "alerting.md").read_text(encoding="utf-8").split())
    section = text.split("## Why: the cause in the alert", 1)[1].split("\n## ", 1)[0]
    for value in (cause.QUEUE_SHARE, cause.IN_FLIGHT_OF_LIMIT, cause.ARRAY_SHARE):
        assert f"{value * 100:.0f} %" in section, value
    assert f"the {cause.NEIGHBOURS} busiest other LUNs" in section


def test_the_runbook_reads_both_annotations() -> None:
    runbook = (ALERTS / "runbooks" / "latency-high.md").read_text(encoding="utf-8")
    for name in ("neighbours", "cause"):
        assert f"`{name}`" in runbook, name
    for words in (
        "Host queue",
        "The array",
        "Between the host and the array",
        "The device",
        "The database layer alone",
    ):
        assert words in runbook, words


def test_a_percent_sign_in_promql_stays_a_literal_one() -> None:
    """A query is a printf format (another exporter's selector or regex goes in as is): its literal %
    is doubled, the placeholders become verbs filled from their template variables."""
    assert cause.query('up{job=~"a%b", $LUN} and x{array=$ARRAY}') == (
        'printf `up{job=~"a%%b", %s} and x{array=%q}` $lun $array | query'
    )


def test_a_backtick_is_refused() -> None:
    with pytest.raises(ValueError, match="backtick"):
        cause.query("up{job=`x`}")
