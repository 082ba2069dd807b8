"""The exporter's image built and the compose stack run for real: the image from exporter/Dockerfile
(deploy/image/build, on a Debian base made with mmdebstrap), then the exporter, Prometheus and
Alertmanager of docker-compose.yml brought up by docker-compose against `podman system service`.

What runs is the user's compose file as `docker-compose config` resolves it, with only these changes
(`stack_file`): Prometheus and Alertmanager are Debian's packages in test images
(tests/deploy/stack/Containerfile; no image registry is reachable here, and Grafana, which has no
Debian package, is left out), every port is published on the loopback at a free port, Prometheus
also loads a test rule that fires at once, and Alertmanager's receivers (its routing tree untouched)
all point at a webhook receiver in the stack.

One command: `pytest tests/deploy/test_stack.py` (skips, naming the Debian package, where podman,
runc, mmdebstrap or docker-compose is missing). About 40 s the first time for the base image; then
the image builds from cache, and the stack's checks take about a minute and a half.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from lunlat.goals import duration_seconds
from tests.alerting.stack import alertmanager_config
from tests.support import podman_stack
from tests.support.compose_config import compose_config
from tests.support.exporter_process import LUNLAT_PORT, ExporterProcess, lunlat_serve, scrape
from tests.support.prometheus_server import PromApi

ROOT = Path(__file__).resolve().parents[2]
STACK = Path(__file__).resolve().parent / "stack"
PROJECT = "lunlat-stack-test"
SERVICES = ("exporter", "prometheus", "alertmanager", "receiver")
RECEIVER_PORT = 9095  # tests/deploy/stack/receiver.py
HOST_CONFIG = ROOT / "deploy" / "lunlat" / "host.yaml"
# The test's alert: a page for an Oracle LUN, which alerts/alertmanager.yml routes to the Oracle DBAs'
# pager by the `engine` label. No `for:`: it fires at the first evaluation after a scrape.
TEST_RULE = {
    "groups": [
        {
            "name": "lunlat-stack-test",
            "rules": [
                {
                    "alert": "LunLatencyStackTest",
                    "expr": 'count by (job, instance) (lunlat_lun_info{job="lunlat", kind="lun"}) > 0',
                    "labels": {"severity": "page", "engine": "oracle"},
                    "annotations": {"summary": "the stack test's page"},
                }
            ],
        }
    ]
}
EXPECTED_RECEIVER = "oracle-dba-pager"


@dataclass(frozen=True, slots=True)
class Stack:
    podman: podman_stack.Podman
    image: str
    ports: dict[str, int]

    def container(self, service: str) -> str:
        return f"{PROJECT}_{service}_1"  # docker-compose v1's container name

    def url(self, service: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}{path}"

    def get(self, service: str, path: str) -> Any:
        with urlopen(self.url(service, path), timeout=10) as response:  # noqa: S310 - loopback
            return json.load(response)


def stack_file(workdir: Path, images: dict[str, str], ports: dict[str, int]) -> Path:
    """The user's docker-compose.yml as `docker-compose config` resolves it, with the test's changes
    (the module's docstring lists them); written under `workdir`."""
    config = compose_config()
    services = {name: config["services"][name] for name in ("exporter", "prometheus", "alertmanager")}
    services["exporter"].pop("build")  # the image deploy/image/build made, never a build by compose
    prometheus_yml = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    prometheus_yml["rule_files"].append("/etc/prometheus/rules/stack-test.rules.yml")
    alertmanager_yml = alertmanager_config("unused")
    for receiver in alertmanager_yml["receivers"]:
        receiver["webhook_configs"][0]["url"] = f"http://receiver:{RECEIVER_PORT}/{receiver['name']}"
    written = {
        "prometheus.yml": prometheus_yml,
        "stack-test.rules.yml": TEST_RULE,
        "alertmanager.yml": alertmanager_yml,
    }
    for name, content in written.items():
        (workdir / name).write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    swapped = {
        "/etc/prometheus/prometheus.yml": workdir / "prometheus.yml",
        "/etc/alertmanager/alertmanager.yml": workdir / "alertmanager.yml",
    }
    for service in services.values():
        volumes = []
        for volume in service.get("volumes", []):
            source, target, *mode = volume.split(":")
            volumes.append(":".join([str(swapped.get(target, source)), target, *mode]))
        service["volumes"] = volumes
    mounted = {volume.split(":")[1] for service in services.values() for volume in service["volumes"]}
    assert set(swapped) <= mounted, f"docker-compose.yml no longer mounts {set(swapped) - mounted}"
    services["prometheus"]["volumes"].append(
        f"{workdir / 'stack-test.rules.yml'}:/etc/prometheus/rules/stack-test.rules.yml:ro"
    )
    services["receiver"] = {"image": images["receiver"], "read_only": True}
    for name in ("prometheus", "alertmanager"):
        services[name]["image"] = images[name]
    inside = {"exporter": 10431, "prometheus": 9090, "alertmanager": 9093, "receiver": RECEIVER_PORT}
    for name, service in services.items():
        service["ports"] = [f"127.0.0.1:{ports[name]}:{inside[name]}"]
    path = workdir / "docker-compose.yml"
    document = {"services": services, "volumes": {"prometheus-data": {}, "alertmanager-data": {}}}
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _compose(env: dict[str, str], file: Path, *args: str) -> None:
    done = subprocess.run(
        ["docker-compose", "-p", PROJECT, "-f", str(file), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, f"docker-compose {' '.join(args)}:\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    reason = podman_stack.missing_tool()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("stack")
    podman = podman_stack.Podman(podman_stack.containers_conf(workdir / "containers.conf"))
    base = podman_stack.base_image(podman, workdir / "mmdebstrap.log")
    image = _build_exporter_image(podman, base)
    digest = base.rsplit(":", 1)[1]
    images = {
        name: podman.build(STACK / "Containerfile", STACK, name, f"lunlat-test-{name}:{digest}", base)
        for name in ("prometheus", "alertmanager", "receiver")
    }
    podman_stack.prune_leftovers(podman)
    ports = {name: podman_stack.free_port() for name in SERVICES}
    file = stack_file(workdir, images, ports)
    with podman_stack.podman_service(podman, workdir) as env:
        compose_env = dict(env)
        _compose(compose_env, file, "down", "-v")  # what a killed earlier run left
        try:
            _compose(compose_env, file, "up", "-d")
            running = Stack(podman, image, ports)
            for service in ("prometheus", "alertmanager"):
                _wait(f"{service} ready", 120, lambda s=service: _status(running.url(s, "/-/ready")) == 200)
            yield running
        finally:
            _compose(compose_env, file, "down", "-v")


def _build_exporter_image(podman: podman_stack.Podman, base: str) -> str:
    done = subprocess.run(
        [str(ROOT / "deploy" / "image" / "build"), "--tool", "podman", "--base", base],
        capture_output=True,
        text=True,
        env=podman.env,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, f"deploy/image/build:\n{done.stderr[-3000:]}"
    return done.stdout.strip().splitlines()[-1]


def _status(url: str) -> int:
    with urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
        return int(response.status)


def _wait(what: str, timeout: float, probe: Any) -> Any:
    """Poll `probe()` until it returns something true; fail naming `what` and its last answer."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if last:
                return last
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s; last: {last!r}"
        time.sleep(2)


def test_prometheus_scrapes_the_exporter(stack: Stack) -> None:
    api = PromApi(stack.url("prometheus", ""))
    up = _wait("up{job=lunlat} == 1", 120, lambda: api.query('up{job="lunlat"} == 1'))
    assert [r["metric"]["instance"] for r in up] == ["exporter:10431"]


# How long the rules get to be evaluated once. A group with an interval of its own longer than this
# (lunlat-drift, every 5 minutes) first runs anywhere within its interval after Prometheus starts (at a
# fixed phase of it): it must be loaded at that interval, and error-free so far; waiting up to 5
# minutes for it would add them to every run, and promtool's tests evaluate its rules
# (alerts/tests/drift.test.yml). /api/v1/rules gives each group's `interval` in seconds
# (prometheus.io/docs/prometheus/latest/querying/api, "Rules": `"interval": 60`).
RULES_TIMEOUT = 120


def test_lunlats_rules_are_loaded_and_evaluate_without_error(stack: Stack) -> None:
    shipped = yaml.safe_load((ROOT / "alerts" / "lunlat.rules.yml").read_text(encoding="utf-8"))
    names = {group["name"] for group in shipped["groups"]}
    slow = {
        g["name"]: g["interval"]
        for g in shipped["groups"]
        if duration_seconds(g.get("interval", "0s")) > RULES_TIMEOUT
    }

    def evaluated() -> list[dict[str, Any]]:
        groups = [g for g in stack.get("prometheus", "/api/v1/rules")["data"]["groups"] if g["name"] in names]
        rules = [rule for group in groups if group["name"] not in slow for rule in group["rules"]]
        done = len(groups) == len(names) and all(rule["health"] != "unknown" for rule in rules)
        return groups if done else []

    groups = _wait("every lunlat rule evaluated once", RULES_TIMEOUT, evaluated)
    assert {g["name"] for g in groups} == names
    assert {g["name"]: g["interval"] for g in groups if g["name"] in slow} == {
        name: duration_seconds(interval) for name, interval in slow.items()
    }
    broken = [
        (r["name"], r.get("lastError"))
        for g in groups
        for r in g["rules"]
        if r["health"] != "ok" and not (g["name"] in slow and r["health"] == "unknown")
    ]
    assert broken == []


def test_a_firing_rule_reaches_the_receiver_through_alertmanagers_routing(stack: Stack) -> None:
    def delivered() -> list[dict[str, Any]]:
        notifications = stack.get("receiver", "/notifications")
        return [
            n
            for n in notifications
            if any(a["labels"].get("alertname") == "LunLatencyStackTest" for a in n["payload"]["alerts"])
        ]

    [first, *_] = _wait("the test page delivered", 180, delivered)
    assert first["path"] == f"/{EXPECTED_RECEIVER}"
    assert first["payload"]["receiver"] == EXPECTED_RECEIVER and first["payload"]["status"] == "firing"
    [alert] = first["payload"]["alerts"]
    assert alert["labels"]["instance"] == "exporter:10431" and alert["labels"]["job"] == "lunlat"
    # Sent by this stack's Prometheus: its own address is the alert's source.
    assert alert["generatorURL"].startswith("http://") and "/graph?" in alert["generatorURL"]


def _luns_and_mountpoints(text: str) -> set[tuple[str, str]]:
    return {
        (sample.labels["lun"], sample.labels["mountpoint"])
        for family in text_string_to_metric_families(text)
        if family.name == "lunlat_lun_info"
        for sample in family.samples
    }


def _reloaded_at(text: str) -> float:
    [family] = [
        f
        for f in text_string_to_metric_families(text)
        if f.name == contract.CONFIG_LAST_RELOAD_SUCCESS_TIME.name
    ]
    return float(family.samples[0].value)


def _after_a_reload(hup: Callable[[], object], get: Callable[[], str]) -> str:
    """SIGHUP, then the first exposition the reload made. A reload builds the diskstats source anew,
    so its topology is read at that moment, not up to a refresh interval ago."""
    before = _reloaded_at(get())
    hup()

    def reloaded() -> str:
        text = get()
        return text if _reloaded_at(text) > before else ""

    return str(_wait("the reload after SIGHUP", 60, reloaded))


def test_the_exporter_in_its_container_sees_the_hosts_luns_and_mountpoints(
    stack: Stack, tmp_path: Path
) -> None:
    """`lunlat_lun_info`'s (lun, mountpoint) pairs in the container and on the host, with the same
    config, each read just after a reload (SIGHUP) at the same moment: an exporter keeps a topology
    up to a refresh interval, and other work on this host attaches and detaches loop devices. The mount
    table changes whenever a container starts or stops on this host (its overlay and network
    namespace mounts): up to five rounds, the last compared."""
    argv = lunlat_serve(f"--config.file={HOST_CONFIG}")
    exporter = stack.container("exporter")
    with (
        ExporterProcess(argv, tmp_path / "host.log", port_pattern=LUNLAT_PORT) as host,
        ThreadPoolExecutor(max_workers=2) as pool,
    ):
        for _ in range(5):
            contained = pool.submit(
                _after_a_reload,
                lambda: stack.podman.run("kill", "--signal", "HUP", exporter),
                lambda: scrape(stack.ports["exporter"]).text,
            )
            on_host = _luns_and_mountpoints(
                _after_a_reload(lambda: os.kill(host.pid, signal.SIGHUP), lambda: host.scrape().text)
            )
            in_container = _luns_and_mountpoints(contained.result())
            if in_container == on_host:
                break
            time.sleep(3)
    assert on_host and any(mountpoint for _, mountpoint in on_host)  # a LUN with a mounted filesystem
    assert in_container == on_host, (sorted(in_container - on_host), sorted(on_host - in_container))


def test_the_image_runs_as_its_user_on_a_read_only_root_without_lab_code(stack: Stack) -> None:
    exporter = stack.container("exporter")
    inspected = json.loads(stack.podman.run("container", "inspect", exporter).stdout)[0]
    assert inspected["Config"]["User"] == "10431" and inspected["HostConfig"]["ReadonlyRootfs"] is True
    assert stack.podman.run("exec", exporter, "id", "-u").stdout.strip() == "10431"
    written = stack.podman.run("exec", exporter, "touch", "/probe", check=False)
    assert written.returncode != 0 and "Read-only file system" in written.stderr
    probe = (
        "import importlib.util as u, lunlat; "
        "print(u.find_spec('lunlat_lab') is None, lunlat.__file__.startswith('/opt/lunlat/'))"
    )
    assert stack.podman.run("exec", exporter, "python3", "-c", probe).stdout.split() == ["True", "True"]
    # The image's files, as root in a container of its own: the exporter's container drops every
    # capability, so even its root could not read every directory.
    found = stack.podman.run(
        "run", "--rm", "--user", "0", "--entrypoint", "find", stack.image,
        "/", "-xdev", "(", "-name", "*labd*", "-o", "-name", "lunlat_lab*", ")",
    )  # fmt: skip
    assert found.stdout.split() == []


def test_the_health_checks_pass_in_the_running_containers(stack: Stack) -> None:
    """The image's HEALTHCHECK (kept by the Docker format) and the compose file's wget checks run in
    their containers. podman runs them from systemd timers, absent here: run once by hand
    (podman-healthcheck-run(1): exit 0 healthy)."""
    image = json.loads(stack.podman.run("image", "inspect", stack.image).stdout)[0]
    assert "/-/healthy" in " ".join(image["Healthcheck"]["Test"])  # podman's inspect: top-level key
    for service in ("exporter", "prometheus", "alertmanager"):
        _wait(
            f"{service}'s health check passing",
            60,
            lambda s=service: (
                stack.podman.run("healthcheck", "run", stack.container(s), check=False).returncode == 0
            ),
        )
