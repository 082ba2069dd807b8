"""What every database target of the config has, whatever its engine: its label, login, password
source, workload, timeouts and container. Each engine's `config` module subclasses `DatabaseTarget`."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from lunlat.files import FileRefusedError, KiB, read_regular
from lunlat.yamlmodel import Strict, quote

# A password file holds one password: Oracle 19c takes at most 30 bytes ("Minimum Requirements for
# Passwords", docs.oracle.com, Database Security Guide 19c), 23ai up to 1024; SQL Server 128
# characters (MicrosoftDocs/sql-docs docs/relational-databases/security/password-policy.md).
SECRET_MAX_BYTES = 64 * KiB
FILE_MAP_MAX_AGE_DEFAULT = 3600.0


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


def one_secret(env: str | None, file: Path | None, what: str, required: bool) -> Secret | None:
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


class DatabaseTarget(Strict):
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
    # How long the last file map may label the series when the source cannot read it again (issue 43):
    # long enough to ride out a grants script re-run, a role recreated or a session lost; short enough
    # that files moved while the map could not be read do not keep a wrong `lun` for long. At least a
    # minute: a lookup refused for a missing grant is asked again after 60 s (dbsession.QueryGates);
    # it must also exceed --collector.topology.refresh-interval, how often a healthy map is re-read
    # (checked when the sources are built, engines/build.py per_target).
    file_map_max_age_seconds: float = Field(
        default=FILE_MAP_MAX_AGE_DEFAULT,
        ge=60,
        le=7 * 86400,
        description="How long the last file map the database answered keeps labelling its series (`file`, "
        "`lun`) and its LUNs' roles when the source cannot read it again (a missing grant, a lost session); "
        "an older map is dropped. 60 s to 7 days, and longer than --collector.topology.refresh-interval.",
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
    def _password_source(self) -> DatabaseTarget:
        one_secret(self.password_env, self.password_file, "password", required=True)
        return self

    def secrets(self) -> list[tuple[str, Secret]]:
        """Every secret the target reads, by the key prefix that names it (`password` …)."""
        return [("password", self.password)]

    @property
    def password(self) -> Secret:
        secret = one_secret(self.password_env, self.password_file, "password", required=True)
        assert secret is not None  # checked by _password_source
        return secret


def not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value
