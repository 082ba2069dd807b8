"""How the lab's native FUSE daemon (labd.c) is built: what the host needs, the flags, the compile.

Standard library only: the build hook (lab/hatch_build.py) loads this file by path inside pip's
isolated build environment, where neither lunlat nor lunlat_lab is importable. labd.c is compiled
with the host's C compiler against libfuse 3 (pkg-config's `fuse3`, linked by soname, so a host that
also has libfuse2 still gets libfuse 3). What it needs, checked by `missing_packages()`: the Debian
packages gcc, pkg-config and libfuse3-dev.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("labd.c")
BUILD_PACKAGES = ("gcc", "libfuse3-dev", "pkg-config")  # Debian and Ubuntu
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")
_FUSE_HEADER = Path("/usr/include/fuse3/fuse_lowlevel.h")


class BuildError(Exception):
    """The native daemon cannot be built here; one line saying what to install."""


def missing_packages() -> list[str]:
    """The Debian packages missing to build the daemon (empty when it can be built)."""
    missing = []
    if shutil.which("cc") is None:
        missing.append("gcc")
    pkg_config = shutil.which("pkg-config")
    if pkg_config is None:
        missing.append("pkg-config")
        if not _FUSE_HEADER.exists():
            missing.append("libfuse3-dev")
    elif subprocess.run([pkg_config, "--exists", "fuse3"], check=False).returncode != 0:
        missing.append("libfuse3-dev")
    return missing


def require_buildable() -> None:
    """BuildError in one line naming the Debian packages to install, when the daemon cannot be built."""
    missing = missing_packages()
    if missing:
        raise BuildError(
            "building lunlat-lab compiles its native FUSE daemon (labd.c), which needs a C compiler and "
            f"libfuse 3's headers: install the Debian packages {' '.join(BUILD_PACKAGES)} "
            f"(missing: {', '.join(missing)}) and build again"
        )


def fuse_flags() -> list[str]:
    result = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise BuildError(f"pkg-config fuse3 failed: {result.stderr.strip() or result.returncode}")
    return result.stdout.split()


def build(target: Path, source: Path = SOURCE) -> Path:
    """Compile `source` into the executable `target` (replaced whole: a reader never sees half)."""
    require_buildable()
    flags = fuse_flags()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    os.close(fd)
    try:
        result = subprocess.run(
            ["cc", *CFLAGS, "-o", tmp, str(source), *flags, "-lm"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BuildError(f"cc {source.name} failed: {result.stderr.strip()[-2000:]}")
        Path(tmp).chmod(0o755)
        Path(tmp).replace(target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
