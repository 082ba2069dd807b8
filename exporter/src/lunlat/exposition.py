"""Prometheus text exposition (format 0.0.4) of the sample model.

Hand-written rather than prometheus_client.generate_latest because the scrape of a host with
thousands of LUNs is the hot path: generate_latest builds a Sample object and escapes every label
on every scrape, while a LabelSet here renders its text once (see bench/). The output is checked
against prometheus_client's own parser in tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from lunlat.model import Family

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """Integers exactly, floats as the shortest repr that round-trips; Go's spellings of the non-finite."""
    if type(value) is int:
        return str(value)
    if math.isfinite(value):
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def _render_column(name: str, family: Family, out: list[str]) -> None:
    assert family.column is not None
    labels, values = family.column
    if not values:
        return
    tail = f"e{family.exponent}\n" if family.exponent else "\n"
    # str() of an int is exact; anything else takes format_value's spelling.
    if set(map(type, values)) == {int}:
        texts = map(str, values)
    elif family.exponent:
        raise ValueError(f"{name}: a family with an exponent holds ints only")
    else:
        texts = map(format_value, values)
    out.append(tail.join(map(str.__add__, labels.prefixes(name), texts)))
    out.append(tail)


def _render_family(name: str, family: Family, out: list[str]) -> None:
    if family.column is not None:
        _render_column(name, family, out)
    samples = family.samples
    if family.exponent:
        tail = f"e{family.exponent}\n"
        out.extend([f"{name}{suffix}{labels.text} {value}{tail}" for suffix, labels, value in samples])
        return
    try:
        # Fast path: ints and finite floats print as Python prints them (repr), which the
        # text format accepts; only a non-finite float needs the slow path's spelling.
        out.extend([f"{name}{suffix}{labels.text} {value}\n" for suffix, labels, value in samples])
        if any(type(value) is float and not math.isfinite(value) for _, _, value in samples):
            raise ValueError("non-finite")
    except ValueError:
        del out[len(out) - len(samples) :]
        out.extend([f"{name}{s}{labels.text} {format_value(v)}\n" for s, labels, v in samples])


def render(families: Iterable[Family]) -> str:
    """Render families, merging those that share a name so each appears once, as the format requires."""
    merged: dict[str, list[Family]] = {}
    for family in families:
        merged.setdefault(family.spec.name, []).append(family)
    out: list[str] = []
    for name, group in merged.items():
        if not any(f.samples or (f.column is not None and len(f.column[1])) for f in group):
            continue
        spec = group[0].spec
        out.append(f"# HELP {name} {escape_help(spec.help)}\n# TYPE {name} {spec.type}\n")
        for family in group:
            _render_family(name, family, out)
    return "".join(out)
