"""The paging path on Prometheus 3: a fake host's lunlat exporter → the Prometheus 3 build
(tests/support/prometheus_server.py) with alerts/lunlat.rules.yml → the Debian Alertmanager with
alerts/alertmanager.yml's routing → a webhook receiver (tests/alerting/stack.py, as the lab's
end-to-end tests, which run on Debian's 2.42).

The host (tests/support/fake_host.py: procfs and sysfs trees whose diskstats a thread advances) has
one multipath LUN, a database's OLTP data LUN, reading 100 times a second at 2 ms against the 1 ms
goal of alerts/goals.yaml: the breach alert of its role pages, naming the LUN, database, role and
op, with its annotations rendered by Prometheus 3's templates without an error. No FUSE latency is
needed, so it is no lab test: marked `prometheus3`, it runs in .ci/run's Prometheus 3 lane.
Timeouts only bound a failure.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerting.stack import AlertingStack, Notification, WebhookReceiver, alertmanager_binary
from tests.support import prometheus_server
from tests.support.background import in_background
from tests.support.fake_host import FakeHost, Stats

pytestmark = pytest.mark.prometheus3

ALERT = "LunLatencyDataReadHigh"
LUN = "ora_data"
LABELS = {"lun": LUN, "database": "ORCL", "role": "data", "workload": "oltp", "op": "read"}
WWID = "3624a93706c1b16ce1c034d1c00024c6f"  # test input: a Pure volume's NAA, as multipath names it
# Shorter than the shipped 15 s so the page comes sooner; the rules' 1-minute windows hold 12 samples.
INTERVAL = "5s"
PAGE_TIMEOUT = 180.0
READS_PER_SECOND = 100
READ_MS = 2.0
# What Prometheus puts in an annotation whose template fails (rules/alerting.go expands templates
# with template.Expander, which returns the error text in place of the value).
TEMPLATE_ERROR = "error expanding template"


def slow_host(root: Path) -> FakeHost:
    host = FakeHost(root)
    host.add_scsi_disk("sdb", wwid="naa." + WWID[1:], vendor="PURE", model="FlashArray")
    host.add_multipath("dm-0", alias=LUN, wwid=WWID, paths=["sdb"])
    host.stats["dm-0"] = Stats()
    host.write()
    return host


@contextmanager
def reading_slowly(host: FakeHost) -> Iterator[None]:
    """Every second, READS_PER_SECOND reads of 8 KiB at READ_MS each on the LUN's map."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(1.0):
            host.add_reads("dm-0", READS_PER_SECOND, 16, READ_MS)
            host.write()

    with in_background(run, stop, "slow-host"):
        yield


def pages(notification: Notification) -> list[dict[str, Any]]:
    """The LUN's breach alerts this notification pages as firing."""
    return [
        alert
        for alert in notification.alerts
        if alert.get("status") == "firing"
        and alert["labels"].get("alertname") == ALERT
        and alert["labels"].get("severity") == "page"
        and all(alert["labels"].get(k) == v for k, v in LABELS.items())
    ]


def test_a_breach_pages_through_prometheus_3_and_alertmanager(tmp_path: Path) -> None:
    binary = prometheus_server.binary_or_skip("3")
    if alertmanager_binary() is None:
        pytest.skip("missing prometheus-alertmanager (Debian: prometheus-alertmanager)")
    host = slow_host(tmp_path / "host")
    config = tmp_path / "lunlat.yaml"
    entry = {"match": {"alias": LUN}, **{k: v for k, v in LABELS.items() if k not in ("lun", "op")}}
    config.write_text(yaml.safe_dump({"luns": [entry]}), encoding="utf-8")
    with (
        reading_slowly(host),
        WebhookReceiver() as hook,
        AlertingStack(
            tmp_path / "stack",
            config,
            hook.url,
            exporter_args=(f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}"),
            prometheus_binary=binary,
            interval=INTERVAL,
        ) as stack,
    ):
        page = hook.wait_for(lambda n: bool(pages(n)), PAGE_TIMEOUT)
        log = stack.prometheus.log_tail()
    (alert,) = pages(page)
    assert page.receiver == "storage-pager", page.receiver  # a page of no engine's LUN
    annotations = alert["annotations"]
    assert {"summary", "description", "runbook_url"} <= annotations.keys(), annotations
    broken = {key: text for key, text in annotations.items() if TEMPLATE_ERROR in text}
    assert broken == {}, broken
    summary = re.fullmatch(
        rf"Read latency of LUN {LUN} \(ORCL data\) above goal: ([0-9.]+) ms", annotations["summary"]
    )
    assert summary is not None, (annotations["summary"], log)
    assert 1.5 < float(summary[1]) < 2.5, "about 2 ms (rates of a thread's seconds, scraped every 5 s)"
