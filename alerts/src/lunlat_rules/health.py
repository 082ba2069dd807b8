"""The exporters' health (group lunlat-exporter; alerts/tests/capability.test.yml,
file_map.test.yml): lunlat down or absent, a source failing, erring or missing a capability, a
database's file map stale, and the host layer's own exporter down when it is not lunlat."""

from __future__ import annotations

from typing import Any

from lunlat import contract
from lunlat.goals import Goals
from lunlat_rules.rulefmt import alert


def host_exporter_alerts(goals: Goals) -> list[dict[str, Any]]:
    """The exporter the host layer is read from (goals host_layer), when it is not lunlat:
    its targets' `up`, as LunLatencyExporterDown watches lunlat's."""
    choice, health = goals.host_layer, goals.health
    if choice.source == "lunlat" or choice.selector is None:
        return []
    return [
        alert(
            "LunLatencyHostExporterDown",
            f"up{{{choice.selector}}} == 0",
            health.exporter_down_for,
            "warning",
            f"{choice.source} {{{{ $labels.instance }}}} is down: no host layer for its LUNs",
            f"Prometheus cannot scrape {{{{ $labels.instance }}}} (job {{{{ $labels.job }}}}), the "
            f"{choice.source} the goals read the host layer from: the host-layer latency of its "
            "LUNs is not recorded and cannot alert; the database layer still is.",
            f"{goals.runbook_base_url}/exporter-down.md#lunlatencyhostexporterdown",
        )
    ]


# The per-I/O histogram's lost samples, as a PromQL alternation (only biolatency counts them).
LOST_SAMPLES = "|".join(contract.BIO_LOST_SAMPLE_REASONS)


def _within(selector: str, matcher: str) -> str:
    """The goals' selector (possibly empty) with one more matcher."""
    return f"{selector},{matcher}" if selector else matcher


def lost_sample_share(goals: Goals) -> float:
    """The share of the per-I/O histogram's I/Os lost (contract.BIO_LOST_SAMPLE_REASONS) above
    which LunLatencySourceErrors opens a ticket: a tenth of the tightest per-I/O objective's error
    budget (the project's own threshold). Were every lost I/O slow, the SLO's error ratio would be
    off by at most that tenth; below it the loss cannot move a burn alert materially."""
    budgets = [goals.slo.error_budget, *(o.error_budget for o in goals.slo.objectives)]
    return round(min(budgets) / 10, 12)


def source_errors_expr(goals: Goals) -> str:
    """Any error in the window, but the histogram's lost samples only past lost_sample_share() of
    the histogram's I/Os of the same exporter in the same window (only the biolatency source counts
    those reasons: tests/unit/test_contract_docs.py)."""
    sel, window = goals.selector, goals.health.source_errors_window
    errors = contract.SOURCE_ERRORS.name
    counted = f"{contract.DEVICE_IO_LATENCY.name}_count"
    others, lost = _within(sel, f'reason!~"{LOST_SAMPLES}"'), _within(sel, f'reason=~"{LOST_SAMPLES}"')
    return (
        f"increase({errors}{{{others}}}[{window}]) > 0\n"
        "or\n"
        f"increase({errors}{{{lost}}}[{window}])\n"
        f"  / on (job, instance) group_left\n"
        f"  sum by (job, instance) (increase({counted}{{{sel}}}[{window}]))\n"
        f"  > {lost_sample_share(goals)!r}"
    )


def health_alerts(goals: Goals) -> list[dict[str, Any]]:
    health, sel, base = goals.health, goals.selector, goals.runbook_base_url
    source_up = contract.SOURCE_UP.name
    # Only what the login, grants or config can restore opens a ticket (contract.Capability).
    fixable = "|".join(contract.FIXABLE_CAPABILITIES)
    capability_sel = _within(sel, f'capability=~"{fixable}"')
    return [
        alert(
            "LunLatencyExporterDown",
            f"up{{{sel}}} == 0",
            health.exporter_down_for,
            "page",
            "lunlat exporter {{ $labels.instance }} is down",
            "Prometheus cannot scrape {{ $labels.instance }} (job {{ $labels.job }}): the LUN latency of "
            "this host is not watched, its latency alerts are inhibited.",
            f"{base}/exporter-down.md#lunlatencyexporterdown",
        ),
        alert(
            "LunLatencyExporterAbsent",
            f"absent(up{{{sel}}})",
            health.exporter_absent_for,
            "page",
            "No lunlat exporter is scraped",
            f"Prometheus has no target matching {{{sel}}}: no LUN latency is watched anywhere.",
            f"{base}/exporter-down.md#lunlatencyexporterabsent",
        ),
        alert(
            "LunLatencySourceDown",
            f"{source_up}{{{sel}}} == 0",
            health.source_down_for,
            "warning",
            "lunlat source {{ $labels.source }} on {{ $labels.instance }} is failing",
            "The {{ $labels.source }} source of {{ $labels.instance }} failed or missed its deadline in "
            "every scrape for " + health.source_down_for + ": its latency series are missing or stale.",
            f"{base}/source-down.md#lunlatencysourcedown",
        ),
        alert(
            "LunLatencySourceErrors",
            source_errors_expr(goals),
            None,
            "ticket",
            "lunlat source {{ $labels.source }} on {{ $labels.instance }} reports {{ $labels.reason }} errors",
            # A lost sample's value is its share of the histogram's I/Os (source_errors_expr).
            f'{{{{ if match "{LOST_SAMPLES}" $labels.reason }}}}'
            "{{ $value | humanizePercentage }} of the per-I/O histogram's I/Os of {{ $labels.instance }} "
            "were lost ({{ $labels.reason }}) in the last " + health.source_errors_window + ", above the "
            f"{lost_sample_share(goals):.2%} a ticket waits for"
            "{{ else }}{{ $value | humanize }} {{ $labels.reason }} errors from the {{ $labels.source }} "
            "source of {{ $labels.instance }} in the last " + health.source_errors_window + "{{ end }}.",
            f"{base}/source-errors.md#lunlatencysourceerrors",
        ),
        alert(
            "LunLatencySourceCapabilityMissing",
            f"{contract.SOURCE_CAPABILITY.name}{{{capability_sel}}} == 0",
            health.source_capability_missing_for,
            "ticket",
            "lunlat source {{ $labels.source }} on {{ $labels.instance }} cannot read "
            "{{ $labels.capability }}",
            "The {{ $labels.source }} source of {{ $labels.instance }} has not read {{ $labels.capability }} "
            "for " + health.source_capability_missing_for + ": its database layer is partial (the rest is "
            "published). Fix the login, grants or exporter config (the runbook says how).",
            f"{base}/source-capability.md#lunlatencysourcecapabilitymissing",
        ),
        file_map_alert(goals),
    ]


def file_map_alert(goals: Goals) -> dict[str, Any]:
    """A database's file map past its limit, or missing while the source is up (its limit is
    published, its age is not): the series have lost `file` and `lun`, the LUNs their role."""
    health, sel, base = goals.health, goals.selector, goals.runbook_base_url
    age = f"{contract.DB_FILE_MAP_AGE.name}{{{sel}}}"
    limit = f"{contract.DB_FILE_MAP_MAX_AGE.name}{{{sel}}}"
    on = "on (job, instance, source)"
    return alert(
        "LunLatencyFileMapStale",
        f"(\n  {age}\n  > {on}\n  {limit}\n)\nor\n(\n  {limit}\n  unless {on}\n  {age}\n)",
        health.file_map_stale_for,
        "ticket",
        "lunlat source {{ $labels.source }} on {{ $labels.instance }} has no current file map",
        "The {{ $labels.source }} source of {{ $labels.instance }} has not read its database's files "
        "for longer than its file_map_max_age_seconds, or never has (for "
        + health.file_map_stale_for
        + "): its series have no file or lun, its LUNs no database role, so the database-vs-host "
        "comparison and the rules that join on lun are blank for it. Usually a grant missing "
        "(the runbook says how to check).",
        f"{base}/file-map-stale.md#lunlatencyfilemapstale",
    )
