"""Operation-weighted averages over a time range, in PromQL: Δ time / Δ operations of each LUN's
device counters, joined to its roles (lunlat_lun_info), summed over any grouping.

One home for the reference tables' arithmetic: the Grafana dashboard (dashboards/reference.py, over
`$__range`) and `lunlat report` (over each phase) build their queries here, so a table read in
Grafana and the report's CSV are the same numbers. Weighted by operations like the reference's
averages: never an average of per-minute averages.
"""

from __future__ import annotations

from collections.abc import Callable

from lunlat import ground

# The labels lunlat_lun_info lends each device counter.
ROLE_LABELS = "workload, database, role"
# One LUN of one host with its roles: the report's per-LUN rows.
PER_LUN = "job, instance, lun, device, workload, database, role"
OPS: tuple[str, ...] = ("read", "write")

Selector = Callable[[str], str]


def time_counter(op: str) -> ground.MetricSpec:
    return ground.DEVICE_READ_TIME if op == "read" else ground.DEVICE_WRITE_TIME


def ops_counter(op: str) -> ground.MetricSpec:
    return ground.DEVICE_READS if op == "read" else ground.DEVICE_WRITES


def bytes_counter(op: str) -> ground.MetricSpec:
    return ground.DEVICE_READ_BYTES if op == "read" else ground.DEVICE_WRITE_BYTES


def range_total(counter: str, info: str, window: str, by: str) -> str:
    """Δ `counter` (a selector) over `window` per `by`, each device's counter joined to its LUN's
    roles through `info` (a lunlat_lun_info selector with kind="lun": path devices never count twice)."""
    return (
        f"sum by ({by}) (\n"
        f"  increase({counter}[{window}])\n"
        f"  * on (job, instance, lun, device) group_left ({ROLE_LABELS})\n"
        f"  {info}\n"
        ")"
    )


def average_latency(op: str, selector: Selector, info: str, window: str, by: str) -> str:
    """Δ time / Δ operations of `op` over `window` per `by`; no value where there was no operation."""
    time_total = range_total(selector(time_counter(op).name), info, window, by)
    ops_total = range_total(selector(ops_counter(op).name), info, window, by)
    return f"{time_total}\n/\n({ops_total} > 0)"
