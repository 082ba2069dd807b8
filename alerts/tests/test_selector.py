"""Rules for the Prometheus a user already runs: lunlat scraped under a job of their own name, the
goals' `selector` set to it, and the rules generated from those goals record lunlat's series there
(docs/alerting.md, "Add lunlat to the Prometheus you already run"). The real Debian Prometheus
scrapes a stub serving lunlat's exposition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lunlat.goals import parse_goals
from lunlat_rules.rules import render
from tests.support import prometheus_server, stub_exporter
from tests.support.exporter_process import LOOPBACK

JOB = "storage-latency"
GOALS = f"selector: 'job=\"{JOB}\"'\n"
START = time.monotonic()


def exposition() -> str:
    """One data LUN of a database at 100 reads/s and 2 ms each, counters growing with the clock."""
    seconds = time.monotonic() - START + 100.0
    return (
        "# TYPE lunlat_lun_info gauge\n"
        'lunlat_lun_info{lun="sdb",device="sdb",kind="lun",database="PROD",role="data",workload="oltp"} 1\n'
        "# TYPE lunlat_device_reads_completed_total counter\n"
        f'lunlat_device_reads_completed_total{{lun="sdb",device="sdb"}} {100 * seconds:.3f}\n'
        "# TYPE lunlat_device_read_time_seconds_total counter\n"
        f'lunlat_device_read_time_seconds_total{{lun="sdb",device="sdb"}} {0.2 * seconds:.6f}\n'
    )


@pytest.fixture
def api(tmp_path: Path) -> Iterator[prometheus_server.PromApi]:
    if (reason := prometheus_server.missing()) is not None:
        pytest.skip(reason)
    rules = tmp_path / "lunlat.rules.yml"
    rules.write_text(render(parse_goals(GOALS)), encoding="utf-8")
    with stub_exporter.serving("/metrics", exposition) as port:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [f"{LOOPBACK}:{port}"]}]}],
        }
        process = prometheus_server.start(tmp_path / "prometheus", config)
        try:
            yield prometheus_server.api(process)
        finally:
            process.stop()


def test_rules_generated_for_another_job_name_record_its_series(api: prometheus_server.PromApi) -> None:
    (latency,) = api.wait_for_series(f'lunlat:read_latency_seconds:avg1m{{job="{JOB}"}}', 1, timeout=60)
    assert latency["metric"]["lun"] == "sdb" and latency["metric"]["database"] == "PROD"
    assert float(latency["value"][1]) == pytest.approx(0.002, rel=0.01)
    # judged against the goal: the breach alert reads the same job's series
    api.wait_for_series(f'lunlat:latency_above_goal:bool{{job="{JOB}", op="read"}} == 1', 1, timeout=60)
    deadline = time.monotonic() + 60
    while not any(a["labels"]["alertname"] == "LunLatencyDataReadHigh" for a in api.alerts()):
        assert time.monotonic() < deadline, api.alerts()
        time.sleep(1)
    # the job is there: no "no lunlat exporter is scraped" alert
    assert not any(a["labels"]["alertname"] == "LunLatencyExporterAbsent" for a in api.alerts())


def test_the_default_selector_reads_only_the_job_named_lunlat() -> None:
    """The counterpart: rules generated with the default goals read job="lunlat" only, so under
    another job name they would record nothing; `selector` is the one setting to change."""
    text = render(parse_goals(""))
    assert 'job="lunlat"' in text and JOB not in text
    assert 'job="lunlat"' not in render(parse_goals(GOALS))
