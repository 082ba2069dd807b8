"""lunlat's rules beyond one Prometheus: two hosts' exporters → remote_write (one host with vmagent
and deploy/fleet/vmagent.yml, the other with Prometheus in agent mode and
deploy/fleet/prometheus-agent.yml) → VictoriaMetrics → vmalert evaluating alerts/lunlat.rules.yml
unchanged (recorded series written back) → the same LUN breach alert fires for each host, named by
host, and reaches the repo's Alertmanager routing, which pages once per host.

Real binaries: Debian `victoria-metrics` (victoria-metrics, vmagent, vmalert), `prometheus` (agent
mode) and `prometheus-alertmanager`; each host is a fake procfs/sysfs tree whose diskstats a thread advances:
one multipath LUN, data, reads at 2 ms stepping between 50 and 150 per second. Timeouts below only bound a failure.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerting.stack import WebhookReceiver, alertmanager_binary, start_alertmanager
from tests.support import prometheus_server, victoria_metrics
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.support.fake_host import FakeHost
from tests.support.prometheus_server import PromApi

ROOT = Path(__file__).resolve().parents[2]
VMAGENT_CONFIG = ROOT / "deploy" / "fleet" / "vmagent.yml"
PROMETHEUS_AGENT_CONFIG = ROOT / "deploy" / "fleet" / "prometheus-agent.yml"
RULES = ROOT / "alerts" / "lunlat.rules.yml"
BINARIES = ("victoria-metrics", "vmagent", "vmalert", prometheus_server.PROMETHEUS)
# db01 ships with vmagent, db02 with Prometheus in agent mode: both shipped configs are exercised.
HOSTS = ("db01", "db02")
LUN = "sales_data"
ALERT = "LunLatencyDataReadHigh"
FIRE_TIMEOUT = 240.0
NOTIFY_TIMEOUT = 90.0
# Shorter than the shipped 15 s so the test is quick; the rules' 1-minute windows still hold 12
# samples (they need at least two).
INTERVAL = "5s"
DESCRIBED = re.compile(
    r"is ([0-9.]+) ms, above its goal of ([0-9.]+) ms \(reads of every size: [0-9.]+ ms at ([0-9.]+) reads/s"
)


def fake_host(root: Path) -> FakeHost:
    host = FakeHost(root)
    host.add_scsi_disk("sdb", wwid="naa.600a098038303053453f463045727a4e")
    host.add_multipath("dm-0", alias=LUN, wwid="3600a098038303053453f463045727a4e", paths=["sdb"])
    host.write()
    return host


def reads_per_second(tick: int) -> int:
    """The load steps between 50 and 150 reads per second every 20 s; latency stays 2 ms. A steady
    load would hide a latency average that mixes two instants (vmalert writes recorded series back
    asynchronously, so a rule reading one recorded in the same evaluation gets an older value)."""
    return 150 if (tick // 20) % 2 else 50


def advance(hosts: list[FakeHost], stop: threading.Event) -> None:
    """Every second: reads of 2 ms (reads_per_second) and 20 writes of 0.5 ms on the LUN of every
    host."""
    tick = 0
    while not stop.wait(1.0):
        reads = reads_per_second(tick)
        tick += 1
        for host in hosts:
            old = host.stats["dm-0"]
            host.stats["dm-0"] = replace(
                old,
                reads=old.reads + reads,
                read_sectors=old.read_sectors + 16 * reads,
                read_ms=old.read_ms + 2 * reads,
                writes=old.writes + 20,
                write_sectors=old.write_sectors + 320,
                write_ms=old.write_ms + 10,
            )
            host.write()


Spawn = Callable[..., ExporterProcess]


def shipped_config(path: Path, exporter: str) -> str:
    """A shipped agent config as it is, but for the exporter's address (every host's is
    127.0.0.1:10431) and the interval."""
    text = path.read_text(encoding="utf-8")
    assert "127.0.0.1:10431" in text and "scrape_interval: 15s" in text, path
    return text.replace("127.0.0.1:10431", exporter).replace(
        "scrape_interval: 15s", f"scrape_interval: {INTERVAL}"
    )


def ship_with_vmagent(host: str, exporter: str, store: str, work: Path, spawn: Spawn) -> None:
    """deploy/fleet/vmagent.yml: the host's name comes from LUNLAT_HOST, as lunlat-vmagent.service
    sets it."""
    config = work / f"vmagent-{host}.yml"
    config.write_text(shipped_config(VMAGENT_CONFIG, exporter), encoding="utf-8")
    spawn(
        [
            "vmagent",
            f"-promscrape.config={config}",
            f"-remoteWrite.url={store}/api/v1/write",
            f"-remoteWrite.tmpDataPath={work / f'vmagent-{host}'}",
            f"-httpListenAddr={LOOPBACK}:0",
            "-remoteWrite.flushInterval=1s",
        ],
        f"vmagent-{host}",
        env={"LUNLAT_HOST": host, "PATH": "/usr/bin:/bin"},
    )


def ship_with_prometheus_agent(host: str, exporter: str, store: str, work: Path, spawn: Spawn) -> None:
    """deploy/fleet/prometheus-agent.yml: the host's name templated in for db01, as its comment
    says; the central store's URL for the example's."""
    text = shipped_config(PROMETHEUS_AGENT_CONFIG, exporter)
    (url,) = [rw["url"] for rw in yaml.safe_load(text)["remote_write"]]
    config = work / f"prometheus-agent-{host}.yml"
    config.write_text(text.replace("db01", host).replace(url, f"{store}/api/v1/write"), encoding="utf-8")
    spawn(
        [
            prometheus_server.PROMETHEUS,
            "--enable-feature=agent",
            f"--config.file={config}",
            f"--storage.agent.path={work / f'prometheus-agent-{host}'}",
            f"--web.listen-address={LOOPBACK}:0",
        ],
        f"prometheus-agent-{host}",
    )


@dataclass(frozen=True, slots=True)
class Fleet:
    store: PromApi  # VictoriaMetrics' Prometheus API
    ruler: PromApi  # vmalert's
    pages: WebhookReceiver  # what the repo's Alertmanager routing sends out


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    missing += [] if alertmanager_binary() else ["prometheus-alertmanager"]
    if missing:
        pytest.skip(
            f"missing {', '.join(missing)} (Debian: victoria-metrics, prometheus, prometheus-alertmanager)"
        )
    with ExitStack() as stack:
        hosts = [fake_host(tmp_path / name) for name in HOSTS]
        config = tmp_path / "lunlat.yaml"
        entry = {"match": {"alias": LUN}, "database": "Sales", "role": "data", "workload": "oltp"}
        config.write_text(yaml.safe_dump({"luns": [entry]}), encoding="utf-8")
        stop = threading.Event()
        threading.Thread(target=advance, args=(hosts, stop), daemon=True).start()
        stack.callback(stop.set)

        def spawn(argv: list[str], name: str, **kw: Any) -> ExporterProcess:
            """A child on a port the kernel picks (`127.0.0.1:0`; found in the exporter's log, for
            the others by the port they listen on), ready when it answers /-/ready."""
            process = ExporterProcess(argv, tmp_path / f"{name}.log", name=name, start_timeout=60.0, **kw)
            stack.callback(process.stop)
            process.start()
            prometheus_server.wait_ready(process)
            return process

        pages = stack.enter_context(WebhookReceiver())
        alertmanager = start_alertmanager(tmp_path / "alertmanager", pages.url)
        stack.callback(alertmanager.stop)
        store = spawn(victoria_metrics.single_node(tmp_path / "vm-data"), "victoria-metrics")
        vm = f"http://{LOOPBACK}:{store.port}"
        for name, host in zip(HOSTS, hosts, strict=True):
            exporter = spawn(
                lunlat_serve(
                    f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}", f"--config.file={config}"
                ),
                f"lunlat-{name}",
                port_pattern=LUNLAT_PORT,
            )
            ship = ship_with_vmagent if name == HOSTS[0] else ship_with_prometheus_agent
            ship(name, f"{LOOPBACK}:{exporter.port}", vm, tmp_path, spawn)
        ruler = spawn(
            [
                "vmalert",
                f"-rule={RULES}",
                f"-datasource.url={vm}",
                f"-remoteWrite.url={vm}",  # recorded series go back to the store
                f"-notifier.url=http://{LOOPBACK}:{alertmanager.port}",
                f"-httpListenAddr={LOOPBACK}:0",
                f"-evaluationInterval={INTERVAL}",
            ],
            "vmalert",
        )
        yield Fleet(PromApi(vm), prometheus_server.api(ruler), pages)


def firing(ruler: PromApi) -> list[dict[str, Any]]:
    return [a for a in ruler.alerts() if a["state"] == "firing" and a["name"] == ALERT]


def paged_hosts(pages: WebhookReceiver) -> dict[str, str]:
    """Host → receiver of every firing notification of the alert."""
    return {
        alert["labels"]["instance"]: notification.receiver
        for notification in pages.snapshot()
        for alert in notification.alerts
        if alert["labels"].get("alertname") == ALERT and alert.get("status") == "firing"
    }


def test_the_same_lun_breach_fires_for_each_host_through_remote_write(fleet: Fleet) -> None:
    deadline = time.monotonic() + FIRE_TIMEOUT
    while {a["labels"].get("instance") for a in firing(fleet.ruler)} != set(HOSTS):
        assert time.monotonic() < deadline, (
            f"{ALERT} not firing for {HOSTS} after {FIRE_TIMEOUT:g}s: {fleet.ruler.alerts()}"
        )
        time.sleep(3)
    for alert in firing(fleet.ruler):
        labels = alert["labels"]
        assert (labels["lun"], labels["database"], labels["role"], labels["layer"]) == (
            LUN,
            "Sales",
            "data",
            "host",
        )
        assert labels["severity"] == "page"
        # The templates' `query` calls ran against VictoriaMetrics too: value, goal and IOPS filled in.
        # Value and goal exactly; the IOPS somewhere in the load's range.
        description = alert["annotations"]["description"]
        found = DESCRIBED.search(description)
        assert found, description
        latency_ms, goal_ms, iops = found.groups()
        assert (latency_ms, goal_ms) == ("2.00", "1.00"), description
        assert 45 <= float(iops) <= 155, description
        # The why (docs/alerting.md, "Why: the cause in the alert"), from vmalert's templates too: a
        # NetApp NAA names no array, and nothing measures a host queue on this host.
        annotations = alert["annotations"]
        assert "its array is unknown" in annotations["neighbours"], annotations["neighbours"]
        assert annotations["cause"].startswith("The device:"), annotations["cause"]
        assert "Measured over 1m: the host's reads 2.00 ms" in annotations["cause"], annotations["cause"]
    # Each host's raw series carry its agent's external `host` label, and `instance` is the host's name.
    rows = fleet.store.query("count by (host, instance) (lunlat_lun_info)")
    assert {(r["metric"]["host"], r["metric"]["instance"]) for r in rows} == {(h, h) for h in HOSTS}
    # vmalert wrote the recording rules' results back: each host's LUN at 2 ms at every evaluation
    # so far, while its IOPS stepped up and down.
    now = time.time()
    latency = f'lunlat:read_latency_seconds:avg1m{{layer="host", lun="{LUN}"}}'
    rows = fleet.store.query_range(latency, now - 600, now, 5)
    assert {r["metric"]["instance"] for r in rows} == set(HOSTS), rows
    for row in rows:
        latencies = [float(v) for _, v in row["values"]]
        assert len(latencies) >= 6 and all(v == pytest.approx(0.002) for v in latencies), row
    iops = fleet.store.query_range(f'lunlat:iops:rate1m{{op="read", lun="{LUN}"}}', now - 600, now, 5)
    seen = [float(v) for r in iops for _, v in r["values"]]
    assert max(seen) - min(seen) > 20, f"the load did not change while the alert was raised: {seen}"
    # The repo's routing (grouped by instance and LUN) pages the storage on-call once per host.
    deadline = time.monotonic() + NOTIFY_TIMEOUT
    while set(paged_hosts(fleet.pages)) != set(HOSTS):
        assert time.monotonic() < deadline, f"no page for each host: {paged_hosts(fleet.pages)}"
        time.sleep(1)
    assert set(paged_hosts(fleet.pages).values()) == {"storage-pager"}
