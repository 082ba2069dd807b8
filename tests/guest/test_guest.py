"""Debian's kernels under qemu: each boots, runs the host's Python from the host's root, has BTF, and
counts a loop device's reads under fio as fio does (/proc/diskstats)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.guest import guest

pytestmark = pytest.mark.guest

PROBE = Path(__file__).with_name("probe.py")
# A whole run (boot, modules, fio for 3 s, power-off) took 15 s a kernel under TCG on a 2-core host.
TIMEOUT = 300.0


def _kernel_or_skip(name: str) -> guest.Kernel:
    """The kernel; a machine that cannot have it skips, saying why, except in CI, where it fails (the
    guests must run there; the rule of tests/postgres/test_matrix.py)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices in the guest, the host's whole root shared to it)")
    try:
        return guest.kernel(name)
    except guest.GuestUnavailable as unavailable:
        if os.environ.get("CI"):
            pytest.fail(str(unavailable))
        pytest.skip(str(unavailable))


@pytest.mark.parametrize("name", sorted(guest.KERNELS))
def test_loop_device_reads_counted_in_guest(name: str, tmp_path: Path) -> None:
    kernel = _kernel_or_skip(name)
    result_file = tmp_path / "probe.json"
    result = guest.run(
        kernel, [sys.executable, str(PROBE), str(result_file)], timeout=TIMEOUT, outdir=tmp_path
    )
    assert result.returncode == 0, (
        f"the probe failed in the guest:\n{result.output}\n{result.console[-3000:]}"
    )
    probe = json.loads(result_file.read_text())
    assert probe["release"] == kernel.release
    assert probe["release"].startswith(guest.KERNELS[name].abi)
    assert probe["btf"], f"{kernel.release} has no /sys/kernel/btf/vmlinux"
    assert probe["fio_read_ios"] > 0
    assert probe["diskstats_reads"] >= probe["fio_read_ios"], probe
