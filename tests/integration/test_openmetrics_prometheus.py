"""A real Prometheus (Debian's) scrapes `lunlat serve` with OpenMetrics first and ingests the series
(issue 42).

Prometheus 2.49 added `scrape_protocols` (prometheus.io/docs/instrumenting/content_negotiation); its default is
OpenMetricsText1.0.0 first, and Prometheus before it (Debian 12's 2.42) always asks for
OpenMetrics 1.0.0 first (scrape/scrape.go, scrapeAcceptHeader). The config names the protocol where the
installed Prometheus knows the setting. That the answer was OpenMetrics shows in what Prometheus
kept of the page's metadata (/api/v1/targets/metadata): the counter's family is named without
`_total` and has the `# UNIT` line's unit, which the text format 0.0.4 has no way to say.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lunlat import contract
from tests import prometheus
from tests.golden.test_golden import CONFIG, HOST
from tests.procs import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve

pytestmark = pytest.mark.skipif(prometheus.missing() is not None, reason=prometheus.missing() or "")


def test_prometheus_scraping_openmetrics_first_ingests_lunlats_series(tmp_path: Path) -> None:
    flags = (f"--path.procfs={HOST / 'proc'}", f"--path.sysfs={HOST / 'sys'}", f"--config.file={CONFIG}")
    with ExporterProcess(lunlat_serve(*flags), tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        cfg = prometheus.config([f"{LOOPBACK}:{exporter.port}"], "1s")
        cfg["rule_files"] = []
        if prometheus.version() >= (2, 49):
            cfg["scrape_configs"][0]["scrape_protocols"] = ["OpenMetricsText1.0.0"]
        server = prometheus.start(tmp_path / "prom", cfg)
        try:
            api = prometheus.api(server)
            reads = api.wait_for_series(contract.DEVICE_READS.name, 1, timeout=60)
            read_time = api.wait_for_series(contract.DEVICE_READ_TIME.name, 1, timeout=60)
            up = api.values('up{job="lunlat"}', "job")
            family = contract.DEVICE_READ_TIME.name.removesuffix("_total")
            deadline = time.monotonic() + 60
            while not (metadata := api.target_metadata(family)) and time.monotonic() < deadline:
                time.sleep(0.5)
            old_name = api.target_metadata(contract.DEVICE_READ_TIME.name)
        finally:
            server.stop()
    assert up == {"lunlat": 1.0}
    assert {r["metric"]["device"] for r in reads} >= {"dm-0"} and read_time
    assert [(m["type"], m["unit"], m["help"]) for m in metadata] == [
        ("counter", "seconds", contract.DEVICE_READ_TIME.help)
    ], exporter.log_tail()
    assert old_name == []  # the text format's family name: not what this scrape said
