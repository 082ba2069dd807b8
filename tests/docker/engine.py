"""A fake Docker engine for tests: the Engine API endpoints the Docker SDK for Python calls to find a
container and read its mounts, served over a unix socket, answered from containers the test declares.

Only what docs/emulated-facts.md ("Docker Engine API") lists is modelled, each field from the Engine
API reference (https://docs.docker.com/reference/api/engine/, source: api/swagger.yaml in
github.com/moby/moby):

    engine = FakeEngine(tmp_path / "docker.sock")
    engine.run(FakeContainer("sql1", mounts=[bind("/srv/mssql/data", "/var/opt/mssql/data")],
                             ports=[published(1433, 14330)]))
    with engine:
        client = docker.DockerClient(base_url=engine.url)

Endpoints (GET only, with or without a /vX.Y prefix): /_ping, /version, /containers/json (running
containers unless all=1 or all=true), /containers/{id or name}/json (404 "No such container: X").
Anything else: 404 "page not found".

Faults (set any time): `status` answers every /containers/ request with that HTTP status and an
ErrorResponse; `garbage` answers inspect with a body that is not a ContainerInspectResponse;
`delay` holds every answer that many seconds. `requests` records each request's method and path.
"""

from __future__ import annotations

import json
import re
import secrets
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_VERSION = "1.45"  # what the engine says it serves (SystemVersion.ApiVersion, the ping's Api-Version)
MIN_API_VERSION = "1.24"
DATA_ROOT = "/var/lib/docker"  # the engine's data root: volumes and overlay2 layers live under it
_VERSIONED = re.compile(r"/v\d+\.\d+(/.*)")


@dataclass(frozen=True, slots=True)
class Mount:
    """One MountPoint: Type, Name (volumes), Source, Destination, Driver, Mode, RW, Propagation."""

    type: str
    source: str
    destination: str
    name: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "Type": self.type,
            "Name": self.name,
            "Source": self.source,
            "Destination": self.destination,
            "Driver": "local" if self.type == "volume" else "",
            "Mode": "z" if self.type != "tmpfs" else "",
            "RW": True,
            "Propagation": "rprivate" if self.type == "bind" else "",
        }


def bind(source: str, destination: str) -> Mount:
    """A bind mount: Source is the host path (MountPoint.Source, "the source (host) part")."""
    return Mount("bind", source, destination)


def volume(name: str, destination: str) -> Mount:
    """A named volume: Source is its storage location within <data root>/volumes/ (MountPoint.Source)."""
    return Mount("volume", f"{DATA_ROOT}/volumes/{name}/_data", destination, name)


def tmpfs(destination: str) -> Mount:
    """A tmpfs: Source is empty (MountPoint.Source: "For `tmpfs` mount points, this field is empty")."""
    return Mount("tmpfs", "", destination)


@dataclass(frozen=True, slots=True)
class Port:
    """One PortSummary: IP (host address), PrivatePort (in the container), PublicPort (host), Type."""

    private: int
    public: int
    ip: str = "0.0.0.0"
    type: str = "tcp"

    def as_json(self) -> dict[str, Any]:
        return {"IP": self.ip, "PrivatePort": self.private, "PublicPort": self.public, "Type": self.type}


def published(private: int, public: int, ip: str = "0.0.0.0") -> Port:
    return Port(private, public, ip)


@dataclass
class FakeContainer:
    name: str
    mounts: list[Mount] = field(default_factory=list)
    devices: list[tuple[str, str]] = field(default_factory=list)  # (PathOnHost, PathInContainer)
    ports: list[Port] = field(default_factory=list)
    running: bool = True
    image: str = "mcr.microsoft.com/mssql/server:2022-latest"
    overlay2: bool = True  # GraphDriver overlay2 with its UpperDir; False: GraphDriver null
    id: str = field(default_factory=lambda: secrets.token_hex(32))  # 64 hex digits, as Id

    @property
    def upper_dir(self) -> str:
        return f"{DATA_ROOT}/overlay2/{self.id}/diff"

    def summary(self) -> dict[str, Any]:
        """ContainerSummary, as GET /containers/json lists it."""
        return {
            "Id": self.id,
            "Names": [f"/{self.name}"],
            "Image": self.image,
            "State": "running" if self.running else "exited",
            "Status": "Up 4 days" if self.running else "Exited (0) 1 minute ago",
            "Ports": [p.as_json() for p in self.ports],
            "Labels": {},
        }

    def inspect(self) -> dict[str, Any]:
        """ContainerInspectResponse, as GET /containers/{id}/json answers it."""
        graph = (
            {
                "Name": "overlay2",
                "Data": {
                    "MergedDir": f"{DATA_ROOT}/overlay2/{self.id}/merged",
                    "UpperDir": self.upper_dir,
                    "WorkDir": f"{DATA_ROOT}/overlay2/{self.id}/work",
                },
            }
            if self.overlay2
            else None
        )
        return {
            "Id": self.id,
            "Name": f"/{self.name}",
            "State": {"Status": "running" if self.running else "exited", "Running": self.running},
            "Mounts": [m.as_json() for m in self.mounts],
            "HostConfig": {
                "Devices": [
                    {"PathOnHost": host, "PathInContainer": inside, "CgroupPermissions": "rwm"}
                    for host, inside in self.devices
                ]
            },
            "GraphDriver": graph,
        }


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    engine: FakeEngine


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the SDK keeps its connection (requests' pool)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a unix socket's client has no address to log."""

    def do_GET(self) -> None:
        engine = self.server.engine
        engine.requests.append(("GET", self.path))
        if engine.delay:
            time.sleep(engine.delay)
        url = urlsplit(self.path)
        versioned = _VERSIONED.fullmatch(url.path)
        path = versioned.group(1) if versioned else url.path
        query = parse_qs(url.query)
        if path == "/_ping":
            self._answer(200, b"OK", "text/plain; charset=utf-8")
            return
        if path == "/version":
            self._json(200, engine.version())
            return
        if path.startswith("/containers/") and engine.status is not None:
            self._json(engine.status, {"message": "fake engine: server error"})
            return
        if path == "/containers/json":
            every = query.get("all", ["0"])[0] in ("1", "true", "True")
            self._json(200, [c.summary() for c in engine.containers if every or c.running])
            return
        inspect = re.fullmatch(r"/containers/([^/]+)/json", path)
        if inspect is not None:
            found = engine.find(inspect.group(1))
            if found is None:
                self._json(404, {"message": f"No such container: {inspect.group(1)}"})
            elif engine.garbage:
                self._json(200, {"Id": found.id, "Mounts": "not a list", "HostConfig": 7})
            else:
                self._json(200, found.inspect())
            return
        self._json(404, {"message": "page not found"})

    def _json(self, status: int, body: object) -> None:
        self._answer(status, json.dumps(body).encode(), "application/json")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Api-Version", API_VERSION)
        self.send_header("Docker-Experimental", "false")
        self.end_headers()
        self.wfile.write(body)


class FakeEngine:
    """See the module docstring."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.containers: list[FakeContainer] = []
        self.status: int | None = None
        self.garbage = False
        self.delay = 0.0
        self.requests: list[tuple[str, str]] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def run(self, container: FakeContainer) -> FakeContainer:
        """A container appears (docker run)."""
        self.containers.append(container)
        return container

    def remove(self, name: str) -> None:
        self.containers = [c for c in self.containers if c.name != name]

    def recreate(self, container: FakeContainer) -> FakeContainer:
        """The container of that name removed and created again (a new id), as compose up does."""
        self.remove(container.name)
        return self.run(container)

    def find(self, ref: str) -> FakeContainer | None:
        """By full id or by name ("ID or name of the container"; names listed with a leading '/')."""
        name = ref.removeprefix("/")
        return next((c for c in self.containers if ref == c.id or name == c.name), None)

    def version(self) -> dict[str, Any]:
        """SystemVersion: Version, ApiVersion (the highest served), MinAPIVersion, Os, Arch."""
        return {
            "Version": "26.1.0",
            "ApiVersion": API_VERSION,
            "MinAPIVersion": MIN_API_VERSION,
            "Os": "linux",
            "Arch": "amd64",
            "KernelVersion": "6.1.0",
            "Platform": {"Name": "Docker Engine - Community"},
        }

    def start(self) -> FakeEngine:
        server = _Server(str(self.socket_path), _Handler)
        server.engine = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake docker engine", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> FakeEngine:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
