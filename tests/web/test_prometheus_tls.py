"""A real Prometheus (Debian's) scrapes `lunlat serve` over TLS with basic auth and sees `up == 1`;
with a wrong password it sees `up == 0`, as a security review would check both ways."""

from __future__ import annotations

import time
from pathlib import Path

import bcrypt
import pytest

from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.web import certs

PASSWORD = "scrape-me"  # noqa: S105 - a test password for a throw-away exporter

pytestmark = pytest.mark.skipif(
    prometheus_server.missing() is not None, reason=prometheus_server.missing() or ""
)


def up_values(api: prometheus_server.PromApi, timeout: float) -> dict[str, float]:
    """`up` per job once every job has been scraped at least once."""
    deadline = time.monotonic() + timeout
    while True:
        values = api.values("up", "job")
        if len(values) == 2 or time.monotonic() > deadline:
            return values
        time.sleep(0.5)


def test_prometheus_scrapes_over_tls_with_basic_auth(tmp_path: Path) -> None:
    pki = certs.make(tmp_path / "pki")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n",
        encoding="utf-8",
    )
    exporter = ExporterProcess(
        lunlat_serve(f"--web.config.file={web}"), tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT
    )
    with exporter:
        target = f"{LOOPBACK}:{exporter.port}"
        cfg = prometheus_server.config([target], "1s")
        cfg["rule_files"] = []
        job = cfg["scrape_configs"][0]
        job.update(scheme="https", tls_config={"ca_file": str(pki.ca_crt)})
        job["basic_auth"] = {"username": "prometheus", "password": PASSWORD}
        wrong = {
            "job_name": "wrong-password",
            "scheme": "https",
            "tls_config": {"ca_file": str(pki.ca_crt)},
            "basic_auth": {"username": "prometheus", "password": "guess"},
            "static_configs": [{"targets": [target]}],
        }
        cfg["scrape_configs"].append(wrong)
        server = prometheus_server.start(tmp_path / "prom", cfg)
        try:
            values = up_values(prometheus_server.api(server), timeout=60)
        finally:
            server.stop()
    assert values == {"lunlat": 1.0, "wrong-password": 0.0}, exporter.log_tail()
