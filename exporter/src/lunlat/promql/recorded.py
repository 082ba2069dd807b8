"""The recorded series: names of the recording rules that the dashboards, docs and tests read.

Beside `contract.py` (what the exporter publishes) because these names are the other half of the
contract (docs/contract.md §3): `lunlat_rules` (alerts/) writes the rules under these names and the
dashboards query them, so a renamed rule changes both or fails the dashboards' lint.
Names follow Prometheus' `level:metric:operation` convention; `{window}` and `{op}` are filled in.
"""

from __future__ import annotations

OPS: tuple[str, ...] = ("read", "write")
# One window: a 5-minute family was recorded once and read by no alert or dashboard.
RATE_WINDOWS: tuple[str, ...] = ("1m",)
# The window of the averages that alerts judge and dashboards draw.
BREACH_WINDOW = "1m"

IOPS = "lunlat:iops:rate{window}"
THROUGHPUT = "lunlat:throughput_bytes:rate{window}"
LATENCY = "lunlat:{op}_latency_seconds:avg{window}"
# The latency the goal judges, per LUN, op and layer (docs/alerting.md, "What is judged"): label
# `judged` says which I/Os: `small` (the per-I/O histogram's small size class), `all` (every I/O: the
# LUN's average), `database` (the database layer: the I/Os its engine counts as the database's own).
# Absent while those I/Os are fewer than the idle guard.
JUDGED_LATENCY = "lunlat:judged_{op}_latency_seconds:avg{window}"
JUDGED_KINDS: tuple[str, ...] = ("small", "all", "database")
GOAL = "lunlat:latency_goal_seconds"
# The throughput floor of the LUNs whose tier sets one (goals throughput_floor_mib_s), bytes per second.
THROUGHPUT_FLOOR = "lunlat:throughput_floor_bytes"
GOAL_MIN_IOPS = "lunlat:latency_goal_min_iops"
# One series per LUN and layer the rules record latency for (SERIES_LABELS; a database layer's
# `engine` too), value 1, from the layer's raw series (Layer.luns): what the goal tiers select from,
# in GOAL_GROUP.
LUN_LAYER = "lunlat:lun_layer:info"
# Each LUN's goal, idle guard and throughput floor (and which engine each database is) are recorded
# once per GOAL_INTERVAL in group GOAL_GROUP, from the raw series, not every 15 s (issue 41: a tenth of
# lunlat-latency's time): they change only when a LUN, its roles or the goals do. The judgement, every
# 15 s, reads them across groups, at most GOAL_INTERVAL old: a new LUN is judged up to a minute after
# its first rates, and a changed role or override applies up to a minute later.
GOAL_GROUP = "lunlat-goal"
GOAL_INTERVAL = "1m"
# lunlat_lun_info of the LUNs (kind lun) of exporters whose device series carry no `kind` (releases
# before ground.DEVICE_ROLE_LABELS), recorded in GOAL_GROUP: the host layer joins those exporters'
# series to it (layers.lun_sum). Empty once every exporter is upgraded, so the join costs nothing;
# joined to lunlat_lun_info itself, it read every LUN's info in every rule, every 15 s.
UNLABELLED_LUNS = "lunlat:unlabelled_lun:info"
ABOVE_GOAL = "lunlat:latency_above_goal:bool"
# The judged latency of the LUNs above their goal only, per op (label `op`), with the goal's `severity`
# and `engine`: absent for every LUN within goal or not judged. The breach alerts select it, each for
# its role, instead of each matching every LUN of its role against the goal to find the few above it
# (issue 41: the six alerts were a sixth of lunlat-latency's time).
JUDGED_ABOVE_GOAL = "lunlat:judged_latency_above_goal_seconds:avg1m"
# SLOs per I/O (docs/alerting.md, "SLOs per I/O"). Per LUN, op and layer, the events the objective
# counts, per second, with `indicator`: `io` where the host's per-I/O histogram exists (each judged I/O
# an event, bad when slower than the LUN's goal, from the buckets) or `minute` elsewhere (each judged
# evaluation an event, bad when the judged 1-minute average is above goal: the SLO counts minutes, and
# says so). `severity` and `engine` are the goal's. Then per database and role (SLO_LABELS, with
# `severity` and `engine`): the events summed over SLO_SUM_WINDOW, the error ratio over each burn window,
# and since when it is judged (the burn alerts' coverage guard).
SLO_EVENTS = "lunlat:slo_events:rate1m"
SLO_BAD_EVENTS = "lunlat:slo_bad_events:rate1m"
SLO_EVENTS_SUM = "lunlat:slo_events:sum1m"
SLO_BAD_EVENTS_SUM = "lunlat:slo_bad_events:sum1m"
# The window of those sums, and the step every burn window reads them at (a subquery): one point per
# minute partitions the time, so each event counts once, and the newest minute is at most one step late.
SLO_SUM_WINDOW = "1m"
# The SLO's events, sums, paged ratios and fast burn, and the tail that reads the same events (the
# judged I/Os above goal, the quantiles, LunLatencyTailHigh), run in group SLO_GROUP once per
# SLO_SUM_WINDOW, not every 15 s (issue 41: a quarter of the rules' time at 15 s). Each evaluation
# judges one minute: the I/Os' rates over the last minute, or the judged minute's bool, so the
# minutes partition the time (at 15 s each minute was counted four times, overlapping). A burn page
# comes up to a minute later; its shortest window is 5 minutes. The bool is recorded first in this
# group (no page reads it); its reads of LATENCY_GROUP's judged latency and the goal group's goal
# are a slower group's of a faster one (alerts/tests/test_rule_groups.py).
SLO_GROUP = "lunlat-slo"
SLO_INTERVAL = SLO_SUM_WINDOW
# The judgement every 15 s (Prometheus' evaluation_interval, EVALUATION_INTERVAL): per LUN and layer
# the rates, averages, judged latency and the breach alerts, in one group per op. No rule of one op
# reads a record of the other, so the two groups run concurrently, each on its own timer (issue 41:
# at 1,000 hosts the one group of both took 12 s median, 18 s at most, of its 15 s; split, and with
# CONTEXT_GROUP's rules once a minute, 5.9 and 5.3 s, docs/benchmarks.md). Only a breach alert's
# annotation reads the other op's rates (the neighbours' reads and writes), at most one evaluation old.
LATENCY_GROUP = "lunlat-latency-{op}"
# What no page waits on, read beside the judgement, once per CONTEXT_INTERVAL in group
# CONTEXT_GROUP, not every 15 s (issue 41: about a seventh of lunlat-latency's time at 50 hosts): the
# flagged average (LunLatencyAverageHigh, a warning), the throughput floor (a ticket over 5 minutes)
# and the host-minus-array difference (read by the dashboards). A flag comes up to a minute later
# than a page would; each reads LATENCY_GROUP's records as a slower group of a faster one.
CONTEXT_GROUP = "lunlat-context"
CONTEXT_INTERVAL = "1m"
SLO_ERROR_RATIO = "lunlat:slo_error:ratio{window}"
SLO_JUDGED_SINCE = "lunlat:slo_judged_since:timestamp"
SLO_LABELS: tuple[str, ...] = ("job", "instance", "database", "role", "workload", "layer", "op", "indicator")
# The ratios over the windows only the slow burn reads (a ticket: goals slo.slow, the windows no fast
# pair names, 2h, 1d and 3d by default) and the slow burn alert itself run every SLO_TICKET_INTERVAL in
# group SLO_TICKET_GROUP, not every 15 s (issue 41): each ratio sums the per-minute sums once a minute,
# a 3-day window 4,320 steps a series, more than every other window together. A ratio 5 minutes old
# shares all but 5m / window of the current window (96 % of 2h, 99.9 % of 3d); a ticket comes up to
# 5 minutes later. The windows a fast burn (a page) reads stay in SLO_GROUP: no page waits on this
# group. Its reads of SLO_GROUP's sums are a slow group's of a faster one
# (alerts/tests/test_rule_groups.py).
SLO_TICKET_GROUP = "lunlat-slo-tickets"
SLO_TICKET_INTERVAL = "5m"
SLO_INDICATORS: tuple[str, ...] = ("io", "minute")

# The most paths each multipath LUN had over PATHS_HISTORY_WINDOW (ground.LUN_PATHS), recorded every
# PATHS_HISTORY_INTERVAL in a group of its own: the path-loss alert reads a day of these (288 samples a
# LUN) instead of a day of the raw gauge (5,760 at 15 s scrapes) at every evaluation (issue 41).
PATHS_MAX = "lunlat:lun_paths:max1h"
PATHS_HISTORY_WINDOW = "1h"
PATHS_HISTORY_INTERVAL = "5m"
# The path-loss alert's group runs at most this long apart, and no more often than its `for` asks
# (lunlat_rules.paths.paths_interval): a warning held for a minute by default needs no 15 s
# evaluation, and its reads (a day of PATHS_MAX, ten minutes of the raw gauge per LUN) were a tenth
# of the rules' time at 15 s (issue 41, docs/benchmarks.md).
PATHS_INTERVAL_MAX = "1m"
# Prometheus' evaluation_interval as docs/alerting.md sets it: a group without `interval` runs at it.
EVALUATION_INTERVAL = "15s"
# Series recorded for history in a slow group of their own and read by other groups on purpose: a
# reader sees the slow group's last value, at most one of its intervals old, which a lookback of
# hours does not notice (alerts/tests/test_rule_groups.py allows these reads, and only these).
HISTORY: frozenset[str] = frozenset({PATHS_MAX})
# Series recorded in GOAL_GROUP from the configuration and the topology (above), which any group may
# read: a reader sees the goal group's last value, at most GOAL_INTERVAL old, and the value changes
# only with what it is built from (alerts/tests/test_rule_groups.py allows these reads too).
CONFIGURED: frozenset[str] = frozenset({LUN_LAYER, UNLABELLED_LUNS, GOAL, GOAL_MIN_IOPS, THROUGHPUT_FLOOR})

# Drift before the breach (docs/alerting.md, "Drift before the breach"): the judged latency averaged
# over the goals' `drift.window` (JUDGED_LATENCY with that window: lunlat:judged_write_latency_seconds:avg1h),
# per LUN, op, layer and `judged`, recorded once per DRIFT_INTERVAL in group DRIFT_GROUP and read back a
# week (weeks) later as the same-hour-of-week baseline. Absent where the LUN was judged (busier than its
# idle guard) for less than DRIFT_MIN_COVERAGE of the window's evaluations.
DRIFT_GROUP = "lunlat-drift"
DRIFT_INTERVAL = "5m"
DRIFT_MIN_COVERAGE = 0.5

# The array side (docs/metrics.md, "The array side"): an array exporter's per-volume latency keyed by the
# LUN's NAA designator (`naa`, as lunlat_lun_info carries it), and the host's latency minus it.
ARRAY_LATENCY = "lunlat:array_latency_seconds:mean{window}"
HOST_MINUS_ARRAY = "lunlat:host_minus_array_latency_seconds:diff{window}"
# From the per-I/O latency histogram (ground.DEVICE_IO_LATENCY, host layer only; labels `op`,
# `layer="host"`): the share of I/Os slower than the LUN's goal over the breach window. Its
# quantiles are computed where they are read (lunlat.promql.layers.io_latency_quantile).
IO_ABOVE_GOAL_RATIO = "lunlat:io_latency_above_goal:ratio{window}"
# SQL Server on Windows (goals `host_layer: windows_exporter`): the physical disk under each database
# volume, windows_exporter's physical_disk joined through logical_disk_info (layers.py
# PhysicalDiskLayer), labels of a judged series without `layer`, plus `disk`; `op` on the rate. Shown
# beside the host layer (the volume's), never judged: the goal and the alerts judge the volumes.
PHYSICAL_DISK_IOPS = "lunlat:physical_disk_iops:rate{window}"
PHYSICAL_DISK_LATENCY = "lunlat:physical_disk_{op}_latency_seconds:avg{window}"
