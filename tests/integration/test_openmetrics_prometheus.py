"""A real Prometheus (Debian's 2.42, and a Prometheus 3 build: tests/support/prometheus_server.py) scrapes `lunlat
serve` with OpenMetrics first and ingests the series (issue 42), and evaluates the repo's rules
without an error (issue 41); Prometheus 3 also in every format it can ask for, with no fallback.

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
from tests.golden.test_golden import CONFIG, HOST
from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve

SERVERS = (
    pytest.param("2", id="prometheus2"),
    pytest.param("3", id="prometheus3", marks=pytest.mark.prometheus3),
)


@pytest.mark.parametrize("major", SERVERS)
def test_prometheus_scraping_openmetrics_first_ingests_lunlats_series(tmp_path: Path, major: str) -> None:
    binary = prometheus_server.binary_or_skip(major)
    flags = (f"--path.procfs={HOST / 'proc'}", f"--path.sysfs={HOST / 'sys'}", f"--config.file={CONFIG}")
    with ExporterProcess(lunlat_serve(*flags), tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        cfg = prometheus_server.config([f"{LOOPBACK}:{exporter.port}"], "1s")
        cfg["rule_files"] = []
        if prometheus_server.version(binary) >= (2, 49):
            cfg["scrape_configs"][0]["scrape_protocols"] = ["OpenMetricsText1.0.0"]
        server = prometheus_server.start(tmp_path / "prom", cfg, binary)
        try:
            api = prometheus_server.api(server)
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


@pytest.mark.parametrize("major", SERVERS)
def test_every_rule_evaluates_without_error_on_a_real_server(tmp_path: Path, major: str) -> None:
    """The repo's rules loaded by the server itself, scraping lunlat: every group evaluated and
    no rule with an error (PromQL the unit tests' engine accepts but a server refuses at run time:
    a many-to-many match, a function a release dropped) or unhealthy."""
    binary = prometheus_server.binary_or_skip(major)
    flags = (f"--path.procfs={HOST / 'proc'}", f"--path.sysfs={HOST / 'sys'}", f"--config.file={CONFIG}")
    with ExporterProcess(lunlat_serve(*flags), tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        server = prometheus_server.start(
            tmp_path / "prom", prometheus_server.config([f"{LOOPBACK}:{exporter.port}"], "1s"), binary
        )
        try:
            api = prometheus_server.api(server)
            api.wait_for_series(contract.DEVICE_READS.name, 1, timeout=60)
            deadline = time.monotonic() + 60
            while True:
                groups = api.rule_groups()
                # A slow group (lunlat-drift, lunlat-paths-history: every 5m) first runs up to its
                # interval after the start: loaded is all a minute can show of it.
                fast = [g for g in groups if g["interval"] <= 60]
                evaluated = [g for g in fast if g["lastEvaluation"] > "2000"]
                if (fast and len(evaluated) == len(fast)) or time.monotonic() > deadline:
                    break
                time.sleep(1)
            time.sleep(2)  # one more evaluation of every group, after the first scrape's series
            groups = api.rule_groups()
            recorded = api.query('count({__name__=~"lunlat:.+"})')
        finally:
            server.stop()
    assert fast and len(evaluated) == len(fast), [g["name"] for g in fast]
    broken = [
        (rule.get("name"), rule.get("health"), rule.get("lastError"))
        for group in groups
        for rule in group["rules"]
        if rule.get("health") not in ("ok", "unknown" if group["interval"] > 60 else "ok")
        or rule.get("lastError")
    ]
    assert broken == [], broken
    assert recorded and float(recorded[0]["value"][1]) > 0, "the rules recorded nothing"


# What Prometheus 3 asks a target for (scrape/scrape.go acceptHeader, module v0.316.0): each protocol
# of the job's scrape_protocols in order with falling q-values, the OpenMetrics 1.0.0 and text 1.0.0
# ranges with an `escaping` parameter, then */*. Without scrape_protocols, OpenMetricsText1.0.0,
# OpenMetricsText0.0.1, PrometheusText1.0.0, PrometheusText0.0.4 (config/config.go
# DefaultScrapeProtocols). And it fails a scrape whose Content-Type it cannot read, where 2.x fell
# back to the text format, unless the job names a `fallback_scrape_protocol` (docs/migration.md,
# "Scrape protocols"; prometheus.io/docs/prometheus/latest/configuration/configuration/#scrape_config):
# no job below names one, so `up == 1` says Prometheus 3 read lunlat's Content-Type as it is.
# Job → its scrape_protocols (None: the default) and the format lunlat answers it in: OpenMetrics
# 1.0.0 where that comes first, else the text format (lunlat writes no OpenMetrics 0.0.1, so that
# range is passed over and */* takes text: exporter/src/lunlat/web/server.py wants_openmetrics).
PROMETHEUS3_ASKS = {
    "lunlat-default": (None, "openmetrics"),
    "lunlat-om1": (["OpenMetricsText1.0.0"], "openmetrics"),
    "lunlat-om0": (["OpenMetricsText0.0.1"], "text"),
    "lunlat-text1": (["PrometheusText1.0.0"], "text"),
    "lunlat-text0": (["PrometheusText0.0.4"], "text"),
}


@pytest.mark.prometheus3
def test_prometheus_3_reads_lunlat_in_every_format_it_asks_for_without_a_fallback(tmp_path: Path) -> None:
    """One Prometheus 3, one lunlat, a job per way 3.x can ask: every job up, every job the same
    series names, and the format each got shown by the metadata kept (OpenMetrics: the counter's
    family without `_total`, with its unit; text: with `_total`, no unit)."""
    binary = prometheus_server.binary_or_skip("3")
    flags = (f"--path.procfs={HOST / 'proc'}", f"--path.sysfs={HOST / 'sys'}", f"--config.file={CONFIG}")
    family = contract.DEVICE_READ_TIME.name.removesuffix("_total")
    with ExporterProcess(lunlat_serve(*flags), tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        cfg = prometheus_server.config([f"{LOOPBACK}:{exporter.port}"], "1s")
        cfg["rule_files"] = []
        cfg["scrape_configs"] = [
            {
                "job_name": job,
                **({"scrape_protocols": protocols} if protocols else {}),
                "static_configs": [{"targets": [f"{LOOPBACK}:{exporter.port}"]}],
            }
            for job, (protocols, _) in PROMETHEUS3_ASKS.items()
        ]
        server = prometheus_server.start(tmp_path / "prom", cfg, binary)
        try:
            api = prometheus_server.api(server)
            reads = f'{contract.DEVICE_READS.name}{{device="dm-0"}}'
            api.wait_for_series(reads, len(PROMETHEUS3_ASKS), timeout=60)
            time.sleep(2)  # a scrape more of every job, all of its series stored
            up = api.values('up{job=~"lunlat-.+"}', "job")
            names = {
                job: set(
                    api.values(f'count by (__name__) ({{job="{job}", __name__=~"lunlat_.+"}})', "__name__")
                )
                for job in PROMETHEUS3_ASKS
            }
            metadata = {
                (m["target"]["job"], name): (m["type"], m["unit"])
                for name in (family, contract.DEVICE_READ_TIME.name)
                for m in api.target_metadata(name)
            }
        finally:
            server.stop()
    assert up == dict.fromkeys(PROMETHEUS3_ASKS, 1.0), (up, server.log_tail())
    reference = names["lunlat-default"]
    assert reference and all(found == reference for found in names.values()), {
        job: sorted(found ^ reference) for job, found in names.items()
    }
    expected = {
        (job, family if answer == "openmetrics" else contract.DEVICE_READ_TIME.name): (
            "counter",
            "seconds" if answer == "openmetrics" else "",
        )
        for job, (_, answer) in PROMETHEUS3_ASKS.items()
    }
    assert metadata == expected, (metadata, exporter.log_tail())
