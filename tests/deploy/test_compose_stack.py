"""`docker compose up` gives a working stack: every service healthy, Prometheus scraping the exporter
with lunlat's rules loaded, Grafana serving the provisioned dashboards.

Needs a Docker engine with Compose v2 (`docker compose`); machines without one skip with the reason.
Credentials are generated into a temporary env file and secret folder, never into deploy/secrets/.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.request import Request, urlopen

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "lunlat-test"
HEALTH_TIMEOUT = 600.0
SERVICES = ("exporter", "prometheus", "alertmanager", "grafana")


def _engine_missing() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, check=False, timeout=30)
    if info.returncode != 0:
        return f"no Docker engine: {info.stderr.strip().splitlines()[-1] if info.stderr.strip() else 'docker info failed'}"
    compose = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, check=False)
    return None if compose.returncode == 0 else "no Compose v2 (docker compose)"


def _compose(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "compose", "-p", PROJECT, "-f", str(ROOT / "docker-compose.yml"), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
        timeout=900,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    reason = _engine_missing()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("compose")
    password = secrets.token_urlsafe(18)
    (work / "grafana.env").write_text(f"GF_SECURITY_ADMIN_PASSWORD={password}\n", encoding="utf-8")
    env = {**os.environ, "LUNLAT_GRAFANA_ENV": str(work / "grafana.env")}
    up = _compose(env, "up", "-d", "--build", *SERVICES)
    try:
        assert up.returncode == 0, up.stderr
        yield password, env
    finally:
        _compose(env, "down", "-v")


def _healthy(env: dict[str, str]) -> dict[str, str]:
    listed = _compose(env, "ps", "--format", "json")
    # Older Compose v2 releases print one JSON array, newer ones one object per line.
    text = listed.stdout.strip()
    rows = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines()]
    return {row["Service"]: row.get("Health") or row.get("State", "") for row in rows}


def test_every_service_becomes_healthy_and_the_stack_is_wired(stack: tuple[str, dict[str, str]]) -> None:
    password, env = stack
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while True:
        health = _healthy(env)
        if all(health.get(s) == "healthy" for s in SERVICES):
            break
        assert time.monotonic() < deadline, f"not healthy after {HEALTH_TIMEOUT:g}s: {health}"
        time.sleep(5)
    with urlopen("http://127.0.0.1:9090/api/v1/targets", timeout=10) as response:
        targets = json.load(response)["data"]["activeTargets"]
    assert any(t["labels"]["job"] == "lunlat" and t["health"] == "up" for t in targets), targets
    with urlopen("http://127.0.0.1:9090/api/v1/rules", timeout=10) as response:
        groups = json.load(response)["data"]["groups"]
    assert groups, "Prometheus loaded no rule group"
    token = base64.b64encode(f"admin:{password}".encode()).decode()
    request = Request(
        "http://127.0.0.1:3000/api/search?tag=lunlat", headers={"Authorization": f"Basic {token}"}
    )
    with urlopen(request, timeout=10) as response:  # noqa: S310
        found = {d["uid"] for d in json.load(response)}
    provisioned = {
        json.loads(p.read_text(encoding="utf-8"))["uid"] for p in (ROOT / "dashboards").glob("*.json")
    }
    assert provisioned and provisioned <= found, (provisioned, found)
    with pytest.raises(OSError):  # anonymous access is off
        urlopen("http://127.0.0.1:3000/api/search", timeout=10)
