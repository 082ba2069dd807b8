"""The exporter's wheel is the exporter: no lab module, no C source, nothing of the lab's."""

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
    assert wheel.name.endswith("-py3-none-any.whl")  # nothing compiled
    # The licence the metadata names travels with the wheel: exporter/LICENSE is a copy of the
    # repository's (a copy, not a link: an image built with exporter/ as its context sees no parent).
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_exporters_licence_is_the_repositorys() -> None:
    exporter_copy = ROOT / "exporter" / "LICENSE"
    assert not exporter_copy.is_symlink()
    assert exporter_copy.read_bytes() == (ROOT / "LICENSE").read_bytes()
