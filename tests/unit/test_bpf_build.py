"""The BPF object's build (exporter/bpf_build.py) and the libbpf binding that opens it, without
loading anything into the kernel: what a build host lacks is named in one line, and the object built
has the programs and maps the source expects, of the sizes it reads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from lunlat.sources import biolatency
from lunlat.sources.bpf import libbpf

ROOT = Path(__file__).resolve().parents[2]


def _bpf_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bpf_build", ROOT / "exporter" / "bpf_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bpf_build = _bpf_build()


def test_a_host_without_the_tools_is_told_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(bpf_build, "_SBIN", ())
    monkeypatch.setattr(bpf_build, "_LIBBPF_HEADER", tmp_path / "bpf_helpers.h")
    assert bpf_build.missing() == ["clang 15 or later", "bpftool", "libbpf's headers (libbpf-dev)"]
    with pytest.raises(bpf_build.BuildError) as err:
        bpf_build.build(tmp_path / "x.o")
    text = str(err.value)
    assert "clang-16 llvm-16 bpftool libbpf-dev" in text and "LUNLAT_BPF=skip" in text
    assert "\n" not in text


def test_lunlat_bpf_takes_three_words(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, mode in (("", "auto"), ("Require", "require"), ("skip", "skip")):
        monkeypatch.setenv("LUNLAT_BPF", value)
        assert bpf_build.mode() == mode
    monkeypatch.setenv("LUNLAT_BPF", "yes")
    with pytest.raises(bpf_build.BuildError, match=r"use auto .* require or skip"):
        bpf_build.mode()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if bpf_build.missing():
        pytest.skip(f"cannot build the BPF object here: missing {', '.join(bpf_build.missing())}")
    return bpf_build.build(tmp_path_factory.mktemp("bpf") / "biolatency.bpf.o")  # type: ignore[no-any-return]


def test_the_object_has_what_the_source_loads(built: Path) -> None:
    assert built.stat().st_mode & 0o444 == 0o444  # lunlat's own user reads it
    obj = libbpf.BpfObject(built)
    try:
        for program in (biolatency.DONE, biolatency.COMPLETE, biolatency.ISSUE):
            obj.set_autoload(program, True)
        assert obj.value_size("io") == biolatency.VALUE_SIZE
        assert (
            obj.value_size("sizes") == biolatency.ISSUED_VALUE.size
            and obj.value_size("devices") == biolatency.DEVICE_VALUE.size
        )
        assert obj.value_size("problems") == 8
        with pytest.raises(OSError, match="no program lunlat_nothing"):
            obj.set_autoload("lunlat_nothing", True)
    finally:
        obj.close()
        obj.close()  # idempotent


def test_a_file_that_is_no_bpf_object_is_named(tmp_path: Path) -> None:
    bogus = tmp_path / "biolatency.bpf.o"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(libbpf.LibbpfError) as err:
        libbpf.BpfObject(bogus)
    assert str(bogus) in str(err.value)


def test_a_lunlat_built_without_the_object_says_how_to_get_it(tmp_path: Path) -> None:
    cause = biolatency.unavailable_cause(euid=0, btf=tmp_path, bpf_object=tmp_path / "missing.o")
    assert cause is not None and "built without its BPF object" in cause and "clang 15+" in cause
