"""lunlat past one Prometheus, sharded by host (deploy/shards/, docs/deploy/fleet.md "Sharded by
host"): a fake fleet split over two shard Prometheus servers by `hashmod` of each host's address,
each evaluating alerts/lunlat.rules.yml for its hosts, sending alerts to one Alertmanager and
remote-writing what it records into VictoriaMetrics, the global view.

Real parts: Debian's `prometheus` (2.42) as both shards, running deploy/shards/prometheus-shard.yml
as shipped but for its SHARD values, the interval and the addresses of the other parts;
`victoria-metrics` (1.79, single node) as the global view; `prometheus-alertmanager` with
alerts/alertmanager.yml's routing. The hosts are bench/fakefleet.py's: each a captured real `lunlat
serve` exposition of 20 multipath LUNs whose counters advance, every 10th host with one data LUN
slow (3 ms reads against the 1 ms goal).

Not marked: nothing here depends on a calm CPU (it waits on sockets and Prometheus' intervals), so
.ci/run runs it in the containers lane with the rest of tests/deploy; only the Prometheus 3 promtool
case is marked `prometheus3`, for the lane that has the build. Timeouts only bound a failure.
"""

from __future__ import annotations

import hashlib
import operator
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from alerts.tests.promtools import PROMTOOLS, promtool
from tests.alerting.stack import WebhookReceiver, alertmanager_binary, start_alertmanager
from tests.support import prometheus_server, victoria_metrics
from tests.support.exporter_process import LOOPBACK, ExporterProcess
from tests.support.prometheus_server import PromApi

ROOT = Path(__file__).resolve().parents[2]
# bench/ holds scripts, not a package: fakefleet imports its siblings by their own names.
sys.path.insert(0, str(ROOT / "bench"))
import fakefleet  # noqa: E402 - needs bench/ on the path first

SHIPPED = ROOT / "deploy" / "shards" / "prometheus-shard.yml"
HOSTS_EXAMPLE = ROOT / "deploy" / "shards" / "lunlat-hosts.yml"
RULES = ROOT / "alerts" / "lunlat.rules.yml"
SHARDS = 2
# 12 hosts: every 10th is slow (fakefleet.SLOW_EVERY), so db0001 and db0011, which hash to
# different shards: each shard has a page to send.
HOSTS = 12
PORT = 10431  # every exporter's port (the shipped hosts file's)
# Shorter than the shipped 15 s so the test is quick; the rules' 1-minute windows still hold 12
# samples (they need two), and Alertmanager's waits are the repo's own.
INTERVAL = "5s"
SLOW_LUN = f"mpath{fakefleet.SLOW_LUN:02d}"  # fakefleet.build_host names LUN n mpath<n>
ALERT = "LunLatencyDataReadHigh"
T = TypeVar("T")
TIMEOUT = 180.0


# --- the shipped config, per shard -----------------------------------------------------------------


def hashmod(address: str, modulus: int) -> int:
    """The shard Prometheus' `hashmod` gives an address: the MD5 of the value, its last 8 bytes as
    a big-endian number, modulo `modulus` (prometheus/prometheus model/relabel/relabel.go,
    `relabel`, case HashMod). Only the test uses it, to know which shard should hold a host."""
    digest = hashlib.md5(address.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[8:], "big") % modulus


def shard_config(index: int, count: int) -> dict[str, Any]:
    """The shipped config with its three SHARD values set, as the docs say to: `modulus`, the
    `keep` regex and the external label `shard`."""
    config: dict[str, Any] = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "lunlat"]
    hashing, keeping = job["relabel_configs"][:2]
    assert hashing["action"] == "hashmod" and hashing["source_labels"] == ["__address__"], hashing
    assert keeping["action"] == "keep" and keeping["source_labels"] == [hashing["target_label"]], keeping
    hashing["modulus"] = count
    keeping["regex"] = str(index)
    config["global"]["external_labels"]["shard"] = str(index)
    return config


def install(config: dict[str, Any], into: Path) -> Path:
    """prometheus.yml beside lunlat.rules.yml and lunlat-hosts.yml, as the docs install them."""
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(RULES, into / "lunlat.rules.yml")
    shutil.copy(HOSTS_EXAMPLE, into / "lunlat-hosts.yml")
    path = into / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("major", PROMTOOLS)
def test_each_shards_config_is_valid_as_installed(major: str, tmp_path: Path) -> None:
    """promtool checks every shard's config with its rule file and hosts file beside it."""
    tool = promtool(major)
    shipped = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    assert shard_config(0, SHARDS) == shipped, "the shipped file is shard 0 of 2"
    assert shipped["global"]["scrape_interval"] == shipped["global"]["evaluation_interval"] == "15s"
    for index in range(SHARDS):
        path = install(shard_config(index, SHARDS), tmp_path / f"shard-{index}")
        done = subprocess.run(
            [tool, "check", "config", str(path)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS: 1 rule files found" in done.stdout, done.stdout
    # Only recorded and info series leave a shard (the per-array ones stay).
    keep, drop = shipped["remote_write"][0]["write_relabel_configs"]
    assert (keep["action"], keep["regex"]) == ("keep", "lunlat:.+|lunlat_lun_info|lunlat_build_info")
    assert (drop["action"], drop["regex"]) == ("drop", "lunlat:array_latency_seconds:mean1m")
    # The rules' selector names the job.
    assert 'job="lunlat"' in (ROOT / "alerts" / "goals.yaml").read_text(encoding="utf-8")


def test_every_shard_keeps_a_disjoint_share_of_the_hosts() -> None:
    """The test's hosts fill both shards (else the real-parts test below would prove little) and
    the example hosts file is shared out too."""
    names = [f"{host}:{PORT}" for host in fakefleet.host_names(HOSTS)]
    shares = {index: {n for n in names if hashmod(n, SHARDS) == index} for index in range(SHARDS)}
    assert all(shares.values()), shares
    assert set().union(*shares.values()) == set(names)
    example = yaml.safe_load(HOSTS_EXAMPLE.read_text(encoding="utf-8"))
    addresses = [t for group in example for t in group["targets"]]
    assert {hashmod(a, SHARDS) for a in addresses} == set(range(SHARDS)), addresses


# --- the fleet, running ----------------------------------------------------------------------------


def running_config(
    index: int, targets: Path, fleet_port: int, alertmanager: str, store: str
) -> dict[str, Any]:
    """Shard `index`'s config as shipped, but for the interval, the paths and addresses of this
    test, and where a host is served: every fake host answers on one local server
    (fakefleet.FleetServer, GET /lunlat?host=NAME), so after the shipped relabeling (which hashes
    the host's own address, as in a fleet) the scrape is sent there. `instance` is set to the host's
    address first: what Prometheus sets it to by default in a fleet ("After relabeling, the
    instance label is set to the value of __address__ by default if it was not set during
    relabeling", prometheus.io/docs/prometheus/latest/configuration/configuration/#relabel_config)."""
    config = shard_config(index, SHARDS)
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = INTERVAL
    config["rule_files"] = [str(RULES)]
    config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [alertmanager]
    (job,) = config["scrape_configs"]
    job["file_sd_configs"][0]["files"] = [str(targets)]
    job["relabel_configs"] += [
        {"source_labels": ["__address__"], "target_label": "instance"},
        {"source_labels": ["__address__"], "regex": f"(.+):{PORT}", "target_label": "__param_host"},
        {"target_label": "__metrics_path__", "replacement": "/lunlat"},
        {"target_label": "__address__", "replacement": f"{LOOPBACK}:{fleet_port}"},
    ]
    (remote,) = config["remote_write"]
    remote["url"] = f"{store}/api/v1/write"  # single-node VictoriaMetrics' remote write path
    return config


@dataclass(frozen=True, slots=True)
class Fleet:
    shards: tuple[PromApi, ...]
    store: PromApi  # VictoriaMetrics' Prometheus API: the global view
    pages: WebhookReceiver
    hosts: dict[str, int]  # instance → the shard that should hold it
    slow: frozenset[str]  # instances with the slow LUN


# Which Prometheus runs each shard: Debian's 2.42 for both; and a fleet halfway through an upgrade,
# shard 0 on Prometheus 3 (the build of tests/support/prometheus_server.py), shard 1 still on 2.42.
SERVERS = (
    pytest.param(("2", "2"), id="prometheus2"),
    pytest.param(("3", "2"), id="prometheus3-and-2", marks=pytest.mark.prometheus3),
)


@pytest.fixture(params=SERVERS)
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    servers = [prometheus_server.binary_or_skip(major) for major in request.param]
    missing = [b for b in (prometheus_server.PROMETHEUS, "victoria-metrics") if shutil.which(b) is None]
    missing += [] if alertmanager_binary() else ["prometheus-alertmanager"]
    if missing:
        pytest.skip(
            f"missing {', '.join(missing)} (Debian: prometheus, victoria-metrics, prometheus-alertmanager)"
        )
    with ExitStack() as stack:
        capture = fakefleet.capture(tmp_path / "capture", None)
        server = stack.enter_context(fakefleet.FleetServer(capture, HOSTS))
        names = list(fakefleet.host_names(HOSTS))
        hosts = {f"{name}:{PORT}": hashmod(f"{name}:{PORT}", SHARDS) for name in names}
        slow = frozenset(f"{name}:{PORT}" for name in server.slow_hosts(names))
        targets = tmp_path / "lunlat-hosts.yml"
        targets.write_text(yaml.safe_dump([{"targets": list(hosts)}]), encoding="utf-8")

        pages = stack.enter_context(WebhookReceiver())
        alertmanager = start_alertmanager(tmp_path / "alertmanager", pages.url)
        stack.callback(alertmanager.stop)
        vm = ExporterProcess(
            victoria_metrics.single_node(tmp_path / "vm-data"),
            tmp_path / "victoria-metrics.log",
            name="victoria-metrics",
            start_timeout=60.0,
        )
        stack.callback(vm.stop)
        vm.start()
        prometheus_server.wait_ready(vm)
        store = f"http://{LOOPBACK}:{vm.port}"
        shards = []
        for index in range(SHARDS):
            config = running_config(index, targets, server.port, f"{LOOPBACK}:{alertmanager.port}", store)
            process = prometheus_server.start(tmp_path / f"shard-{index}", config, servers[index])
            stack.callback(process.stop)
            shards.append(prometheus_server.api(process))
        yield Fleet(tuple(shards), PromApi(store), pages, hosts, slow)


def wait_for(what: str, found: Callable[[], T], done: Callable[[T], bool]) -> T:
    """Poll `found()` until `done(result)`; the last result. Fails with it after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        result = found()
        if done(result):
            return result
        assert time.monotonic() < deadline, f"{what} after {TIMEOUT:g}s: {result}"
        time.sleep(2)


def instances(api: PromApi, promql: str) -> dict[str, list[dict[str, str]]]:
    """instance → the label sets of the query's result with that instance."""
    found: dict[str, list[dict[str, str]]] = {}
    for row in api.query(promql):
        found.setdefault(row["metric"].get("instance", ""), []).append(row["metric"])
    return found


def scraping(shard: PromApi) -> set[str]:
    """The hosts `shard` scrapes, and scraped last time."""
    return set(instances(shard, 'up{job="lunlat"} == 1'))


def paged(pages: WebhookReceiver) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(instance, lun) → every distinct firing alert of ALERT notified for it."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for notification in pages.snapshot():
        for alert in notification.alerts:
            labels = alert["labels"]
            if labels.get("alertname") != ALERT or alert.get("status") != "firing":
                continue
            key = (labels["instance"], labels["lun"])
            entry = {"labels": labels, "receiver": notification.receiver}
            if entry not in found.setdefault(key, []):
                found[key].append(entry)
    return found


def test_a_sharded_fleet_answers_one_global_query_and_pages_once(fleet: Fleet) -> None:
    every = set(fleet.hosts)
    # Each shard scrapes the hosts whose address hashes to it: none on two shards, none lost.
    for index, shard in enumerate(fleet.shards):
        own = {host for host, at in fleet.hosts.items() if at == index}
        scraped = wait_for(
            f"shard {index} scraping {sorted(own)}",
            partial(scraping, shard),
            partial(operator.eq, own),
        )
        assert scraped == own
    # The global view: every host's judged read latency, recorded by its shard, each host under
    # one shard only, the one its address hashes to.
    judged = 'lunlat:judged_read_latency_seconds:avg1m{layer="host"}'
    rows = wait_for(
        f"{judged} of every host in VictoriaMetrics",
        lambda: instances(fleet.store, f"count by (instance, shard) ({judged})"),
        lambda got: set(got) == every,
    )
    for host, labels in rows.items():
        assert [r["shard"] for r in labels] == [str(fleet.hosts[host])], (host, labels)
    # Every host's 20 LUNs counted once (a host scraped by two shards would count 40).
    luns = dict.fromkeys(every, float(fakefleet.LUNS))
    counted = wait_for(
        f"{fakefleet.LUNS} LUNs of every host, once each",
        partial(
            fleet.store.values,
            'count by (instance) (lunlat:iops:rate1m{layer="host", op="read"})',
            "instance",
        ),
        partial(operator.eq, luns),
    )
    assert counted == luns
    # One query over the whole fleet, answered by the global view alone: the LUNs above their 1 ms
    # goal are the slow hosts' slow LUN, wherever their shard is, at its 3 ms.
    above = fleet.store.query(f"{judged} > 0.001")
    assert {(r["metric"]["instance"], r["metric"]["lun"]) for r in above} == {
        (h, SLOW_LUN) for h in fleet.slow
    }
    assert len({fleet.hosts[h] for h in fleet.slow}) == SHARDS, "a slow host on each shard"
    for row in above:
        assert float(row["value"][1]) == pytest.approx(0.003, rel=0.01), row
    # The info series the dashboards list hosts by come along; the raw counters stay on the shards.
    info = fleet.store.values('count by (instance) (lunlat_lun_info{kind="lun"})', "instance")
    assert set(info) == every, info
    assert fleet.store.query("count(lunlat_device_reads_completed_total)") == []
    assert fleet.shards[0].query("count(lunlat_device_reads_completed_total)") != []

    # The slow LUN of each slow host pages once, through the one Alertmanager (the repo's routing:
    # the storage on-call's pager), from the shard that holds the host, and no other host pages.
    wanted = {(host, SLOW_LUN) for host in fleet.slow}
    pages = wait_for(
        f"a page for {sorted(wanted)}", lambda: paged(fleet.pages), lambda got: set(got) >= wanted
    )
    assert set(pages) == wanted, pages
    for (host, _), alerts in pages.items():
        assert len(alerts) == 1, alerts
        (alert,) = alerts
        assert alert["labels"]["shard"] == str(fleet.hosts[host]), alert
        assert alert["receiver"] == "storage-pager", alert
    # Each shard evaluated the alert for its own hosts only.
    for index, shard in enumerate(fleet.shards):
        firing = {
            a["labels"]["instance"]
            for a in shard.alerts()
            if a["labels"]["alertname"] == ALERT and a["state"] == "firing"
        }
        assert firing == {h for h in fleet.slow if fleet.hosts[h] == index}, (index, firing)
