"""The exporter's wheel is the exporter: nothing of the lab's, no rule or dashboard generator; the
mixin's wheels hold those, with the goals file they default to."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_exporters_wheel_holds_no_lab(tmp_path: Path) -> None:
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run([*pip_wheel, "--wheel-dir", str(tmp_path), str(ROOT / "exporter")], check=True)
    [wheel] = tmp_path.glob("lunlat-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "lunlat/cli.py" in names  # the exporter is there
    assert "lunlat/reference.csv" in names  # its package data (`lunlat report --reference`, the lab)
    lab = [n for n in names if n.startswith(("lunlat/lab/", "lunlat_lab/")) or n.endswith((".c", "lab.yaml"))]
    assert lab == []
    mixin = [n for n in names if n.startswith(("lunlat/dashboards/", "lunlat/alerting/")) or "rules" in n]
    assert mixin == []
    # Nothing compiled for a platform: the BPF programs are bytecode for any kernel (bpf_build.py).
    assert wheel.name.endswith("-py3-none-any.whl")
    assert "lunlat/sources/bpf/biolatency.bpf.o" in names
    # The licence the metadata names travels with the wheel: exporter/LICENSE is a copy of the
    # repository's (a copy, not a link: an image built with exporter/ as its context sees no parent).
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_exporters_licence_is_the_repositorys() -> None:
    exporter_copy = ROOT / "exporter" / "LICENSE"
    assert not exporter_copy.is_symlink()
    assert exporter_copy.read_bytes() == (ROOT / "LICENSE").read_bytes()


def _wheel(folder: str, tmp_path: Path) -> list[str]:
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip_wheel, "--wheel-dir", str(tmp_path), str(ROOT / folder)], check=True)
    [wheel] = tmp_path.glob("*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_rules_wheel_ships_the_goals_file(tmp_path: Path) -> None:
    names = _wheel("alerts", tmp_path)
    assert "lunlat_rules/rules.py" in names and "lunlat_rules/cli.py" in names
    with zipfile.ZipFile(next(tmp_path.glob("*.whl"))) as wheel:
        assert wheel.read("lunlat_rules/goals.yaml") == (ROOT / "alerts" / "goals.yaml").read_bytes()


def test_the_dashboards_wheel_holds_the_generator(tmp_path: Path) -> None:
    names = _wheel("dashboards", tmp_path)
    assert "lunlat_dashboards/cli.py" in names and "lunlat_dashboards/panels.py" in names
    assert not [n for n in names if n.endswith(".json")]  # the generated boards stay in the repository
