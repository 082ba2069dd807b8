"""Against a real Docker engine, where one answers (DOCKER_HOST, else the default socket): for each
running container with mounts, each mount's Destination maps to its Source. Skipped, saying why,
where no engine answers (the machines that build lunlat have none)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from lunlat.containers import ContainerMapper, ContainerRef

docker = pytest.importorskip("docker", reason="the Docker SDK is not installed (extra lunlat[docker])")

# docker-py leaves its socket unclosed when it cannot connect (docker/transport/unixconn.py): see
# tests/docker/test_containers.py. Collected (and its warning ignored) before the skip.
pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


def engine() -> Any:
    """A client of the engine the SDK's environment names, or a skip saying why there is none."""
    why = ""
    try:
        client = docker.from_env(timeout=5)
        client.ping()  # GET /_ping
    except docker.errors.DockerException as exc:
        why = str(exc)
    if why:
        gc.collect()  # the failed attempt's socket, no longer referenced by the exception
        pytest.skip(f"no Docker engine answers /_ping (DOCKER_HOST, else the default socket): {why}")
    return client


def test_each_mount_destination_of_each_running_container_maps_to_its_source() -> None:
    client = engine()
    try:
        running = [c for c in client.containers.list() if c.attrs.get("Mounts")]
    finally:
        client.close()
    if not running:
        pytest.skip("the engine runs no container with mounts")
    for container in running:
        mapper = ContainerMapper(ContainerRef(name=container.id), None)
        mapper.refresh()
        assert mapper.mapped, (container.name, mapper.problem)
        for mount in container.attrs["Mounts"]:
            if mount.get("Source"):  # tmpfs mounts have none: on no host path
                assert mapper.host_path(mount["Destination"]) == mount["Source"], (container.name, mount)
