"""memtune: glibc's mmap threshold fixed, so a freed body-sized block leaves the resident set."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import sys
from lunlat import memtune
fixed = memtune.fix_mmap_threshold() if sys.argv[1] == "fixed" else False
def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
# Two rounds of a freed 16 MiB block (below glibc's 32 MiB cap on the raised threshold): without the fix glibc raises its threshold after the first,
# and the second comes from the heap and stays resident.
for _ in range(2):
    block = bytearray(16 << 20)
    block[::4096] = b"x" * len(block[::4096])
    del block
    small = [bytes(200_000) for _ in range(3)]  # a heap allocation above the freed block
print(fixed, rss_kib())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_a_freed_large_block_leaves_the_resident_set() -> None:
    def run(mode: str) -> tuple[str, int]:
        out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
        fixed, rss = out.stdout.split()
        return fixed, int(rss)

    fixed, rss_fixed = run("fixed")
    assert fixed == "True"
    _, rss_default = run("default")
    assert rss_default - rss_fixed > 8 << 10  # KiB: the second 16 MiB block stayed without the fix
