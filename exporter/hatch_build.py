"""The exporter's build hook: compiles the biolatency source's BPF object (bpf_build.py) into the wheel.

Hatchling runs a custom hook (this file, `[tool.hatch.build.targets.wheel.hooks.custom]`) for every
version of the targets it is configured for, `standard` and `editable` alike
(https://hatch.pypa.io/latest/plugins/build-hook/reference/ "Build hooks run for every selected
version of build targets"). So the object is compiled when lunlat is installed, never when it runs:

- standard wheel: compiled into a temporary directory and shipped as
  lunlat/sources/bpf/biolatency.bpf.o (`force_include`, same page); the wheel stays pure Python,
  the object being BPF bytecode for any kernel (bpf_build.py says why);
- editable install: lunlat is imported from src/, so the object is compiled next to its source
  (src/lunlat/sources/bpf/biolatency.bpf.o, git-ignored), where the loader looks for it.

Without clang 15+, bpftool or libbpf's headers, LUNLAT_BPF (bpf_build.mode) decides: by default the
wheel is built without the object and one line says what to install.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

INSIDE = "lunlat/sources/bpf/biolatency.bpf.o"  # lunlat.sources.bpf.OBJECT


def _bpf_build(root: str) -> ModuleType:
    """bpf_build.py, by path: pip's isolated build environment cannot import lunlat."""
    path = Path(root) / "bpf_build.py"
    spec = importlib.util.spec_from_file_location("bpf_build", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and friends look the module up by name
    spec.loader.exec_module(module)
    return module


class BpfBuildHook(BuildHookInterface):  # type: ignore[type-arg]  # generic over its builder config
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        bpf = _bpf_build(self.root)
        try:
            mode = bpf.mode()
            if mode == "skip":
                return
            if mode == "auto" and bpf.missing():
                try:
                    bpf.require_buildable()
                except bpf.BuildError as exc:
                    print(f"lunlat: built without the biolatency BPF object: {exc}", file=sys.stderr)
                return
            if version == "editable":
                bpf.build(Path(self.root) / "src" / INSIDE)
                return
            self._tmp = tempfile.mkdtemp(prefix="lunlat-bpf-")
            built = bpf.build(Path(self._tmp) / Path(INSIDE).name)
        except bpf.BuildError as exc:
            # One line, last in pip's output: what to install.
            raise SystemExit(f"lunlat: {exc}") from None
        build_data["force_include"][str(built)] = INSIDE

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
