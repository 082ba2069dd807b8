"""Real kernel: a loop device, O_DIRECT I/O, and the exporter's counters against /proc/diskstats."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter_process import LUNLAT_PORT, ExporterProcess

pytestmark = pytest.mark.kernel

BLOCK = 4096
READS = 64
WRITES = 32


def _skip_reason() -> str | None:
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root to attach a loop device"
    if shutil.which("losetup") is None:
        return "losetup (util-linux) is not installed"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control: loop devices are not available"
    return None


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    with attached_loop(tmp_path / "lun.img", 64 << 20) as device:
        yield device


@contextmanager
def attached_loop(backing: Path, size: int) -> Iterator[str]:
    """A loop device on a new sparse file of `size` bytes (skips the test when losetup cannot
    attach one); detached whatever happens."""
    with backing.open("wb") as f:
        f.truncate(size)
    result = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        pytest.skip(f"losetup could not attach a loop device: {result.stderr.strip()}")
    device = result.stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


def raw_fields(name: str) -> list[int]:
    for line in Path("/proc/diskstats").read_text().splitlines():
        parts = line.split()
        if parts[2] == name:
            return [int(p) for p in parts[3:]]
    raise AssertionError(f"{name} not in /proc/diskstats")


def settle(name: str) -> list[int]:
    """Wait until nothing else (udev probing a new device) is doing I/O on it."""
    last = raw_fields(name)
    for _ in range(50):
        time.sleep(0.2)
        now = raw_fields(name)
        if now == last:
            return now
        last = now
    raise AssertionError(f"{name} never went idle")


def direct_io(device: str) -> None:
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
    fd = os.open(device, os.O_RDWR | os.O_DIRECT)
    try:
        for i in range(READS):
            assert os.preadv(fd, [buf], i * BLOCK * 3) == BLOCK  # gaps: no two reads can merge
        buf.write(b"x" * BLOCK)
        for i in range(WRITES):
            assert os.pwritev(fd, [buf], (1000 + i * 3) * BLOCK) == BLOCK
    finally:
        os.close(fd)
        buf.close()


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[ExporterProcess]:
    argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0"]
    with ExporterProcess(argv, tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as process:
        yield process


def scrape(exporter: ExporterProcess, device: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(exporter.scrape().text):
        for sample in family.samples:
            if sample.labels.get("device") == device and sample.name.startswith("lunlat_device_"):
                values[sample.name] = sample.value
            if sample.name == "lunlat_lun_info" and sample.labels.get("device") == device:
                values["info_kind_" + sample.labels["kind"]] = 1
    return values


def exported_equals_raw(exported: dict[str, float], raw: list[int]) -> None:
    assert exported["lunlat_device_reads_completed_total"] == raw[0]
    assert exported["lunlat_device_read_bytes_total"] == raw[2] * 512
    assert round(exported["lunlat_device_read_time_seconds_total"] * 1000) == raw[3]
    assert exported["lunlat_device_writes_completed_total"] == raw[4]
    assert exported["lunlat_device_write_bytes_total"] == raw[6] * 512
    assert round(exported["lunlat_device_write_time_seconds_total"] * 1000) == raw[7]
    assert round(exported["lunlat_device_io_time_seconds_total"] * 1000) == raw[9]
    assert round(exported["lunlat_device_io_weighted_time_seconds_total"] * 1000) == raw[10]


def test_counters_move_by_exactly_what_the_kernel_reports(
    loop_device: str, exporter: ExporterProcess
) -> None:
    name = Path(loop_device).name
    before_raw = settle(name)
    before = scrape(exporter, name)
    assert before.get("info_kind_lun") == 1, "an attached loop device is published as a LUN"
    exported_equals_raw(before, before_raw)

    direct_io(loop_device)
    after_raw = settle(name)
    after = scrape(exporter, name)
    assert raw_fields(name) == after_raw, "no I/O happened during the scrape"
    exported_equals_raw(after, after_raw)

    assert (
        after["lunlat_device_reads_completed_total"] - before["lunlat_device_reads_completed_total"] == READS
    )
    assert (
        after["lunlat_device_writes_completed_total"] - before["lunlat_device_writes_completed_total"]
        == WRITES
    )
    assert after["lunlat_device_read_bytes_total"] - before["lunlat_device_read_bytes_total"] == READS * BLOCK
    assert (
        after["lunlat_device_write_bytes_total"] - before["lunlat_device_write_bytes_total"] == WRITES * BLOCK
    )
    # The time the kernel summed over those I/Os, to the millisecond it reports.
    read_ms = after_raw[3] - before_raw[3]
    assert after["lunlat_device_read_time_seconds_total"] - before[
        "lunlat_device_read_time_seconds_total"
    ] == (pytest.approx(read_ms / 1000, abs=1e-9))
