"""One breach-and-restore cycle on the lab, timed: shared by the end-to-end test and the benchmark."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lunlat_lab import commands
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.state import LabState
from tests.alerting.stack import Notification, WebhookReceiver, started_at

# The lab as described: the reference's baselines (0.16-0.64 ms) and full rates. The lab's engine
# subtracts its own calibrated cost per I/O: diskstats shows lab.yaml's service times plus the
# array's modelled transfer time and queueing, not the engine's cost.
LAB_CONFIG = DEFAULT_LAB_FILE
# Streams the rules judge under the OLTP phase: 3 data LUNs (reads and writes) and 3 log LUNs (writes);
# the log readers (`archive`, 5 IOPS) stay below the idle guard.
OLTP_JUDGED = 9
BREACH_LUN = "sqlserver1_data"  # the lab's name; the exporter's `lun` label is its loop device
BREACH_LABELS = {"database": "SQL Server 1", "role": "data", "workload": "oltp"}
BREACH_MS = 2.0
PAGE_TIMEOUT = 240.0
RESOLVE_TIMEOUT = 300.0


@dataclass(frozen=True, slots=True)
class Cycle:
    page: Notification
    resolved: Notification
    seconds_to_page: float
    seconds_to_resolve: float


BREACH_ALERTS = ("LunLatencyDataReadHigh", "LunLatencyDataWriteHigh")


def breach_alerts(notification: Notification, status: str) -> list[dict[str, Any]]:
    """The breached LUN's breach alerts in this notification with that status. (Its group may also
    carry a budget burn alert: after a breach on a young TSDB the 1h ratio is high for a while.)"""
    return [
        a
        for a in notification.alerts
        if a.get("status") == status
        and a["labels"].get("alertname") in BREACH_ALERTS
        and all(a["labels"].get(k) == v for k, v in BREACH_LABELS.items())
    ]


def page_after(wall_time: float) -> Callable[[Notification], bool]:
    """Matches a notification paging a breach alert of the LUN that started firing after `wall_time`."""

    def matches(notification: Notification) -> bool:
        return any(
            a["labels"].get("severity") == "page" and started_at(a) >= wall_time
            for a in breach_alerts(notification, "firing")
        )

    return matches


def is_resolved(notification: Notification) -> bool:
    """Matches the notification saying the LUN's breach alerts resolved, none still firing."""
    return bool(breach_alerts(notification, "resolved")) and not breach_alerts(notification, "firing")


def breach_and_restore(state_dir: Path, hook: WebhookReceiver, hold: float = 0.0) -> Cycle:
    """Raise the data LUN to BREACH_MS, wait for its page; `hold` seconds later restore it to its
    latency in LAB_CONFIG, wait for the resolution. (Restoring at once would start every resolve
    on the group's notification tick.)"""
    lab = commands.load_lab(LAB_CONFIG)
    normal = next(lun.latency for lun in lab.luns if lun.name == BREACH_LUN)
    onset, onset_wall = time.monotonic(), time.time()
    commands.set_latency(state_dir, BREACH_LUN, BREACH_MS, BREACH_MS, None)
    page = hook.wait_for(page_after(onset_wall), PAGE_TIMEOUT, since=onset)
    time.sleep(hold)
    restore = time.monotonic()
    commands.set_latency(state_dir, BREACH_LUN, normal.read_ms, normal.write_ms, None)
    resolved = hook.wait_for(is_resolved, RESOLVE_TIMEOUT, since=restore)
    return Cycle(page, resolved, page.received - onset, resolved.received - restore)


def exporter_config(state_dir: Path) -> Path:
    """The exporter's config `up` wrote for the lab in `state_dir`: its LUNs labelled, its own loop
    devices only (another lab's, run beside it, stay out of its Prometheus)."""
    state = LabState.load(state_dir)
    assert state is not None, f"no lab in {state_dir}"
    return state.exporter_config


def device_of(state_dir: Path, lun: str) -> str:
    """The kernel name (the exporter's `lun` label) of a lab LUN's loop device."""
    state = LabState.load(state_dir)
    assert state is not None, f"no lab in {state_dir}"
    return Path(state.loops[lun]).name
