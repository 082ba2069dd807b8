"""The node_exporter host layer end to end: a real node_exporter and a real lunlat (its counters off,
--no-collector.diskstats.counters) read one fake /proc/diskstats; a real Prometheus scrapes both as
two jobs and evaluates the rules generated for `host_layer: {source: node_exporter}`. The recorded
host-layer latency of the LUN with a role comes from node_exporter's series, labelled with lunlat's
LUN, database and role, and the data-read alert fires on it.

Both exporters listen on 127.0.0.1 on ports the kernel picks: the default join takes the host from
`instance` without its port, so the two targets are one host, as on a real server.
"""

from __future__ import annotations

import math
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from lunlat.goals import parse_goals
from lunlat_rules.rules import render
from tests.support import prometheus_server
from tests.support.exporter_process import (
    LOOPBACK,
    LUNLAT_PORT,
    NODE_EXPORTER_PORT,
    ExporterProcess,
    lunlat_serve,
)

pytestmark = pytest.mark.peer

# A node_exporter built from source (go install, on PATH) first, else Debian's package.
NODE_EXPORTER_NAMES = ("node_exporter", "prometheus-node-exporter")
GOALS = """\
selector: 'job="lunlat"'
host_layer: {source: node_exporter, selector: 'job="node"'}
"""
CONFIG = """\
luns:
  - match: {device: sdb}
    database: ORCL
    role: data
    workload: oltp
"""
# Per tick: 100 reads taking 200 ms (2 ms each, above the default 1 ms goal) on sdb; sda idle.
TICK = 0.5
READS, READ_MS = 100, 200


def _node_exporter() -> str:
    for name in NODE_EXPORTER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"node_exporter not installed (none of {', '.join(NODE_EXPORTER_NAMES)} on PATH)")


def _diskstats(tick: int) -> str:
    # 20-field lines (kernel 5.5+): major minor name, then 17 stats fields (iostats.rst).
    sdb = [READS * tick, 0, 8 * READS * tick, READ_MS * tick] + [0] * 13
    return f"   8       0 sda {' '.join(['0'] * 17)}\n   8      16 sdb {' '.join(map(str, sdb))}\n"


class Writer:
    """Advances sdb's counters every TICK seconds, replacing the file at once."""

    def __init__(self, procfs: Path) -> None:
        self.procfs, self.tick, self.stop = procfs, 0, threading.Event()
        self.write()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def write(self) -> None:
        tmp = self.procfs / "diskstats.tmp"
        tmp.write_text(_diskstats(self.tick))
        tmp.replace(self.procfs / "diskstats")

    def run(self) -> None:
        while not self.stop.wait(TICK):
            self.tick += 1
            self.write()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[prometheus_server.PromApi]:
    if (reason := prometheus_server.missing()) is not None:
        pytest.skip(reason)
    node_exporter = _node_exporter()
    procfs, sysfs, udev = tmp_path / "proc", tmp_path / "sys", tmp_path / "udev"
    for directory in (procfs / "1", sysfs, udev):
        directory.mkdir(parents=True)
    (procfs / "1" / "mountinfo").write_text("")
    writer = Writer(procfs)
    config = tmp_path / "lunlat.yaml"
    config.write_text(CONFIG)
    rules = tmp_path / "lunlat.rules.yml"
    rules.write_text(render(parse_goals(GOALS)))
    listen = f"--web.listen-address={LOOPBACK}:0"
    node = ExporterProcess(
        [
            node_exporter,
            f"--path.procfs={procfs}",
            f"--path.sysfs={sysfs}",
            f"--path.udev.data={udev}",
            "--collector.disable-defaults",
            "--collector.diskstats",
            listen,
        ],
        tmp_path / "node_exporter.log",
        port_pattern=NODE_EXPORTER_PORT,
        name="node_exporter",
    )
    lunlat = ExporterProcess(
        lunlat_serve(
            f"--path.procfs={procfs}",
            f"--path.sysfs={sysfs}",
            f"--config.file={config}",
            "--no-collector.diskstats.counters",
        ),
        tmp_path / "lunlat.log",
        port_pattern=LUNLAT_PORT,
        name="lunlat",
    )
    with ExitStack() as stack:
        stack.callback(writer.stop.set)
        stack.enter_context(node)
        stack.enter_context(lunlat)
        writer.thread.start()
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": "lunlat", "static_configs": [{"targets": [f"{LOOPBACK}:{lunlat.port}"]}]},
                {"job_name": "node", "static_configs": [{"targets": [f"{LOOPBACK}:{node.port}"]}]},
            ],
        }
        server = prometheus_server.start(tmp_path / "prometheus", cfg)
        stack.callback(server.stop)
        assert "lunlat_device_" not in lunlat.scrape().text, "lunlat publishes no counters of its own"
        yield prometheus_server.api(server)


def test_the_host_layer_comes_from_node_exporter_and_the_alert_fires_on_it(
    stack: prometheus_server.PromApi,
) -> None:
    (series,) = stack.wait_for_series('lunlat:read_latency_seconds:avg1m{layer="host"}', 1, timeout=60)
    labels = series["metric"]
    assert (labels["job"], labels["database"], labels["role"], labels["workload"]) == (
        "lunlat",
        "ORCL",
        "data",
        "oltp",
    )
    assert labels["instance"].startswith(f"{LOOPBACK}:")
    # Δ time / Δ reads of node_exporter's float seconds: 2 ms whatever the window's extrapolation.
    assert math.isclose(float(series["value"][1]), READ_MS / READS / 1000, rel_tol=1e-9)
    deadline = time.monotonic() + 60
    while not [a for a in stack.alerts() if a["labels"]["alertname"] == "LunLatencyDataReadHigh"]:
        assert time.monotonic() < deadline, "LunLatencyDataReadHigh never became active"
        time.sleep(1)
    (alert,) = [a for a in stack.alerts() if a["labels"]["alertname"] == "LunLatencyDataReadHigh"]
    assert (alert["labels"]["lun"], alert["labels"]["layer"]) == (labels["lun"], "host")
