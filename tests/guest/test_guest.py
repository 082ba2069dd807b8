"""Debian's kernels under qemu: each boots, runs the host's Python from the host's root, has BTF, and
counts a loop device's reads under fio as fio does (/proc/diskstats)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.guest import guest

pytestmark = pytest.mark.guest

PROBE = Path(__file__).with_name("probe.py")
# A whole run (boot, modules, fio for 3 s, power-off) took 12 to 25 s a kernel under TCG on a 2-core host.
TIMEOUT = 300.0


@pytest.mark.parametrize("name", sorted(guest.KERNELS))
def test_loop_device_reads_counted_in_guest(name: str, tmp_path: Path) -> None:
    kernel = guest.kernel_or_skip(name)
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
    assert probe["loopback"], "no TCP over 127.0.0.1 in the guest"
    assert probe["fio_read_ios"] > 0
    assert probe["diskstats_reads"] >= probe["fio_read_ios"], probe


def test_exit_code_output_environment_and_directory_come_back(tmp_path: Path) -> None:
    kernel = guest.kernel_or_skip("debian12")
    script = 'echo "$GREETING from $(pwd)"; echo to-stderr >&2; env | sort > "$OUT/env"; exit 7'
    result = guest.run(
        kernel,
        ["/bin/sh", "-c", script],
        timeout=TIMEOUT,
        env={"GREETING": "hello", "OUT": str(tmp_path), "PATH": guest.PATH},
        cwd="/usr/share",
        outdir=tmp_path,
    )
    assert result.returncode == 7, result.console[-3000:]
    assert result.output.splitlines() == ["hello from /usr/share", "to-stderr"]
    assert (tmp_path / "env").read_text().splitlines() == [
        "GREETING=hello",
        f"OUT={tmp_path}",
        f"PATH={guest.PATH}",
        "PWD=/usr/share",
    ]
    assert 0 < result.boot_seconds < result.seconds
    assert f"Linux version {kernel.release}" in result.console


def test_a_command_past_the_timeout_is_an_error_with_the_console() -> None:
    kernel = guest.kernel_or_skip("debian11")
    with pytest.raises(guest.GuestError, match="did not power off within 12 s") as raised:
        guest.run(kernel, ["sleep", "600"], timeout=12)
    assert "console tail:" in str(raised.value)
