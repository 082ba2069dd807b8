"""The native engine: the settings lines the C daemon reads; how it is built (native/labd_build.py,
run by the build hook) and found (next to the package, never compiled at `up`)."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

from lunlat import contract
from lunlat_lab import native
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, ENGINES, parse_engine
from lunlat_lab.settings import ArraySetting, LunSetting, Settings


def test_settings_become_lines_with_stable_array_indexes_and_encoded_names() -> None:
    settings = Settings(
        luns={"a": LunSetting("fast", 0.15, 0.2, 0.3), "b c": LunSetting("slow", 2.0, 0.0, 0.0)},
        arrays={"slow": ArraySetting(1, 50.0), "fast": ArraySetting(64, 100_000.0)},
        overhead_ms={"read": 0.05, "write": 0.06},
    )
    arrays: dict[str, int] = {}
    assert native.encode(settings, arrays).splitlines() == [
        "overhead 0.05 0.06 0.0 0.0",
        f"sizes {contract.BIO_SMALL_MAX} {contract.BIO_LARGE_MIN}",  # the exporter's size classes
        "array 0 1 50.0",
        "array 1 64 100000.0",
        "lun 1 0.15 0.2 0.3 a",
        "lun 0 2.0 0.0 0.0 b%20c",
        "end",
    ]
    # An index is the array's for the daemon's life: a later version listing them otherwise keeps them.
    reordered = Settings(
        settings.luns, {"new": ArraySetting(2, 10.0), **settings.arrays}, settings.overhead_ms
    )
    lines = native.encode(reordered, arrays).splitlines()
    assert lines[2:5] == ["array 2 2 10.0", "array 0 1 50.0", "array 1 64 100000.0"]
    assert arrays == {"slow": 0, "fast": 1, "new": 2}


def test_one_home_for_the_engine_names() -> None:
    assert DEFAULT_ENGINE in ENGINES
    assert [parse_engine(name) for name in ENGINES] == list(ENGINES)
    with pytest.raises(ValueError, match="unknown engine 'rust'; the lab has: native, python"):
        parse_engine("rust")


def _labd_build() -> ModuleType:
    """lab/native/labd_build.py as the build hook loads it: by path (it is no module of the package)."""
    path = Path(__file__).resolve().parents[2] / "native" / "labd_build.py"
    spec = importlib.util.spec_from_file_location("labd_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


labd = _labd_build()


def _tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_missing_debian_packages_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(labd, "_FUSE_HEADER", tmp_path / "absent.h")
    assert labd.missing_packages() == ["gcc", "pkg-config", "libfuse3-dev"]
    _tool(tmp_path, "cc", "exit 0")
    _tool(tmp_path, "pkg-config", "exit 1")  # knows no fuse3
    assert labd.missing_packages() == ["libfuse3-dev"]
    with pytest.raises(labd.BuildError) as caught:
        labd.build(tmp_path / "lunlat-labd")
    message = str(caught.value)
    assert "\n" not in message
    assert "install the Debian packages gcc libfuse3-dev pkg-config (missing: libfuse3-dev)" in message
    assert not (tmp_path / "lunlat-labd").exists()
    _tool(tmp_path, "pkg-config", "exit 0")
    assert labd.missing_packages() == []


@pytest.mark.skipif(bool(labd.missing_packages()), reason="no C compiler or libfuse 3 headers here")
def test_build_compiles_the_daemon_whole_into_its_target(tmp_path: Path) -> None:
    target = tmp_path / "native" / "lunlat-labd"
    assert labd.build(target) == target
    assert target.is_file() and os.access(target, os.X_OK)
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary file left


def test_the_lab_finds_the_daemon_next_to_its_package_or_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert native.BINARY.parent == Path(native.__file__).parent
    monkeypatch.setattr(native, "BINARY", tmp_path / native.BINARY_NAME)
    with pytest.raises(native.BuildError) as caught:
        native.binary()
    message = str(caught.value)
    assert "\n" not in message and "reinstall lunlat-lab" in message and "--engine python" in message
    assert "gcc libfuse3-dev pkg-config" in message
    (tmp_path / native.BINARY_NAME).write_bytes(b"")
    assert native.binary() == tmp_path / native.BINARY_NAME
