"""deploy/arrays/: the array exporters' scrape jobs that give their series lunlat's `naa` label."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

PUREFA = Path(__file__).resolve().parents[2] / "deploy" / "arrays" / "purefa.yml"


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
