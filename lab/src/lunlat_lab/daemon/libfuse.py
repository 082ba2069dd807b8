"""Mounting through mfusepy on libfuse 3, whatever else the host has installed.

mfusepy picks its library when it is imported: the file named by the environment variable
FUSE_LIBRARY_PATH (handed to ctypes.CDLL unchecked), else `find_library('fuse')` (libfuse 2)
before `find_library('fuse3')` (github:mxmlnkn/mfusepy, mfusepy.py, where it sets
`_libfuse_path`). On a host that also has libfuse2 (AppImages need it) it would load libfuse 2,
which refuses the libfuse 3 option `max_threads` the daemon mounts with (`fuse: unknown option
'max_threads=128'`). So the daemon loads libfuse 3 by its soname and hands mfusepy that path.
"""

from __future__ import annotations

import ctypes
import os
from types import ModuleType

# The soname of libfuse 3 (Debian and Ubuntu: package libfuse3-3, pulled in by fuse3); dlopen finds
# it the way the dynamic linker does, LD_LIBRARY_PATH included.
LIBFUSE3 = "libfuse3.so.3"


class LibfuseError(Exception):
    """libfuse 3 cannot be loaded, or mfusepy runs on another libfuse; the message says which."""


def require_libfuse3() -> None:
    """Refuse clearly, in one line, when libfuse 3 cannot be loaded."""
    try:
        ctypes.CDLL(LIBFUSE3)
    except OSError as exc:
        raise LibfuseError(
            f"libfuse 3 is not installed ({LIBFUSE3}: {exc}); install the Debian package fuse3"
        ) from None


def mfusepy_on_libfuse3() -> ModuleType:
    """mfusepy, imported on libfuse 3 (LibfuseError otherwise)."""
    require_libfuse3()
    os.environ["FUSE_LIBRARY_PATH"] = LIBFUSE3  # read by mfusepy when it is first imported
    import mfusepy  # type: ignore[import-untyped]  # noqa: PLC0415 - loads libfuse: only when mounting

    # mfusepy states the version of the library it loaded (fuse_version_major, from fuse_version()).
    if mfusepy.fuse_version_major != 3:
        raise LibfuseError(
            f"mfusepy was already loaded on libfuse {mfusepy.fuse_version_major}, not {LIBFUSE3}"
        )
    module: ModuleType = mfusepy
    return module
