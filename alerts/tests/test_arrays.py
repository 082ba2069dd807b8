"""The array side: deploy/arrays/'s scrape jobs that give an array exporter's series lunlat's `naa`
label, and alerts/goals.yaml `arrays`, the data the array rules are generated from."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lunlat.goals import Goals, load_goals, parse_goals
from lunlat.yamlmodel import ConfigError
from lunlat_rules.arrays import array_rules, host_minus_array
from lunlat_rules.rules import render

REPO = Path(__file__).resolve().parents[2]
PUREFA = REPO / "deploy" / "arrays" / "purefa.yml"
GOALS = REPO / "alerts" / "goals.yaml"


def test_the_purefa_job_is_a_valid_prometheus_config(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    config = yaml.safe_load(PUREFA.read_text(encoding="utf-8"))
    token = tmp_path / "token"
    token.write_text("00000000-0000-0000-0000-000000000000\n")
    config["scrape_configs"][0]["authorization"]["credentials_file"] = str(token)
    checked = tmp_path / "prometheus.yml"
    checked.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [promtool, "check", "config", str(checked)], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_purefa_relabeling_makes_naa_from_naa_id() -> None:
    """The two metric relabel steps, applied as Prometheus applies them (replace with the default
    `$1`, then lowercase), to a naa_id as Pure's exporter writes it."""
    steps = yaml.safe_load(PUREFA.read_text(encoding="utf-8"))["scrape_configs"][0]["metric_relabel_configs"]
    assert [s.get("action", "replace") for s in steps] == ["replace", "lowercase"]
    labels = {"naa_id": "naa.624a93706C1B16CE1C034D1C00024C6F"}

    match = re.fullmatch(steps[0]["regex"], labels[steps[0]["source_labels"][0]])
    assert match is not None
    labels[steps[0]["target_label"]] = match.expand(steps[0].get("replacement", r"\1").replace("$1", r"\1"))
    labels[steps[1]["target_label"]] = labels[steps[1]["source_labels"][0]].lower()
    assert labels["naa"] == "624a93706c1b16ce1c034d1c00024c6f"


# --- alerts/goals.yaml `arrays`: the array exporters are data ----------------------------------------

_NETAPP = """\
arrays:
  - name: netapp
    read: {metric: lun_avg_read_latency}
    write: {metric: lun_avg_write_latency}
    unit: microseconds
    naa:
      from: {metric: lun_labels, join_on: [cluster, svm, volume, lun]}
      label: serial_hex
      regex: '([0-9a-f]{24})'
      replacement: '600a0980$1'
"""


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (_NETAPP.replace("unit: microseconds", "unit: usec"), "arrays[0].unit", "Input should be"),
        (_NETAPP.replace("    unit: microseconds\n", ""), "arrays[0].unit", "Field required"),
        (
            _NETAPP.replace("{metric: lun_avg_read_latency}", "{metric: lun-avg}"),
            "arrays[0].read.metric",
            "not a Prometheus metric name",
        ),
        (
            _NETAPP.replace("{metric: lun_avg_read_latency}", "{metric: x, match: 'op=read'}"),
            "arrays[0].read.match",
            "label matchers",
        ),
        (
            _NETAPP.replace("join_on: [cluster, svm, volume, lun]", "on: [lun]"),
            "arrays[0].naa.from",
            "name the join labels `join_on`",
        ),
        (
            _NETAPP.replace("join_on: [cluster, svm, volume, lun]", "join_on: []"),
            "arrays[0].naa.from.join_on",
            "at least 1",
        ),
        (
            _NETAPP.replace("join_on: [cluster, svm, volume, lun]", "join_on: [lun, naa]"),
            "arrays[0].naa.from.join_on",
            "the join adds",
        ),
        (_NETAPP.replace("'([0-9a-f]{24})'", "'[0-9a-f]{24}'"), "arrays[0].naa.regex", "capture group"),
        (_NETAPP.replace("'([0-9a-f]{24})'", "'([0-9a-f'"), "arrays[0].naa.regex", "regular expression"),
        (_NETAPP.replace("label: serial_hex", "label: serial-hex"), "arrays[0].naa.label", "label name"),
        (_NETAPP.replace("name: netapp", "name: NetApp ONTAP"), "arrays[0].name", "lower-case"),
        (_NETAPP.replace("    unit:", "    colour: blue\n    unit:"), "arrays[0].colour", "unknown key"),
        (_NETAPP + _NETAPP.removeprefix("arrays:\n"), "arrays[1].name", "another array is named 'netapp'"),
    ],
)
def test_a_bad_array_entry_is_named_by_key_and_line(text: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_goals(text, "goals.yaml")
    messages = [str(p) for p in caught.value.problems]
    assert any(re.match(rf"goals\.yaml:\d+: {re.escape(key)}: .*{re.escape(words)}", m) for m in messages), (
        messages
    )


def test_a_duplicate_array_names_the_line_of_the_first() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_goals(_NETAPP + _NETAPP.removeprefix("arrays:\n"), "goals.yaml")
    assert [str(p) for p in caught.value.problems] == [
        "goals.yaml:11: arrays[1].name: another array is named 'netapp': their series would mix (first on line 2)"
    ]


def test_no_array_in_the_goals_no_array_rule() -> None:
    """Which arrays there are is configuration: the built-in goals name none, and the rules then have
    no array rule (no array metric is written in the code)."""
    assert Goals().arrays == []
    assert array_rules(Goals()) == host_minus_array(Goals()) == []
    assert "purefa" not in render(Goals()) and "lun_avg_read_latency" not in render(Goals())


def test_each_array_entry_records_its_metric_in_seconds_by_naa() -> None:
    """A third array is one more entry: its metric, unit and NAA label become its recorded series."""
    goals = parse_goals(
        "arrays:\n"
        "  - name: acme\n"
        "    selector: 'job=\"acme\"'\n"
        "    read: {metric: acme_volume_latency_ms, match: 'op=\"read\"'}\n"
        "    write: {metric: acme_volume_latency_ms, match: 'op=\"write\"'}\n"
        "    unit: milliseconds\n"
        "    naa: {label: wwn, regex: 'naa\\.([0-9a-f]{32})'}\n",
        "goals.yaml",
    )
    read = array_rules(goals)[0]
    assert read["labels"] == {"op": "read", "array": "acme"}
    assert read["expr"] == (
        "max by (naa) (\n"
        '  label_replace(avg_over_time(acme_volume_latency_ms{job="acme", op="read", wwn=~"naa\\\\.([0-9a-f]{32})"}[1m]), '
        '"naa", "$1", "wwn", "naa\\\\.([0-9a-f]{32})")\n'
        ") / 1e3"
    )


def test_the_repository_goals_join_pure_and_netapp() -> None:
    goals = load_goals(GOALS)
    assert [(a.name, a.unit) for a in goals.arrays] == [
        ("purefa", "microseconds"),
        ("netapp", "microseconds"),
    ]
    rules = array_rules(goals) + host_minus_array(goals)
    assert [(r["record"], r.get("labels")) for r in rules] == [
        ("lunlat:array_latency_seconds:mean1m", {"op": "read", "array": "purefa"}),
        ("lunlat:array_latency_seconds:mean1m", {"op": "write", "array": "purefa"}),
        ("lunlat:array_latency_seconds:mean1m", {"op": "read", "array": "netapp"}),
        ("lunlat:array_latency_seconds:mean1m", {"op": "write", "array": "netapp"}),
        ("lunlat:host_minus_array_latency_seconds:diff1m", {"op": "read"}),
        ("lunlat:host_minus_array_latency_seconds:diff1m", {"op": "write"}),
    ]
