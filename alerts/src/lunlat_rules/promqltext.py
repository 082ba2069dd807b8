"""Small helpers that write PromQL text, shared by the rule modules (each group's module and the
assembler, rules.py, which imports them all: so none of them imports rules.py)."""

from __future__ import annotations

from collections.abc import Sequence

from lunlat.promql.layers import SERIES_LABELS


def indent(text: str, spaces: int = 2) -> str:
    """Indent every line but the first (it continues a line already indented)."""
    return text.replace("\n", "\n" + " " * spaces)


def on(labels: Sequence[str] = SERIES_LABELS) -> str:
    return f"on ({', '.join(labels)})"


def number(value: float) -> str:
    return f"{value:.6g}"


def labelled(vector: str, **labels: str) -> str:
    """`vector` with these labels set (label_replace from no source label: always matches)."""
    for name, value in labels.items():
        vector = f'label_replace(\n  {indent(vector)},\n  "{name}", "{value}", "", ""\n)'
    return vector
