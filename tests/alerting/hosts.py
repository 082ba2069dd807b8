"""Several "hosts" behind one Prometheus: one `lunlat serve` per host, each with its own flags, all
scraped by one Debian Prometheus evaluating the repo's generated rules (what a breach's `neighbours`
annotation reads across hosts). Used by the cause tests on fake hosts and on the lab."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.support.prometheus_server import PromApi


def serve_hosts(
    stack: ExitStack, work: Path, flags: dict[str, list[str]], interval: str
) -> tuple[PromApi, dict[str, str]]:
    """One exporter per host (`flags`: host name -> its `lunlat serve` flags) and a Prometheus scraping
    them every `interval`, each stopped when `stack` closes; the server's API and each host's
    `instance` label."""
    instances = {}
    for name, host_flags in flags.items():
        exporter = ExporterProcess(
            lunlat_serve(*host_flags),
            work / f"lunlat-{name}.log",
            name=f"lunlat-{name}",
            port_pattern=LUNLAT_PORT,
            start_timeout=60.0,
        )
        stack.callback(exporter.stop)
        exporter.start()
        instances[name] = f"{LOOPBACK}:{exporter.port}"
    server = prometheus_server.start(
        work / "prometheus", prometheus_server.config(list(instances.values()), interval)
    )
    stack.callback(server.stop)
    return prometheus_server.api(server), instances
