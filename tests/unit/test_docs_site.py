"""The docs a user reads first: a short README with the two set-up commands, and the site's
generated references (docs/gen_reference.py) fresh, detected when stale, and usable."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest
import yaml

from tests.support.skip_unless_installed import needs

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# Issue 26: the README is for users; the rest lives in docs/ (mkdocs.yml).
README_MAX_BYTES = 20_000
RUN_THE_EXPORTER = "python3 -m venv .venv && .venv/bin/pip install -q ./exporter && .venv/bin/lunlat serve"
RUN_THE_TESTS = "bash .ci/run"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_keeps_the_two_set_up_commands() -> None:
    assert README.stat().st_size <= README_MAX_BYTES
    text = README.read_text(encoding="utf-8")
    quick_start = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", quick_start, re.DOTALL)
    assert blocks == [RUN_THE_EXPORTER, RUN_THE_TESTS]


def test_the_readme_links_to_the_project_files_and_never_to_a_registry_image() -> None:
    text = README.read_text(encoding="utf-8")
    for name in ("CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md", "LICENSE"):
        assert f"]({name})" in text and (REPO / name).exists(), name
    # No image is published yet: the README says how to build one, and pulls none.
    assert "docker build -f exporter/Dockerfile" in text
    assert not re.search(r"docker (pull|run) \S*lunlat", text)


def test_every_relative_link_of_the_readme_exists() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, "the README links to the docs"
    assert [t for t in local if not (REPO / t).exists()] == []


@needs("lunlat_dashboards")  # the flags page holds every command, the mixin's and the lab's
@needs("lunlat_lab")
def test_the_committed_references_are_what_the_code_gives() -> None:
    stale = [
        str(path.relative_to(REPO))
        for path, text in _generator().pages().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], "run python docs/gen_reference.py"


@needs("lunlat_dashboards")  # the flags page holds every command, the mixin's and the lab's
@needs("lunlat_lab")
def test_check_fails_on_a_missing_or_edited_page_and_passes_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = _generator()
    monkeypatch.setattr(gen, "DOCS", tmp_path)
    monkeypatch.setattr(gen, "OUT", tmp_path / "reference")
    assert gen.main(["--check"]) == 1  # nothing written yet
    assert not (tmp_path / "reference").exists()  # --check writes nothing
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    page = tmp_path / "reference" / "metrics.md"
    page.write_text(page.read_text(encoding="utf-8").replace("counter", "gauge", 1), encoding="utf-8")
    assert gen.main(["--check"]) == 1


def test_the_metric_reference_lists_every_metric_with_its_type_and_labels() -> None:
    from lunlat import contract  # noqa: PLC0415 - the package under test

    text = (REPO / "docs" / "reference" / "metrics.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(lunlat_[a-z_]+)` \| (.+) \|$", text, re.MULTILINE))
    assert set(rows) == {spec.name for spec in contract.ALL_METRICS}
    for spec in contract.ALL_METRICS:
        kind, labels = rows[spec.name].split(" | ")[:2]
        assert kind == spec.type
        assert re.findall(r"`([a-z_]+)`", labels) == list(spec.labels)


def test_the_flags_reference_has_every_flag_of_serve() -> None:
    from lunlat.cli import _parser  # noqa: PLC0415

    text = (REPO / "docs" / "reference" / "flags.md").read_text(encoding="utf-8")
    serve_help = text.split("\n## `lunlat serve`\n", 1)[1].split("\n## ", 1)[0]
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    serve: argparse.ArgumentParser = commands.choices["serve"]
    flags = [s for action in serve._actions for s in action.option_strings]
    assert flags and [f for f in flags if f not in serve_help] == []


@pytest.mark.parametrize(
    "config",
    [
        "deploy/lunlat/host.yaml",
        "deploy/oracle/lunlat.yaml",
        "deploy/mssql/lunlat.yaml",
        "deploy/lab/lunlat.yaml",
        "tests/golden/lunlat.yaml",
    ],
)
def test_the_editors_schema_accepts_the_shipped_configs(config: str) -> None:
    schema = json.loads(
        (REPO / "docs" / "reference" / "lunlat-config.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.validate(yaml.safe_load((REPO / config).read_text(encoding="utf-8")), schema)


def test_the_editors_schema_refuses_what_check_config_refuses() -> None:
    schema = json.loads(
        (REPO / "docs" / "reference" / "lunlat-config.schema.json").read_text(encoding="utf-8")
    )
    wrong_configs: tuple[dict[str, object], ...] = (
        {"diskstat": {}},  # an unknown key
        {"luns": [{"match": {"alias": "a"}, "role": "redo"}]},  # not a role
        {"biolatency": {"max_devices": 0}},  # out of range
    )
    for wrong in wrong_configs:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


def test_the_readmes_counts_are_the_contracts_and_the_rules() -> None:
    """The numbers the README gives a newcomer follow the code: metric families, per-engine metrics,
    recording rules and alerts."""
    from lunlat import contract  # noqa: PLC0415
    from lunlat.engines.registry import ENGINES  # noqa: PLC0415

    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    families = re.search(r"(\d+) families in all", text)
    assert families is not None and int(families[1]) == len(contract.ALL_METRICS)
    for engine in ENGINES:
        assert re.search(rf"\b{len(engine.metrics)} {re.escape(engine.title)} metrics\b", text), engine.title
    groups = yaml.safe_load((REPO / "alerts" / "lunlat.rules.yml").read_text(encoding="utf-8"))["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    counts = re.search(r"(\d+) recording rules and (\d+) alerts", text)
    assert counts is not None
    assert (int(counts[1]), int(counts[2])) == (
        sum("record" in r for r in rules),
        sum("alert" in r for r in rules),
    )
