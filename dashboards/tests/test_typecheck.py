"""The dashboards against Grafana's TypeScript types of the pinned SDK build (dashboards/typecheck):
the generated ones pass `check.mjs` (TypeScript strict: every field known at every depth, every
panel's options and custom field config typed by its plugin, no colour only Grafana can resolve),
and deliberately broken copies fail with an error naming the field.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from dashboards.tests import boards
from lunlat.goals import load_goals
from lunlat.promql import recorded
from lunlat_dashboards import interference, overview, panels, render_all, to_json

TYPECHECK = boards.DASHBOARDS / "typecheck"
CHECK = TYPECHECK / "check.mjs"
GOALS = boards.REPO / "alerts" / "goals.yaml"
# Goals whose DSS tier sets a throughput floor (the floor row of the interference dashboard).
DSS_GOALS = boards.REPO / "alerts" / "tests" / "judged" / "dss.goals.yaml"
SDK = "@grafana/grafana-foundation-sdk"
# check.mjs: "<file>:<line>:<col>: error <code>: at <json path>[ (panel "<title>")]: <message>"
_ERROR = re.compile(r'^(?P<file>.+?):\d+:\d+: error (?P<code>\S+): at (?P<path>\S+)(?: \(panel ".*?"\))?: ')


def _node_or_skip() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to type-check the dashboards (Debian: nodejs, npm)")
    if not (TYPECHECK / "node_modules" / SDK).is_dir():
        pytest.skip("the type check's packages are not installed: run `npm ci` in dashboards/typecheck")
    return node


@dataclass(frozen=True, slots=True)
class Checked:
    returncode: int
    output: str
    errors: dict[str, list[tuple[str, str]]]  # file name → [(code, JSON path)]


def _check(node: str, files: list[Path]) -> Checked:
    result = subprocess.run(
        [node, str(CHECK), *map(str, files)], capture_output=True, text=True, check=False, timeout=120
    )
    errors: dict[str, list[tuple[str, str]]] = {}
    for line in result.stdout.splitlines():
        if match := _ERROR.match(line):
            errors.setdefault(Path(match["file"]).name, []).append((match["code"], match["path"]))
    return Checked(result.returncode, result.stdout + result.stderr, errors)


@cache
def _generated() -> dict[str, dict[str, Any]]:
    """File name → dashboard, as the generator writes it now."""
    return {name: json.loads(text) for name, text in render_all(load_goals(GOALS)).items()}


def _index(board: dict[str, Any], kind: str) -> int:
    """The first top-level panel of plugin `kind`."""
    return next(i for i, p in enumerate(board["panels"]) if p["type"] == kind)


# --- the real ones ----------------------------------------------------------------------------


def test_the_generated_dashboards_pass(tmp_path: Path) -> None:
    node = _node_or_skip()
    files = []
    for name, board in _generated().items():
        files.append(tmp_path / name)
        files[-1].write_text(json.dumps(board, indent=2), encoding="utf-8")
    checked = _check(node, files)
    assert checked.returncode == 0, checked.output
    assert f"ok: {len(files)} dashboard(s) against {SDK}" in checked.output


def test_the_rows_drawn_for_some_rules_only_pass(tmp_path: Path) -> None:
    """The rows drawn only where the rules record their series: the DSS floor (goals with a floor)
    and the error budget (rules recording the per-I/O SLO sums), which the committed files may lack."""
    node = _node_or_skip()
    dss = load_goals(DSS_GOALS)
    assert recorded.THROUGHPUT_FLOOR in panels.rules_record(dss)
    goals = load_goals(GOALS)
    with_sums = panels.rules_record(goals) | {recorded.SLO_EVENTS_SUM, recorded.SLO_BAD_EVENTS_SUM}
    drawn = {
        "floor.json": (to_json(interference.build(dss).build()), interference.FLOOR_ROW),
        "budget.json": (to_json(overview.build(goals, with_sums).build()), overview.BUDGET_ROW),
    }
    files = []
    for name, (board, row) in drawn.items():
        assert row in [p["title"] for p in board["panels"] if p["type"] == "row"], name
        files.append(tmp_path / name)
        files[-1].write_text(json.dumps(board, indent=2), encoding="utf-8")
    checked = _check(node, files)
    assert checked.returncode == 0, checked.output


def test_the_npm_build_is_the_python_pin() -> None:
    """The SDK publishes one build to PyPI as EPOCH!GRAFANA and to npm as GRAFANA-cogv0.0.x.EPOCH
    (the same build timestamp): the type check must read the types the generator was built from."""
    epoch, grafana = version("grafana-foundation-sdk").split("!")
    expected = f"{grafana}-cogv0.0.x.{epoch}"
    package = json.loads((TYPECHECK / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((TYPECHECK / "package-lock.json").read_text(encoding="utf-8"))
    assert package["devDependencies"][SDK] == expected
    assert lock["packages"][f"node_modules/{SDK}"]["version"] == expected


# --- broken copies ----------------------------------------------------------------------------


def _deep_unknown_option(board: dict[str, Any]) -> str:
    i = _index(board, "timeseries")
    board["panels"][i]["options"]["legend"]["sortByColumn"] = "Max"
    return f"panels[{i}].options.legend.sortByColumn"


def _wrong_type(board: dict[str, Any]) -> str:
    i = _index(board, "stat")
    board["panels"][i]["options"]["wideLayout"] = "yes"
    return f"panels[{i}].options.wideLayout"


def _unknown_panel_key(board: dict[str, Any]) -> str:
    i = _index(board, "bargauge")
    board["panels"][i]["thresholdsFrom"] = "goal"
    return f"panels[{i}].thresholdsFrom"


def _deep_unknown_custom(board: dict[str, Any]) -> str:
    i = _index(board, "heatmap")
    board["panels"][i]["fieldConfig"]["defaults"]["custom"] = {"hideFrom": {"legend": False, "graph": True}}
    return f"panels[{i}].fieldConfig.defaults.custom.hideFrom.graph"


def _custom_on_a_plugin_without_one(board: dict[str, Any]) -> str:
    i = _index(board, "stat")
    board["panels"][i]["fieldConfig"]["defaults"]["custom"] = {"lineWidth": 2}
    return f"panels[{i}].fieldConfig.defaults.custom.lineWidth"


def _override_of_an_unknown_option(board: dict[str, Any]) -> str:
    # The first time series with an override (not every one has one: the "Why" row's do not).
    i = next(
        i
        for i, p in enumerate(board["panels"])
        if p["type"] == "timeseries" and p.get("fieldConfig", {}).get("overrides")
    )
    properties = board["panels"][i]["fieldConfig"]["overrides"][0]["properties"]
    properties.append({"id": "custom.lineDash", "value": 1})
    return f"panels[{i}].fieldConfig.overrides[0].properties[{len(properties) - 1}].id"


def _unknown_query_field(board: dict[str, Any]) -> str:
    i = _index(board, "timeseries")
    board["panels"][i]["targets"][0]["step"] = "30s"
    return f"panels[{i}].targets[0].step"


def _enum_value_not_in_the_enum(board: dict[str, Any]) -> str:
    board["templating"]["list"][1]["refresh"] = 3
    return "templating.list[1].refresh"


def _theme_colour(board: dict[str, Any]) -> str:
    i = _index(board, "stat")
    board["panels"][i]["fieldConfig"]["defaults"]["thresholds"]["steps"][0]["color"] = "text"
    return f"panels[{i}].fieldConfig.defaults.thresholds.steps[0].color"


# name → (how to break the overview, returning the JSON path it broke; the error code expected)
BROKEN: dict[str, tuple[Callable[[dict[str, Any]], str], str]] = {
    "unknown-option-deep": (_deep_unknown_option, "TS2353"),
    "wrong-type": (_wrong_type, "TS2322"),
    "unknown-panel-key": (_unknown_panel_key, "TS2353"),
    "unknown-custom-deep": (_deep_unknown_custom, "TS2353"),
    "custom-without-fieldconfig": (_custom_on_a_plugin_without_one, "TS2322"),
    # TS2820: not assignable, with TypeScript's "did you mean" (custom.lineStyle).
    "override-unknown-option": (_override_of_an_unknown_option, "TS2820"),
    "unknown-query-field": (_unknown_query_field, "TS2353"),
    "enum-value": (_enum_value_not_in_the_enum, "TS2322"),
    "theme-colour": (_theme_colour, "colour"),
}

# Colours written explicitly and Grafana's palette names pass; theme names (grafana/grafana
# packages/grafana-data/src/themes/createVisualizationColors.ts: text, panel-bg, transparent), CSS
# names and malformed values do not.
ACCEPTED = ["#73BF69", "#73bf6980", "rgb(0, 128, 255)", "rgba(255,0,255,0.7)", "dark-red", "super-light-blue"]
REFUSED = [
    "text",
    "panel-bg",
    "transparent",
    "white",
    "#fff",
    "#zzzzzz",
    "rgb(300, 0, 0)",
    "rgba(1, 2, 3)",
    "",
]


def _colours(board: dict[str, Any]) -> list[str]:
    """Every colour above as a threshold step; the JSON paths of the refused ones."""
    i = _index(board, "stat")
    steps = f"panels[{i}].fieldConfig.defaults.thresholds.steps"
    board["panels"][i]["fieldConfig"]["defaults"]["thresholds"]["steps"] = [
        {"value": None if n == 0 else n, "color": c} for n, c in enumerate(ACCEPTED + REFUSED)
    ]
    return [f"{steps}[{n}].color" for n in range(len(ACCEPTED), len(ACCEPTED) + len(REFUSED))]


@dataclass(frozen=True, slots=True)
class Broken:
    checked: Checked
    paths: dict[str, str]  # case → the JSON path it broke
    colours: list[str]  # the JSON paths of the refused colours


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Broken:
    """One run of the check over every broken copy (each its own file, its errors its own)."""
    node = _node_or_skip()
    folder = tmp_path_factory.mktemp("broken")
    paths: dict[str, str] = {}
    files = []

    def write(name: str, board: dict[str, Any]) -> None:
        files.append(folder / f"{name}.json")
        files[-1].write_text(json.dumps(board, indent=2), encoding="utf-8")

    for name, (breaks, _) in BROKEN.items():
        board = copy.deepcopy(_generated()["lunlat-overview.json"])
        paths[name] = breaks(board)
        write(name, board)
    board = copy.deepcopy(_generated()["lunlat-overview.json"])
    colours = _colours(board)
    write("colours", board)
    return Broken(_check(node, files), paths, colours)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_copy_fails_naming_the_field(name: str, broken: Broken) -> None:
    assert broken.checked.returncode == 1
    expected = [(BROKEN[name][1], broken.paths[name])]
    assert broken.checked.errors.get(f"{name}.json") == expected, broken.checked.output


def test_only_explicit_colours_and_grafanas_palette_names_pass(broken: Broken) -> None:
    expected = [("colour", path) for path in broken.colours]
    assert broken.checked.errors.get("colours.json") == expected, broken.checked.output
