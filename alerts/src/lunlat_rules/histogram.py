"""The per-I/O latency histogram as PromQL: the host layer's buckets per LUN and op (contract
DEVICE_IO_LATENCY, the biolatency source), the rate of the I/Os at or below a goal read from them,
and their quantiles. Read by the judged latency (latency.py), the SLO's events per I/O (slo.py) and
the tail alert's quantiles (tail.py); a database's wait histogram is read at its goal the same way
(events_at_or_below)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lunlat import contract
from lunlat.exposition import format_value
from lunlat.promql.layers import LUN_LABELS, lun_sum, small_ios
from lunlat.promql.recorded import UNLABELLED_LUNS
from lunlat_rules.promqltext import indent as _indent
from lunlat_rules.promqltext import number as _promql_number

# The per-I/O histogram is the host's (block layer): its recorded series are layer="host".
HOST_LAYER = "host"
# Labels of one per-I/O histogram series per LUN once joined to its roles (the layer is a rule label).
HISTOGRAM_LABELS: tuple[str, ...] = (*LUN_LABELS, "op")


def bucket_le(bound: float) -> str:
    """The `le` label of a histogram bound as the exporter prints it (the text format's shortest
    round-trip float: 0.001, 0.000125, 7.8125e-06; Prometheus 3 normalises to the same spelling)."""
    return format_value(bound)


@dataclass(frozen=True, slots=True)
class IoHistogram:
    """The host layer's per-I/O latency histogram (contract.DEVICE_IO_LATENCY, the biolatency
    source) per LUN, role and op, summed like the diskstats rates (lunlat.promql.layers.lun_sum).

    The share of I/Os slower than a goal is read from the buckets: exact where the goal is a bucket
    edge (the default 1 ms is one, contract.BIO_BUCKETS); inside a bucket, interpolated linearly
    between its edges, as histogram_quantile interpolates, so the share and the quantiles agree
    (the share is above q exactly when the (1 - q) quantile is above the goal). Below the first
    edge the bucket starts at 0 (as histogram_quantile's); above the last finite edge (512 ms) the
    histogram cannot tell, and the share above that edge is used (an upper bound).
    """

    selector: str
    bounds: tuple[float, ...] = contract.BIO_BUCKETS
    # Only this size class's I/Os (contract.BIO_SIZES), this op's; every one when None.
    size: str | None = None
    op: str | None = None

    def device_rate(self, window: str, le: str | None = None, kind: str | None = None) -> str:
        """Rate of each device's bucket `le` (every bucket with None), not yet summed per LUN; of the
        devices of `kind` (IoHistogram.per_lun's `per_device`) when given."""
        le_matcher = f', le="{le}"' if le is not None else ""
        if self.size is not None:
            le_matcher += f', size="{self.size}"'
        if self.op is not None:
            le_matcher += f', op="{self.op}"'
        if kind is not None:
            le_matcher += f', kind="{kind}"'
        return f"rate({contract.DEVICE_IO_LATENCY.name}_bucket{{{self.selector}{le_matcher}}}[{window}])"

    def per_lun(self, per_device: Callable[[str], str], by: tuple[str, ...] = ()) -> str:
        """`per_device(kind)` (rates by device of that kind: lunlat.promql.layers.lun_sum) summed per
        LUN, role and op (and the labels `by`)."""
        by = ("op", *by)
        return lun_sum(per_device, self.selector, by, unlabelled=UNLABELLED_LUNS)

    def small(self, op: str, part: str, window: str) -> str:
        """Rate of the `part` (sum, count) of the LUN's small `op` I/Os (contract.BIO_SIZES' first
        class), by its labels without `op`: lunlat.promql.layers.small_ios, which `lunlat report` reads too."""
        return small_ios(self.selector, op, part, window, UNLABELLED_LUNS)


def events_at_or_below(
    goal: float, edges: Sequence[tuple[float, str]], bucket: Callable[[str], str], match: str = ""
) -> str:
    """Rate of the events at or below `goal` seconds from a histogram's finite `edges` (upper bound,
    `le` label; ascending) and `bucket` (the rate of one bucket by its `le`): the bucket itself where
    the goal is an edge; inside a bucket, interpolated linearly between its edges, as
    histogram_quantile interpolates; below the first edge the bucket starts at 0; above the last
    finite edge the histogram cannot tell, and that edge's bucket is used (the bad share an upper
    bound). `match` (e.g. `ignoring (le) `) goes after each operator between two buckets: where
    `bucket` keeps its `le`, two buckets match only without it."""
    for bound, le in edges:
        if math.isclose(bound, goal, rel_tol=1e-9):
            return bucket(le)
    if goal > edges[-1][0]:
        return bucket(edges[-1][1])
    upper, upper_le = next((b, le) for b, le in edges if b > goal)
    lower, lower_le = max(((b, le) for b, le in edges if b < goal), default=(0.0, ""))
    fraction = _promql_number((goal - lower) / (upper - lower))
    upper_rate = bucket(upper_le)
    if lower == 0.0:
        return f"{fraction} * {upper_rate}"
    lower_rate = bucket(lower_le)
    return (
        f"(\n    {_indent(lower_rate, 4)}\n"
        f"  + {match}{fraction} * (\n"
        f"        {_indent(upper_rate, 8)}\n"
        f"      - {match}{_indent(lower_rate, 8)}\n"
        "    )\n"
        ")"
    )


def bad_per_device(histogram: IoHistogram, goal: float, window: str, kind: str | None = None) -> str:
    """Rate of each device's I/Os slower than `goal` seconds (events_at_or_below for between
    edges): its +Inf bucket less its I/Os at or below the goal, per device (of the devices of
    `kind` when given), to be summed per LUN once (IoHistogram.per_lun). The difference of two
    per-LUN sums is the same number at twice the sums, each with its branch for old exporters
    (lunlat.promql.layers.lun_sum), whose operands PromQL evaluates whatever the other holds
    (latency.idle_guard): two or three per goal and kind every 15 s (issue 41)."""
    edges = tuple((bound, bucket_le(bound)) for bound in histogram.bounds)
    below = events_at_or_below(
        goal, edges, lambda le: histogram.device_rate(window, le, kind), match="ignoring (le) "
    )
    total = histogram.device_rate(window, "+Inf", kind)
    return f"(\n  {total}\n- ignoring (le)\n  {_indent(below, 2)}\n)"
