"""`docker-compose config` of the repository's compose file, parsed, for the tests that check it
(tests/deploy/test_compose.py, tests/oracle/test_deploy.py): one invocation per profile set, cached.

Grafana's admin password comes from an env file the user creates (git-ignored) and compose refuses
to read a missing one, so validation points LUNLAT_GRAFANA_ENV at the committed template.
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GRAFANA_ENV = ROOT / "deploy" / "grafana" / "grafana.env.example"


def compose_config(
    *profiles: str, env: dict[str, str] | None = None, file: Path | None = None
) -> dict[str, Any]:
    """`docker-compose config` of these profiles (after `config -q` passed), parsed; skips the test
    where docker-compose is not installed."""
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (CI installs it with apt-get)")
    compose_file = file or ROOT / "docker-compose.yml"
    return copy.deepcopy(_config(tool, compose_file, profiles, tuple(sorted((env or {}).items()))))


@functools.cache
def _config(
    tool: str, file: Path, profiles: tuple[str, ...], env: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("LUNLAT_", "COMPOSE_"))}
    environment["LUNLAT_GRAFANA_ENV"] = str(GRAFANA_ENV)
    environment.update(env)
    argv = [tool, "-f", str(file), *(a for p in profiles for a in ("--profile", p))]
    for args in (["config", "-q"], ["config"]):
        done = subprocess.run(
            [*argv, *args], capture_output=True, text=True, env=environment, check=False, cwd=ROOT, timeout=60
        )
        assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = yaml.safe_load(done.stdout)
    return loaded


@dataclass(frozen=True, slots=True)
class Mount:
    source: str
    target: str
    read_only: bool


def mounts(service: dict[str, Any]) -> Iterator[Mount]:
    """Volumes in either form `config` prints: short "src:dst[:mode]" (v1) or long (v2)."""
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target, *mode = volume.split(":")
            yield Mount(source, target, "ro" in "".join(mode).split(","))
        else:
            yield Mount(str(volume.get("source", "")), volume["target"], bool(volume.get("read_only")))


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path → host path of a service's bind mounts (`config` prints them absolute)."""
    return {m.target: Path(m.source) for m in mounts(service) if m.source.startswith("/")}
