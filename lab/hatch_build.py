"""The lab's build hook: compiles the native FUSE daemon (native/labd.c) into the wheel.

Hatchling runs a custom hook (this file, `[tool.hatch.build.targets.wheel.hooks.custom]`) for every
version of the targets it is configured for, `standard` and `editable` alike
(https://hatch.pypa.io/latest/plugins/build-hook/reference/ "Build hooks run for every selected
version of build targets"; https://hatch.pypa.io/latest/plugins/builder/wheel/ "Versions"). So the
daemon is compiled when the lab is installed, never when it runs:

- standard wheel: compiled into a temporary directory and shipped as lunlat_lab/native/lunlat-labd
  (`force_include`), the wheel tagged for this platform (`infer_tag`, `pure_python` False: build
  data of the wheel builder, same page);
- editable install: the package is imported from src/, so the binary is compiled next to it
  (src/lunlat_lab/native/lunlat-labd, git-ignored), where the lab looks for it.

Without a C compiler, pkg-config or libfuse 3's headers the build stops, naming the Debian packages.
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

BINARY = "src/lunlat_lab/native/lunlat-labd"  # lunlat_lab.native.BINARY_NAME


def _labd_build(root: str) -> ModuleType:
    """native/labd_build.py, by path: pip's isolated build environment cannot import the lab."""
    path = Path(root) / "native" / "labd_build.py"
    spec = importlib.util.spec_from_file_location("labd_build", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and friends look the module up by name
    spec.loader.exec_module(module)
    return module


class LabdBuildHook(BuildHookInterface):  # type: ignore[type-arg]  # generic over its builder config
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        labd = _labd_build(self.root)
        try:
            if version == "editable":
                labd.build(Path(self.root) / BINARY)
                return
            self._tmp = tempfile.mkdtemp(prefix="lunlat-labd-")
            built = labd.build(Path(self._tmp) / Path(BINARY).name)
        except labd.BuildError as exc:
            # One line, last in pip's output: what to install.
            raise SystemExit(f"lunlat-lab: {exc}") from None
        build_data["force_include"][str(built)] = "lunlat_lab/native/" + Path(BINARY).name
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
