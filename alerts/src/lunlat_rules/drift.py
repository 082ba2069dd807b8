"""Drift before the breach: a LUN's judged latency against its own same-hour-of-week baseline
(docs/alerting.md, "Drift before the breach"; goals `drift:`).

A log LUN whose writes creep from 0.18 to 0.6 ms raises nothing while it stays within its 1 ms goal;
this opens a ticket first. What is compared is the latency the goal judges (recorded.JUDGED_LATENCY,
per LUN, op, layer and `judged` kind), so a scan's large reads moving a LUN's average are no drift of
its small reads, and a baseline of one kind is never compared with a latency of another.

Kept cheap (issue 41's budget): one recorded series per LUN, op and layer, the judged latency's
average over `drift.window`, written once per recorded.DRIFT_INTERVAL (5m) by a group of its own.
The baseline is never recorded: it is that same series read back `offset 1w`, `2w` … (the same hour
of the week), their median, in the alert and in the dashboards (`baseline`, one definition).

The group's own `interval` overrides Prometheus' evaluation_interval for its rules only
(prometheus.io/docs/prometheus/latest/configuration/recording_rules: `<rule_group>`, "interval:
<duration> | default = global.evaluation_interval"); `offset` reads a selector that far in the past
(querying/basics, "offset modifier"), so the baseline needs the records kept that long: weeks x 1w
plus the window within the TSDB's retention (`--storage.tsdb.retention.time`, "Defaults to 15d":
docs/storage.md), which the default two weeks are.

A rule of this group reads the 1-minute judged latency, which groups lunlat-latency-{read,write}
record every 15 s: it sees them at most one of their evaluations late, which
a 5-minute ticket with a 1-hour window does not notice (alerts/tests/test_rule_groups.py allows a
group evaluated at least ten times less often to read a faster group's records, nothing else).
"""

from __future__ import annotations

from typing import Any

from lunlat.goals import Drift, Goals, duration_seconds
from lunlat.promql.layers import SERIES_LABELS
from lunlat.promql.recorded import (
    BREACH_WINDOW,
    DRIFT_GROUP,
    DRIFT_INTERVAL,
    DRIFT_MIN_COVERAGE,
    GOAL,
    GOAL_MIN_IOPS,
    JUDGED_LATENCY,
    OPS,
)
from lunlat_rules.promqltext import indent as _indent
from lunlat_rules.promqltext import number as _number
from lunlat_rules.promqltext import on as _on

ALERT = "LunLatencyDrift"
# The labels of a judged latency series: the LUN's, its op and which I/Os were judged.
DRIFT_LABELS: tuple[str, ...] = (*SERIES_LABELS, "op", "judged")
# The label the baseline's weeks are told apart by before their median drops it: `or` keeps a right-hand
# series only where no left-hand one has the same labels, and an offset changes no label, so each week
# gets its own value of it first (label_replace from an empty source always matches), and
# `quantile without (week)` takes the median across them (prometheus.io/docs/prometheus/latest/querying/
# operators: "Logical/set binary operators", "Aggregation operators"; functions: label_replace).
WEEK_LABEL = "week"
# How far back from each week's instant its record is looked for: two of the group's intervals. The
# records are DRIFT_INTERVAL apart, and a plain `offset 1w` selector finds the one at that instant only
# while none was missed: Prometheus 3 excludes a sample exactly at the lookback's left edge ("Range
# selectors and lookback exclude samples coinciding with the left boundary", docs/migration.md of
# prometheus/prometheus), so one evaluation missed a week ago (a restart) would leave a hole in the
# baseline and restart the alert's `for`. last_over_time over two intervals bridges one.
BASELINE_LOOKBACK = f"{2 * int(duration_seconds(DRIFT_INTERVAL)) // 60}m"


def window_average(op: str, drift: Drift) -> str:
    """The recorded name of the judged `op` latency averaged over the drift window (…:avg1h)."""
    return JUDGED_LATENCY.format(op=op, window=drift.window)


def baseline(series: str, drift: Drift, bridged: bool = True) -> str:
    """The same-hour-of-week baseline of `series` (the window average, a selector with any matchers):
    its value 1 … `drift.weeks` weeks ago, the median of the weeks that have one. A week without one
    (no history yet, the LUN idle at that hour) is left out; none at all: no baseline, no sample.

    `bridged`: each week's record looked for over BASELINE_LOOKBACK (the alert). A dashboard draws it
    without (its lint wants no fixed range): its points fall between two records, and Prometheus'
    lookback (5 minutes by default: querying/basics, "Staleness") finds the one before."""
    weeks = [
        "label_replace("
        + (
            f"last_over_time({series}[{BASELINE_LOOKBACK}] offset {offset})"
            if bridged
            else f"{series} offset {offset}"
        )
        + f', "{WEEK_LABEL}", "{number}", "", "")'
        for number, offset in enumerate(drift.offsets(), start=1)
    ]
    joined = "\n  or\n    ".join(weeks)
    return f"quantile without ({WEEK_LABEL}) (0.5,\n    {joined}\n)"


class DriftRules:
    """The group `lunlat-drift` for one goal definition: the window averages and the ticket."""

    def __init__(self, goals: Goals) -> None:
        self.goals = goals
        self.drift = goals.drift

    def records(self) -> list[dict[str, Any]]:
        """Per op: the judged latency's average over the window, where the LUN was judged (busier
        than its idle guard, which the judged latency already applies) for at least
        DRIFT_MIN_COVERAGE of the evaluations in it that saw the LUN at all (its idle guard series
        exists whenever its I/O is counted): an hour with a few busy minutes is no LUN's usual."""
        window = self.drift.window
        rules = []
        for op in OPS:
            judged = JUDGED_LATENCY.format(op=op, window=BREACH_WINDOW)
            expr = (
                f"avg_over_time({judged}[{window}])\n"
                "and\n"
                "(\n"
                f"    count_over_time({judged}[{window}])\n"
                f"  >= {_on(SERIES_LABELS)} group_left ()\n"
                f"    {_number(DRIFT_MIN_COVERAGE)} * count_over_time({GOAL_MIN_IOPS}[{window}])\n"
                ")"
            )
            rules.append({"record": window_average(op, self.drift), "expr": expr})
        return rules

    def alerts(self) -> list[dict[str, Any]]:
        """Per op: the window average at least `ratio` times its baseline and `min_rise_ms` above it,
        the window average within the goal and the latest minute not above it (a breach pages
        instead; Alertmanager mutes this ticket under that page), for `for`. Value: the ratio."""
        drift = self.drift
        rules = []
        for op in OPS:
            average = window_average(op, drift)
            usual = baseline(average, drift)
            judged = JUDGED_LATENCY.format(op=op, window=BREACH_WINDOW)
            on = _on(SERIES_LABELS)
            expr = (
                "(\n"
                f"    {average}\n"
                "  /\n"
                f"    {_indent(usual, 4)}\n"
                f"  > {_number(drift.ratio)}\n"
                "and\n"
                f"    {average}\n"
                "  -\n"
                f"    {_indent(usual, 4)}\n"
                f"  >= {_number(drift.min_rise_ms / 1000)}\n"
                "and\n"
                f"  {average} <= {on} group_left () {GOAL}\n"
                ")\n"
                f"unless {_on((*SERIES_LABELS, 'op'))}\n"
                f"  ({judged} > {on} group_left () {GOAL})"
            )
            rules.append(
                {
                    "alert": ALERT,
                    "expr": expr,
                    "for": drift.for_,
                    "labels": {"op": op, "severity": drift.severity},
                    "annotations": self._annotations(op),
                }
            )
        return rules

    def _annotations(self, op: str) -> dict[str, str]:
        drift = self.drift
        matchers = ", ".join(f"{label}=%q" for label in DRIFT_LABELS)
        args = " ".join(f"$labels.{label}" for label in DRIFT_LABELS)
        average = window_average(op, drift)
        now = f"printf `1000 * {average}{{{matchers}}}` {args}"
        # The baseline is the average over the ratio the alert's value is: no second copy of its query.
        usual = f"printf `1000 * {average}{{{matchers}}} / %f` {args} $value"
        goal_matchers = ", ".join(f"{label}=%q" for label in SERIES_LABELS)
        goal_args = " ".join(f"$labels.{label}" for label in SERIES_LABELS)
        goal = f"printf `1000 * {GOAL}{{{goal_matchers}}}` {goal_args}"

        def value(query: str) -> str:
            return f'{{{{ with {query} | query }}}}{{{{ . | first | value | printf "%.2f" }}}}{{{{ end }}}}'

        weeks = "week" if drift.weeks == 1 else f"{drift.weeks} weeks"
        owner = "{{ with $labels.database }} ({{ . }}{{ with $labels.role }} {{ . }}{{ end }}){{ end }}"
        return {
            "summary": f"{op.capitalize()} latency of LUN {{{{ $labels.lun }}}}{owner} drifting up: "
            f'{{{{ printf "%.1f" $value }}}}x its usual for this hour of the week, still within goal',
            "description": f"The {drift.window} average latency of the judged {op}s (judged "
            "{{ $labels.judged }}) of LUN {{ $labels.lun }} on {{ $labels.instance }} (database "
            "{{ $labels.database }}, role {{ $labels.role }}, workload {{ $labels.workload }}, layer "
            f"{{{{ $labels.layer }}}}) is {value(now)} ms, "
            f'{{{{ printf "%.1f" $value }}}}x its baseline of {value(usual)} ms (its {drift.window} average at '
            f"this time of the week, the median over the last {weeks}) and at least "
            f"{_number(drift.min_rise_ms)} ms above it for {drift.for_}, while within its goal of "
            f"{value(goal)} ms: no page yet. Find what changed since last week before it breaches.",
            "runbook_url": f"{self.goals.runbook_base_url}/drift.md#{ALERT.lower()}",
        }

    def group(self) -> dict[str, Any]:
        """The group, on its own slower interval (the window average needs no 15 s cadence)."""
        return {
            "name": DRIFT_GROUP,
            "interval": DRIFT_INTERVAL,
            "rules": [*self.records(), *self.alerts()],
        }


def drift_group(goals: Goals) -> dict[str, Any]:
    return DriftRules(goals).group()
