"""docker-compose.yml: valid with and without each profile, images pinned, mounted files present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lunlat.config import load_config

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ((), ("oracle",), ("mssql",), ("oracle", "mssql"))


def compose_config(*profiles: str) -> dict[str, Any]:
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (CI installs it with apt-get)")
    argv = [
        tool,
        "-f",
        str(ROOT / "docker-compose.yml"),
        *(a for p in profiles for a in ("--profile", p)),
        "config",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = yaml.safe_load(done.stdout)
    return loaded


@pytest.mark.parametrize("profiles", PROFILES)
def test_every_profile_is_valid_and_pins_its_images(profiles: tuple[str, ...]) -> None:
    services = compose_config(*profiles)["services"]
    assert set(profiles) <= set(services)
    for name, service in services.items():
        image = service.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned to a version"


def test_the_oracle_profile_mounts_files_that_exist_and_configs_that_load() -> None:
    services = compose_config("oracle")["services"]
    for service in ("exporter", "oracle"):
        for volume in services[service].get("volumes", []):
            source = volume.split(":", 1)[0]  # `config` prints short syntax, bind sources absolute
            if source.startswith(str(ROOT)):
                assert Path(source).exists(), f"{service} mounts {source}, which the repository lacks"
    oracle = load_config(ROOT / "deploy" / "oracle" / "lunlat.yaml").oracle
    assert [t.dsn for t in oracle] == ["oracle:1521/FREEPDB1"]
    assert load_config(ROOT / "deploy" / "lunlat" / "host.yaml").oracle == []
    # The setup script itself is tested in tests/oracle/test_deploy.py.


def test_the_mssql_profile_mounts_files_that_exist_and_its_config_loads() -> None:
    services = compose_config("mssql")["services"]
    for service in ("mssql", "mssql-setup"):
        for volume in services[service].get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith(str(ROOT)):
                assert Path(source).exists(), f"{service} mounts {source}, which the repository lacks"
    (target,) = load_config(ROOT / "deploy" / "mssql" / "lunlat.yaml").mssql
    assert (target.server, target.driver) == ("mssql,1433", "FreeTDS")  # the driver the image carries
    assert "tdsodbc" in (ROOT / "exporter" / "Dockerfile").read_text()
    setup = (ROOT / "deploy" / "mssql" / "setup.sh").read_text()
    assert "/opt/lunlat/grants.sql" in setup and "mssql_lunlat_password" in setup
