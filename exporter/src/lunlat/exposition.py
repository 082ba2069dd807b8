"""Prometheus text exposition (format 0.0.4) of the sample model, and OpenMetrics 1.0 for the
scrapers that ask for it (server.wants_openmetrics).

Hand-written rather than prometheus_client.generate_latest because the scrape of a host with
thousands of LUNs is the hot path: generate_latest builds a Sample object and escapes every label
on every scrape, while a LabelSet here renders its text once (see bench/). The output is checked
against prometheus_client's own parser in tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from lunlat.model import Family

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# prometheus_client's openmetrics.exposition.CONTENT_TYPE_LATEST, the answer it gives an Accept of
# OpenMetrics without a version or with 1.0.0 (exposition.choose_encoder).
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# OpenMetrics 1.0 ("Overall Structure"): the exposition MUST end with this line, which tells a
# reader the page is whole (prometheus.io/docs/specs/om/open_metrics_spec/).
OPENMETRICS_EOF = "# EOF\n"


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_openmetrics_help(text: str) -> str:
    """OpenMetrics 1.0's HELP is an `escaped-string` (its ABNF): a double quote is no `normal-char`
    there, so it is escaped too, as in label values; the text format leaves it as it is."""
    return escape_help(text).replace('"', '\\"')


# Readers parse a value with Go's strconv.ParseFloat (prometheus/common, expfmt/text_parse.go,
# parseFloat), which refuses a literal beyond float64's range (~1.8e308) and with it the whole
# exposition. An int below this bound, times 10**exponent for |exponent| <= 8, stays in range.
INT_LIMIT = 10**300


def _ints_in_range(values: Sequence[float]) -> bool:
    """All `values` are ints (not bools) the text format takes as they print."""
    if not values or set(map(type, values)) != {int}:
        return False
    return min(values) > -INT_LIMIT and max(values) < INT_LIMIT


def format_value(value: float, exponent: int = 0) -> str:
    """`value * 10**exponent` as the text format takes it: integers exactly (`1234e-3`), floats as
    the shortest repr that round-trips, Go's spellings of the non-finite; an int beyond float64's
    range is the infinity a float64 holds for it."""
    if type(value) is int:
        if -INT_LIMIT < value < INT_LIMIT:
            return f"{value}e{exponent}" if exponent else str(value)
        return "+Inf" if value > 0 else "-Inf"
    value = float(value)
    if exponent:  # as Family.value: divide for a negative exponent, so 1234e-3 and 1.234 agree
        value = value / 10.0**-exponent if exponent < 0 else value * 10.0**exponent
    if math.isfinite(value):
        return repr(value)
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def _render_column(name: str, family: Family, out: list[str]) -> None:
    assert family.column is not None
    labels, values = family.column
    if not values:
        return
    texts = labels.texts()
    # The usual case: ints in range, printed by str() with the exponent as a shared tail. Each line
    # is name + `{labels} ` + value + tail, so the lines joined are name, then the `{labels} value`
    # pieces joined by tail + name, then tail: the name is never pasted onto a kept string.
    if _ints_in_range(values):
        tail = f"e{family.exponent}\n" if family.exponent else "\n"
        out.append(name)
        out.append((tail + name).join(map(str.__add__, texts, map(str, values))))
        out.append(tail)
        return
    exponent = family.exponent
    out.extend([f"{name}{text}{format_value(v, exponent)}\n" for text, v in zip(texts, values, strict=True)])


def _render_family(name: str, family: Family, out: list[str]) -> None:
    if family.column is not None:
        _render_column(name, family, out)
    samples = family.samples
    exponent = family.exponent
    if not samples:
        return
    if _plain([value for _, _, value in samples], exponent):
        # Ints in range and finite floats print as Python prints them (str, repr), which the
        # text format accepts.
        tail = f"e{exponent}\n" if exponent else "\n"
        out.extend([f"{name}{suffix}{labels.text} {value}{tail}" for suffix, labels, value in samples])
        return
    out.extend([f"{name}{s}{labels.text} {format_value(v, exponent)}\n" for s, labels, v in samples])


def _plain(values: list[float], exponent: int) -> bool:
    """Whether every value prints as Python prints it: ints in range, or (without an exponent)
    finite floats too. A bool, for one, prints "True"."""
    types = set(map(type, values))
    if exponent or float not in types:
        return _ints_in_range(values)
    if not types <= {int, float}:
        return False
    return all(math.isfinite(v) if type(v) is float else -INT_LIMIT < v < INT_LIMIT for v in values)


def _merged(families: Iterable[Family]) -> dict[str, list[Family]]:
    """Families by name, those that share one merged so each appears once, as both formats require;
    families without a sample left out."""
    merged: dict[str, list[Family]] = {}
    for family in families:
        merged.setdefault(family.spec.name, []).append(family)
    return {
        name: group
        for name, group in merged.items()
        if any(f.samples or (f.column is not None and len(f.column[1])) for f in group)
    }


def render(families: Iterable[Family]) -> str:
    """The text format 0.0.4 of `families`."""
    out: list[str] = []
    for name, group in _merged(families).items():
        spec = group[0].spec
        out.append(f"# HELP {name} {escape_help(spec.help)}\n# TYPE {name} {spec.type}\n")
        for family in group:
            _render_family(name, family, out)
    return "".join(out)


def render_openmetrics(families: Iterable[Family], eof: bool = True) -> str:
    """OpenMetrics 1.0 of `families`; `eof`: end it with `# EOF` (False: more families follow).

    The samples' lines are the text format's: names, label escaping and numbers (`1234e-3`, `+Inf`,
    `NaN`) are written alike in both (the spec's ABNF: metricname, escaped-string, realnumber). What
    differs is the metadata (prometheus.io/docs/specs/om/open_metrics_spec/): a counter's
    MetricFamily is named without the `_total` its samples carry ("Counter"), a unit is said in a
    `# UNIT` line and must be the name's suffix ("Unit"), HELP escapes `"` too. A counter's Created
    timestamp (`_created`) is a SHOULD ("Counter"), not a MUST, and is left out: lunlat's counters
    are the kernel's and the databases', counted since a start lunlat does not know.
    """
    out: list[str] = []
    for name, group in _merged(families).items():
        spec = group[0].spec
        family_name = name.removesuffix("_total") if spec.type == "counter" else name
        out.append(
            f"# HELP {family_name} {escape_openmetrics_help(spec.help)}\n# TYPE {family_name} {spec.type}\n"
        )
        if spec.unit:
            out.append(f"# UNIT {family_name} {spec.unit}\n")
        for family in group:
            _render_family(name, family, out)
    if eof:
        out.append(OPENMETRICS_EOF)
    return "".join(out)
