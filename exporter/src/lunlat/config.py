"""The exporter's YAML config (docs/contract.md §6): validated by pydantic, errors named by key and line.

Every key is optional and unknown keys are errors. With no file at all, the embedded default is
used: every LUN of the host, no database.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
import re
from pathlib import Path, PurePosixPath

from pydantic import Field, field_validator, model_validator

from lunlat.contract import Role
from lunlat.files import FileRefusedError, KiB, MiB, read_regular
from lunlat.yamlmodel import (
    ConfigError,
    ConfigProblem,
    LocatedError,
    Strict,
    check_regex,
    load_model,
    parse_model,
    quote,
)

__all__ = [
    "BiolatencyConfig",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "DockerConfig",
    "load_config",
    "parse_config",
]

# The config is read whole and every entry validated: at 1 MiB (~25,000 one-line `luns:` entries)
# that takes ~9 s and ~210 MB on a 2-core machine, at 4 MiB 33 s and 715 MB. The largest config a
# host needs is far smaller: 4,096 LUNs written out with wwid, database, role and workload are ~450 KB.
CONFIG_MAX_BYTES = MiB
# A password file holds one password: Oracle 19c takes at most 30 bytes ("Minimum Requirements for
# Passwords", docs.oracle.com, Database Security Guide 19c), 23ai up to 1024; SQL Server 128
# characters (MicrosoftDocs/sql-docs docs/relational-databases/security/password-policy.md).
SECRET_MAX_BYTES = 64 * KiB

# Devices that are never LUNs: RAM disks, compressed swap, floppies, optical drives.
DEFAULT_EXCLUDE = r"^(ram|zram|fd|sr)\d+$"


class DiskstatsConfig(Strict):
    include: str | None = Field(default=None, description="Regex on kernel device names to keep.")
    exclude: str | None = Field(default=DEFAULT_EXCLUDE, description="Regex on kernel device names to drop.")
    show_paths: bool = Field(default=False, description="Also publish multipath path devices and partitions.")

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
        both by dm name); WWIDs compare in the form luns.py compares them.
        """
        if self.device is not None:
            name = self.device.removeprefix("/dev/")
            return ("alias", name.removeprefix("mapper/")) if name.startswith("mapper/") else ("device", name)
        if self.wwid is not None:
            from lunlat.luns import normalize_wwid  # noqa: PLC0415 - luns imports this module

            return ("wwid", normalize_wwid(self.wwid))
        if self.mount is not None:
            return ("mount", str(PurePosixPath(self.mount)))
        key = next(k for k in MATCH_KEYS if getattr(self, k) is not None)
        return (key, str(getattr(self, key)))


class LunEntry(Strict):
    match: LunMatch
    database: str | None = None
    role: Role | None = None
    workload: str | None = None

    @model_validator(mode="after")
    def _labels_something(self) -> LunEntry:
        if self.database is None and self.role is None and self.workload is None:
            raise ValueError("an entry must set at least one of database, role, workload")
        return self


class Secret(Strict):
    """Where a password comes from: an environment variable or a file, never the config or a flag."""

    env: str | None = None
    file: Path | None = None

    def read(self) -> str:
        """The secret's value, read now (a rotated file is picked up at the next connect).

        Raises ValueError naming the variable or file, never the value.
        """
        if self.env is not None:
            value = os.environ.get(self.env)
            if value is None:
                raise ValueError(f"environment variable {self.env} is not set")
            return value
        if self.file is None:
            return ""
        try:
            # Read at each connect: a FIFO or /dev/zero here must cost nothing (files.read_regular).
            text = read_regular(self.file, SECRET_MAX_BYTES, "password file").decode("utf-8")
        except FileRefusedError as exc:
            raise ValueError(f"cannot read {self.file}: {exc.reason.removeprefix('cannot read: ')}") from None
        except UnicodeDecodeError:
            # The decoder's message quotes a byte of the secret: say only what is wrong.
            raise ValueError(f"cannot read {self.file}: not UTF-8 text") from None
        # Secret files are usually written by `echo` or a template: one trailing newline is not the password.
        return text.removesuffix("\n").removesuffix("\r")


def _one_secret(env: str | None, file: Path | None, what: str, required: bool) -> Secret | None:
    if env is not None and file is not None:
        raise ValueError(f"give {what}_env or {what}_file, not both")
    if env is None and file is None:
        if required:
            raise ValueError(f"give {what}_env (an environment variable) or {what}_file (a file)")
        return None
    if env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
        raise ValueError(f"{what}_env must be an environment variable name, got {env!r}")
    return Secret(env=env, file=file)


# A container's name as the Engine API accepts it at create (`/?[a-zA-Z0-9][a-zA-Z0-9_.-]+`, Docker
# Engine API reference, ContainerCreate's `name` parameter; moby/moby api/swagger.yaml); an id (64 hex
# digits, or a prefix of one) fits the same pattern. Names are listed with a leading '/' (ContainerSummary.Names).
CONTAINER_NAME = re.compile(r"/?[a-zA-Z0-9][a-zA-Z0-9_.-]+")
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


class _DatabaseTarget(Strict):
    """What every database target has: its label, login, password source, workload and timeout."""

    name: str = Field(description="The `database` label of everything this target publishes.")
    user: str
    password_env: str | None = None
    password_file: Path | None = None
    workload: str | None = None
    timeout_seconds: float = Field(default=5.0, gt=0, le=300, description="Bounds the login and every query.")
    # 0 by default: the exporter cannot know the scrape interval, and an interval as long as it
    # would serve a lone Prometheus every other collection twice. At most 30: the recording rules
    # take rate() over 1m windows (alerts/lunlat.rules.yml), and rate() needs two samples in its
    # window (github.com/prometheus/prometheus, promql/functions.go `extrapolatedRate`) which,
    # when a collection is served again, must come from two collections to differ.
    min_interval_seconds: float = Field(
        default=0.0,
        ge=0,
        le=30,
        description="Serve the last collection again to scrapes within this many seconds of its start "
        "(0: every scrape queries).",
    )
    container: str | None = Field(
        default=None,
        description="The Docker container (name or id) the database runs in: its file paths are the "
        "container's, followed through its mounts to the host's (containers.py).",
    )

    @field_validator("container")
    @classmethod
    def _container_name(cls, value: str | None) -> str | None:
        if value is not None and not CONTAINER_NAME.fullmatch(value):
            raise ValueError(f"not a container name or id: {quote(value)}")
        return value

    def endpoint(self) -> tuple[str, int] | None:
        """(host, TCP port) the target connects to, when the config says it; None otherwise."""
        return None

    @model_validator(mode="after")
    def _password_source(self) -> _DatabaseTarget:
        _one_secret(self.password_env, self.password_file, "password", required=True)
        return self

    @property
    def password(self) -> Secret:
        secret = _one_secret(self.password_env, self.password_file, "password", required=True)
        assert secret is not None  # checked by _password_source
        return secret


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


class OracleTarget(_DatabaseTarget):
    """One Oracle database (a CDB root, a PDB or a non-CDB; RAC through its GV$ views)."""

    dsn: str = Field(description="Easy Connect (host:port/service, tcps://… for TLS) or a TNS alias.")
    wallet_location: Path | None = Field(
        default=None, description="Directory with ewallet.pem for TLS / mTLS (tcps:// DSNs)."
    )
    wallet_password_env: str | None = None
    wallet_password_file: Path | None = None
    config_dir: Path | None = Field(default=None, description="Directory of tnsnames.ora for TNS aliases.")

    _blank = field_validator("name", "dsn", "user")(_not_blank)

    @model_validator(mode="after")
    def _wallet_password_source(self) -> OracleTarget:
        _one_secret(self.wallet_password_env, self.wallet_password_file, "wallet_password", required=False)
        return self

    @property
    def wallet_password(self) -> Secret | None:
        return _one_secret(self.wallet_password_env, self.wallet_password_file, "wallet_password", False)

    def endpoint(self) -> tuple[str, int] | None:
        """Host and port of an Easy Connect dsn ([tcp[s]://][//]host[:port][/service][?…], port 1521 by
        default); None for a TNS alias (its address is in tnsnames.ora, not read here)."""
        return easy_connect_endpoint(self.dsn)


class MssqlTarget(_DatabaseTarget):
    """One SQL Server instance (every database it hosts; Always On secondaries included)."""

    server: str = Field(description="host, host,port or host\\instance, as in an ODBC connection string.")
    driver: str = Field(
        default="ODBC Driver 18 for SQL Server",
        description="The ODBC driver name as odbcinst knows it ('FreeTDS' where Microsoft's is not installed).",
    )
    encrypt: bool = True
    trust_server_certificate: bool = False
    database: str | None = Field(
        default=None,
        description="The database the login opens (ODBC DATABASE=); Azure SQL Database: the one database read.",
    )

    @field_validator("name", "server", "user", "driver", "database")
    @classmethod
    def _odbc_value(cls, value: str | None) -> str | None:
        # These go into an ODBC connection string, where ; and braces delimit attributes.
        if value is None:
            return None
        if any(c in value for c in ";{}"):
            raise ValueError("must not contain ';', '{' or '}'")
        return _not_blank(value)

    def endpoint(self) -> tuple[str, int] | None:
        """Host and port of `server` (host or host,port; 1433 by default); None for host\\instance,
        whose port SQL Server Browser assigns at run time."""
        host, comma, port = self.server.partition(",")
        host = host.strip().removeprefix("tcp:")
        if "\\" in host:
            return None
        if not comma:
            return host, MSSQL_DEFAULT_PORT
        return (host, int(port)) if port.strip().isdigit() else None


# The default ports: SQL Server's TCP 1433, Oracle Net's listener 1521 (Easy Connect's default port).
MSSQL_DEFAULT_PORT = 1433
ORACLE_DEFAULT_PORT = 1521
_EASY_CONNECT = re.compile(
    r"(?:tcps?://)?(?://)?(?P<host>\[[^\]]+\]|[^:/?\s]+)(?::(?P<port>\d+))?(?P<rest>[/?].*)?", re.IGNORECASE
)


def easy_connect_endpoint(dsn: str) -> tuple[str, int] | None:
    """(host, port) of an Easy Connect string; None for a TNS alias or a full descriptor."""
    text = dsn.strip()
    if text.startswith("("):
        return None  # (DESCRIPTION=…): an address list, not one host
    found = _EASY_CONNECT.fullmatch(text)
    if found is None:
        return None
    # A bare word (no port, no service, no scheme) is a TNS alias, as python-oracledb reads it.
    if found.group("port") is None and found.group("rest") is None and "://" not in text:
        return None
    port = int(found.group("port")) if found.group("port") else ORACLE_DEFAULT_PORT
    return found.group("host").strip("[]"), port


class Config(Strict):
    diskstats: DiskstatsConfig = DiskstatsConfig()
    biolatency: BiolatencyConfig = BiolatencyConfig()
    luns: list[LunEntry] = Field(default_factory=list)
    oracle: list[OracleTarget] = Field(default_factory=list)
    mssql: list[MssqlTarget] = Field(default_factory=list)
    docker: DockerConfig | None = Field(
        default=None,
        description="The Docker engine; given, a target without `container:` whose host is a loopback "
        "address is looked up by the TCP port a running container publishes.",
    )

    @model_validator(mode="after")
    def _unique_databases(self) -> Config:
        first: dict[str, tuple[str, int]] = {}
        for kind, targets in (("oracle", self.oracle), ("mssql", self.mssql)):
            for i, target in enumerate(targets):
                if target.name in first:
                    raise LocatedError(
                        f"database name {quote(target.name)} is used twice: names must be unique",
                        (kind, i, "name"),
                        (*first[target.name], "name"),
                    )
                first[target.name] = (kind, i)
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
        targets: list[tuple[str, list[OracleTarget] | list[MssqlTarget]]] = [
            ("oracle", self.oracle),
            ("mssql", self.mssql),
        ]
        for kind, group in targets:
            for i, target in enumerate(group):
                secrets = [("password", target.password)]
                if isinstance(target, OracleTarget) and target.wallet_password is not None:
                    secrets.append(("wallet_password", target.wallet_password))
                for what, secret in secrets:
                    key = f"{what}_env" if secret.env is not None else f"{what}_file"
                    try:
                        value = secret.read()
                    except ValueError as exc:
                        problems.append(((kind, i, key), str(exc)))
                        continue
                    if not value:  # no database takes an empty password: the login would only fail
                        where = (
                            f"environment variable {secret.env}"
                            if secret.env is not None
                            else str(secret.file)
                        )
                        problems.append(((kind, i, key), f"{where} is empty"))
        return problems

    def driver_problems(self) -> list[tuple[tuple[int | str, ...], str]]:
        """What `serve` could not use for a target on this host: the engine's driver (the extra) not
        installed, an ODBC driver name unixODBC does not know. Imports the drivers: check-config only."""
        problems: list[tuple[tuple[int | str, ...], str]] = []
        if self.oracle and not _importable("oracledb"):
            problems += [
                (("oracle", i), "python-oracledb is not installed: pip install 'lunlat[oracle]'")
                for i in range(len(self.oracle))
            ]
        if not self.mssql:
            return problems
        if not _importable("pyodbc"):
            return problems + [
                (("mssql", i), "pyodbc is not installed: pip install 'lunlat[mssql]' (and an ODBC driver)")
                for i in range(len(self.mssql))
            ]
        import pyodbc  # noqa: PLC0415 - the mssql extra; imported only when targets need it

        # pyodbc.drivers() lists what the driver manager's SQLDrivers returns (mkleehammer/pyodbc
        # src/pyodbcmodule.cpp mod_drivers), i.e. the names unixODBC has registered in odbcinst.ini:
        # the names a connection string's DRIVER= can take.
        known = list(pyodbc.drivers())
        for i, target in enumerate(self.mssql):
            if target.driver not in known:
                listed = ", ".join(repr(name) for name in known) or "none"
                problems.append(
                    (
                        ("mssql", i, "driver"),
                        f"{target.driver!r} is not registered with unixODBC (odbcinst -q -d lists: {listed}): "
                        "install that driver, or name one of these",
                    )
                )
        return problems


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def parse_config(text: str, source: str = "<config>", check_secrets: bool = False) -> Config:
    """`check_secrets` also refuses password sources that cannot be read now (check-config)."""
    return parse_model(text, source, Config, _explain_extra, _secret_check if check_secrets else None)


def _secret_check(config: Config) -> list[tuple[tuple[int | str, ...], str]]:
    """What check-config refuses beyond the file itself: what `serve` would refuse or could not serve."""
    return config.secret_problems() + config.driver_problems()


def _explain_extra(loc: tuple[int | str, ...]) -> str:
    if len(loc) == 3 and loc[0] in ("oracle", "mssql") and loc[2] == "password":
        return "passwords are never inline: use password_env or password_file"
    return "unknown key"


def load_config(path: Path | None, check_secrets: bool = False) -> Config:
    """The config in `path`, or the embedded default when no path is given. `check_secrets` also
    refuses password sources that cannot be read now (check-config)."""
    if path is None:
        return Config()
    return load_model(
        path, Config, _explain_extra, _secret_check if check_secrets else None, max_bytes=CONFIG_MAX_BYTES
    )
