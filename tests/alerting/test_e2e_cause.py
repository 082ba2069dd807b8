"""The breach alerts' `neighbours` and `cause` with real parts: two hosts' lunlat exporters on one
FlashArray (fake procfs/sysfs trees whose diskstats a thread advances) scraped by one Debian
Prometheus evaluating alerts/lunlat.rules.yml. Host A's OLTP LUN reads at 2 ms while host B's DSS LUN
on the same array scans 200 MiB/s: A's alert names B's LUN and its workload, and says the device
(0.2 I/Os in flight against a queue depth of 32 is no host queue); B's PostgreSQL LUN with 4 I/Os in
flight against an nr_requests of 4 is named as host queueing. The array comes from the LUNs' NAAs
(Pure's prefix and serial, lunlat.arrayid), the queue limits from sysfs: nothing here is given to
the rules by hand.

The lab (FUSE LUNs with set latencies, fio, two exporters on one lab array) is the done-when of issue
38; this runs the same chain on fake hosts, without root. Timeouts below only bound a failure.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerting.hosts import serve_hosts
from tests.alerting.stack import wait_full_window
from tests.support import prometheus_server
from tests.support.fake_host import FakeHost
from tests.support.prometheus_server import PromApi

ALERT = "LunLatencyDataReadHigh"
# Shorter than the shipped 15 s so the test is quick; the rules' 1-minute windows still hold 12 samples.
INTERVAL_S = 5
INTERVAL = f"{INTERVAL_S}s"
FIRE_TIMEOUT = 240.0
# One FlashArray: the volumes' serials share their first 14 hex digits (lunlat.arrayid).
ARRAY = "purefa:6c1b16ce1c034d"
ORA_WWID = "3624a93706c1b16ce1c034d1c00024c6f"
DW_WWID = "3624a93706c1b16ce1c034d1c00024c70"
LUNS = [
    {"match": {"alias": "ora_data"}, "database": "ORCL", "role": "data", "workload": "oltp"},
    {"match": {"alias": "dw_data"}, "database": "DW", "role": "data", "workload": "dss"},
    {"match": {"device": "loop3"}, "database": "PG", "role": "data", "workload": "oltp"},
]


def host_a(root: Path) -> FakeHost:
    """ora_data: a multipath LUN on one path of queue depth 32, its map's nr_requests 128."""
    host = FakeHost(root)
    host.add_scsi_disk("sdb", wwid="naa." + ORA_WWID[1:], vendor="PURE", model="FlashArray")
    host.add_multipath("dm-0", alias="ora_data", wwid=ORA_WWID, paths=["sdb"])
    host.set_queue_limits("sdb", queue_depth=32, nr_requests=64)
    host.set_queue_limits("dm-0", nr_requests=128)
    host.write()
    return host


def host_b(root: Path) -> FakeHost:
    """dw_data on the same array; pg_data a loop device (no array known) whose nr_requests is 4."""
    host = FakeHost(root)
    host.add_scsi_disk("sdb", wwid="naa." + DW_WWID[1:], vendor="PURE", model="FlashArray")
    host.add_multipath("dm-0", alias="dw_data", wwid=DW_WWID, paths=["sdb"])
    host.set_queue_limits("sdb", queue_depth=32, nr_requests=64)
    host.set_queue_limits("dm-0", nr_requests=128)
    host.add_loop("loop3", backing_file="/srv/pg.img")
    host.set_queue_limits("loop3", nr_requests=4)
    host.write()
    return host


# How often the fake hosts publish their counters: the exporter's "since the last scrape" covers
# the writes between two scrapes, so a 5 s window of writes a second apart saw 4 or 5 seconds of
# I/O (a CI run read 3.2 in flight for 4: 4 x 4/5). Writes every TURN_S leave one turn's worth.
TURN_S = 0.1


@dataclass
class Turns:
    """The longest time between two publications of the fake hosts' counters."""

    longest: float = 0.0


def advance(a: FakeHost, b: FakeHost, stop: threading.Event, turns: Turns) -> None:
    """Every TURN_S: ora_data 100 reads/s of 8 KiB at 2 ms (0.2 in flight); dw_data 200 reads/s of
    1 MiB at 0.5 ms (200 MiB/s); pg_data 1000 reads/s of 8 KiB at 4 ms (4 in flight). Each turn
    adds the seconds really gone by (a turn can take longer than its wait on a busy machine)."""
    last = time.monotonic()
    while not stop.wait(TURN_S):
        now = time.monotonic()
        seconds, last = now - last, now
        a.add_reads("dm-0", 100, 16, 2.0, seconds)
        b.add_reads("dm-0", 200, 2048, 0.5, seconds)
        b.add_reads("loop3", 1000, 16, 4.0, seconds)
        a.write()
        b.write()
        turns.longest = max(turns.longest, time.monotonic() - now + seconds)


@dataclass(frozen=True, slots=True)
class Stack:
    prometheus: PromApi
    instances: dict[str, str]  # host name -> its exporter's instance label
    turns: Turns


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    if missing := prometheus_server.missing():
        pytest.skip(missing)
    with ExitStack() as stack:
        hosts = {"a": host_a(tmp_path / "a"), "b": host_b(tmp_path / "b")}
        config = tmp_path / "lunlat.yaml"
        config.write_text(yaml.safe_dump({"luns": LUNS}), encoding="utf-8")
        stop = threading.Event()
        turns = Turns()
        threading.Thread(target=advance, args=(hosts["a"], hosts["b"], stop, turns), daemon=True).start()
        stack.callback(stop.set)
        flags = {
            name: [f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}", f"--config.file={config}"]
            for name, host in hosts.items()
        }
        api, instances = serve_hosts(stack, tmp_path, flags, INTERVAL)
        yield Stack(api, instances, turns)


def _firing(api: PromApi, lun: str) -> dict[str, Any]:
    return api.wait_for_firing(ALERT, FIRE_TIMEOUT, lun=lun)


def test_a_breach_names_the_neighbour_on_the_array_and_the_cause(stack: Stack) -> None:
    api, b = stack.prometheus, stack.instances["b"]
    # The array of both hosts' LUNs, from their NAAs; the queue limits from sysfs.
    info = api.wait_for_series(f'lunlat_lun_info{{kind="lun", array="{ARRAY}"}}', 2, 60.0)
    assert {s["metric"]["lun"] for s in info} == {"ora_data", "dw_data"}
    assert api.values('lunlat_device_nr_requests{lun="loop3"}', "device") == {"loop3": 4.0}

    _firing(api, "ora_data")
    wait_full_window(api, 3, INTERVAL)
    ora = _firing(api, "ora_data")["annotations"]
    assert ora["neighbours"].startswith(f"Busiest other LUNs on array {ARRAY}"), ora["neighbours"]
    by_throughput = ora["neighbours"].split("By throughput: ", 1)[1].split(". By IOPS", 1)[0]
    first = re.match(
        rf"LUN dw_data on {re.escape(b)} \(database DW, workload dss\): ([0-9.]+)MiB/s", by_throughput
    )
    assert first is not None, ora["neighbours"]
    assert 150 < float(first[1]) < 250, "about 200 MiB/s (rates of a thread's seconds, scraped every 5 s)"
    assert "loop3" not in ora["neighbours"], "a LUN of no known array is no neighbour"
    assert ora["cause"].startswith("The device:"), ora["cause"]
    assert "I/Os in flight on average since the last scrape, against its queue_depth of 32" in ora["cause"], (
        ora["cause"]
    )

    pg = _firing(api, "loop3")["annotations"]
    assert pg["cause"].startswith("Host queue: the queue of this LUN's device is at its limit"), pg["cause"]
    in_flight = re.search(
        r"([0-9.]+) I/Os in flight on average since the last scrape, against its nr_requests of 4",
        pg["cause"],
    )
    # Two scrapes INTERVAL apart see the writes between them: INTERVAL give or take the longest
    # time between two writes, so 4 in flight reads as 4 x (1 - longest / INTERVAL) at the least,
    # less 0.05 from its printf "%.1f" (lunlat_rules/cause.py).
    assert in_flight is not None, pg["cause"]
    assert float(in_flight[1]) >= 4 * (1 - stack.turns.longest / INTERVAL_S) - 0.05, (
        pg["cause"],
        f"longest time between two writes of the counters: {stack.turns.longest:.2f} s",
    )
    assert "its array is unknown" in pg["neighbours"], pg["neighbours"]
