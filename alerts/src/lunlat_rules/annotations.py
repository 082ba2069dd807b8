"""Pieces of the alerts' annotations: Go templates that query the alert's own series when it fires
(Prometheus' template functions `query`, `first`, `value`, `printf`:
prometheus.io/docs/prometheus/latest/configuration/template_reference), and the words naming it."""

from __future__ import annotations

from lunlat.promql.layers import SERIES_LABELS
from lunlat.promql.recorded import BREACH_WINDOW


def series_query(metric: str, *extra: str, scale: str = "") -> str:
    """A template query fetching `metric` for the alert's own series (its SERIES_LABELS)."""
    matchers = ", ".join([*extra, *(f"{label}=%q" for label in SERIES_LABELS)])
    args = " ".join(f"$labels.{label}" for label in SERIES_LABELS)
    return f"printf `{scale}{metric}{{{matchers}}}` {args}"


def ratio_query(numerator: str, denominator: str, *extra: str, scale: str = "") -> str:
    """A template query dividing two recorded series (breach window) of the alert's own series."""
    window = BREACH_WINDOW
    matchers = ", ".join([*extra, *(f"{label}=%q" for label in SERIES_LABELS)])
    args = " ".join(f"$labels.{label}" for label in SERIES_LABELS)
    return (
        f"printf `{scale}{numerator.format(window=window)}{{{matchers}}} / "
        f"{denominator.format(window=window)}{{{matchers}}}` {args} {args}"
    )


def template_value(query: str, fmt: str) -> str:
    return f"{{{{ with {query} | query }}}}{{{{ . | first | value | printf {fmt} }}}}{{{{ end }}}}"


# " (PROD data)" when the LUN is labelled with a database (and role), else nothing.
OWNER = "{{ with $labels.database }} ({{ . }}{{ with $labels.role }} {{ . }}{{ end }}){{ end }}"


def where_text() -> str:
    """The alert's LUN, host, database, role, workload and layer, in words."""
    return (
        "LUN {{ $labels.lun }} on {{ $labels.instance }} (database {{ $labels.database }}, role "
        "{{ $labels.role }}, workload {{ $labels.workload }}, layer {{ $labels.layer }})"
    )


def named_wait(wait: str) -> str:
    """A database wait's name as the text says it: quoted when it has spaces (Oracle's)."""
    return f"'{wait}'" if " " in wait else wait
