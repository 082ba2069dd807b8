"""Issue 38's first done-when, in the lab: "with two exporters on one lab array (two hosts' worth of
LUNs) and an unthrottled DSS scan on host B, host A's OLTP breach alert names B's LUN and its workload".

The parts: a lab of one array (lab/src/lunlat_lab/daemon/latency.py's service model: a few slots
shared by every LUN of the array, so large scan reads hold them and the OLTP reads queue behind) with
two LUNs: `oltp_a`, an OLTP data LUN at 0.3 ms set latency under fio's 8 KiB random reads, and `dss_b`,
a warehouse's data LUN under fio's unthrottled 1 MiB sequential reads (kind dss, no rate). Two
exporters, one per "host": each publishes only its own LUN (`diskstats.include` of its loop device)
with the lab's generated labels, which name the lab array as the LUN's `array`
(lunlat_lab.exporter_config). One Debian Prometheus scrapes both (two `instance`s) and evaluates the
repo's generated rules.

What is checked: LunLatencyDataReadHigh fires for A's LUN (the scan beside it pushes its reads over
the 1 ms goal) and its `neighbours` annotation lists B's LUN, on B's instance, with database DW and
workload dss, first by throughput. Timeouts below only bound a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
from tests.alerting.hosts import lab_in_phase, serve_hosts  # noqa: E402
from tests.alerting.stack import INTERVAL, wait_full_window  # noqa: E402
from tests.support import prometheus_server  # noqa: E402
from tests.support.lab_host import lab_skip_reason  # noqa: E402
from tests.support.prometheus_server import PromApi  # noqa: E402

pytestmark = pytest.mark.lab

ALERT = "LunLatencyDataReadHigh"
ARRAY = "shared"
LAB = f"""\
size_mib: 128
arrays:
  {ARRAY}: {{slots: 2, bandwidth_mib_s: 100}}
luns:
  - {{name: oltp_a, database: OLTP, engine: mssql, role: data, workload: oltp, array: {ARRAY},
     latency: {{read_ms: 0.3, write_ms: 0.3}}}}
  - {{name: dss_b, database: DW, engine: mssql, role: data, workload: dss, array: {ARRAY},
     latency: {{read_ms: 0.3, write_ms: 0.3}}}}
workloads:
  oltp: {{kind: oltp, luns: [oltp_a], block_size: 8k, read_percent: 100, iodepth: 1, rate_iops: 100}}
  scan: {{kind: dss, luns: [dss_b], block_size: 1m, iodepth: 4}}
phases:
  both: [oltp, scan]
"""
FIRE_TIMEOUT = 240.0


@dataclass(frozen=True, slots=True)
class TwoHosts:
    api: PromApi
    instance: dict[str, str]  # lab LUN -> the instance of the exporter publishing it
    device: dict[str, str]  # lab LUN -> its loop device (the exporters name a loop device's LUN by it)


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoHosts]:
    reason = lab_skip_reason() or prometheus_server.missing()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("cause-lab")
    with ExitStack() as stack:
        state = lab_in_phase(stack, LAB, "both", "lunlat-cause-")
        generated: dict[str, Any] = yaml.safe_load(state.exporter_config.read_text(encoding="utf-8"))
        device = {lun: Path(path).name for lun, path in state.loops.items()}
        flags = {}
        for lun in ("oltp_a", "dss_b"):
            # One "host" per LUN: the lab's labels, only this LUN's loop device published.
            own = {**generated, "diskstats": {"include": f"^{device[lun]}$"}}
            path = work / f"{lun}.yaml"
            path.write_text(yaml.safe_dump(own, sort_keys=False), encoding="utf-8")
            flags[lun] = [f"--config.file={path}"]
        api, instance = serve_hosts(stack, work, flags, INTERVAL)
        yield TwoHosts(api, instance, device)


def _firing(api: PromApi, lun: str) -> dict[str, Any]:
    return api.wait_for_firing(ALERT, FIRE_TIMEOUT, lun=lun)


def test_host_as_oltp_breach_names_host_bs_scan_on_the_same_array(two_hosts: TwoHosts) -> None:
    api, device, instance = two_hosts.api, two_hosts.device, two_hosts.instance
    info = api.wait_for_series(f'lunlat_lun_info{{kind="lun", array="{ARRAY}"}}', 2, 60.0)
    assert {(s["metric"]["lun"], s["metric"]["instance"]) for s in info} == {
        (device["oltp_a"], instance["oltp_a"]),
        (device["dss_b"], instance["dss_b"]),
    }, "each host publishes its own LUN, both on the lab array"
    _firing(api, device["oltp_a"])
    # The alert's `for` is 0s: it can fire before B's exporter has two samples, when B's LUN has no
    # rate yet (a CI run saw exactly that); the annotations read after a full window see both hosts.
    wait_full_window(api, 2)
    alert = _firing(api, device["oltp_a"])
    neighbours = alert["annotations"]["neighbours"]
    print(f"\n{ALERT} {alert['labels']}\nneighbours: {neighbours}\ncause: {alert['annotations']['cause']}")
    assert neighbours.startswith(f"Busiest other LUNs on array {ARRAY}"), neighbours
    by_throughput = neighbours.split("By throughput: ", 1)[1]
    first = (
        rf"LUN {re.escape(device['dss_b'])} on {re.escape(instance['dss_b'])} \(database DW, workload dss\): "
    )
    assert re.match(first, by_throughput), neighbours
