"""The host layer read from an exporter the user already runs (goals `host_layer`): node_exporter's
diskstats or windows_exporter's logical_disk, joined to lunlat's LUNs, roles and database files.

The promtool unit tests in alerts/tests/host_layers/ run against rules generated from the goals file
beside each; the default host layer (lunlat's own counters) is what alerts/lunlat.rules.yml holds.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lunlat.goals import load_goals, parse_goals
from lunlat.yamlmodel import ConfigError
from lunlat_rules.rules import render

from .promtools import PROMTOOLS, promtool, unit_test_files

HOST_LAYERS = Path(__file__).resolve().parent / "host_layers"
SOURCES = ("node_exporter", "windows_exporter")


def _run_promtool_test(
    tmp_path: Path, source: str, goals_text: str, major: str = "2"
) -> subprocess.CompletedProcess[str]:
    goals = tmp_path / f"{source}.goals.yaml"
    goals.write_text(goals_text, encoding="utf-8")
    (tmp_path / f"{source}.rules.yml").write_text(render(load_goals(goals)), encoding="utf-8")
    shutil.copy(HOST_LAYERS / f"{source}.test.yml", tmp_path)
    copies = tmp_path / "copies"
    copies.mkdir()
    [test] = unit_test_files(major, [tmp_path / f"{source}.test.yml"], copies)
    return subprocess.run(
        [promtool(major), "test", "rules", str(test)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("major", PROMTOOLS)
@pytest.mark.parametrize("source", SOURCES)
def test_promtool_host_layer_tests_pass(tmp_path: Path, source: str, major: str) -> None:
    goals = (HOST_LAYERS / f"{source}.goals.yaml").read_text(encoding="utf-8")
    result = _run_promtool_test(tmp_path, source, goals, major)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("source", SOURCES)
def test_promtool_host_layer_tests_fail_on_lunlats_own_host_layer(tmp_path: Path, source: str) -> None:
    """The tests bite: the same series judged by the default host layer (lunlat's diskstats counters,
    none here) record no host layer and page nothing."""
    result = _run_promtool_test(tmp_path, source, "selector: 'job=\"lunlat\"'\n")
    assert result.returncode != 0
    assert "LunLatencyDataReadHigh" in result.stdout + result.stderr


def test_the_default_and_an_explicit_lunlat_host_layer_generate_the_same_rules() -> None:
    assert render(parse_goals("host_layer: {source: lunlat}\n")) == render(parse_goals(""))


def _host_latency(rules: str) -> str:
    """The expression recording the host layer's 1-minute read latency."""
    for group in yaml.safe_load(rules)["groups"]:
        for rule in group["rules"]:
            if rule.get("record") == "lunlat:read_latency_seconds:avg1m" and rule["labels"] == {
                "layer": "host"
            }:
                return str(rule["expr"])
    raise AssertionError("no host-layer read latency recorded")


def test_node_exporter_host_is_the_instance_without_its_port_on_both_sides() -> None:
    expr = _host_latency(
        render(parse_goals("host_layer: {source: node_exporter, selector: 'job=\"node\"'}\n"))
    )
    assert 'rate(node_disk_read_time_seconds_total{job="node"}[1m])' in expr
    assert expr.count('"lunlat_host", "$1", "instance", "(.+?)(?::[0-9]+)?")') == 4
    assert 'lunlat_lun_info{job="lunlat", kind="lun"}' in expr
    assert "lunlat_device_" not in expr


def test_a_host_label_both_scrapes_carry_replaces_the_instance() -> None:
    rules = render(
        parse_goals(
            "host_layer:\n  source: node_exporter\n  selector: 'job=\"node\"'\n"
            "  exporter_host: {label: host}\n  lunlat_host: {label: host}\n"
        )
    )
    assert '"lunlat_host", "$1", "host", "(.+)")' in rules
    assert '"instance", "(.+?)' not in rules


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("host_layer: {source: node_exporter}\n", "host_layer", "needs `selector`"),
        ("host_layer: {source: windows_exporter}\n", "host_layer", "needs `selector`"),
        ("host_layer: {source: lunlat, selector: 'job=\"node\"'}\n", "host_layer", "selector and hosts"),
        ("host_layer: {source: collectd, selector: 'job=\"x\"'}\n", "host_layer.source", "Input should be"),
        ("host_layer: {source: node_exporter, selector: 'job=node'}\n", "host_layer.selector", "matchers"),
        (
            "host_layer:\n  source: node_exporter\n  selector: 'job=\"node\"'\n  exporter_host: {label: instance, regex: '.+'}\n",
            "host_layer.exporter_host.regex",
            "capture group",
        ),
        (
            "host_layer:\n  source: node_exporter\n  selector: 'job=\"node\"'\n  lunlat_host: {label: __name__}\n",
            "host_layer.lunlat_host.label",
            "label name",
        ),
    ],
)
def test_host_layer_validation(text: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_goals(text, "goals.yaml")
    messages = [str(p) for p in caught.value.problems]
    assert any(f": {key}: " in m and words in m for m in messages), messages


@pytest.mark.parametrize("source", SOURCES)
def test_the_host_exporter_alert_has_its_runbook_heading(source: str) -> None:
    goals = load_goals(HOST_LAYERS / f"{source}.goals.yaml")
    (alert,) = [
        rule
        for group in yaml.safe_load(render(goals))["groups"]
        for rule in group["rules"]
        if rule.get("alert") == "LunLatencyHostExporterDown"
    ]
    assert alert["expr"] == f"up{{{goals.host_layer.selector}}} == 0"
    file, _, anchor = (
        alert["annotations"]["runbook_url"].removeprefix(goals.runbook_base_url + "/").partition("#")
    )
    runbook = (HOST_LAYERS.parents[1] / "runbooks" / file).read_text(encoding="utf-8")
    assert f"## {anchor}" in runbook.lower()
    assert "LunLatencyHostExporterDown" not in render(parse_goals(""))
