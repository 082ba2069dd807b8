"""One tag for the exporter's image: deploy/image/build tags it lunlat:<version of
exporter/pyproject.toml>, and docker-compose.yml and the Kubernetes DaemonSet name that tag."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "deploy" / "image" / "build"
VERSION = tomllib.loads((ROOT / "exporter" / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "version"
]
TAG = f"lunlat:{VERSION}"


def test_compose_and_the_daemonset_name_the_tag_the_build_makes() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    assert compose["services"]["exporter"]["image"] == TAG
    daemonset = yaml.safe_load(
        (ROOT / "deploy" / "kubernetes" / "daemonset.yaml").read_text(encoding="utf-8")
    )
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["image"] == TAG
    # Built here or loaded into the node's runtime, never pulled when present (docs/deploy/kubernetes.md).
    assert container["imagePullPolicy"] == "IfNotPresent"


def _fake_tool(tmp_path: Path, name: str) -> Path:
    """A stand-in `name` on PATH that records its arguments, one per line, and succeeds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/{name}.args"\n', encoding="utf-8")
    tool.chmod(0o755)
    return bin_dir


def _build(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{_fake_tool(tmp_path, 'podman')}:{os.environ['PATH']}"}
    return subprocess.run(
        [str(BUILD), *args], capture_output=True, text=True, env=env, check=False, timeout=30
    )


def test_the_build_tags_the_version_and_keeps_the_healthcheck_under_podman(tmp_path: Path) -> None:
    done = _build(tmp_path, "--tool", "podman", "--base", "localhost/some-base:1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == TAG
    argv = (tmp_path / "podman.args").read_text(encoding="utf-8").splitlines()
    assert argv[:2] == ["build", "-f"] and argv[-1] == "exporter"
    for option, value in (("-t", TAG), ("--target", "exporter"), ("--format", "docker")):
        assert argv[argv.index(option) + 1] == value
    assert argv[argv.index("--build-arg") + 1] == "BASE=localhost/some-base:1"


def test_the_build_names_a_registry_and_keeps_the_official_base_by_default(tmp_path: Path) -> None:
    done = _build(tmp_path, "--tool", "podman", "--tag", "registry.example:5000/storage/lunlat")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"registry.example:5000/storage/lunlat:{VERSION}"
    assert "--build-arg" not in (tmp_path / "podman.args").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tag", "lunlat:dev"), "holds a version; give the name only"),
        (("--colour",), "unknown argument '--colour'"),
    ],
)
def test_the_build_refuses_bad_arguments_naming_the_fix(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = _build(tmp_path, "--tool", "podman", *args)
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "podman.args").exists()
