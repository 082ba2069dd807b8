"""Small helpers that write PromQL text, shared by the rule modules (rules.py and the group modules
it imports, which therefore cannot import rules.py)."""

from __future__ import annotations

from collections.abc import Sequence

from lunlat.layers import SERIES_LABELS


def indent(text: str, spaces: int = 2) -> str:
    """Indent every line but the first (it continues a line already indented)."""
    return text.replace("\n", "\n" + " " * spaces)


def on(labels: Sequence[str] = SERIES_LABELS) -> str:
    return f"on ({', '.join(labels)})"


def number(value: float) -> str:
    return f"{value:.6g}"
