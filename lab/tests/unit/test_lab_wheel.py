"""The lab's wheel: its package with the native daemon compiled by the build hook (lab/hatch_build.py),
the lab description as package data, no C source to compile at run time."""

from __future__ import annotations

import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_built_daemon_and_the_description(tmp_path: Path) -> None:
    if subprocess.run(["pkg-config", "--exists", "fuse3"], check=False).returncode != 0:
        pytest.skip("no libfuse 3 headers here (Debian: libfuse3-dev): the lab's build needs them")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run([*pip_wheel, "--wheel-dir", str(tmp_path), str(LAB)], check=True)
    [wheel] = tmp_path.glob("lunlat_lab-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert {"lunlat_lab/cli.py", "lunlat_lab/lab.yaml", "lunlat_lab/native/__init__.py"} <= set(names)
    daemon = archive.getinfo("lunlat_lab/native/lunlat-labd")
    mode = daemon.external_attr >> 16
    assert mode & stat.S_IXUSR and archive.read(daemon)[:4] == b"\x7fELF"
    assert [n for n in names if n.endswith(".c")] == []
    assert not wheel.name.endswith("-none-any.whl")  # a binary inside: tagged for this platform
