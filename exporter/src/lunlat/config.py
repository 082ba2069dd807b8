"""The exporter's YAML config (docs/contract.md §6): validated by pydantic, errors named by key and line.

Every key is optional and unknown keys are errors. With no file at all, the embedded default is
used: every LUN of the host, no database.

This module knows no engine: `Config` is the config without database sections, and
`config_model(engines)` adds one section per engine. The registry's model, the one the commands read,
is assembled at the top (`configfile.py`), so the config sits below the engines and the sources that
read it (docs/architecture.md, "The layers").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import Field, create_model, field_validator, model_validator

from lunlat.dbtarget import DatabaseTarget
from lunlat.files import MiB
from lunlat.ground import ARRAY_UNKNOWN, Role
from lunlat.wwid import key as wwid_key
from lunlat.yamlmodel import ConfigError, ConfigProblem, LocatedError, Strict, check_regex, quote

__all__ = [
    "BiolatencyConfig",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "DockerConfig",
    "Section",
    "config_model",
]

# The config is read whole and every entry validated: at 1 MiB (~25,000 one-line `luns:` entries)
# that takes ~9 s and ~210 MB on a 2-core machine, at 4 MiB 33 s and 715 MB. The largest config a
# host needs is far smaller: 4,096 LUNs written out with wwid, database, role and workload are ~450 KB.
CONFIG_MAX_BYTES = MiB

# Devices that are never LUNs: RAM disks, compressed swap, floppies, optical drives.
DEFAULT_EXCLUDE = r"^(ram|zram|fd|sr)\d+$"


class DiskstatsConfig(Strict):
    include: str | None = Field(default=None, description="Regex on kernel device names to keep.")
    exclude: str | None = Field(default=DEFAULT_EXCLUDE, description="Regex on kernel device names to drop.")
    show_paths: bool = Field(default=False, description="Also publish multipath path devices and partitions.")
    # Off when the rules' host layer reads node_exporter's diskstats (goals host_layer, docs/host-layer.md):
    # lunlat_lun_info and path health still come from here, the counters from node_exporter.
    counters: bool = Field(
        default=True,
        description="Publish the device counters (lunlat_device_*); false keeps lunlat_lun_info and path health.",
    )

    _regex = field_validator("include", "exclude")(check_regex)


class BiolatencyConfig(Strict):
    """Per-I/O latency histograms from the kernel's block tracepoints (sources/biolatency.py)."""

    enabled: bool = Field(default=False, description="Run the biolatency source (--collector.biolatency).")
    # Two maps are sized by it: the device hash (dev_t -> slot) and the per-CPU counters, 2 elements
    # of 168 bytes per CPU for each device, preallocated by the kernel.
    max_devices: int = Field(
        default=512,
        ge=1,
        le=65536,
        description="LUNs traced at most (kernel memory: 336 bytes per device and CPU).",
    )
    only_with_role: bool = Field(
        default=False, description="Publish only LUNs with a role (a luns: entry or a database gave one)."
    )


MATCH_KEYS = ("alias", "wwid", "device", "mount", "loop_file")


class LunMatch(Strict):
    alias: str | None = None
    wwid: str | None = None
    device: str | None = None
    mount: str | None = None
    loop_file: str | None = Field(
        default=None,
        description="Backing file of a loop device: a full path, or a file name matching any directory.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> LunMatch:
        given = [k for k in MATCH_KEYS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(MATCH_KEYS)} (got {', '.join(given) or 'none'})"
            )
        for key in given:
            if not str(getattr(self, key)).strip():
                raise ValueError(f"{key} must not be empty")
        if self.mount is not None and not self.mount.startswith("/"):
            raise ValueError(f"mount must be an absolute path, got {quote(self.mount)}")
        return self

    def describe(self) -> str:
        for key in MATCH_KEYS:
            value = getattr(self, key)
            if value is not None:
                return f"{key}={value}"
        return "?"

    def identity(self) -> tuple[str, str]:
        """What this match names, in one spelling: equal identities name the same device(s).

        `/dev/sda` and `sda` are one device; `device: /dev/mapper/X` is `alias: X` (luns.py matches
        both by dm name); WWIDs compare in one spelling (lunlat.wwid).
        """
        if self.device is not None:
            name = self.device.removeprefix("/dev/")
            return ("alias", name.removeprefix("mapper/")) if name.startswith("mapper/") else ("device", name)
        if self.wwid is not None:
            return ("wwid", wwid_key(self.wwid))
        if self.mount is not None:
            return ("mount", str(PurePosixPath(self.mount)))
        key = next(k for k in MATCH_KEYS if getattr(self, k) is not None)
        return (key, str(getattr(self, key)))


class LunEntry(Strict):
    match: LunMatch
    database: str | None = None
    role: Role | None = None
    workload: str | None = None
    array: str | None = Field(
        default=None,
        max_length=128,
        description="The array serving the LUN, as you name it (lunlat_lun_info's `array`): wins over "
        "what the LUN's WWID says (arrayid.py).",
    )

    @field_validator("array")
    @classmethod
    def _array(cls, value: str | None) -> str | None:
        # "unknown" is what lunlat_lun_info says of a LUN whose array nobody named: a user's array of
        # that name would be left out by every rule that groups LUNs by array.
        if value is not None and (not value.strip() or value.strip() == ARRAY_UNKNOWN):
            raise ValueError(f"must name the array (not empty, not {quote(ARRAY_UNKNOWN)})")
        return value.strip() if value is not None else None

    @model_validator(mode="after")
    def _labels_something(self) -> LunEntry:
        if self.database is None and self.role is None and self.workload is None and self.array is None:
            raise ValueError("an entry must set at least one of database, role, workload, array")
        return self


# Where the SDK can reach an engine without extra packages: docker-py's APIClient mounts its unix
# socket adapter for unix:// and http+unix://, and plain HTTP(S) for tcp://, http:// and https://
# (github.com/docker/docker-py, docker/api/client.py `APIClient.__init__`, docker/utils/utils.py
# `parse_host`); ssh:// needs paramiko and npipe:// is Windows only.
DOCKER_URL_SCHEMES = ("unix://", "http+unix://", "tcp://", "http://", "https://")
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class DockerConfig(Strict):
    """How to reach the Docker engine that runs the database containers (containers.py)."""

    url: str | None = Field(
        default=None,
        description="The engine: unix:///var/run/docker.sock, tcp://HOST:PORT … (default: the SDK's "
        "environment, DOCKER_HOST, else the default unix socket).",
    )
    # Small by default: the lookup runs inside a collection, whose deadline is twice the target's timeout.
    timeout_seconds: float = Field(default=2.0, gt=0, le=30, description="Bounds each engine lookup.")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(DOCKER_URL_SCHEMES):
            raise ValueError(f"must start with one of {', '.join(DOCKER_URL_SCHEMES)}, got {quote(value)}")
        return value


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback: a port it publishes is then a local container's."""
    host = host.strip().strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


TargetT_co = TypeVar("TargetT_co", bound=DatabaseTarget, covariant=True)


class Section(Protocol[TargetT_co]):
    """What the config needs of a database engine (engines/engine.py `Engine`): its section's key,
    how people name it, and the type of one entry of the section."""

    @property
    def key(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def target(self) -> type[TargetT_co]: ...


TargetT = TypeVar("TargetT", bound=DatabaseTarget)


class Config(Strict):
    """The exporter's config file. Every key is optional; each database engine has a section, a list of
    its targets."""

    # The engines whose sections the model has (config_model); none in this base.
    engines: ClassVar[tuple[Section[DatabaseTarget], ...]] = ()

    diskstats: DiskstatsConfig = DiskstatsConfig()
    biolatency: BiolatencyConfig = BiolatencyConfig()
    luns: list[LunEntry] = Field(default_factory=list)
    docker: DockerConfig | None = Field(
        default=None,
        description="The Docker engine; given, a target without `container:` whose host is a loopback "
        "address is looked up by the TCP port a running container publishes.",
    )

    def targets(self, engine: Section[TargetT]) -> list[TargetT]:
        """The targets of `engine`'s section (none when the model has no such section)."""
        found: list[TargetT] = getattr(self, engine.key, [])
        return found

    def database_targets(self) -> list[tuple[Section[DatabaseTarget], int, DatabaseTarget]]:
        """Every database target, with its engine and its index in the engine's section."""
        return [
            (engine, i, target) for engine in self.engines for i, target in enumerate(self.targets(engine))
        ]

    @model_validator(mode="after")
    def _unique_databases(self) -> Config:
        first: dict[str, tuple[str, int]] = {}
        for engine, i, target in self.database_targets():
            if target.name in first:
                raise LocatedError(
                    f"database name {quote(target.name)} is used twice: names must be unique",
                    (engine.key, i, "name"),
                    (*first[target.name], "name"),
                )
            first[target.name] = (engine.key, i)
        return self

    @model_validator(mode="after")
    def _unique_luns(self) -> Config:
        """Two entries naming the same device the same way: the second would never apply.

        Entries naming one device different ways (an alias and its WWID) show only at run time,
        where the first entry wins label by label (luns.assign).
        """
        first: dict[tuple[str, str], int] = {}
        for i, entry in enumerate(self.luns):
            identity = entry.match.identity()
            if identity in first:
                raise LocatedError(
                    f"{entry.match.describe()} names the same device as an earlier entry",
                    ("luns", i, "match"),
                    ("luns", first[identity], "match"),
                )
            first[identity] = i
        return self

    def secret_problems(self) -> list[tuple[tuple[int | str, ...], str]]:
        """Password sources that cannot be read now: (key path, what is wrong), never the secret."""
        problems: list[tuple[tuple[int | str, ...], str]] = []
        for engine, i, target in self.database_targets():
            for what, secret in target.secrets():
                key = f"{what}_env" if secret.env is not None else f"{what}_file"
                try:
                    value = secret.read()
                except ValueError as exc:
                    problems.append(((engine.key, i, key), str(exc)))
                    continue
                if not value:  # no database takes an empty password: the login would only fail
                    where = (
                        f"environment variable {secret.env}" if secret.env is not None else str(secret.file)
                    )
                    problems.append(((engine.key, i, key), f"{where} is empty"))
        return problems


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def config_model(engines: Iterable[Section[DatabaseTarget]]) -> type[Config]:
    """`Config` with one section per engine, a list of its targets: adding an engine adds its config
    key without an edit here."""
    chosen = tuple(engines)
    sections: dict[str, Any] = {
        engine.key: (
            list[engine.target],  # type: ignore[name-defined]  # a type made at run time, per engine
            Field(
                default_factory=list,
                description=f"{engine.title} targets. {_first_line(engine.target.__doc__)}",
            ),
        )
        for engine in chosen
    }
    model = create_model("Config", __base__=Config, __doc__=Config.__doc__, **sections)
    model.engines = chosen
    return model
