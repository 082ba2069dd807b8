"""Multipath paths (groups lunlat-paths and lunlat-paths-history; alerts/tests/paths.test.yml): a
LUN with fewer working paths than it had over the lookback, read from the recorded hourly maxima
where the lookback is longer than their window."""

from __future__ import annotations

from typing import Any

from lunlat import contract
from lunlat.goals import Goals, duration_seconds
from lunlat.promql.recorded import (
    EVALUATION_INTERVAL,
    PATHS_HISTORY_INTERVAL,
    PATHS_HISTORY_WINDOW,
    PATHS_INTERVAL_MAX,
    PATHS_MAX,
)
from lunlat_rules.annotations import OWNER, template_value
from lunlat_rules.rulefmt import alert, record


def path_alerts(goals: Goals) -> list[dict[str, Any]]:
    """A LUN whose working paths are fewer than the most paths it had over the lookback: a path
    failed (its device not running), or was dropped from the map after its device was deleted."""
    paths, sel = goals.paths, goals.selector
    total, failed = contract.LUN_PATHS.name, contract.LUN_PATHS_FAILED.name
    most = f"max_over_time({total}{{{sel}}}[{paths.lookback}])"
    if paths_history(goals):
        # The recorded hourly maxima over the lookback, and the raw gauge over the last two of
        # their intervals (what they may not hold yet): the larger of the two.
        recent = f"{2 * duration_seconds(PATHS_HISTORY_INTERVAL) / 60:g}m"
        most = (
            "max by (job, instance, lun, device) (\n"
            f'      label_replace(max_over_time({PATHS_MAX}{{{sel}}}[{paths.lookback}]), "from", "history", "", "")\n'
            "    or\n"
            f'      label_replace(max_over_time({total}{{{sel}}}[{recent}]), "from", "recent", "", "")\n'
            "    )"
        )
    expr = (
        "(\n"
        f"    {most}\n"
        f"  - ({total}{{{sel}}} - {failed}{{{sel}}})\n"
        "  > 0\n"
        ")\n"
        "* on (job, instance, lun, device) group_left (database, role, workload)\n"
        f'  {contract.LUN_INFO.name}{{{sel}, kind="lun"}}'
    )
    now = template_value(
        f"printf `{total}{{job=%q, instance=%q, device=%q}} - {failed}{{job=%q, instance=%q, device=%q}}` "
        "$labels.job $labels.instance $labels.device $labels.job $labels.instance $labels.device",
        '"%.0f"',
    )
    return [
        alert(
            "LunLatencyPathLost",
            expr,
            paths.for_,
            paths.severity,
            "LUN {{ $labels.lun }}" + OWNER + " on {{ $labels.instance }} lost "
            "{{ $value | humanize }} path(s)",
            "Multipath LUN {{ $labels.lun }} ({{ $labels.device }}) on {{ $labels.instance }} has "
            + now
            + " working path(s), {{ $value | humanize }} fewer than it had in the last "
            + paths.lookback
            + ": a path failed (its device is not running) or was dropped from the map. Its I/O now "
            "goes over the paths left: expect its latency to rise before anything else does.",
            f"{goals.runbook_base_url}/path-lost.md#lunlatencypathlost",
        )
    ]


def paths_interval(goals: Goals) -> str | None:
    """The path-loss group's `interval`: its alert's `for`, within [the evaluation interval,
    PATHS_INTERVAL_MAX]; None (the evaluation interval) where that is what it comes to. An
    alert fires at the first evaluation at least `for` after the one that found it pending
    (prometheus.io/docs/prometheus/latest/configuration/alerting_rules, `for`), so a lost path
    warns within the evaluation interval plus `for` plus one more interval: at most 2 minutes
    with the default `for: 1m`, where a 15 s group warned within 1m15s."""
    seconds = max(duration_seconds(goals.paths.for_), duration_seconds(EVALUATION_INTERVAL))
    if seconds >= duration_seconds(PATHS_INTERVAL_MAX):
        return PATHS_INTERVAL_MAX
    return None if seconds == duration_seconds(EVALUATION_INTERVAL) else f"{seconds:g}s"


def paths_history(goals: Goals) -> list[dict[str, Any]]:
    """PATHS_MAX, where the lookback is longer than its window (else the alert reads the gauge)."""
    if duration_seconds(goals.paths.lookback) <= duration_seconds(PATHS_HISTORY_WINDOW):
        return []
    total = f"{contract.LUN_PATHS.name}{{{goals.selector}}}"
    return [record(PATHS_MAX, f"max_over_time({total}[{PATHS_HISTORY_WINDOW}])")]
