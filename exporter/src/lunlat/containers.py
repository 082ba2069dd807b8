"""Databases in Docker containers: a path the database reports, which is the container's, to the host path.

SQL Server on Linux and Oracle Free usually run in Docker, and their views report the container's
paths (/var/opt/mssql/data/sales.mdf). The host's mount table knows none of them, so a database
source with a container asks the Docker engine, through the Docker SDK for Python (`docker`, the
optional extra `lunlat[docker]`), how the container is built and maps each path before the
FileLocator (dbfiles.py) follows it to a LUN:

- a device passed in with --device (ASM disks): `HostConfig.Devices[].PathInContainer` → `PathOnHost`;
- a path under a mount: the mount with the longest `Mounts[].Destination` holding it → its `Source`
  (bind mounts and named volumes alike: a volume's Source is its directory under the engine's data root);
- a path on no mount: the container's writable layer (`GraphDriver.Data.UpperDir`, overlay2), when the
  engine reports one; else the path is unmapped (its file gets an empty `lun`).

The container is named in the config (`container:`), or, with a `docker:` section, found by the TCP
port it publishes on this host for a target whose host is a loopback address. Every engine call is
bounded by `docker.timeout_seconds` and never raises: a failed lookup is `problem`, said by the
source once and published as `lunlat_source_capability{capability="container"} 0`.

Engine API facts relied on are cited beside the code as "Engine API, <definition>": the Docker Engine
API reference (https://docs.docker.com/reference/api/engine/; its source is api/swagger.yaml in
github.com/moby/moby). SDK facts cite github.com/docker/docker-py files.
"""

from __future__ import annotations

import errno
import posixpath
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lunlat.config import DockerConfig, is_loopback
from lunlat.dbtarget import DatabaseTarget

SDK_MISSING = "the `container` lookup needs the Docker SDK for Python: pip install 'lunlat[docker]'"
DEFAULT_TIMEOUT_SECONDS = DockerConfig().timeout_seconds
# PortSummary.IP of a port published on every address (Engine API, PortSummary: "Host IP address that
# the container's port is mapped to"); Docker lists 0.0.0.0 and :: for `-p 1433:1433`.
_ANY_ADDRESS = frozenset({"", "0.0.0.0", "::"})


def sdk_installed() -> bool:
    """Whether the `docker` package can be imported (checked at build, so a missing one is one line)."""
    try:
        import docker  # noqa: F401, PLC0415 - optional dependency, only for targets with a container
    except ImportError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """Which container: by name or id (`container:`), or by the TCP port it publishes (auto lookup)."""

    name: str = ""
    host: str = ""
    port: int = 0

    def describe(self) -> str:
        return self.name or f"(publishing {self.host}:{self.port})"


def ref_for(target: DatabaseTarget, docker: DockerConfig | None) -> ContainerRef | None:
    """The container a target's database runs in, or None when it is not in one (as far as the config says)."""
    if target.container is not None:
        return ContainerRef(name=target.container)
    if docker is None:
        return None  # auto lookup only where the config names an engine
    endpoint = target.endpoint()
    if endpoint is None or not is_loopback(endpoint[0]):
        return None
    return ContainerRef(host=endpoint[0], port=endpoint[1])


class AnswerError(ValueError):
    """The engine answered something this module cannot read (a missing or mistyped field)."""


class PortLookupError(Exception):
    """No single running container publishes the target's port."""


@dataclass(frozen=True, slots=True)
class ContainerPaths:
    """How one container's paths map to the host's (see the module docstring)."""

    name: str
    mounts: tuple[tuple[str, str], ...]  # (Destination, Source), longest Destination first
    devices: Mapping[str, str]  # PathInContainer -> PathOnHost
    upper_dir: str  # the writable layer's host directory, '' when the engine reports none

    def host_path(self, path: str) -> str | None:
        """The host path of `path` in the container; None when it is on no host path (tmpfs, or no
        writable layer reported). Paths that are not absolute POSIX paths (ASM's +DATA/…, ORCL:…,
        Windows' D:\\…) are no container's and come back as they are."""
        if not path.startswith("/"):
            return path
        path = posixpath.normpath(path)
        device = self.devices.get(path)
        if device is not None:
            return device
        for destination, source in self.mounts:
            if path == destination or path.startswith(destination.rstrip("/") + "/"):
                if not source:
                    # Engine API, MountPoint.Source: "For `tmpfs` mount points, this field is empty":
                    # memory, on no LUN.
                    return None
                rest = path[len(destination) :].lstrip("/")
                return posixpath.join(source, rest) if rest else source
        if self.upper_dir:
            return posixpath.join(self.upper_dir, path.lstrip("/"))
        return None


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise AnswerError(f"{where} is {value!r:.60}, not text")
    return value


def _items(value: object, where: str) -> list[Any]:
    # Go encodes an empty slice as null: both mean none.
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnswerError(f"{where} is {value!r:.60}, not a list")
    return value


def _object(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnswerError(f"{where} is {value!r:.60}, not an object")
    return value


def paths_of(attrs: object) -> ContainerPaths:
    """Read what GET /containers/{id}/json answered (ContainerInspectResponse); AnswerError when
    a field this module relies on is missing or of the wrong type."""
    inspect = _object(attrs, "the answer")
    if not inspect:
        raise AnswerError("the answer is empty")
    # Engine API, ContainerInspectResponse.Name: the container's name ("/sql1").
    name = str(inspect.get("Name") or inspect.get("Id") or "?").lstrip("/")
    mounts: list[tuple[str, str]] = []
    # Engine API, ContainerInspectResponse.Mounts: a list of MountPoint. MountPoint.Destination is
    # "the path relative to the container root (`/`) where the `Source` is mounted inside the
    # container"; MountPoint.Source is the host part of a bind mount and, for a volume, "the storage
    # location of the volume (within `/var/lib/docker/volumes/`)", a host path too.
    for i, mount in enumerate(_items(inspect.get("Mounts"), "Mounts")):
        entry = _object(mount, f"Mounts[{i}]")
        destination = _text(entry.get("Destination"), f"Mounts[{i}].Destination")
        source = _text(entry.get("Source", ""), f"Mounts[{i}].Source")
        if not destination.startswith("/"):
            raise AnswerError(f"Mounts[{i}].Destination {destination!r:.60} is not an absolute path")
        mounts.append((posixpath.normpath(destination), source))
    mounts.sort(key=lambda m: len(m[0]), reverse=True)
    devices: dict[str, str] = {}
    # Engine API, HostConfig (allOf Resources).Devices: "A list of devices to add to the container",
    # each a DeviceMapping with PathOnHost and PathInContainer (docker run --device).
    host_config = _object(inspect.get("HostConfig"), "HostConfig")
    for i, device in enumerate(_items(host_config.get("Devices"), "HostConfig.Devices")):
        entry = _object(device, f"HostConfig.Devices[{i}]")
        on_host = _text(entry.get("PathOnHost"), f"HostConfig.Devices[{i}].PathOnHost")
        in_container = _text(
            entry.get("PathInContainer") or on_host, f"HostConfig.Devices[{i}].PathInContainer"
        )
        devices[posixpath.normpath(in_container)] = on_host
    # Engine API, ContainerInspectResponse.GraphDriver (DriverData, x-nullable): Data holds the
    # driver's paths; overlay2's example has UpperDir, the container's writable layer on the host.
    # Driver-specific and "informational": used only when present.
    graph = _object(inspect.get("GraphDriver"), "GraphDriver")
    data = _object(graph.get("Data"), "GraphDriver.Data")
    upper = data.get("UpperDir")
    upper_dir = upper if isinstance(upper, str) and upper.startswith("/") else ""
    return ContainerPaths(name, tuple(mounts), devices, upper_dir)


def publishes(ports: object, host: str, port: int) -> bool:
    """Whether a container's `Ports` (GET /containers/json, ContainerSummary.Ports: PortSummary
    items with IP, PrivatePort, PublicPort, Type) publish TCP `port` where `host` reaches it."""
    for item in _items(ports, "Ports"):
        entry = _object(item, "Ports[]")
        # Engine API, PortSummary: PublicPort "Port exposed on the host", Type tcp | udp | sctp,
        # IP the host address it is bound to.
        if entry.get("PublicPort") != port or entry.get("Type") != "tcp":
            continue
        ip = entry.get("IP") or ""
        if not isinstance(ip, str):
            raise AnswerError(f"Ports[].IP is {ip!r:.60}, not text")
        if ip in _ANY_ADDRESS or is_loopback(ip) or ip == host.strip("[]"):
            return True
    return False


def _causes(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack += [current.__cause__, current.__context__]
        stack += [a for a in current.args if isinstance(a, BaseException)]


def unanswered(timeout: float) -> str:
    """The problem of an engine that did not answer in time, whichever clock ended the wait."""
    return f"engine unreachable: no answer within {timeout:g} s"


def explain(exc: BaseException, timeout: float) -> str:  # noqa: PLR0911 - one return per cause
    """One line saying why the engine lookup failed (the log names it; no secrets in it)."""
    # docker-py raises docker.errors.NotFound for a 404 and APIError for other error statuses; the
    # message is the engine's ErrorResponse.message (docker/errors.py, create_api_error_from_http_exception;
    # Engine API, ContainerInspect: 404 "no such container").
    kind = type(exc).__name__
    if isinstance(exc, PortLookupError):
        return str(exc)
    if kind == "NotFound":
        said = str(getattr(exc, "explanation", None) or exc)
        return (said if said.lower().startswith("no such container") else f"no such container: {said}")[:300]
    if isinstance(exc, AnswerError):
        return f"unexpected answer from the engine: {exc}"[:300]
    for cause in _causes(exc):
        if isinstance(cause, PermissionError) or getattr(cause, "errno", None) == errno.EACCES:
            return "permission denied on the Docker engine's socket (the exporter's user cannot open it)"
        # The SDK's own timeout on a call (requests' ReadTimeout over urllib3's ReadTimeoutError,
        # raised from the socket's TimeoutError) is the same cause as the lookup's wait running out.
        if isinstance(cause, TimeoutError):
            return unanswered(timeout)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if kind == "APIError" and status is not None:
        return f"the engine answered HTTP {status}: {getattr(exc, 'explanation', None) or exc}"[:300]
    text = " ".join(str(exc).split())
    if kind in ("ValueError", "TypeError", "KeyError", "JSONDecodeError", "AttributeError"):
        return f"unexpected answer from the engine: {kind}: {text}"[:300]
    return f"engine unreachable: {text}"[:300]


def _client(docker_config: DockerConfig | None, timeout: float, version: str) -> Any:
    """A DockerClient for the configured engine, or the SDK's environment (DOCKER_HOST, else the
    default socket: docker/client.py `DockerClient.from_env`, docker/constants.py DEFAULT_UNIX_SOCKET).
    With an explicit `version` the constructor makes no request (docker/api/client.py
    `APIClient.__init__` asks GET /version only for version None or "auto"), so a client is always
    built and can be closed, whatever the engine does."""
    import docker  # noqa: PLC0415 - optional dependency, checked at build (sdk_installed)

    url = docker_config.url if docker_config is not None else None
    if url is None:
        return docker.from_env(timeout=timeout, version=version)
    return docker.DockerClient(base_url=url, timeout=timeout, version=version)


def _engine_client(docker_config: DockerConfig | None, timeout: float) -> Any:
    """A client speaking the API version the engine serves, as the SDK's version="auto" picks it
    (SystemVersion.ApiVersion of the unversioned GET /version: docker/api/client.py
    `_retrieve_server_version`), so an engine older than the SDK's default version is answered."""
    import docker  # noqa: PLC0415 - optional dependency, checked at build (sdk_installed)

    probe = _client(docker_config, timeout, docker.constants.MINIMUM_DOCKER_API_VERSION)
    try:
        # Engine API, SystemVersion.ApiVersion: "The default (and highest) API version that is
        # supported by the daemon".
        served = _object(probe.version(api_version=False), "/version").get("ApiVersion")
    finally:
        probe.close()
    return _client(docker_config, timeout, _text(served, "ApiVersion"))


class ContainerMapper:
    """The mapping of one target's container, looked up again on `refresh()` (a new session)."""

    def __init__(
        self,
        ref: ContainerRef,
        docker_config: DockerConfig | None,
        client: Callable[[float], Any] | None = None,
    ) -> None:
        self.ref = ref
        self.docker = docker_config
        self.timeout = docker_config.timeout_seconds if docker_config is not None else DEFAULT_TIMEOUT_SECONDS
        self._client = client or (lambda timeout: _engine_client(self.docker, timeout))
        self.paths: ContainerPaths | None = None
        self.problem = "not looked up yet"

    @property
    def mapped(self) -> bool:
        return self.paths is not None and not self.problem

    def host_path(self, path: str) -> str | None:
        """The host path of a path in the container; None while the container is not mapped."""
        if self.paths is None or self.problem:
            return None
        return self.paths.host_path(path)

    def refresh(self) -> None:
        """Ask the engine again, within `timeout` seconds whatever it does; never raises."""
        outcome: list[ContainerPaths | BaseException] = []

        def run() -> None:
            try:
                outcome.append(self._look_up())
            except Exception as exc:  # noqa: BLE001 - every failure becomes `problem`
                outcome.append(exc)

        # A thread, so a stalled engine cannot hold the collection past the timeout: the SDK's own
        # timeout bounds each of its calls, but a lookup is up to three of them.
        worker = threading.Thread(target=run, name=f"docker lookup {self.ref.describe()}", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if not outcome:
            self.paths, self.problem = None, unanswered(self.timeout)
        elif isinstance(outcome[0], BaseException):
            self.paths, self.problem = None, explain(outcome[0], self.timeout)
        else:
            self.paths, self.problem = outcome[0], ""

    def _look_up(self) -> ContainerPaths:
        client = self._client(self.timeout)
        try:
            container_id = self.ref.name or self._by_port(client)
            # GET /containers/{id}/json (docker/models/containers.py `ContainerCollection.get` →
            # docker/api/container.py `inspect_container`); the id may be a name (Engine API,
            # ContainerInspect: "ID or name of the container").
            return paths_of(client.containers.get(container_id).attrs)
        finally:
            client.close()

    def _by_port(self, client: Any) -> str:
        # GET /containers/json lists running containers only unless all=1 (Engine API, ContainerList
        # `all`: "By default, only running containers are shown"); sparse: the list's own fields,
        # without inspecting each (docker/models/containers.py `ContainerCollection.list`).
        found: list[str] = []
        for container in client.containers.list(sparse=True):
            attrs = _object(container.attrs, "a listed container")
            if publishes(attrs.get("Ports"), self.ref.host, self.ref.port):
                found.append(_text(attrs.get("Id"), "Id"))
        unique = sorted(set(found))
        if not unique:
            raise PortLookupError(f"no running container publishes TCP port {self.ref.port} on this host")
        if len(unique) > 1:
            raise PortLookupError(
                f"{len(unique)} running containers publish TCP port {self.ref.port}: set `container:`"
            )
        return unique[0]
