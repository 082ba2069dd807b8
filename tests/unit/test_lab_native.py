"""The native engine's Python side: the settings lines the C daemon reads, what building it needs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lunlat.lab import native
from lunlat.lab.engine import DEFAULT_ENGINE, ENGINES, parse_engine
from lunlat.lab.settings import ArraySetting, LunSetting, Settings


def test_settings_become_lines_with_stable_array_indexes_and_encoded_names() -> None:
    settings = Settings(
        luns={"a": LunSetting("fast", 0.15, 0.2, 0.3), "b c": LunSetting("slow", 2.0, 0.0, 0.0)},
        arrays={"slow": ArraySetting(1, 50.0), "fast": ArraySetting(64, 100_000.0)},
        overhead_ms={"read": 0.05, "write": 0.06},
    )
    arrays: dict[str, int] = {}
    assert native.encode(settings, arrays).splitlines() == [
        "overhead 0.05 0.06 0.0 0.0",
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
    assert lines[1:4] == ["array 2 2 10.0", "array 0 1 50.0", "array 1 64 100000.0"]
    assert arrays == {"slow": 0, "fast": 1, "new": 2}


def test_one_home_for_the_engine_names() -> None:
    assert DEFAULT_ENGINE in ENGINES
    assert [parse_engine(name) for name in ENGINES] == list(ENGINES)
    with pytest.raises(ValueError, match="unknown engine 'rust'; the lab has: native, python"):
        parse_engine("rust")


def _tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_missing_debian_packages_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(native, "_FUSE_HEADER", tmp_path / "absent.h")
    assert native.missing_packages() == ["gcc", "pkg-config", "libfuse3-dev"]
    _tool(tmp_path, "cc", "exit 0")
    _tool(tmp_path, "pkg-config", "exit 1")  # knows no fuse3
    assert native.missing_packages() == ["libfuse3-dev"]
    with pytest.raises(native.BuildError) as caught:
        native.build()
    message = str(caught.value)
    assert "\n" not in message
    assert "install the Debian packages gcc libfuse3-dev pkg-config (missing: libfuse3-dev)" in message
    _tool(tmp_path, "pkg-config", "exit 0")
    assert native.missing_packages() == []


def test_the_binary_is_named_by_the_source_and_the_build_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    one = native.binary_path(["-lfuse3"])
    assert one.parent == tmp_path / "lunlat" and one.name.startswith(native.BINARY_PREFIX)
    assert native.binary_path(["-lfuse3"]) == one
    assert native.binary_path(["-lfuse3", "-lpthread"]) != one
    source = tmp_path / "labd.c"
    source.write_bytes(native.SOURCE.read_bytes() + b"\n")
    monkeypatch.setattr(native, "SOURCE", source)
    assert native.binary_path(["-lfuse3"]) != one


@pytest.mark.skipif(bool(native.missing_packages()), reason="no C compiler or libfuse 3 headers here")
def test_build_compiles_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    binary = native.build()
    assert binary.is_file() and os.access(binary, os.X_OK)
    built = binary.stat().st_mtime_ns
    assert native.build() == binary and binary.stat().st_mtime_ns == built
    assert [p.name for p in binary.parent.iterdir()] == [binary.name]  # no temporary file left
