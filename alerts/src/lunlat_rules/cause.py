"""Why a LUN breached: two annotations of every breach alert, computed when the alert is evaluated.

- `neighbours`: the busiest other LUNs on the LUN's array (lunlat_lun_info's `array`, on any host
  this Prometheus scrapes) by throughput and by IOPS, each with its host, database and workload; a
  LUN whose array is unknown says its neighbours cannot be named, and why;
- `cause`: which part of the time grew, as one verdict: the host queue, the array, the path between
  host and array, the device, or the database layer alone.

Both are Go template `query` calls over series already there (recorded per LUN, or published), so
they add no recorded series: the rule budget per LUN (alerts/tests/test_rule_budget.py, issue 41)
is unchanged. Prometheus runs an alert's templates "during every rule iteration for each alert that
fires", and asks that their queries be kept lightweight
(prometheus.io/docs/prometheus/latest/configuration/template_examples): the text says what was true
at the breach, and each measure is queried once per evaluation (the `cause` below). The thresholds below are the project's own, stated and
argued in docs/alerting.md ("Why: the cause in the alert"); alerts/tests/test_cause.py holds the two
to the same numbers.

The PromQL is written with placeholders ($SEL, $LUN, $ARRAY, …) that become printf verbs, each
filled with the template variable of the same name, so no label value is ever spliced into a query
unquoted (%q quotes it as a PromQL string, as the description's queries do).
"""

from __future__ import annotations

import re

from lunlat import contract
from lunlat.promql.layers import ExporterHostLayer, HostLayer
from lunlat.promql.recorded import (
    ARRAY_LATENCY,
    BREACH_WINDOW,
    IOPS,
    LATENCY,
    THROUGHPUT,
)
from lunlat_rules.latency import above_goal_expr

# How many other LUNs each list names.
NEIGHBOURS = 3
# Host queue, from the per-I/O histogram: at least this share of the op's time waited in the host's
# queue before issue (its queue-time counter over the histogram's sum).
QUEUE_SHARE = 0.5
# Host queue, from diskstats: the average I/Os in flight at least this share of the smaller of the
# device's queue limits (queue_depth, nr_requests). Not 0.9: a queue never empty reads under its limit
# (measured in the lab, a loop device with nr_requests 4 under 64 outstanding I/Os: 3.6-3.84 in
# flight), since the average is Little's law over completed I/Os and a freed request is taken again
# only once a waiting submitter runs (docs/alerting.md, "Why: the cause in the alert").
IN_FLIGHT_OF_LIMIT = 0.75
# The array: its own latency (its exporter's, joined by NAA) at least this share of the host's.
ARRAY_SHARE = 0.5

_INFO = contract.LUN_INFO.name
_LIMITS = f"{contract.DEVICE_QUEUE_DEPTH.name}|{contract.DEVICE_NR_REQUESTS.name}"
# The alert's LUN's own device (kind lun), not its paths or partitions, for per-device series.
_OWN_DEVICE = f'and on (job, instance, lun, device) {_INFO}{{$LUN, kind="lun"}}'
# Placeholder -> the template variable filling it ($LUN: the LUN's matchers, string %s; the others
# label values, quoted %q).
_VARIABLES: dict[str, tuple[str, str]] = {
    "$SEL": ("%s", "$sel"),
    "$LUN": ("%s", "$lun"),
    "$REC": ("%s", "$rec"),
    "$ARRAY": ("%q", "$array"),
    "$N_JOB": ("%q", "$n.Labels.job"),
    "$N_INSTANCE": ("%q", "$n.Labels.instance"),
    "$N_LUN": ("%q", "$n.Labels.lun"),
}
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in sorted(_VARIABLES, key=len, reverse=True)))


def query(promql: str) -> str:
    """A template pipeline running `promql`, its placeholders filled by printf from their variables."""
    if "`" in promql:
        raise ValueError(f"a backtick cannot be in a Go raw string: {promql}")
    args: list[str] = []

    def verb(match: re.Match[str]) -> str:
        fmt, variable = _VARIABLES[match.group(0)]
        args.append(variable)
        return fmt

    # A literal percent sign (a regex of the goals' selector) is doubled before the verbs go in.
    fmt = _PLACEHOLDER.sub(verb, promql.replace("%", "%%"))
    return f"printf `{fmt}` {' '.join(args)} | query"


def _with(promql: str, then: str, otherwise: str | None = None) -> str:
    """`then` with the query's result as `.` when it has one, else `otherwise`."""
    rest = "" if otherwise is None else f"{{{{ else }}}}{otherwise}"
    return f"{{{{ with {query(promql)} }}}}{then}{rest}{{{{ end }}}}"


def _first(fmt: str) -> str:
    return f'{{{{ . | first | value | printf "{fmt}" }}}}'


_PERCENT = "{{ . | first | value | humanizePercentage }}"


def _variables(selector: str) -> str:
    """`$sel`: the goals' selector of lunlat's series; `$lun`: it and the alert's job, instance and
    LUN, as PromQL matchers; `$rec`: the alert's job, instance and LUN alone, for recorded series
    (they keep only their `by` labels, not every label the selector may match on)."""
    if "`" in selector:
        raise ValueError(f"a backtick cannot be in a Go raw string: {selector}")
    return (
        f"{{{{ $sel := `{selector}` }}}}"
        "{{ $rec := printf `job=%q, instance=%q, lun=%q` $labels.job $labels.instance $labels.lun }}"
        "{{ $lun := printf `%s, %s` $sel $rec }}"
    )


# --- neighbours -------------------------------------------------------------------------------------


def _busiest(metric: str) -> str:
    """The NEIGHBOURS LUNs with the highest host-layer `metric` (reads and writes summed) on array
    $ARRAY, on any host, but the alert's own LUN; highest first (sort_desc: a query's vector is
    otherwise in no order)."""
    on_array = f'{_INFO}{{$SEL, kind="lun", array=$ARRAY}}'
    return (
        f"sort_desc(topk({NEIGHBOURS}, (sum by (job, instance, lun, database, workload) "
        f'({metric}{{layer="host"}} and on (job, instance, lun) {on_array}) '
        f'unless on (job, instance, lun) {_INFO}{{$LUN, kind="lun"}}) > 0))'
    )


def neighbours(selector: str) -> str:
    """The `neighbours` annotation: the busiest other LUNs on the same array by throughput and by
    IOPS over the breach window, each with its host, database, workload and the other measure."""
    throughput = THROUGHPUT.format(window=BREACH_WINDOW)
    iops = IOPS.format(window=BREACH_WINDOW)
    one = 'sum({metric}{{layer="host", job=$N_JOB, instance=$N_INSTANCE, lun=$N_LUN}})'

    def listed(title: str, metric: str, shown: str, other: str, other_shown: str) -> str:
        each = (
            "{{ if $i }}; {{ end }}LUN {{ $n.Labels.lun }} on {{ $n.Labels.instance }} (database "
            '{{ or $n.Labels.database "none" }}, workload {{ or $n.Labels.workload "none" }}): '
            + shown
            + _with(one.format(metric=other), f", {other_shown}")
        )
        return _with(
            _busiest(metric),
            f"{title}: {{{{ range $i, $n := . }}}}{each}{{{{ end }}}}.",
            f"{title}: no other LUN on it is measured above 0 now.",
        )

    lists = (
        listed(
            "By throughput", throughput, "{{ $n.Value | humanize1024 }}B/s", iops, f"{_first('%.0f')} IO/s"
        )
        + " "
        + listed(
            "By IOPS",
            iops,
            '{{ $n.Value | printf "%.0f" }} IO/s',
            throughput,
            "{{ . | first | value | humanize1024 }}B/s",
        )
    )
    unknown = (
        "The LUNs beside this one on its array cannot be named: its array is unknown (neither its "
        "`luns:` entry's `array:` nor its WWID names one; docs/metrics.md, Array identity). Name it "
        "in the exporter's config to have them here."
    )
    known = f"Busiest other LUNs on array {{{{ $array }}}} (any host; {BREACH_WINDOW} rates, reads and writes). {lists}"
    return _variables(selector) + _with(
        f'{_INFO}{{$LUN, kind="lun"}}',
        '{{ $array := . | first | label "array" }}'
        f'{{{{ if or (eq $array "{contract.ARRAY_UNKNOWN}") (eq $array "") }}}}{unknown}'
        f"{{{{ else }}}}{known}{{{{ end }}}}",
        f"No {_INFO} of this LUN: its array, and so its neighbours, cannot be named.",
    )


# --- cause --------------------------------------------------------------------------------------------

# Go templates have no arithmetic: every ratio is PromQL's; the template only compares. Each measure
# is queried once into a variable (-1 where the query has no result), then the verdict is chosen
# and the measures said once, after it.
_ABSENT = "-1.0"


def _measure(variable: str, promql: str) -> str:
    """`{{ $variable := -1.0 }}`, then the query's first value into it where it has one."""
    return (
        f"{{{{ ${variable} := {_ABSENT} }}}}"
        f"{{{{ with {query(promql)} }}}}{{{{ ${variable} = . | first | value }}}}{{{{ end }}}}"
    )


# The I/Os in flight are read between the last two scrapes (irate: "based on the last two data
# points", prometheus.io/docs/prometheus/latest/querying/functions/#irate), not as rate() over the
# breach window, for two reasons. A page comes at the first evaluation above goal, while a rate over
# the window still averages in the time before the queue filled. And a series younger than the window
# (the exporter just started, a new LUN) reads low: rate() extrapolates at most half a sample
# interval before a series' first sample (prometheus/prometheus commit 43b5d8e, "promql: Limit
# extrapolation of delta/rate/increase"), so two samples 15 s apart in a 1m window give half the
# rate. Measured in the lab: a queue at 3.8 of nr_requests 4 read 2.1 at the first page
# (tests/alerting/test_e2e_postgres_wal.py).
IN_FLIGHT_FUNCTION = "irate"


def _in_flight(host: HostLayer | ExporterHostLayer) -> str | None:
    """The alert's LUN's average I/Os in flight between the last two scrapes (diskstats' weighted time
    per second), or None where the host layer's source counts no weighted time (windows_exporter)."""
    if isinstance(host, HostLayer):
        weighted = contract.DEVICE_IO_WEIGHTED_TIME.name
        return f"sum({IN_FLIGHT_FUNCTION}({weighted}{{$LUN}}[{BREACH_WINDOW}]) {_OWN_DEVICE})"
    queue = host.queue(BREACH_WINDOW, IN_FLIGHT_FUNCTION)
    if queue is None:
        return None
    # Another exporter's counters joined to lunlat's LUNs (layers.ExporterHostLayer), picked after the join.
    return f'sum(({queue}) and on (job, instance, lun) {_INFO}{{$LUN, kind="lun"}})'


def _measures(op: str, host: HostLayer | ExporterHostLayer) -> str:
    """The template variables the verdict reads, for the alert's LUN and `op`:
    $share (time in the host's queue over all time, per-I/O histogram), $inflight, $limit and
    $limitname (the smaller queue limit), $fill ($inflight / $limit), $hostms and $arrayms (the host's
    and the array's own average latency, ms), $arrayshare ($arrayms / $hostms)."""
    window = BREACH_WINDOW
    queue_time = f'sum(rate({contract.DEVICE_IO_QUEUE_TIME.name}{{$LUN, op="{op}"}}[{window}]) {_OWN_DEVICE})'
    total = f'sum(rate({contract.DEVICE_IO_LATENCY.name}_sum{{$LUN, op="{op}"}}[{window}]) {_OWN_DEVICE})'
    limits = f'{{__name__=~"{_LIMITS}", $LUN}} {_OWN_DEVICE}'
    host_latency = f'max({LATENCY.format(op=op, window=window)}{{layer="host", $REC}})'
    array = f'max({ARRAY_LATENCY.format(window=window)}{{op="{op}"}} and on (naa) {_INFO}{{$LUN, kind="lun", naa!=""}})'
    in_flight = _in_flight(host)
    parts = [_measure("share", f"{queue_time} / {total}")]
    if in_flight is None:
        parts += [f"{{{{ ${name} := {_ABSENT} }}}}" for name in ("inflight", "limit", "fill")]
        parts.append('{{ $limitname := "" }}')
    else:
        parts += [
            _measure("inflight", in_flight),
            # The smaller limit and its name (bottomk keeps the series' labels, `and` its metric name),
            # said by its sysfs attribute.
            f'{{{{ $limit := {_ABSENT} }}}}{{{{ $limitname := "nr_requests" }}}}'
            f"{{{{ with {query(f'bottomk(1, {limits})')} }}}}{{{{ $limit = . | first | value }}}}"
            f'{{{{ if eq (. | first | label "__name__") "{contract.DEVICE_QUEUE_DEPTH.name}" }}}}'
            '{{ $limitname = "queue_depth" }}{{ end }}{{ end }}',
            _measure("fill", f"{in_flight} / min({limits})"),
        ]
    parts += [
        _measure("hostms", f"1000 * {host_latency}"),
        _measure("arrayms", f"1000 * {array}"),
        _measure("arrayshare", f"{array} / {host_latency}"),
    ]
    return "".join(parts)


def _said(op: str) -> str:
    """The measures behind the verdict, those that exist; and, for a host-layer verdict, when
    nothing measured the host queue, that it cannot be ruled out."""
    return (
        f" Measured over {BREACH_WINDOW}: the host's {op}s "
        '{{ if ge $hostms 0.0 }}{{ printf "%.2f" $hostms }} ms{{ else }}not measured{{ end }}'
        "{{ if ge $share 0.0 }}; {{ humanizePercentage $share }} of their time in the host's queue{{ end }}"
        '{{ if ge $inflight 0.0 }}; {{ printf "%.1f" $inflight }} I/Os in flight on average since the last scrape'
        '{{ if ge $limit 0.0 }}, against its {{ $limitname }} of {{ printf "%.0f" $limit }}{{ end }}{{ end }}'
        '{{ if ge $arrayms 0.0 }}; the array\'s own latency {{ printf "%.2f" $arrayms }} ms{{ end }}.'
        "{{ if and $split (lt $share 0.0) (lt $fill 0.0) }} No host queue time and no queue limit of this "
        "LUN: a host queue cannot be ruled out.{{ end }}"
    )


def _verdict(op: str) -> str:
    """The host layer's verdict, first that holds: host queue (queue time, then in flight), the array,
    between host and array, the device."""
    return (
        f"{{{{ if ge $share {QUEUE_SHARE} }}}}Host queue: at least {QUEUE_SHARE:.0%} of the time of this LUN's "
        f"{op}s waited in the host's queue before issue (per-I/O histogram), not on the device."
        f"{{{{ else if ge $fill {IN_FLIGHT_OF_LIMIT} }}}}Host queue: the queue of this LUN's device is at its limit "
        f"most of the time since the last scrape (in flight at least {IN_FLIGHT_OF_LIMIT:.0%} of its limit): "
        "further I/Os wait on the host for a slot, not on the array."
        '{{ if eq $labels.layer "db" }} A wait for a free request comes before the block layer counts an I/O: '
        "the database layer sees it, the host layer's latency may not.{{ end }}"
        f"{{{{ else if ge $arrayshare {ARRAY_SHARE} }}}}The array: its own {op} latency is at least "
        f"{ARRAY_SHARE:.0%} of the host's."
        "{{ else if ge $arrayshare 0.0 }}Between the host and the array (HBA, fabric, multipath): the array's "
        f"own {op} latency is less than {ARRAY_SHARE:.0%} of the host's."
        "{{ else }}The device: the time is its service time, below the host's queue (the HBA, fabric or array; "
        "no array exporter is joined for this LUN).{{ end }}"
    )


def cause(op: str, host: HostLayer | ExporterHostLayer, selector: str) -> str:
    """The `cause` annotation of a breach alert of `op`: one verdict, then the numbers it rests on.

    A database-layer alert first: with the device's queue full (I/Os in flight at its limit), the
    host queue, whatever the host layer's latency: an I/O waiting for a free request is not counted
    by the block layer yet (its time starts once it has one: torvalds/linux block/blk-mq.c,
    blk_mq_rq_time_init, "Set start and alloc time when the allocated request is actually used"; a
    submitter without one sleeps in blk_mq_get_tag, block/blk-mq-tag.c), so diskstats and the per-I/O
    histogram miss that wait and the database's own timing holds it. Otherwise, with its host layer
    within goal, the database layer alone; not judged, it cannot be split; above goal, the host
    layer's measures decide, as for a host-layer alert."""
    # Computed here, not read from ABOVE_GOAL: that is recorded once a minute (recorded.SLO_GROUP),
    # this every 15 s with the alert.
    host_layer = 'layer="host", $REC'
    above = f"max({above_goal_expr(op, host_layer)})"
    database = (
        _measure("above", above) + "{{ if eq $above 0.0 }}"
        f"The database layer alone: the host's block layer of this LUN is within its goal for {op}s, so "
        "the time is spent above it (the database's own I/O path: host CPU, scheduling, file system, its "
        "own queues), not in the storage.{{ $split = false }}"
        "{{ else if eq $above 1.0 }}The host's block layer of this LUN is above its goal too. "
        "{{ else }}The host's block layer of this LUN is not judged now (idle, or not measured): the "
        "database layer's time cannot be split.{{ $split = false }}{{ end }}"
    )
    return (
        _variables(selector)
        + _measures(op, host)
        + "{{ $split := true }}"
        + f'{{{{ if and (eq $labels.layer "db") (lt $fill {IN_FLIGHT_OF_LIMIT}) }}}}{database}{{{{ end }}}}'
        + f"{{{{ if $split }}}}{_verdict(op)}{{{{ end }}}}"
        + _said(op)
    )
