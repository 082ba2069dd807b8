"""Real kernel: the biolatency source's histograms of a loop device under fio, against the kernel's own
counters (/proc/diskstats) and fio's completion-latency percentiles."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.config import BiolatencyConfig, DiskstatsConfig
from lunlat.lab.settings import ArraySetting, LunSetting, Settings
from lunlat.sources import biolatency
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.biolatency import BiolatencySource, Engine
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.published import PublishedDevices
from tests import tracefs
from tests.integration import test_lab_fusefs
from tests.integration.test_lab_fusefs import Daemon
from tests.integration.test_real_kernel import attached_loop, settle
from tests.labhost import lab_skip_reason, memory_backed_dir

pytestmark = pytest.mark.kernel

# The lab's FUSE daemon fixture (starts it, and detaches, stops and unmounts whatever happens).
start_daemon = test_lab_fusefs.start_daemon

INTERVAL = 1  # bpftrace prints its maps every second here


def _skip_reason() -> str | None:
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (bpftrace, loop devices)"
    missing = [t for t in ("bpftrace", "losetup", "fio") if shutil.which(t) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (Debian: bpftrace, util-linux, fio)"
    return tracefs.missing()


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    base = memory_backed_dir(512 << 20)
    workdir = Path(tempfile.mkdtemp(prefix="lunlat-biolat-", dir=base))
    backing = workdir / "lun.img"
    try:
        with attached_loop(backing, 256 << 20) as device:
            yield device
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def slow_lun(start_daemon: Callable[[Settings], Daemon]) -> str:
    """A loop device (direct I/O) on the lab's FUSE file system, each I/O held ~0.5 ms (lognormal
    spread): latencies of an array LUN, where the microseconds the block layer spends before a
    request is inserted are well under 1 %."""
    reason = _skip_reason() or lab_skip_reason()
    if reason:
        pytest.skip(reason)
    settings = Settings(
        luns={"slow": LunSetting("wide", 0.5, 0.5, 0.3)},
        arrays={"wide": ArraySetting(32, 100_000.0)},
        overhead_ms={"read": 0.0, "write": 0.0},
    )
    return start_daemon(settings).attach("slow")


@pytest.fixture
def bpftrace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """bpftrace itself where tracefs is mounted; else a wrapper mounting tracefs in a private mount
    namespace (this host's tracefs stays unmounted; the source's own check is pointed at a stand-in)."""
    private = tracefs.private_tracefs(tmp_path)
    if private is None:
        return None
    monkeypatch.setattr(biolatency, "TRACEFS", (private.stand_in,))
    return private.bpftrace


def histograms(result: SourceResult, device: str) -> dict[str, dict[str, float]]:
    """op -> {le or _sum/_count: value} of `device` in a collection."""
    out: dict[str, dict[str, float]] = {"read": {}, "write": {}}
    for family in result.families:
        if family.spec is not contract.DEVICE_IO_LATENCY:
            continue
        for suffix, labels, value in family.samples:
            values = labels.as_dict()
            if values["device"] == device:
                out[values["op"]][values.get("le", suffix)] = value
    return out


def wait_up(source: BiolatencySource) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            source.collect()
            return
        except SourceError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def quantile_bucket(hist: dict[str, float], q: float) -> tuple[float, float]:
    """The (lower, upper) bounds of the bucket holding quantile q, as histogram_quantile picks it."""
    rank = q * hist["_count"]
    lower = 0.0
    for bound in contract.BIO_BUCKETS:
        if hist[repr(bound)] >= rank:
            return lower, bound
        lower = bound
    return lower, math.inf


def test_counts_on_a_fast_lun(loop_device: str, bpftrace: str | None) -> None:
    """A loop device on tmpfs: tens of microseconds per I/O, tens of thousands of I/Os."""
    check(loop_device, bpftrace, block=4096, size_mb=200, io_mb=150, sum_tolerance=None)


def test_histograms_match_the_kernels_counts_times_and_fio(slow_lun: str, bpftrace: str | None) -> None:
    """A FUSE-delayed LUN (~0.5 ms): counts, summed time within 2 %, fio's percentiles within a bucket."""
    check(slow_lun, bpftrace, block=8192, size_mb=32, io_mb=24, sum_tolerance=0.02)


def check(
    loop_device: str, bpftrace: str | None, block: int, size_mb: int, io_mb: int, sum_tolerance: float | None
) -> None:
    name = Path(loop_device).name
    board = PublishedDevices()
    host = DiskstatsSource(Path("/proc"), Path("/sys"), DiskstatsConfig(include=f"^{name}$"), published=board)
    host.collect()
    source = BiolatencySource(
        Engine(BiolatencyConfig(enabled=True, interval_seconds=INTERVAL, bpftrace=bpftrace)), board
    )
    try:
        wait_up(source)
        before_raw = settle(name)
        time.sleep(INTERVAL * 2.5)  # a print after the device went idle
        before = histograms(source.collect(), name)
        fio = subprocess.run(
            [
                "fio",
                "--name=oltp",
                f"--filename={loop_device}",
                "--rw=randrw",
                "--rwmixread=70",
                f"--bs={block}",
                "--direct=1",
                "--ioengine=libaio",
                "--iodepth=8",
                # Fewer blocks than the region holds: fio's random map then never sends two I/Os to one
                # block, and no two requests in flight share a sector (the timing key, see below).
                f"--size={size_mb}m",
                f"--io_size={io_mb}m",
                "--output-format=json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        after_raw = settle(name)
        time.sleep(INTERVAL * 2.5)
        collected = source.collect()  # its errors: what was counted since the collection before
        after = histograms(collected, name)
        errors = collected.errors
    finally:
        source.close()
    job = json.loads(fio.stdout[fio.stdout.index("{") :])["jobs"][0]
    for op, ops_field, ms_field in (("read", 0, 3), ("write", 4, 7)):
        count = after[op]["_count"] - before[op]["_count"]
        kernel_count = after_raw[ops_field] - before_raw[ops_field]
        # Every completed request of the LUN, timed once: the kernel's own count, but for what the
        # kernel did not let the programs see (a tracepoint hit while another BPF program ran on that
        # CPU: `missed_io`) or saw without a start (`untimed_io`), over every device and op.
        unseen = errors.get("missed_io", 0) + errors.get("untimed_io", 0)
        assert 0 <= kernel_count - count <= unseen, (
            f"{op}: {count} timed, the kernel completed {kernel_count}; {errors}"
        )
        assert count > 500
        assert after[op]["+Inf"] - before[op]["+Inf"] == count
        seconds = after[op]["_sum"] - before[op]["_sum"]
        kernel_seconds = (after_raw[ms_field] - before_raw[ms_field]) / 1000
        if sum_tolerance is None:
            # The kernel's time starts when the request is allocated, ours when it is inserted or
            # issued: a few µs apart, which on a tens-of-µs device is several per cent.
            assert 0.8 * kernel_seconds <= seconds <= kernel_seconds * 1.02 + 0.002
            continue
        assert seconds == pytest.approx(kernel_seconds, rel=sum_tolerance), (
            f"{op}: {seconds} s, the kernel {kernel_seconds} s"
        )
        # fio's completion latency percentiles fall in the bucket the histogram gives, or one beside it.
        hist = {k: after[op][k] - before[op][k] for k in after[op]}
        for q, key in ((0.5, "50.000000"), (0.9, "90.000000"), (0.99, "99.000000")):
            fio_seconds = job[op]["clat_ns"]["percentile"][key] / 1e9
            lower, upper = quantile_bucket(hist, q)
            assert lower / 2 <= fio_seconds <= upper * 2, (
                f"{op} p{q}: fio {fio_seconds}, bucket ({lower}, {upper}]"
            )
    assert errors.get("bad_output", 0) == 0
