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
from lunlat.engines.registry import ENGINES
from lunlat.goals import DEFAULT_GOALS_FILE, Goals, goals_or_default, load_goals, parse_goals
from lunlat.promql import recorded
from lunlat.yamlmodel import ConfigError
from lunlat_rules.breach import ROLE_HINT
from lunlat_rules.cli import main
from lunlat_rules.latency import goal_series
from lunlat_rules.rules import RuleSet, render, render_prometheus_rule
from lunlat_rules.tail import tail_alerts
from lunlat_rules.tiers import goal_tiers

from .promtools import PROMTOOLS, promtool, unit_test_files

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
        "alerts/lunlat.rules.yml is stale: run `bash .ci/generate`"
    )


def test_check_flag_reports_stale_and_fresh_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output, kubernetes = tmp_path / "rules.yml", tmp_path / "prometheusrule.yaml"
    argv = [
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
    assert committed == render_prometheus_rule(load_goals(GOALS)), "stale: run `bash .ci/generate`"
    resource = yaml.safe_load(committed)
    assert (resource["apiVersion"], resource["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert resource["spec"]["groups"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]


def test_bad_goals_exit_2_naming_key_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    goals = tmp_path / "goals.yaml"
    goals.write_text("default:\n  goal_ms: 1\n  severity: critical\nbreach:\n  for: soon\n")
    output = tmp_path / "rules.yml"
    kubernetes = tmp_path / "prometheusrule.yaml"
    argv = [
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
            "must set goal_ms, severity, min_iops, judge or throughput_floor_mib_s",
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
        ("tail:\n  above_percent: 0\n", "tail.above_percent", "greater than 0"),
        ("tail:\n  above_percent: 100\n", "tail.above_percent", "less than 100"),
        ("tail:\n  for: a while\n", "tail.for", "not a Prometheus duration"),
        ("tail:\n  severity: critical\n", "tail.severity", "Input should be"),
        ("unowned:\n  severity: critical\n", "unowned.severity", "Input should be"),
        ("unowned:\n  goal_ms: 0\n", "unowned.goal_ms", "greater than 0"),
        ("unowned:\n  role: data\n", "unowned.role", "unknown key"),
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
    rules = {r["record"]: r["expr"] for r in goal_series(goals)}
    goal = rules["lunlat:latency_goal_seconds"]
    assert (
        goal.index('database=~"Oracle"')
        < goal.index('workload=~"snapshot.*"')
        < goal.index('lunlat:lun_layer:info{role!=""}')
    )
    assert "0.0005 *" in goal and '"severity", "warning"' in goal
    assert "50 * group by" in rules["lunlat:latency_goal_min_iops"]
    # by default a LUN no database uses (no role) has no goal: no branch takes it
    assert 'role=""' not in goal


def test_unowned_luns_get_their_own_tier_after_the_overrides() -> None:
    goals = parse_goals(
        "overrides:\n  - match: {workload: 'backup.*'}\n    severity: warning\n"
        "unowned: {goal_ms: 20, severity: ticket, min_iops: 5}\n"
    )
    rules = {r["record"]: r["expr"] for r in goal_series(goals)}
    goal, guard = rules["lunlat:latency_goal_seconds"], rules["lunlat:latency_goal_min_iops"]
    assert goal.index('workload=~"backup.*"') < goal.index('lunlat:lun_layer:info{role=""}')
    assert goal.index('lunlat:lun_layer:info{role=""}') < goal.index("lunlat:lun_layer:info\n")
    assert "0.02 *" in goal and '"severity", "ticket"' in goal
    assert "5 * group by" in guard and 'role!=""' not in guard
    # the SLO's events (and the tail alert's share) read the unowned LUNs' own goal too
    assert [(t.goal_ms, m) for t, m in goal_tiers(goals)] == [
        (1.0, 'workload=~"backup.*"'),
        (20.0, 'role=""'),
        (1.0, ""),
    ]


def test_rules_read_only_contract_metrics() -> None:
    text = RULES.read_text(encoding="utf-8")
    used = set(re.findall(r"\b(lunlat_[a-z_]+)\b", text))
    published = {m.name for m in contract.ALL_METRICS}
    published |= {
        f"{m.name}{suffix}"
        for m in contract.ALL_METRICS
        if m.type == "histogram"
        for suffix in ("_bucket", "_sum", "_count")
    }
    assert used, "the rules read lunlat metrics"
    assert used <= published, f"not in the contract: {sorted(used - published)}"
    # The recording names of docs/contract.md §3 exist.
    for name in ("lunlat:read_latency_seconds:avg1m", "lunlat:write_latency_seconds:avg1m", "lunlat:iops:rate1m",
                 "lunlat:throughput_bytes:rate1m"):  # fmt: skip
        assert f"record: {name}\n" in text
    # The histogram's recorded share under recorded.py's name (the dashboards read it there).
    assert f"record: {recorded.IO_ABOVE_GOAL_RATIO.format(window=recorded.BREACH_WINDOW)}\n" in text


def test_latency_averages_divide_raw_counters_only() -> None:
    """Numerator and denominator of an average from the same raw samples: vmalert writes recorded
    series back asynchronously, so an average reading one recorded in the same evaluation would mix
    two instants in a fleet (tests/deploy/test_fleet.py shows it with real binaries). The goal
    group's records (recorded.CONFIGURED: an old exporter's LUNs, joined for their roles) change
    only with the configuration, not between two instants."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    averages = [
        rule
        for group in groups
        for rule in group["rules"]
        if re.fullmatch(r"lunlat:(read|write)_latency_seconds:avg\w+", rule.get("record", ""))
    ]
    layers = 1 + len(ENGINES)  # the host's and each engine's (its FileLayer)
    assert len(averages) == 2 * len(recorded.RATE_WINDOWS) * layers, "read/write x windows x every layer"
    for rule in averages:
        read = set(re.findall(r"lunlat:[a-z0-9_]+:[a-z0-9_]+", rule["expr"]))
        assert read <= recorded.CONFIGURED, rule


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
        # Or the severity of the goal: joined from the goal series, or carried by the SLO's series or
        # by the judged latency above goal.
        assert (
            severity in ("page", "warning", "ticket")
            or "group_left (severity, engine)" in alert["expr"]
            or recorded.JUDGED_ABOVE_GOAL in alert["expr"]
            or recorded.SLO_ERROR_RATIO.format(window="") in alert["expr"]
        ), alert
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


@pytest.mark.parametrize("major", PROMTOOLS)
def test_promtool_accepts_the_rules_without_a_lint_finding(major: str) -> None:
    """`promtool check rules` exits 0 on lint findings (duplicate rules) and prints them: any line
    besides its own header and SUCCESS line is a finding."""
    result = subprocess.run(
        [promtool(major), "check", "rules", str(RULES)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert lines[0] == f"Checking {RULES}"
    assert re.fullmatch(r"\s*SUCCESS: \d+ rules found", lines[1])
    assert lines[2:] == [], "\n".join(lines)


def test_the_lint_check_bites(tmp_path: Path) -> None:
    """Two recording rules of one name and labels, as the two engines' db layers were before they
    had an `engine` label, are a lint finding the test above fails on."""
    rules = tmp_path / "rules.yml"
    rule = {"record": "lunlat:x", "expr": "vector(1)", "labels": {"layer": "db"}}
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [rule, {**rule, "expr": "vector(2)"}]}]})
    )
    result = subprocess.run(
        [_tool("promtool"), "check", "rules", str(rules)], check=False, capture_output=True, text=True
    )
    assert "duplicate rule" in result.stdout + result.stderr


@pytest.mark.parametrize("major", PROMTOOLS)
def test_promtool_rule_unit_tests_pass(major: str, tmp_path: Path) -> None:
    tests = unit_test_files(major, sorted((ALERTS / "tests").glob("*.test.yml")), tmp_path)
    assert len(tests) >= 2
    result = subprocess.run(
        [promtool(major), "test", "rules", *map(str, tests)],
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
        (["severity=page", "engine=mssql", "database=SQL Server 1", "lun=mpatha"], "mssql-dba-pager"),
        (["severity=page", "engine=oracle", "database=Oracle", "lun=ora_redo"], "oracle-dba-pager"),
        (["severity=page", "engine=postgres", "database=PG", "role=log"], "postgres-dba-pager"),
        # the engine routes, never the database's name
        (["severity=page", "engine=mssql", "database=PROD", "layer=host"], "mssql-dba-pager"),
        (["severity=page", "engine=oracle", "database=SQL Server look-alike"], "oracle-dba-pager"),
        (["severity=page", "database=Oracle"], "storage-pager"),
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
    # Every latency alert (breach, drift and burn), none of the health alerts.
    assert sorted(targets) == sorted(n for n in names if re.search("High|Low|Drift|BudgetBurn", n))
    assert blind["equal"] == ["instance"]
    assert rules[1]["equal"] == ["instance", "lun", "database", "role", "op"]


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


def test_the_tail_alert_takes_its_share_duration_and_severity_from_the_goals() -> None:
    default = parse_goals("")
    assert (default.tail.above_percent, default.tail.for_, default.tail.severity) == (5.0, "15m", "ticket")
    goals = parse_goals("tail:\n  above_percent: 2.5\n  for: 30m\n  severity: warning\n")
    tails = [r for r in tail_alerts(goals) if r["alert"] == "LunLatencyTailHigh"]
    assert [r["labels"]["op"] for r in tails] == ["read", "write"]
    for rule in tails:
        assert rule["expr"].startswith(
            f'100 * lunlat:io_latency_above_goal:ratio1m{{op="{rule["labels"]["op"]}"}} > 2.5\n'
        )
        assert (rule["for"], rule["labels"]["severity"]) == ("30m", "warning")
        # the complement of the breach alert: the judged latency at or below goal, as recorded by
        # the bool the breach's judgement also records (the idle guard is in the judged latency)
        assert f'(lunlat:latency_above_goal:bool{{op="{rule["labels"]["op"]}"}} == 0)' in rule["expr"]


def _histogram_test(
    goals_text: str, tmp_path: Path, exp: list[tuple[str, str, float]], quantiles: dict[int, float]
) -> str:
    """promtool's verdict on the share recorded for `goals_text`, for one LUN of each workload in
    `exp` (workload, le of the bucket its I/Os fall in, expected share): per 15 s step 1000 reads,
    900 at or below 0.5 ms and 100 in the bucket named. `quantiles`: LUN index → the goal (s) that
    histogram_quantile(1 - share) of its buckets must give back."""
    (tmp_path / "lunlat.rules.yml").write_text(render(parse_goals(goals_text)))
    bounds = [repr(b) for b in contract.BIO_BUCKETS] + ["+Inf"]
    series, checks = [], []
    for n, (workload, slow_le, share) in enumerate(exp):
        labels = f'job="lunlat",instance="h:1",lun="l{n}",device="sd{n}"'
        series.append(
            {"series": f'lunlat_lun_info{{{labels},kind="lun",database="D",role="data",workload="{workload}"}}',
             "values": "1x40"}
        )  # fmt: skip
        # What the rules judge the share on: the LUN's judged (small) reads, busy enough for the
        # idle guard, with its diskstats counters for the goal series.
        seconds = 900 * 0.0004 + 100 * min(float(slow_le), 1.0)
        series += [
            {"series": f"lunlat_device_reads_completed_total{{{labels}}}", "values": "0+1000x40"},
            {"series": f"lunlat_device_read_time_seconds_total{{{labels}}}", "values": f"0+{seconds}x40"},
            {"series": f'lunlat_device_io_latency_seconds_count{{{labels},op="read",size="small"}}',
             "values": "0+1000x40"},
            {"series": f'lunlat_device_io_latency_seconds_sum{{{labels},op="read",size="small"}}',
             "values": f"0+{seconds}x40"},
        ]  # fmt: skip
        for le in bounds:
            per_step = (900 if float(le) >= 0.0005 else 0) + (100 if float(le) >= float(slow_le) else 0)
            series.append(
                {"series": f'lunlat_device_io_latency_seconds_bucket{{{labels},op="read",size="small",le="{le}"}}',
                 "values": f"0+{per_step}x40"}
            )  # fmt: skip
        checks.append(
            {"expr": f'round(lunlat:io_latency_above_goal:ratio1m{{lun="l{n}"}} * 1e6)', "eval_time": "5m",
             "exp_samples": [{"labels": f'{{job="lunlat",instance="h:1",lun="l{n}",database="D",role="data",'
                              f'workload="{workload}",layer="host",op="read"}}', "value": round(share * 1e6)}]}
        )  # fmt: skip
    for n, goal in quantiles.items():
        inverse = (
            f'histogram_quantile(1 - scalar(lunlat:io_latency_above_goal:ratio1m{{lun="l{n}"}}), '
            f'sum by (le) (rate(lunlat_device_io_latency_seconds_bucket{{lun="l{n}"}}[1m])))'
        )
        checks.append(
            {"expr": f"round({inverse} * 1e6)", "eval_time": "5m",
             "exp_samples": [{"labels": "{}", "value": round(goal * 1e6)}]}
        )  # fmt: skip
    test = {
        "rule_files": ["lunlat.rules.yml"],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": series, "promql_expr_test": checks}],
    }
    (tmp_path / "share.test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    result = subprocess.run(
        [_tool("promtool"), "test", "rules", "share.test.yml"], check=False, capture_output=True, text=True,
        cwd=tmp_path,
    )  # fmt: skip
    return result.stdout + result.stderr


def test_the_share_above_goal_is_exact_at_an_edge_and_interpolated_inside_a_bucket(tmp_path: Path) -> None:
    """Each LUN's own goal, first matching override wins: 1 ms (an edge: exact), 1.5 ms (inside
    (1 ms, 2 ms]: linear, as histogram_quantile), 2 ms (an edge), 0.005 ms (inside the first bucket,
    which starts at 0), 600 ms (above the last finite edge: the share above 512 ms)."""
    goals = (
        "overrides:\n"
        "  - match: {workload: 'mid'}\n    goal_ms: 1.5\n"
        "  - match: {workload: 'edge2'}\n    goal_ms: 2\n"
        "  - match: {workload: 'tiny'}\n    goal_ms: 0.005\n"
        "  - match: {workload: 'huge'}\n    goal_ms: 600\n"
        "  - match: {workload: 'snapshot.*'}\n    severity: warning\n"
    )
    cases = [
        ("oltp", "0.002", 0.1),  # 100 of 1000 in (1 ms, 2 ms]: all above 1 ms
        ("mid", "0.002", 0.05),  # half of (1 ms, 2 ms] lies above 1.5 ms
        ("mid", "0.004", 0.1),  # (2 ms, 4 ms] is wholly above 1.5 ms
        ("edge2", "0.002", 0.0),  # at or below 2 ms
        ("edge2", "0.004", 0.1),
        ("snapshot_oltp", "0.002", 0.1),  # severity only: the default goal
        ("tiny", "0.002", 1.0),  # every I/O is above 5 µs (none in the first bucket)
        ("huge", "+Inf", 0.1),  # slower than 512 ms: counted as above a 600 ms goal (upper bound)
    ]
    # Inside a bucket the share inverts histogram_quantile's interpolation: the (1 - share)
    # quantile of the LUN's buckets is its goal, so the share and the p99 panel agree.
    output = _histogram_test(goals, tmp_path, cases, {1: 0.0015})
    assert "SUCCESS" in output, output
    # the share bites: another goal, another share
    wrong = _histogram_test(goals.replace("goal_ms: 1.5", "goal_ms: 1.25"), tmp_path, cases, {})
    assert "FAILED" in wrong and 'lun="l1"' in wrong, wrong


def test_promtool_tail_tests_can_fail(tmp_path: Path) -> None:
    """The tail tests bite: at 15 % the 10 % tail they expect to open a ticket does not."""
    goals = tmp_path / "goals.yaml"
    goals.write_text(GOALS.read_text(encoding="utf-8").replace("above_percent: 5", "above_percent: 15"))
    (tmp_path / "lunlat.rules.yml").write_text(render(load_goals(goals)))
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ALERTS / "tests" / "tail.test.yml", tests)
    result = subprocess.run(
        [_tool("promtool"), "test", "rules", "tail.test.yml"], check=False, capture_output=True, text=True,
        cwd=tests,
    )  # fmt: skip
    assert result.returncode != 0 and "LunLatencyTailHigh" in result.stdout + result.stderr


def test_commands_outside_the_repository_judge_against_the_default_goal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report` and `top` read alerts/goals.yaml where they run from the repository, the built-in
    1 ms goal elsewhere; a goals file that is named must exist."""
    monkeypatch.chdir(tmp_path)
    assert not DEFAULT_GOALS_FILE.exists()
    assert goals_or_default(None) == Goals()
    assert goals_or_default(None).default.goal_ms == contract.DEFAULT_GOAL_SECONDS * 1000
    with pytest.raises(ConfigError, match="cannot read"):
        goals_or_default(tmp_path / "missing.yaml")
    DEFAULT_GOALS_FILE.parent.mkdir()
    DEFAULT_GOALS_FILE.write_text("default: {goal_ms: 2}\n")
    assert goals_or_default(None).default.goal_ms == 2


def test_generate_runs_from_an_empty_directory_with_the_shipped_goals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No checkout needed: the goals default to the file lunlat-rules ships, the output to here."""
    monkeypatch.chdir(tmp_path)
    assert main(["generate"]) == 0
    assert (tmp_path / "lunlat.rules.yml").read_text(encoding="utf-8") == render(load_goals(GOALS))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lunlat.rules.yml"]


def test_log_hint_says_a_governed_log_rate_is_not_a_slow_log_lun() -> None:
    # Azure SQL's log rate governance waits carry role throttle (engines/mssql/sql.py, IO_WAITS): the
    # log alert's hint names them so a throttled database is not mistaken for a slow log LUN.
    hint = ROLE_HINT["log"]["write"]
    assert "LOG_RATE_GOVERNOR" in hint and "role throttle" in hint
    assert "LOG_RATE_GOVERNOR" not in ROLE_HINT["data"]["read"]


def test_ci_builds_the_prometheus_3_the_tests_look_for() -> None:
    """.ci/run builds Prometheus 3 where tests/support/prometheus_server.py looks for it, at the version it names."""
    from tests.support.prometheus_server import PROMETHEUS3_DIR, PROMETHEUS3_MODULE_VERSION  # noqa: PLC0415

    ci = (ALERTS.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert f'p3="$HOME/.cache/lunlat/{PROMETHEUS3_DIR.name}"' in ci
    assert ci.count(f"@{PROMETHEUS3_MODULE_VERSION}") == 2
    assert PROMETHEUS3_DIR.name.endswith(PROMETHEUS3_MODULE_VERSION)


@pytest.mark.parametrize(
    ("held_for", "interval"),
    [("0s", None), ("15s", None), ("30s", "30s"), ("1m", "1m"), ("10m", "1m")],
)
def test_the_path_loss_group_runs_as_often_as_its_for_needs_and_at_least_once_a_minute(
    held_for: str, interval: str | None
) -> None:
    """Issue 41: LunLatencyPathLost, a warning held for `paths.for`, is evaluated no more often
    than that needs (a tenth of the rules' time at 15 s), and never more than a minute apart."""
    groups = RuleSet(parse_goals(f"paths:\n  for: {held_for}\n", "goals.yaml")).groups()
    (paths,) = (g for g in groups if g["name"] == "lunlat-paths")
    assert paths.get("interval") == interval
    assert [r["alert"] for r in paths["rules"]] == ["LunLatencyPathLost"]
