"""lunlat's rules beyond one Prometheus: two hosts' exporters → vmagent (deploy/fleet/vmagent.yml,
remote_write) → VictoriaMetrics → vmalert evaluating alerts/lunlat.rules.yml unchanged → the same
LUN breach alert fires for each host, named by host, and is sent to an Alertmanager API.

Real binaries (Debian `victoria-metrics`: victoria-metrics, vmagent, vmalert); each host is a fake
procfs/sysfs tree whose diskstats a thread advances: one multipath LUN, data, 100 reads/s at 2 ms.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest
import yaml

from tests.fakesys import FakeHost
from tests.procs import LOOPBACK, LUNLAT_PORT, ExporterProcess

ROOT = Path(__file__).resolve().parents[2]
VMAGENT_CONFIG = ROOT / "deploy" / "fleet" / "vmagent.yml"
RULES = ROOT / "alerts" / "lunlat.rules.yml"
BINARIES = ("victoria-metrics", "vmagent", "vmalert")
HOSTS = ("db01", "db02")
LUN = "sales_data"
ALERT = "LunLatencyDataReadHigh"
FIRE_TIMEOUT = 240.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def get_json(url: str) -> Any:
    with urlopen(url, timeout=10) as response:  # noqa: S310 - loopback URLs built here
        return json.load(response)


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urlopen(url, timeout=5):  # noqa: S310
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def fake_host(root: Path) -> FakeHost:
    host = FakeHost(root)
    host.add_scsi_disk("sdb", wwid="naa.600a098038303053453f463045727a4e")
    host.add_multipath("dm-0", alias=LUN, wwid="3600a098038303053453f463045727a4e", paths=["sdb"])
    host.write()
    return host


def advance(hosts: list[FakeHost], stop: threading.Event) -> None:
    """Every second: 100 reads of 2 ms and 20 writes of 0.5 ms on the LUN of every host."""
    while not stop.wait(1.0):
        for host in hosts:
            old = host.stats["dm-0"]
            host.stats["dm-0"] = replace(
                old,
                reads=old.reads + 100,
                read_sectors=old.read_sectors + 1600,
                read_ms=old.read_ms + 200,
                writes=old.writes + 20,
                write_sectors=old.write_sectors + 320,
                write_ms=old.write_ms + 10,
            )
            host.write()


class AlertmanagerApi:
    """Records what vmalert sends to Alertmanager's API (POST /api/v2/alerts)."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.alerts.extend(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.server.server_address[1]}"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[str, str, AlertmanagerApi]]:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (Debian: victoria-metrics)")
    with ExitStack() as stack:
        hosts = [fake_host(tmp_path / name) for name in HOSTS]
        config = tmp_path / "lunlat.yaml"
        entry = {"match": {"alias": LUN}, "database": "Sales", "role": "data", "workload": "oltp"}
        config.write_text(yaml.safe_dump({"luns": [entry]}), encoding="utf-8")
        stop = threading.Event()
        threading.Thread(target=advance, args=(hosts, stop), daemon=True).start()
        stack.callback(stop.set)

        def spawn(argv: list[str], name: str, **kw: Any) -> ExporterProcess:
            process = ExporterProcess(argv, tmp_path / f"{name}.log", name=name, start_timeout=60.0, **kw)
            stack.callback(process.stop)
            return process.start()

        vm_port = free_port()
        spawn(
            [
                "victoria-metrics",
                f"-storageDataPath={tmp_path / 'vm-data'}",
                f"-httpListenAddr={LOOPBACK}:{vm_port}",
                "-retentionPeriod=1d",
                "-search.latencyOffset=1s",  # default 30 s hides the newest samples from the rules
            ],
            "victoria-metrics",
        )
        vm = f"http://{LOOPBACK}:{vm_port}"
        wait_http(f"{vm}/health")
        shipped = VMAGENT_CONFIG.read_text(encoding="utf-8")
        for name, host in zip(HOSTS, hosts, strict=True):
            exporter = spawn(
                [
                    sys.executable,
                    "-m",
                    "lunlat",
                    "serve",
                    f"--web.listen-address={LOOPBACK}:0",
                    f"--path.procfs={host.procfs}",
                    f"--path.sysfs={host.sysfs}",
                    f"--config.file={config}",
                ],
                f"lunlat-{name}",
                port_pattern=LUNLAT_PORT,
            )
            # The shipped config as it is, but for the exporter's port (every host's is 10431).
            agent_config = tmp_path / f"vmagent-{name}.yml"
            agent_config.write_text(
                shipped.replace("127.0.0.1:10431", f"{LOOPBACK}:{exporter.port}").replace(
                    "scrape_interval: 15s", "scrape_interval: 5s"
                ),
                encoding="utf-8",
            )
            spawn(
                [
                    "vmagent",
                    f"-promscrape.config={agent_config}",
                    f"-remoteWrite.url={vm}/api/v1/write",
                    f"-remoteWrite.tmpDataPath={tmp_path / f'vmagent-{name}'}",
                    f"-httpListenAddr={LOOPBACK}:{free_port()}",
                    "-remoteWrite.flushInterval=1s",
                ],
                f"vmagent-{name}",
                env={"LUNLAT_HOST": name, "PATH": "/usr/bin:/bin"},
            )
        alertmanager = AlertmanagerApi()
        stack.callback(alertmanager.server.server_close)  # runs after shutdown (last in, first out)
        stack.callback(alertmanager.server.shutdown)
        vmalert_port = free_port()
        spawn(
            [
                "vmalert",
                f"-rule={RULES}",
                f"-datasource.url={vm}",
                f"-remoteWrite.url={vm}",
                f"-notifier.url={alertmanager.url}",
                f"-httpListenAddr={LOOPBACK}:{vmalert_port}",
                "-evaluationInterval=5s",
            ],
            "vmalert",
        )
        vmalert = f"http://{LOOPBACK}:{vmalert_port}"
        wait_http(f"{vmalert}/api/v1/alerts")
        yield vm, vmalert, alertmanager


def firing(vmalert: str) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = get_json(f"{vmalert}/api/v1/alerts")["data"]["alerts"] or []
    return [a for a in alerts if a["state"] == "firing" and a["name"] == ALERT]


def test_the_same_lun_breach_fires_for_each_host_through_remote_write(
    fleet: tuple[str, str, AlertmanagerApi],
) -> None:
    vm, vmalert, alertmanager = fleet
    deadline = time.monotonic() + FIRE_TIMEOUT
    while {a["labels"].get("instance") for a in firing(vmalert)} != set(HOSTS):
        assert time.monotonic() < deadline, (
            f"{ALERT} not firing for {HOSTS} after {FIRE_TIMEOUT:g}s: {firing(vmalert)}"
        )
        time.sleep(3)
    for alert in firing(vmalert):
        labels = alert["labels"]
        assert (labels["lun"], labels["database"], labels["role"], labels["layer"]) == (
            LUN,
            "Sales",
            "data",
            "host",
        )
        assert labels["severity"] == "page"
        # The templates' `query` calls ran against VictoriaMetrics too: value, goal and IOPS filled in.
        description = alert["annotations"]["description"]
        assert "is 2.00 ms, above its goal of 1.00 ms, at 100 reads/s" in description, description
    # Each host's raw series carry vmagent's external label, and `instance` is the host's name.
    query = urlencode({"query": "count by (host, instance) (lunlat_lun_info)"})
    rows = get_json(f"{vm}/api/v1/query?{query}")["data"]["result"]
    assert {(r["metric"]["host"], r["metric"]["instance"]) for r in rows} == {(h, h) for h in HOSTS}
    deadline = time.monotonic() + 60
    while {
        a["labels"].get("instance") for a in alertmanager.alerts if a["labels"].get("alertname") == ALERT
    } != set(HOSTS):
        assert time.monotonic() < deadline, f"not sent to Alertmanager's API: {alertmanager.alerts}"
        time.sleep(1)
