"""Give large freed blocks back to the system at once (glibc only).

A scrape of a large host builds a few body-sized blocks (the text, its bytes, the gzip: ~13 MB each
with show-paths on the 10,000-device host of bench/) and frees them. glibc serves blocks above
M_MMAP_THRESHOLD with mmap, returned to the system on free, but by default it raises that threshold
to the size of each mmap'ed block freed, so from the second scrape on such blocks come from the heap
and stay in the resident set: +35 MiB measured there. Setting the threshold fixes it and disables
the raising ("If the parameter is set, the dynamic adjustment is disabled and the value is set
statically to the input value": glibc manual, Memory Allocation, Malloc Tunable Parameters;
M_MMAP_THRESHOLD is -3 in glibc malloc/malloc.h). 128 KiB is glibc's own default.
"""

from __future__ import annotations

import ctypes
import platform

M_MMAP_THRESHOLD = -3  # glibc malloc/malloc.h
THRESHOLD = 128 * 1024  # glibc's default (manual, as above), kept fixed


def fix_mmap_threshold() -> bool:
    """Set glibc's mmap threshold to its default, statically; False where the libc is not glibc
    (musl has no such raising, and another libc's mallopt may read -3 as something else)."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, THRESHOLD))
    except (OSError, AttributeError):
        return False
