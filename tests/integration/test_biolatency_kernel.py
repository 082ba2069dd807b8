"""Real kernel: the biolatency source's histograms of a loop device under fio, against the kernel's own
counters (/proc/diskstats) and fio's completion-latency percentiles."""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.config import BiolatencyConfig, DiskstatsConfig
from lunlat.sources import biolatency
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.biolatency import BiolatencySource, Engine
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.published import PublishedDevices
from tests.support.background import in_background
from tests.support.biolatency_counts import by_op
from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
from lunlat_lab.settings import ArraySetting, LunSetting, Settings  # noqa: E402
from tests.integration.test_real_kernel import attached_loop, raw_fields, settle  # noqa: E402
from tests.support import lab_daemon  # noqa: E402
from tests.support.lab_daemon import Daemon  # noqa: E402
from tests.support.lab_host import lab_skip_reason, memory_backed_dir  # noqa: E402

pytestmark = pytest.mark.kernel

# diskstats' fields (Documentation/admin-guide/iostats.rst), as raw_fields gives them from 0: reads
# completed, time reading (ms), writes completed, time writing (ms), I/Os currently in progress.
READS, READ_MS, WRITES, WRITE_MS, IN_PROGRESS = 0, 3, 4, 7, 8

# The lab's FUSE daemon fixture (starts it, and detaches, stops and unmounts whatever happens).
start_daemon = lab_daemon.start_daemon


def _skip_reason() -> str | None:
    if sys.platform != "linux":
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (BPF programs, loop devices)"
    missing = [t for t in ("losetup", "fio") if shutil.which(t) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (Debian: util-linux, fio)"
    return biolatency.unavailable_cause()


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


def histograms(result: SourceResult, device: str, size: str | None = None) -> dict[str, dict[str, float]]:
    """op -> {le or _sum/_count: value} of `device` in a collection, of one size class or all added."""
    out: dict[str, dict[str, float]] = {"read": {}, "write": {}}
    for family in result.families:
        if family.spec is not contract.DEVICE_IO_LATENCY:
            continue
        for suffix, labels, value in family.samples:
            values = labels.as_dict()
            if values["device"] == device and size in (None, values["size"]):
                key = values.get("le", suffix)
                out[values["op"]][key] = out[values["op"]].get(key, 0.0) + value
    return out


def bracketed(
    source: BiolatencySource, name: str
) -> tuple[list[int], dict[str, dict[str, float]], Counter[str]]:
    """`bracketed_collection` with the device's histograms of every size class added."""
    raw, collection, errors = bracketed_collection(source, name)
    return raw, histograms(collection, name), errors


def bracketed_collection(source: BiolatencySource, name: str) -> tuple[list[int], SourceResult, Counter[str]]:
    """The device's diskstats read between two collections that agree on its counts, with no I/O in
    progress in that read, so that none is counted on one side and not yet on the other (issue 39: a
    diskstats read before the programs' snapshot counted any I/O in between as unseen); that
    collection, and the errors counted over every collection made here.

    The programs count a completion at block_io_done, which blk_account_io_done fires before it adds
    the completion to diskstats and takes it off the I/Os in progress, in one step
    (block/blk-mq.c; since 6.16 diskstats' in-progress count is that per-CPU counter,
    block/genhd.c bdev_count_inflight): agreeing collections around a read that shows none in
    progress leave no completion between the two sides."""
    errors: Counter[str] = Counter()
    for _ in range(50):
        first = source.collect()
        raw = raw_fields(name)
        second = source.collect()
        errors.update(first.errors)
        errors.update(second.errors)
        counts = [{op: h.get("_count") for op, h in histograms(c, name).items()} for c in (first, second)]
        if counts[0] == counts[1] and raw[IN_PROGRESS] == 0:
            return raw, second, errors
        time.sleep(0.1)
    raise AssertionError(f"{name} never held still between two collections")


@contextmanager
def udev_kept_off(device: str) -> Iterator[None]:
    """Holds a BSD lock on the device node: systemd-udevd takes LOCK_SH|LOCK_NB before it processes a
    block device and leaves it alone while another holds LOCK_EX, and fio's close after writing (the
    IN_CLOSE_WRITE udev watches for) then runs no blkid probe on it mid-test ("Locking Block Device
    Access", systemd.io/BLOCK_DEVICE_LOCKING). Taking the lock waits for a probe under way (udev
    probes a freshly attached loop device). Where no udev runs, nothing changes."""
    fd = os.open(device, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


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


def bucket_index(seconds: float) -> int:
    """The histogram bucket a latency falls in: bucket i holds [bound i-1, bound i), as the programs
    class it (histogram.h bucket_of: `le` exclusive); the last, everything from the top bound."""
    return sum(1 for bound in contract.BIO_BUCKETS if bound <= seconds)


def quantile_index(hist: dict[str, float], q: float) -> int:
    """The index of the bucket holding quantile q, as histogram_quantile picks it."""
    rank = q * hist["_count"]
    return next(
        (i for i, b in enumerate(contract.BIO_BUCKETS) if hist[repr(b)] >= rank), len(contract.BIO_BUCKETS)
    )


def quantile_bucket(hist: dict[str, float], q: float) -> tuple[float, float]:
    """The (lower, upper) bounds of the bucket holding quantile q, as histogram_quantile picks it."""
    rank = q * hist["_count"]
    lower = 0.0
    for bound in contract.BIO_BUCKETS:
        if hist[repr(bound)] >= rank:
            return lower, bound
        lower = bound
    return lower, math.inf


def test_counts_on_a_fast_lun(loop_device: str) -> None:
    """A loop device on tmpfs: tens of microseconds per I/O, tens of thousands of I/Os."""
    check(loop_device, block=4096, size_mb=200, io_mb=150, sum_tolerance=None)


def test_histograms_match_the_kernels_counts_times_and_fio(slow_lun: str) -> None:
    """A FUSE-delayed LUN (~0.5 ms): counts, summed time within 2 %, fio's percentiles in the
    histogram's bucket or the one next to it."""
    check(slow_lun, block=8192, size_mb=32, io_mb=24, sum_tolerance=0.02)


def published(name: str) -> tuple[Engine, BiolatencySource]:
    """The programs and the source, with device `name` alone published to them (as the diskstats
    source of a real serve publishes what it shows)."""
    board = PublishedDevices()
    host = DiskstatsSource(Path("/proc"), Path("/sys"), DiskstatsConfig(include=f"^{name}$"), published=board)
    host.collect()
    engine = Engine(BiolatencyConfig(enabled=True))
    return engine, BiolatencySource(engine, board)


def check(loop_device: str, block: int, size_mb: int, io_mb: int, sum_tolerance: float | None) -> None:
    name = Path(loop_device).name
    engine, source = published(name)
    try:
        with udev_kept_off(loop_device):
            wait_up(source)
            hook = engine.tracepoints[0]
            settle(name)
            before_raw, before, _ = bracketed(source, name)
            kept_before = len(engine.requests_kept())
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
                    # Fewer blocks than the region holds: every I/O a block of its own.
                    f"--size={size_mb}m",
                    f"--io_size={io_mb}m",
                    "--output-format=json",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            settle(name)
            after_raw, after, errors = bracketed(source, name)  # errors: counted since `before`
            # The device is idle (no I/O in progress in that read): what the programs still keep is
            # requests whose completion they never saw, their struct request not issued again yet.
            kept = len(engine.requests_kept()) - kept_before
    finally:
        source.close()
    job = json.loads(fio.stdout[fio.stdout.index("{") :])["jobs"][0]
    untold = 0
    for op, ops_field, ms_field in (("read", READS, READ_MS), ("write", WRITES, WRITE_MS)):
        count = after[op]["_count"] - before[op]["_count"]
        kernel_count = after_raw[ops_field] - before_raw[ops_field]
        assert count <= kernel_count, f"{op}: {count} timed, the kernel completed {kernel_count}"
        untold += kernel_count - int(count)
        assert count > 500
        assert after[op]["+Inf"] - before[op]["+Inf"] == count
        seconds = after[op]["_sum"] - before[op]["_sum"]
        kernel_seconds = (after_raw[ms_field] - before_raw[ms_field]) / 1000
        if sum_tolerance is None:
            # Both start at the request's start_time_ns. On block_io_done ours ends a fraction of a µs
            # after the kernel's `now` (~1 % of a tens-of-µs I/O); on block_rq_complete (kernels before
            # 6.5) before the bios' completion, which on such a device is up to a tenth.
            low, high = (0.97, 1.03) if hook == biolatency.TRACEPOINTS[biolatency.DONE] else (0.85, 1.001)
            assert low * kernel_seconds <= seconds <= high * kernel_seconds + 0.001, (
                f"{op}: {seconds} s, the kernel {kernel_seconds} s ({hook})"
            )
            continue
        assert seconds == pytest.approx(kernel_seconds, rel=sum_tolerance), (
            f"{op}: {seconds} s, the kernel {kernel_seconds} s"
        )
        # fio's completion-latency percentiles in the bucket the histogram gives for them, or the one
        # next to it. Not always the same bucket: fio's clat runs from its issue_time to when it
        # reaps the completion, not from start_time_ns to block_io_done, and its percentiles come
        # from its own latency bins ("How does fio measure latency", fio-blog by fio's maintainer
        # Vincent Fu), while this LUN's median sits at the 0.5 ms bound and its tail near 1 ms.
        # Measured in 25 runs (2026-11-29): the same bucket for every median; one bucket above for
        # p90 in 2 runs and for p99 in 5, never below.
        hist = {k: after[op][k] - before[op][k] for k in after[op]}
        for q, key in ((0.5, "50.000000"), (0.9, "90.000000"), (0.99, "99.000000")):
            fio_seconds = job[op]["clat_ns"]["percentile"][key] / 1e9
            assert abs(bucket_index(fio_seconds) - quantile_index(hist, q)) <= 1, (
                f"{op} p{q}: fio {fio_seconds}, bucket {quantile_bucket(hist, q)}"
            )
    # Every completion the kernel counted and the histograms lack, accounted for: those the kernel
    # ran no program for and said so (`missed_io`, recursion on a CPU; counted over every device, so
    # an upper bound here), those it ran the program for without a start (`untimed_io`), and those
    # it ran no program for without saying so (`unseen_io`, counted when their struct request is
    # issued again; on this idle device the rest are the requests still kept). On 6.18 the last
    # came in bursts of up to 8 (the queue depth) completions ended in one block softirq: the
    # tracepoint's other probes saw each (an ftrace instance on block_io_done), the program's entry
    # was never reached and its recursion_misses stayed 0 (issue 39; docs/metrics.md).
    told = errors.get("untimed_io", 0) + errors.get("unseen_io", 0) + kept
    assert told <= untold <= told + errors.get("missed_io", 0), (untold, kept, errors)
    assert errors.get("map_full", 0) == 0


def test_only_published_devices_are_traced_in_the_kernel(loop_device: str, tmp_path: Path) -> None:
    """The device filter runs in the kernel: an unpublished device's I/O reaches no counter, and a
    device that stops being published loses its slot (and starts from zero if it comes back)."""
    engine = Engine(BiolatencyConfig(enabled=True, max_devices=1))
    try:
        assert engine.load() is None
        other = tmp_path / "other.img"
        with attached_loop(other, 16 << 20) as unpublished:
            devs = [biolatency.kernel_dev(*map(int, Path(f"/sys/class/block/{Path(d).name}/dev").read_text().split(":")))
                    for d in (loop_device, unpublished)]  # fmt: skip
            assert engine.sync(devs) == [devs[1]]  # one slot: the second is left out, and said so
            for device in (loop_device, unpublished):
                subprocess.run(["dd", f"if={device}", "of=/dev/null", "bs=4k", "count=64", "iflag=direct"],
                               check=True, capture_output=True)  # fmt: skip
            counters = by_op(engine.counters())
            assert set(counters) == {(devs[0], 0), (devs[0], 1)}
            assert sum(counters[(devs[0], 0)].buckets) == 64
            assert engine.sync([devs[1]]) == []  # the slot moves to the other device, zeroed
            subprocess.run(["dd", f"if={unpublished}", "of=/dev/null", "bs=4k", "count=8", "iflag=direct"],
                           check=True, capture_output=True)  # fmt: skip
            assert sum(by_op(engine.counters())[(devs[1], 0)].buckets) == 8
    finally:
        engine.close()


def test_8k_and_1m_reads_fall_in_their_size_classes(loop_device: str) -> None:
    """8 KiB reads are counted as small, and each 1 MiB read as at least one large request, with the
    completions the programs say they did not see accounted as `check` accounts them (a fresh-clone
    CI run on 2026-11-29 counted 1,999 small reads of the kernel's 2,000: an unseen completion this
    test did not count then).

    A 1 MiB read is one request only when its buffer's pages fit the queue's `max_segments` (128
    here; Documentation/ABI/stable/sysfs-block: the most segments a request may hold): else the block
    layer splits it, its first request 128 segments of a page or more (512 KiB or more: large), the
    rest of any size. Here 1 run in 33 split every read in two, one large and one middle."""
    name = Path(loop_device).name
    engine, source = published(name)
    try:
        with udev_kept_off(loop_device):
            wait_up(source)
            for block, count, size in (("8K", 2000, "small"), ("1M", 64, "large")):
                settle(name)
                before_raw, before, _ = bracketed_collection(source, name)
                kept_before = len(engine.requests_kept())
                subprocess.run(
                    [
                        "dd",
                        f"if={loop_device}",
                        "of=/dev/null",
                        f"bs={block}",
                        f"count={count}",
                        "iflag=direct",
                    ],
                    check=True,
                    capture_output=True,
                )
                settle(name)
                after_raw, after, errors = bracketed_collection(source, name)
                kept = len(engine.requests_kept()) - kept_before
                reads = after_raw[READS] - before_raw[READS]
                assert reads >= count
                counted = {
                    each: histograms(after, name, each)["read"]["_count"]
                    - histograms(before, name, each)["read"]["_count"]
                    for each in contract.BIO_SIZES
                }
                told = errors.get("untimed_io", 0) + errors.get("unseen_io", 0) + kept
                untold = reads - int(sum(counted.values()))
                summary = f"{block} reads: {counted}, kernel {reads}, kept {kept}, errors {dict(errors)}"
                assert told <= untold <= told + errors.get("missed_io", 0), summary
                if size == "small":
                    assert counted["small"] == sum(counted.values()), summary
                else:
                    assert counted[size] + untold >= count, summary
                assert not errors.get("unsized_io") and not errors.get("unknown_issue_prototype")
    finally:
        source.close()


def _in_flight(name: str) -> int:
    """Requests of the device in flight now (/sys/block/<dev>/inflight: reads and writes,
    Documentation/ABI/stable/sysfs-block)."""
    return sum(int(n) for n in Path(f"/sys/block/{name}/inflight").read_text().split())


def reads_in_flight(device: str, seconds: int, size_mb: int) -> subprocess.Popen[str]:
    """fio in the background keeping 32 direct 4 KiB reads in flight on `device` for `seconds`."""
    return subprocess.Popen(
        ["fio", "--name=inflight", f"--filename={device}", "--rw=randread", "--bs=4k", "--direct=1",
         "--ioengine=libaio", "--iodepth=32", "--time_based", f"--runtime={seconds}", f"--size={size_mb}m",
         "--output-format=json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_requests_in_flight_when_the_source_starts_are_no_error(slow_lun: str) -> None:
    """A request issued before its device was published to the programs (in flight when the exporter
    starts) completes with no size seen at issue: it is classed without one, and is no `unsized_io`
    error, since its issue was out of sight; requests started afterwards are sized at issue. fio keeps
    32 requests in flight on the FUSE-delayed LUN (~0.5 ms each) while the source starts."""
    name = Path(slow_lun).name
    fio = reads_in_flight(slow_lun, seconds=6, size_mb=64)
    errors: Counter[str] = Counter()
    try:
        deadline = time.monotonic() + 10
        while _in_flight(name) == 0:
            assert time.monotonic() < deadline and fio.poll() is None, "fio put no request in flight"
            time.sleep(0.05)
        board = PublishedDevices()
        host = DiskstatsSource(
            Path("/proc"), Path("/sys"), DiskstatsConfig(include=f"^{name}$"), published=board
        )
        host.collect()
        # Some requests in flight once the device is published, while the programs start: of
        # those, the ones issued before it were out of their sight. Sampled all along, not once:
        # fio, starved of a CPU for a few milliseconds, lets all 32 complete before it issues more
        # (a CI run read 0 at its one sample).
        samples: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.001):
                samples.append(_in_flight(name))

        with ExitStack() as cleanup:
            with in_background(sample, stop, "inflight-sampler"):
                source = BiolatencySource(Engine(BiolatencyConfig(enabled=True)), board)
                cleanup.callback(source.close)
                wait_up(source)
            assert max(samples, default=0) > 0, (
                f"none in flight as the source started ({len(samples)} samples)"
            )
            counted = 0.0
            while fio.poll() is None:
                result = source.collect()
                errors.update(result.errors)
                counted = histograms(result, name)["read"].get("_count", 0.0)
                time.sleep(0.5)
    finally:
        _, stderr = fio.communicate(timeout=30)  # reads and closes its pipe
    assert fio.returncode == 0, stderr
    assert counted > 1000, counted  # the reads were traced, sized at issue
    assert errors["unsized_io"] == 0, errors


def test_a_completion_the_programs_did_not_see_is_counted_when_its_request_comes_back(
    slow_lun: str,
) -> None:
    """A request whose completion no program ran for is `unseen_io` once its struct request is issued
    again for another request, and kept by the programs until then (issue 39). The kernel skips the
    completion program in bursts that no test can call up (the counts tests above met one in 24 of
    about 340 runs on 6.18): here the programs' own record of a request taken while it was in flight
    is put back after it completed, as the kernel leaves it when it skips the program."""
    name = Path(slow_lun).name
    engine, source = published(name)
    try:
        with udev_kept_off(slow_lun):
            wait_up(source)
            fio = reads_in_flight(slow_lun, seconds=2, size_mb=16)
            caught: dict[bytes, bytes] = {}
            deadline = time.monotonic() + 10
            while not caught:
                assert fio.poll() is None and time.monotonic() < deadline, "no request was kept in flight"
                caught = engine.requests_kept()
            _, stderr = fio.communicate(timeout=30)
            assert fio.returncode == 0, stderr
            settle(name)
            before_raw, before, _ = bracketed(source, name)
            kept_before = engine.requests_kept()
            key, value = next(iter(caught.items()))
            assert kept_before.get(key) != value  # that request completed and was seen to
            engine.keep_request(key, value)
            # Every tag of the device in use at once, a few times over: a tag's struct request is
            # reused only after the one before it ended, and one read at a time would take the same
            # tag again and again (a freed tag becomes its CPU's allocation hint: lib/sbitmap.c,
            # sbitmap_queue_clear; measured, 1,000 dd reads one at a time never reused the one put back).
            depth = int(Path(f"/sys/block/{name}/queue/nr_requests").read_text())
            subprocess.run(
                ["fio", "--name=cycle", f"--filename={slow_lun}", "--rw=randread", "--bs=4k", "--direct=1",
                 "--ioengine=libaio", f"--iodepth={depth}", f"--number_ios={4 * depth}", "--size=16m"],
                check=True, capture_output=True,
            )  # fmt: skip
            settle(name)
            after_raw, after, errors = bracketed(source, name)
            kept_after = engine.requests_kept()
    finally:
        source.close()
    assert kept_after.get(key) != value  # its struct request came back for another request
    # Over the reads: the request put back, counted once (`unseen_io`), and any completion the kernel
    # itself skipped meanwhile (counted, or still kept on the idle device) beside it.
    skipped = sum(after_raw[f] - before_raw[f] - (after[op]["_count"] - before[op]["_count"])
                  for op, f in (("read", READS), ("write", WRITES)))  # fmt: skip
    told = errors.get("unseen_io", 0) + len(kept_after) - len(kept_before) - 1
    assert told <= skipped <= told + errors.get("missed_io", 0), (skipped, errors, kept_before, kept_after)
