"""Prometheus recording and alert rules generated from the goal definition (`alerts/goals.yaml`).

Why generated: the goal, the idle guard, the windows and every metric name must agree between the
rules, the dashboards and the docs (docs/contract.md §3; the shape of the monitoring mixins and sloth). Editing YAML by
hand drifts; `lunlat-rules generate --check` (.ci/generate) fails CI when the committed file is not what this
module writes.

Shape of what is generated (names `level:metric:operation`, one series per LUN and `layer`):

- `lunlat:iops:rate1m`, `lunlat:throughput_bytes:rate1m` with `op` = read | write;
- `lunlat:{read,write}_latency_seconds:avg1m` = Δtime / Δoperations of every I/O (no operations: no
  sample);
- `lunlat:latency_goal_seconds` and `lunlat:latency_goal_min_iops`: each LUN's goal and idle guard,
  from the default and the first matching override, `severity` and which I/Os each op judges
  (`judge_read`, `judge_write`) as labels. The goal is data in Prometheus, so one alert rule serves
  every tier and dashboards draw each LUN's own goal line;
- `lunlat:judged_{read,write}_latency_seconds:avg1m`: the latency the goal judges (label `judged`: the
  per-I/O histogram's small I/Os, every I/O, or the database layer's own), read by the breach alerts;
  the LUN's average above goal while the judged latency is not is flagged (`LunLatencyAverageHigh`,
  once a minute in group lunlat-context, with the throughput floor and the host-minus-array
  difference);
- `lunlat:latency_above_goal:bool`: 1 when the judged latency is above goal, else 0; absent when
  not judged (once a minute, first in group lunlat-slo);
- the SLO per I/O: per LUN the judged I/Os and the bad ones from the histogram's buckets
  (`lunlat:slo_events:rate1m`, `lunlat:slo_bad_events:rate1m`), summed per database and role each
  minute with the judged minutes of the LUNs without them (read from the above-goal bool), their
  error ratio over each burn window (`lunlat:slo_error:ratio*`) and since when judged, read by the
  burn alerts;
- from the per-I/O histogram (host layer, `op`): `lunlat:io_latency_above_goal:ratio1m`, the share of
  the judged I/Os slower than the LUN's goal, read by the tail alert (`LunLatencyTailHigh`: judged
  average within goal, too many judged I/Os above it); its p50 and p99 are not recorded, computed
  where they are read (lunlat.promql.layers.io_latency_quantile);
- `lunlat:throughput_floor_bytes` where a tier sets a floor (`LunLatencyThroughputLow`);
- `lunlat:lun_paths:max1h`: each multipath LUN's most paths over the last hour, every 5 minutes in
  a group of its own, read by `LunLatencyPathLost` over its lookback;
- group `lunlat-drift` (lunlat_rules.drift, every 5 minutes): the judged latency's hourly average and
  `LunLatencyDrift` against its same-hour-of-week baseline.

Each group's rules are written by a module of their own, as alerts/tests holds their tests: latency
(the rates, goal and judged latency), breach (the breach alerts and their hints), slo (the SLO's
events, ratios and burn alerts), tail (the per-I/O histogram's share, the tail
alert), arrays, health (the exporters), paths, physical_disks (Windows), drift and cause; the
PromQL and template helpers they share in promqltext, annotations, histogram, tiers and rulefmt.
This module assembles them into groups and the file.
"""

from __future__ import annotations

from typing import Any

from lunlat.goals import Goals
from lunlat.promql.recorded import (
    CONTEXT_GROUP,
    CONTEXT_INTERVAL,
    GOAL_GROUP,
    GOAL_INTERVAL,
    LATENCY_GROUP,
    OPS,
    PATHS_HISTORY_INTERVAL,
    SLO_GROUP,
    SLO_INTERVAL,
)
from lunlat_rules.arrays import array_rules, host_minus_array
from lunlat_rules.breach import average_alerts, breach_alerts, throughput_alerts
from lunlat_rules.drift import drift_group
from lunlat_rules.health import health_alerts, host_exporter_alerts
from lunlat_rules.latency import (
    above_goal,
    above_goal_bool,
    engines,
    floor_series,
    goal_series,
    judged_latency,
    lun_layers,
    rates,
    unlabelled,
)
from lunlat_rules.paths import path_alerts, paths_history, paths_interval
from lunlat_rules.physical_disks import physical_disks
from lunlat_rules.rulefmt import GENERATED_HEADER, dump
from lunlat_rules.slo import fast_burn_alerts, slo_events, slo_ratios, ticket_group, wait_slo_events
from lunlat_rules.tail import io_histogram, tail_alerts


class RuleSet:
    """Builds the rule groups for one goal definition."""

    def __init__(self, goals: Goals) -> None:
        self.goals = goals

    def groups(self) -> list[dict[str, Any]]:
        goals = self.goals
        return [
            # Each LUN's goal, idle guard and floor once a minute from the raw series (recorded.py,
            # GOAL_GROUP), first in the file: a running Prometheus has it from up to a minute before
            # the judgement below reads it, and promtool tests evaluate the groups in the file's
            # order (alerts/tests/promtools.py), so the judgement reads the same step's goal.
            {
                "name": GOAL_GROUP,
                "interval": GOAL_INTERVAL,
                "rules": [
                    *lun_layers(goals),
                    *unlabelled(goals),
                    *engines(goals),
                    *goal_series(goals),
                    *floor_series(goals),
                ],
            },
            # Every rule reading a record shares the group that records it: the rules of a group run
            # in order, so each sees this evaluation's value, while groups run concurrently, each on
            # its own timer, and a read across groups sees the other's previous one
            # (prometheus.io/docs/prometheus/latest/configuration/recording_rules). Hence the breach
            # alerts beside the averages, and the array's latency, which their cause reads, beside
            # them; a slower group may read a faster one's records, as the SLO's and the context's do
            # (alerts/tests/test_rule_groups.py). One group per op (recorded.LATENCY_GROUP says why).
            *(
                {
                    "name": LATENCY_GROUP.format(op=op),
                    "rules": [
                        *rates(goals, [op]),
                        *judged_latency(goals, [op]),
                        *above_goal(goals, [op]),
                        # No array in the goals: no array rule (no array metric is written in the code).
                        *array_rules(goals, [op]),
                        *breach_alerts(goals, [op]),
                    ],
                }
                for op in OPS
            ),
            # What no page waits on, once a minute (recorded.CONTEXT_GROUP says why).
            {
                "name": CONTEXT_GROUP,
                "interval": CONTEXT_INTERVAL,
                "rules": [*average_alerts(goals), *throughput_alerts(goals), *host_minus_array(goals)],
            },
            # The SLO per I/O and the tail, which reads the same events, once a minute
            # (recorded.SLO_GROUP says why): each evaluation judges the minute before it.
            {
                "name": SLO_GROUP,
                "interval": SLO_INTERVAL,
                "rules": [
                    *above_goal_bool(goals),
                    *slo_events(goals),
                    *wait_slo_events(goals),
                    *io_histogram(goals),
                    *slo_ratios(goals),
                    *tail_alerts(goals),
                    *fast_burn_alerts(goals),
                ],
            },
            # The slow burn's ratios and the slow burn, a ticket, every 5 minutes (recorded.py,
            # SLO_TICKET_GROUP): no page reads them.
            *([tickets] if (tickets := ticket_group(goals)) else []),
            {"name": "lunlat-exporter", "rules": [*health_alerts(goals), *host_exporter_alerts(goals)]},
            # As often as its alert's `for` needs, at most a minute apart (paths.paths_interval).
            {
                "name": "lunlat-paths",
                **({"interval": every} if (every := paths_interval(goals)) else {}),
                "rules": path_alerts(goals),
            },
            # Slow on purpose: an hour's maximum needs no fresher value (PATHS_HISTORY_INTERVAL).
            *(
                [{"name": "lunlat-paths-history", "interval": PATHS_HISTORY_INTERVAL, "rules": history}]
                if (history := paths_history(goals))
                else []
            ),
            # Drift before the breach: its own slower group (lunlat_rules.drift says why it is cheap).
            drift_group(goals),
            # Windows hosts only (goals host_layer: windows_exporter): no group elsewhere.
            *([{"name": "lunlat-windows-disks", "rules": disks}] if (disks := physical_disks(goals)) else []),
        ]

    def render(self) -> str:
        return GENERATED_HEADER + dump({"groups": self.groups()})

    def render_prometheus_rule(self) -> str:
        """The same groups as a prometheus-operator PrometheusRule (Kubernetes): the operator hands
        them to every Prometheus whose ruleSelector matches its labels."""
        resource = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {
                "name": "lunlat",
                "labels": {"app.kubernetes.io/name": "lunlat", "app.kubernetes.io/part-of": "lunlat"},
            },
            "spec": {"groups": self.groups()},
        }
        return GENERATED_HEADER + dump(resource)

    def alert_names(self) -> list[str]:
        return [r["alert"] for g in self.groups() for r in g["rules"] if "alert" in r]


def render(goals: Goals) -> str:
    return RuleSet(goals).render()


def render_prometheus_rule(goals: Goals) -> str:
    return RuleSet(goals).render_prometheus_rule()
