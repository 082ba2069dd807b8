"""The generated rules: fresh, valid for promtool, unit-tested by promtool, tied to the contract and
the runbooks; the Alertmanager config valid and routing as documented."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lunlat import contract
from lunlat.alerting.goals import load_goals, parse_goals
from lunlat.alerting.rules import RuleSet, render, render_prometheus_rule
from lunlat.cli import main

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "alerts"
GOALS = ALERTS / "goals.yaml"
RULES = ALERTS / "lunlat.rules.yml"
AM_CONFIG = ALERTS / "alertmanager.yml"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (Debian: prometheus / prometheus-alertmanager)")
    return path


def test_committed_rules_are_what_the_goals_generate() -> None:
    assert RULES.read_text(encoding="utf-8") == render(load_goals(GOALS)), (
        "alerts/lunlat.rules.yml is stale: run `lunlat rules generate`"
    )


def test_check_flag_reports_stale_and_fresh_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, kubernetes = tmp_path / "rules.yml", tmp_path / "prometheusrule.yaml"
    argv = [
        "rules",
        "generate",
        "--goals",
        str(GOALS),
        "--output",
        str(output),
        "--kubernetes-output",
        str(kubernetes),
    ]
    assert main([*argv, "--check"]) == 1
    assert main(argv) == 0
    assert main([*argv, "--check"]) == 0
    output.write_text(output.read_text().replace("0.001 *", "0.002 *"))
    assert main([*argv, "--check"]) == 1
    assert f"{output} is stale" in capsys.readouterr().err
    assert main(argv) == 0
    kubernetes.write_text(kubernetes.read_text().replace("0.001 *", "0.002 *"))
    assert main([*argv, "--check"]) == 1
    assert f"{kubernetes} is stale" in capsys.readouterr().err


def test_the_prometheus_rule_carries_exactly_the_rule_groups() -> None:
    """deploy/kubernetes/prometheusrule.yaml: the committed one is fresh and holds the same groups."""
    committed = (REPO / "deploy" / "kubernetes" / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert committed == render_prometheus_rule(load_goals(GOALS)), "stale: run `lunlat rules generate`"
    resource = yaml.safe_load(committed)
    assert (resource["apiVersion"], resource["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert resource["spec"]["groups"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]


def test_bad_goals_exit_2_naming_key_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    goals = tmp_path / "goals.yaml"
    goals.write_text("default:\n  goal_ms: 1\n  severity: critical\nbreach:\n  for: soon\n")
    output = tmp_path / "rules.yml"
    kubernetes = tmp_path / "prometheusrule.yaml"
    argv = [
        "rules",
        "generate",
        "--goals",
        str(goals),
        "--output",
        str(output),
        "--kubernetes-output",
        str(kubernetes),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{goals}:3: default.severity" in err
    assert f"{goals}:5: breach.for" in err and "not a Prometheus duration" in err
    assert not output.exists() and not kubernetes.exists(), "nothing is written from a bad goals file"


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (
            "overrides:\n  - match: {workload: oltp}\n",
            "overrides[0]",
            "must set goal_ms, severity or min_iops",
        ),
        (
            "overrides:\n  - match: {tier: gold}\n    severity: warning\n",
            "overrides[0].match.tier",
            "Input should be",
        ),
        (
            "overrides:\n  - match: {workload: '(oltp'}\n    severity: warning\n",
            "overrides[0].match",
            "regular",
        ),
        ("default:\n  goal_ms: 0\n", "default.goal_ms", "greater than 0"),
        ("slo:\n  objective: 1\n", "slo.objective", "less than 1"),
        ("slo:\n  fast: [{long: 5m, short: 1h, burn_rate: 14.4}]\n", "slo.fast[0]", "shorter than"),
        ("slo:\n  period: 1d\n", "slo", "longer than the SLO period"),
        ("selector: 'job=lunlat'\n", "selector", "label matchers"),
        ("colour: blue\n", "colour", "unknown key"),
    ],
)
def test_goal_validation(text: str, key: str, words: str) -> None:
    from lunlat.yamlmodel import ConfigError  # noqa: PLC0415

    with pytest.raises(ConfigError) as caught:
        parse_goals(text, "goals.yaml")
    messages = [str(p) for p in caught.value.problems]
    assert any(f": {key}: " in m and words in m for m in messages), messages


def test_first_matching_override_wins() -> None:
    goals = parse_goals(
        "default: {goal_ms: 1, severity: page, min_iops: 10}\n"
        "overrides:\n"
        "  - match: {workload: 'snapshot.*', role: log}\n    goal_ms: 3\n"
        "  - match: {workload: 'snapshot.*'}\n    severity: warning\n"
    )
    assert goals.tier({"workload": "snapshot_oltp", "role": "log"}).goal_ms == 3
    assert goals.tier({"workload": "snapshot_oltp", "role": "log"}).severity == "page"
    assert goals.tier({"workload": "snapshot_oltp", "role": "data"}).severity == "warning"
    assert goals.tier({"workload": "oltp", "role": "data"}).goal_ms == 1
    # Regexes are anchored like PromQL's =~: "snap" alone does not match "snapshot_oltp".
    assert (
        parse_goals("overrides:\n  - match: {workload: snap}\n    goal_ms: 5\n")
        .tier({"workload": "snapshot_oltp"})
        .goal_ms
        == 1
    )


def test_overrides_become_ordered_goal_branches() -> None:
    goals = parse_goals(
        "overrides:\n"
        "  - match: {database: 'Oracle'}\n    goal_ms: 0.5\n"
        "  - match: {workload: 'snapshot.*'}\n    severity: warning\n    min_iops: 50\n"
    )
    rules = {r["record"]: r["expr"] for r in RuleSet(goals).goal_series()}
    goal = rules["lunlat:latency_goal_seconds"]
    assert (
        goal.index('database=~"Oracle"')
        < goal.index('workload=~"snapshot.*"')
        < goal.index("(lunlat:iops:rate1m)")
    )
    assert "0.0005 *" in goal and '"severity", "warning"' in goal
    assert "50 * group by" in rules["lunlat:latency_goal_min_iops"]


def test_rules_read_only_contract_metrics() -> None:
    text = RULES.read_text(encoding="utf-8")
    used = set(re.findall(r"\b(lunlat_[a-z_]+)\b", text))
    published = {m.name for m in contract.ALL_METRICS}
    assert used, "the rules read lunlat metrics"
    assert used <= published, f"not in the contract: {sorted(used - published)}"
    # The recording names of docs/contract.md §3 exist.
    for name in ("lunlat:read_latency_seconds:avg1m", "lunlat:write_latency_seconds:avg1m", "lunlat:iops:rate1m",
                 "lunlat:throughput_bytes:rate1m"):  # fmt: skip
        assert f"record: {name}\n" in text


def test_latency_averages_divide_raw_counters_only() -> None:
    """Numerator and denominator of an average from the same raw samples: vmalert writes recorded
    series back asynchronously, so an average reading one recorded in the same evaluation would mix
    two instants in a fleet (tests/deploy/test_fleet.py shows it with real binaries)."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    averages = [
        rule
        for group in groups
        for rule in group["rules"]
        if re.fullmatch(r"lunlat:\w+_latency_seconds:avg\w+", rule.get("record", ""))
    ]
    assert len(averages) == 2 * 2 * 3, "read/write x 1m/5m x host, Oracle, SQL Server layers"
    for rule in averages:
        assert "lunlat:" not in rule["expr"], rule


def test_every_alert_is_complete_and_its_runbook_exists() -> None:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    base = load_goals(GOALS).runbook_base_url
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    assert len(alerts) >= 12
    for alert in alerts:
        assert alert["alert"].startswith("LunLatency"), alert["alert"]
        annotations = alert["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(annotations), alert["alert"]
        severity = alert.get("labels", {}).get("severity")
        assert severity in ("page", "warning", "ticket") or "group_left (severity)" in alert["expr"], alert
        url = annotations["runbook_url"]
        assert url.startswith(base + "/"), url
        file, _, anchor = url.removeprefix(base + "/").partition("#")
        runbook = ALERTS / "runbooks" / file
        assert runbook.is_file(), f"{alert['alert']}: no runbook {runbook}"
        headings = {
            re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in runbook.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        }
        assert anchor in headings, f"{alert['alert']}: no heading for #{anchor} in {file}"


def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(
        [_tool("promtool"), "check", "rules", str(RULES)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rule_unit_tests_pass() -> None:
    tests = sorted((ALERTS / "tests").glob("*.test.yml"))
    assert len(tests) >= 2
    result = subprocess.run(
        [_tool("promtool"), "test", "rules", *map(str, tests)],
        check=False,
        capture_output=True,
        text=True,
        cwd=ALERTS / "tests",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(tests)


def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """The rule tests bite: with a 3 ms goal, the 2 ms breach they expect to page does not."""
    goals = tmp_path / "goals.yaml"
    goals.write_text(GOALS.read_text(encoding="utf-8").replace("goal_ms: 1.0", "goal_ms: 3.0"))
    (tmp_path / "lunlat.rules.yml").write_text(render(load_goals(goals)))
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ALERTS / "tests" / "latency.test.yml", tests)
    result = subprocess.run(
        [_tool("promtool"), "test", "rules", "latency.test.yml"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tests,
    )
    assert result.returncode != 0 and "LunLatencyDataReadHigh" in result.stdout + result.stderr


def test_alertmanager_config_is_valid() -> None:
    result = subprocess.run(
        [_tool("amtool"), "check-config", str(AM_CONFIG)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 inhibit rules" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["severity=page", "database=SQL Server 1", "lun=mpatha"], "mssql-dba-pager"),
        (["severity=page", "database=Oracle", "lun=ora_redo"], "oracle-dba-pager"),
        (["severity=page", "alertname=LunLatencyExporterDown"], "storage-pager"),
        (["severity=warning", "database=Oracle"], "storage-chat"),
        (["severity=ticket", "database=Oracle"], "storage-tickets"),
        (["alertname=Unknown"], "storage-chat"),
    ],
)
def test_alertmanager_routes(labels: list[str], receiver: str) -> None:
    result = subprocess.run(
        [_tool("amtool"), "config", "routes", "test", f"--config.file={AM_CONFIG}", f"--verify.receivers={receiver}",
         *labels],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_inhibits_latency_when_blind_and_warnings_under_a_page() -> None:
    config = yaml.safe_load(AM_CONFIG.read_text(encoding="utf-8"))
    names = RuleSet(load_goals(GOALS)).alert_names()
    rules = config["inhibit_rules"]

    def regex(matchers: list[str], label: str) -> str:
        found = next(m for m in matchers if m.startswith(f"{label}=~"))
        return found.split("=~", 1)[1].strip('"')

    blind = rules[0]
    sources = [n for n in names if re.fullmatch(regex(blind["source_matchers"], "alertname"), n)]
    targets = [n for n in names if re.fullmatch(regex(blind["target_matchers"], "alertname"), n)]
    assert sorted(sources) == ["LunLatencyExporterDown", "LunLatencySourceDown"]
    # Every latency alert (breach and burn), none of the health alerts.
    assert sorted(targets) == sorted(n for n in names if "High" in n or "BudgetBurn" in n)
    assert blind["equal"] == ["instance"]
    assert rules[1]["equal"] == ["instance", "lun", "op"]


def test_override_regexes_are_quoted_for_promql(tmp_path: Path) -> None:
    """A regex with backslashes and quotes survives into valid PromQL that means the same."""
    goals = parse_goals(
        "overrides:\n  - match: {database: 'SQL Server \\d+', workload: 'a\"b|snap.*'}\n    severity: warning\n"
    )
    rules = tmp_path / "rules.yml"
    rules.write_text(render(goals))
    result = subprocess.run(
        [_tool("promtool"), "check", "rules", str(rules)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'database=~"SQL Server \\\\d+"' in rules.read_text()
