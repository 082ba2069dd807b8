"""The committed dashboards as the tests read them: every query (panel targets, annotations,
template variables) and the variable expansion Grafana applies before sending one to Prometheus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
ALL = "$__all"
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\)$", re.DOTALL)
# Characters Grafana escapes in a multi-value variable's values before putting them in a regex
# matcher (its prometheusSpecialRegexEscape): a backslash doubled for the PromQL string.
_REGEX_SPECIAL = re.compile(r"([$^*{}\[\]'+?.()|])")


@cache
def load() -> dict[str, dict[str, Any]]:
    """File name → dashboard JSON, every committed dashboard."""
    return {
        path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(DASHBOARDS.glob("*.json"))
    }


def row_panels(board: Mapping[str, Any], title: str) -> list[dict[str, Any]]:
    """The panels after row `title` up to the next row (the rows are not collapsed)."""
    found, inside = [], False
    for panel in board["panels"]:
        if panel.get("type") == "row":
            inside = panel["title"] == title
        elif inside:
            found.append(panel)
    return found


def panels(board: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that is not a row, collapsed rows' panels included."""
    for panel in board.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


@dataclass(frozen=True, slots=True)
class Query:
    board: str
    where: str  # "panel 'title' A", "annotation 'name'", "variable job"
    expr: str
    instant: bool = False

    def __str__(self) -> str:
        return f"{self.board}: {self.where}"


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    label: str  # the label whose values it lists
    match: str  # the series selector it lists them from
    all_value: str | None  # None: no "All" option
    current: str | None  # the default when there is no "All"


def variables(board: Mapping[str, Any]) -> list[Variable]:
    """The board's query variables (label_values), in dashboard order."""
    found = []
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        text = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        parsed = _LABEL_VALUES.match(text.strip())
        assert parsed, f"variable {var['name']}: not label_values(...): {text!r}"
        current = var.get("current", {}).get("value")
        found.append(
            Variable(
                var["name"],
                parsed["label"],
                parsed["match"] or "",
                var.get("allValue") if var.get("includeAll") else None,
                current if isinstance(current, str) else None,
            )
        )
    return found


def queries(name: str, board: Mapping[str, Any]) -> list[Query]:
    """Every PromQL the board sends: panel targets, annotations and the variables' selectors."""
    found = [
        Query(
            name, f"panel {panel['title']!r} {target['refId']}", target["expr"], bool(target.get("instant"))
        )
        for panel in panels(board)
        for target in panel.get("targets", [])
    ]
    found += [
        Query(name, f"annotation {a['name']!r}", a["expr"])
        for a in board.get("annotations", {}).get("list", [])
        if a.get("expr")
    ]
    found += [Query(name, f"variable {v.name}", v.match) for v in variables(board) if v.match]
    return found


def regex_escape(value: str) -> str:
    return _REGEX_SPECIAL.sub(r"\\\\\1", value)


def expand(expr: str, values: Mapping[str, str]) -> str:
    """`expr` with every $var / ${var} replaced from `values`; KeyError naming one that is not."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"unresolved variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


def referenced(expr: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in _VARIABLE.finditer(expr)}
