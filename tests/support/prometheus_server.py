"""The Debian Prometheus as a child process, and a small client of its HTTP API.

Shared by the end-to-end alerting stack (tests/alerting/stack.py) and the dashboards' query tests
(dashboards/tests): both run the real binary with the repo's rules and ask it PromQL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest
import yaml

from tests.support.exporter_process import LOOPBACK, ExporterProcess, scrape

PROMETHEUS = "prometheus"
# Prometheus 3, built from source (its module's tag of the 3.x line; no Debian package has 3.x):
# .ci/run runs `GOBIN=PROMETHEUS3_DIR go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/{prometheus,promtool}@…`
# (every service discovery but file, HTTP and static left out: no test uses another).
PROMETHEUS3_MODULE_VERSION = "v0.316.0"
PROMETHEUS3_DIR = Path.home() / ".cache" / "lunlat" / f"prometheus-{PROMETHEUS3_MODULE_VERSION}"
REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "lunlat.rules.yml"


class QueryError(RuntimeError):
    """Prometheus refused a query (bad PromQL, a type error, a timeout): its error text."""


@dataclass(frozen=True, slots=True)
class PromApi:
    """Prometheus' HTTP API at `base` (http://host:port)."""

    base: str

    def _get(self, path: str, params: list[tuple[str, str]]) -> Any:
        url = f"{self.base}{path}?{urlencode(params)}"
        try:
            with urlopen(url, timeout=30) as response:  # noqa: S310 - loopback URL built here
                answer = json.load(response)
        except HTTPError as exc:  # 400/422 carry the reason as JSON
            answer = json.load(exc)
        if answer.get("status") != "success":
            raise QueryError(f"{answer.get('errorType', '')}: {answer.get('error', answer)}")
        return answer["data"]

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; the result vector (a scalar comes back as one unlabelled sample)."""
        params = [("query", promql)] + ([("time", f"{at:.3f}")] if at is not None else [])
        data = self._get("/api/v1/query", params)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = [("query", promql), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", f"{step:g}")]
        return list(self._get("/api/v1/query_range", params)["result"])

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """What Grafana's label_values(match, label) lists: the label's values on the matching series."""
        params = [("match[]", match), ("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
        return sorted(self._get(f"/api/v1/label/{label}/values", params))

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (pending and firing) of the rules this server evaluates: Prometheus' and
        vmalert's /api/v1/alerts."""
        return list(self._get("/api/v1/alerts", [])["alerts"] or [])

    def rule_groups(self) -> list[dict[str, Any]]:
        """The rule groups this server evaluates, each with its rules and `lastEvaluation` (RFC 3339):
        /api/v1/rules."""
        return list(self._get("/api/v1/rules", [])["groups"])

    def target_metadata(self, metric: str) -> list[dict[str, Any]]:
        """What the targets' scrapes said of `metric` (its HELP, TYPE and UNIT), keyed by the name
        the exposition gave the family: /api/v1/targets/metadata."""
        return list(self._get("/api/v1/targets/metadata", [("metric", metric)]))

    def wait_for_firing(self, alertname: str, timeout: float, **labels: str) -> dict[str, Any]:
        """Poll /api/v1/alerts until alert `alertname` with these labels fires; that alert."""
        deadline = time.monotonic() + timeout
        while True:
            for alert in self.alerts():
                have = alert["labels"]
                wanted = {"alertname": alertname, **labels}
                if alert["state"] == "firing" and all(have.get(k) == v for k, v in wanted.items()):
                    return alert
            if time.monotonic() > deadline:
                raise TimeoutError(f"{alertname} {labels} not firing after {timeout:g}s: {self.alerts()}")
            time.sleep(2)

    def values(self, promql: str, label: str, at: float | None = None) -> dict[str, float]:
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in self.query(promql, at)}

    def wait_for_series(self, promql: str, count: int, timeout: float) -> list[dict[str, Any]]:
        """Poll until the query returns at least `count` series."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.query(promql)
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{promql}: {len(found)} series after {timeout:g}s, wanted {count}")
            time.sleep(2)


def missing() -> str | None:
    return None if shutil.which(PROMETHEUS) else "missing prometheus (Debian: prometheus)"


def binary(major: str) -> str | None:
    """The Prometheus server of release line `major`: "2", Debian's on PATH; "3", the build in
    PROMETHEUS3_DIR (or LUNLAT_PROMETHEUS3). None where it is not there."""
    if major == "2":
        return shutil.which(PROMETHEUS)
    named = os.environ.get("LUNLAT_PROMETHEUS3")
    built = Path(named) if named else PROMETHEUS3_DIR / "prometheus"
    return str(built) if built.is_file() else None


def binary_or_skip(major: str) -> str:
    """`binary(major)`, or the test skipped, saying what is missing and where it comes from."""
    found = binary(major)
    if found is None:
        pytest.skip(
            (missing() or "no prometheus")
            if major == "2"
            else f"no Prometheus 3 build in {PROMETHEUS3_DIR} (.ci/run builds it)"
        )
    return found


def version(server: str = PROMETHEUS) -> tuple[int, int]:
    """(major, minor) of a Prometheus server: `prometheus --version`'s first line. A build by `go
    install` prints no version (its build flags set none): (3, 0) for the Prometheus 3 build, i.e.
    "a 3.x", which is all the tests ask."""
    out = subprocess.run([server, "--version"], capture_output=True, text=True, check=True)
    found = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    if found is None and server == binary("3"):
        return 3, 0
    assert found is not None, out
    return int(found[1]), int(found[2])


def config(targets: list[str], interval: str, alertmanager: str | None = None) -> dict[str, Any]:
    """One `lunlat` job scraping `targets`, the repo's rules, evaluated as often as scraped."""
    cfg: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "lunlat", "static_configs": [{"targets": targets}]}],
    }
    if alertmanager is not None:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return cfg


def start(workdir: Path, cfg: dict[str, Any], server: str = PROMETHEUS) -> ExporterProcess:
    """Prometheus (`server`, Debian's by default) with `cfg` under `workdir`, on a port the kernel
    picks; returns once ready."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    process = ExporterProcess(
        [
            server,
            f"--config.file={path}",
            f"--storage.tsdb.path={workdir / 'prometheus-data'}",
            f"--web.listen-address={LOOPBACK}:0",
        ],
        workdir / "prometheus.log",
        name="prometheus",
        start_timeout=60.0,
    ).start()
    try:
        wait_ready(process)
    except BaseException:
        process.stop()
        raise
    return process


def api(process: ExporterProcess) -> PromApi:
    return PromApi(f"http://{LOOPBACK}:{process.port}")


def wait_ready(process: ExporterProcess, timeout: float = 60.0) -> None:
    """Prometheus answers 503 until its TSDB is open: poll /-/ready (Alertmanager has it too)."""
    deadline = time.monotonic() + timeout
    while scrape(process.port, "/-/ready", timeout=10).status != 200:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{process.name} not ready after {timeout:g}s\n{process.log_tail()}")
        time.sleep(0.5)
