"""The lab's FUSE daemon without FUSE: latency sampling, service time, the slot queue, settings reload,
and the filesystem operations called directly (tests/integration/test_lab_fusefs.py mounts it)."""

from __future__ import annotations

import ctypes
import errno
import importlib.util
import logging
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lunlat_lab.daemon import libfuse
from lunlat_lab.daemon.filesystem import LabFS, lun_of
from lunlat_lab.daemon.injector import Injector
from lunlat_lab.daemon.latency import MIB, sample_latency_ms, service_seconds
from lunlat_lab.daemon.libfuse import LIBFUSE3, LibfuseError
from lunlat_lab.daemon.sleeper import DeadlineSleeper
from lunlat_lab.daemon.slots import SlotQueue
from lunlat_lab.daemon.watcher import SettingsWatcher
from lunlat_lab.settings import ArraySetting, LunSetting, Settings, SettingsError, load_settings
from tests.support import polling

WAIT = 5.0  # seconds a test waits for another thread before failing (never reached when correct)


def settings(read_ms: float = 2.0, write_ms: float = 1.0, jitter: float = 0.0, slots: int = 4) -> Settings:
    return Settings(
        luns={"data": LunSetting("arr", read_ms, write_ms, jitter)},
        arrays={"arr": ArraySetting(slots, 100.0)},
        overhead_ms={"read": 0.0, "write": 0.0},
    )


class FakeClock:
    """A monotonic clock that only moves when told (or when something sleeps on it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def wait_until(condition: Callable[[], bool], what: str) -> None:
    polling.wait_until(condition, what, WAIT, poll=0.001)


@pytest.fixture
def fusefs_log() -> Iterator[list[logging.LogRecord]]:
    """Records of the daemon's logger, caught at the logger itself: `lunlat` may not propagate."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("lunlat.lab.daemon")  # a logger name under `lunlat`, not the module
    handler = Keep(logging.DEBUG)
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


# --- latency sampling ----------------------------------------------------------------------------


@pytest.mark.parametrize("mean", [0.05, 0.47, 2.0, 1234.5])
def test_jitter_zero_gives_exactly_the_mean(mean: float) -> None:
    rng = random.Random(1)
    assert {sample_latency_ms(mean, 0.0, rng) for _ in range(100)} == {mean}


def test_a_zero_mean_is_zero_whatever_the_jitter() -> None:
    rng = random.Random(1)
    assert {sample_latency_ms(0.0, jitter, rng) for jitter in (0.0, 0.3, 3.0)} == {0.0}


# Mean within 1.5 % over 100k draws: the standard error of the sample mean is jitter/sqrt(n) of the
# mean (0.3 % at jitter 1), so 1.5 % is about 5 standard errors; the seed makes it deterministic.
@pytest.mark.parametrize("jitter", [0.1, 0.3, 1.0])
def test_jitter_keeps_the_mean_and_gives_that_coefficient_of_variation(jitter: float) -> None:
    rng = random.Random(20240601)
    mean = 0.47
    samples = [sample_latency_ms(mean, jitter, rng) for _ in range(100_000)]
    assert min(samples) > 0
    assert statistics.fmean(samples) == pytest.approx(mean, rel=0.015)
    assert statistics.pstdev(samples) / statistics.fmean(samples) == pytest.approx(jitter, rel=0.05)
    # Right-skewed like real storage latency: the median is below the mean.
    assert statistics.median(samples) < mean


# --- service time --------------------------------------------------------------------------------


def test_service_time_is_latency_plus_transfer_minus_overhead() -> None:
    assert service_seconds(2.0, 0, 400.0, 0.0) == pytest.approx(0.002)
    # 1 MiB at 100 MiB/s is 10 ms of transfer.
    assert service_seconds(2.0, MIB, 100.0, 0.0) == pytest.approx(0.012)
    assert service_seconds(2.0, MIB, 100.0, 0.25) == pytest.approx(0.01175)


def test_overhead_subtraction_floors_at_zero() -> None:
    assert service_seconds(0.2, 0, 400.0, 0.25) == 0.0
    assert service_seconds(0.0, 8192, 1e9, 0.25) == 0.0


@given(
    latency=st.floats(0, 10_000),
    nbytes=st.integers(0, 16 * MIB),
    bandwidth=st.floats(0.001, 1e6),
    overhead=st.floats(0, 2),
)
def test_service_time_is_never_negative_and_grows_with_size(
    latency: float, nbytes: int, bandwidth: float, overhead: float
) -> None:
    small = service_seconds(latency, nbytes, bandwidth, overhead)
    assert small >= 0
    assert service_seconds(latency, nbytes + 4096, bandwidth, overhead) >= small


def test_the_sleeper_sleeps_only_what_is_left() -> None:
    clock = FakeClock()
    sleeper = DeadlineSleeper(clock, clock.sleep)
    sleeper.until(clock.now + 0.002)
    sleeper.until(clock.now - 0.001)  # already late: no sleep
    assert clock.sleeps == [pytest.approx(0.002)]
    assert sleeper.lateness == 0.0


class LateClock(FakeClock):
    """Every sleep wakes late by an exponential amount (mean `late`), as on an idle virtual CPU."""

    def __init__(self, late: float) -> None:
        super().__init__()
        self.late = late
        self.rng = random.Random(7)

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds + self.rng.expovariate(1 / self.late))


# Mean within 3 % over 20k sleeps: the lateness' spread (0.4 ms) over sqrt(20k) is 0.003 ms,
# under 1 % of the smaller target; the rest is what the running estimate lags behind.
@pytest.mark.parametrize("target", [0.0003, 0.002])
def test_the_sleeper_learns_the_lateness_and_keeps_the_mean(target: float) -> None:
    clock = LateClock(late=0.0004)
    sleeper = DeadlineSleeper(clock, clock.sleep, random.Random(3))
    for _ in range(1000):  # learn
        sleeper.until(clock.now + target)
    assert sleeper.lateness == pytest.approx(0.0004, rel=0.3)
    took = []
    for _ in range(20_000):
        start = clock.now
        sleeper.until(start + target)
        took.append(clock.now - start)
    assert statistics.fmean(took) == pytest.approx(target, rel=0.03)


def test_one_very_late_wake_up_moves_the_estimate_only_a_little() -> None:
    clock = LateClock(late=0.0002)
    sleeper = DeadlineSleeper(clock, clock.sleep, random.Random(3))
    for _ in range(500):
        sleeper.until(clock.now + 0.001)
    before = sleeper.lateness
    sleeper._observe(0.05)  # a wake-up 50 ms late: the host preempted the VM
    assert sleeper.lateness - before <= DeadlineSleeper.WEIGHT * DeadlineSleeper.MAX_LATENESS


def test_injector_holds_the_slot_for_the_service_time_including_the_io() -> None:
    clock = FakeClock()
    injector = Injector(settings(read_ms=2.0, write_ms=1.0), clock=clock, sleep=clock.sleep)

    def io() -> bytes:
        assert injector.queue("arr").busy == 1, "the I/O runs while it holds a slot"
        clock.now += 0.0005  # the real pread took 0.5 ms
        return b"x"

    assert injector.serve("data", "read", 0, io) == b"x"
    # The sleep ends at the deadline: 2 ms after the slot was taken, the I/O's own 0.5 ms included.
    assert clock.sleeps == [pytest.approx(0.0015)]
    assert injector.queue("arr").busy == 0


def test_injector_subtracts_the_calibrated_overhead_per_op_and_adds_transfer_time() -> None:
    clock = FakeClock()
    base = settings(read_ms=2.0, write_ms=1.0)
    injector = Injector(
        Settings(base.luns, base.arrays, {"read": 0.25, "write": 0.5}), clock=clock, sleep=clock.sleep
    )
    injector.serve("data", "read", 0, lambda: None)
    injector.serve("data", "write", 0, lambda: None)
    injector.serve("data", "read", MIB, lambda: None)  # 100 MiB/s: +10 ms
    assert clock.sleeps == [pytest.approx(0.00175), pytest.approx(0.0005), pytest.approx(0.01175)]


def test_files_without_settings_get_no_delay_and_no_array() -> None:
    clock = FakeClock()
    injector = Injector(settings(), clock=clock, sleep=clock.sleep)
    assert injector.serve(None, "read", 8192, lambda: 1) == 1
    assert injector.serve("not_a_lun", "write", 8192, lambda: 2) == 2
    assert clock.sleeps == []


def test_a_failed_io_releases_its_slot() -> None:
    injector = Injector(settings(slots=1))

    def failing() -> None:
        raise OSError(errno.EIO, "boom")

    with pytest.raises(OSError, match="boom"):
        injector.serve("data", "read", 0, failing)
    assert injector.queue("arr").busy == 0


# --- the slot queue ------------------------------------------------------------------------------


def test_slot_queue_bounds_concurrency() -> None:
    queue = SlotQueue(3)
    lock = threading.Lock()
    running = 0
    peak = 0

    def worker() -> None:
        nonlocal running, peak
        for _ in range(5):
            with queue:
                with lock:
                    running += 1
                    peak = max(peak, running)
                time.sleep(0.002)
                with lock:
                    running -= 1

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert peak == 3
    assert (queue.busy, queue.waiting) == (0, 0)


def _queued_workers(
    queue: SlotQueue, count: int
) -> tuple[list[int], list[threading.Event], list[threading.Thread]]:
    """`count` threads queued on `queue` in order; each records its turn, then holds its slot until
    its event is set."""
    order: list[int] = []
    done = [threading.Event() for _ in range(count)]

    def worker(i: int) -> None:
        with queue:
            order.append(i)
            done[i].wait(WAIT)

    threads = []
    for i in range(count):
        t = threading.Thread(target=worker, args=(i,))
        t.start()
        threads.append(t)
        wait_until(lambda i=i: queue.waiting == i + 1, f"worker {i} to queue")  # type: ignore[misc]
    return order, done, threads


def test_slot_queue_serves_waiters_first_come_first_served() -> None:
    queue = SlotQueue(1)
    queue.acquire()
    order, done, threads = _queued_workers(queue, 5)
    queue.release()
    for i in range(5):
        wait_until(lambda i=i: len(order) == i + 1, f"worker {i} to run")  # type: ignore[misc]
        assert queue.busy == 1
        done[i].set()
    for t in threads:
        t.join(WAIT)
    assert order == [0, 1, 2, 3, 4]
    assert (queue.busy, queue.waiting) == (0, 0)


def test_growing_the_queue_lets_waiters_in_at_once_and_shrinking_loses_none() -> None:
    queue = SlotQueue(1)
    queue.acquire()
    order, done, threads = _queued_workers(queue, 4)
    queue.resize(3)  # two more slots: the first two waiters run now
    wait_until(lambda: sorted(order) == [0, 1], "two waiters to get the new slots")  # either may run first
    assert (queue.busy, queue.waiting) == (3, 2)

    queue.resize(1)  # three held, one allowed: releases are not handed on until busy < 1 ...
    queue.release()
    done[0].set()
    wait_until(lambda: queue.busy == 1, "two releases")
    assert (sorted(order), queue.waiting) == ([0, 1], 2)
    done[1].set()  # ... and the last holder's release goes to the oldest waiter
    wait_until(lambda: order[2:] == [2], "waiter 2 to run")
    assert queue.busy == 1
    done[2].set()
    wait_until(lambda: order[2:] == [2, 3], "waiter 3 to run")
    done[3].set()
    for t in threads:
        t.join(WAIT)
    assert (queue.busy, queue.waiting, queue.size) == (0, 0, 1)


def test_slot_queue_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SlotQueue(0)
    queue = SlotQueue(1)
    with pytest.raises(ValueError, match="at least 1"):
        queue.resize(0)
    with pytest.raises(RuntimeError, match="not held"):
        queue.release()


def test_new_settings_resize_the_array_queue_in_place() -> None:
    injector = Injector(settings(slots=1))
    queue = injector.queue("arr")
    queue.acquire()
    order, done, threads = _queued_workers(queue, 2)
    injector.apply(settings(slots=3))
    assert injector.queue("arr") is queue, "waiters stay on the same queue"
    wait_until(lambda: sorted(order) == [0, 1], "waiters to get the new slots")
    queue.release()
    for event in done:
        event.set()
    for t in threads:
        t.join(WAIT)
    assert (queue.busy, queue.size) == (0, 3)


# --- settings reload -----------------------------------------------------------------------------


def test_settings_reload_picks_up_changes_and_survives_a_broken_file(
    tmp_path: Path, fusefs_log: list[logging.LogRecord]
) -> None:
    path = tmp_path / "settings.json"
    settings(read_ms=2.0).save(path)
    injector = Injector(load_settings(path))
    watcher = SettingsWatcher(path, injector.apply)
    assert not watcher.check(), "nothing changed yet"

    settings(read_ms=5.0, slots=2).save(path)  # write + rename, as `lab set-latency` does
    assert watcher.check()
    assert injector.settings.luns["data"].read_ms == 5.0
    assert injector.queue("arr").size == 2

    path.write_text('{"luns": {"data": ')  # half-written
    assert not watcher.check()
    assert not watcher.check(), "a bad version is reported once, not at every poll"
    assert injector.settings.luns["data"].read_ms == 5.0, "the previous settings stay in force"
    warnings = [r for r in fusefs_log if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "keeping the previous" in warnings[0].getMessage()
    assert "not a valid settings file" in str(warnings[0].__dict__["kv"]["err"])

    settings(read_ms=7.0).save(path)
    assert watcher.check()
    assert injector.settings.luns["data"].read_ms == 7.0


def test_settings_naming_an_unknown_array_or_negative_delay_are_rejected(tmp_path: Path) -> None:
    bad = Settings(
        luns={"data": LunSetting("nowhere", -1.0, 1.0, 0.0)},
        arrays={"arr": ArraySetting(0, 0.0)},
        overhead_ms={"read": float("nan")},
    )
    path = tmp_path / "settings.json"
    bad.save(path)
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    problems = str(err.value).split(": ", 1)[1].split("; ")
    assert len(problems) == 4, problems  # every bound the lab description states (lab/config.py)
    for where in ("luns.data.read_ms", "arrays.arr.slots", "arrays.arr.bandwidth_mib_s", "overhead_ms.read"):
        assert any(p.startswith(where) for p in problems), (where, problems)
    # Values in bounds, then the references between them.
    Settings({"data": LunSetting("nowhere", 1.0, 1.0, 0.0)}, {"arr": ArraySetting(1, 1.0)}).save(path)
    with pytest.raises(SettingsError, match="array 'nowhere' is not in arrays"):
        load_settings(path)
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "missing.json")
    settings().save(path)
    assert load_settings(path) == settings()


def test_a_removed_settings_file_keeps_the_settings_and_logs_once(
    tmp_path: Path, fusefs_log: list[logging.LogRecord]
) -> None:
    path = tmp_path / "settings.json"
    settings().save(path)
    injector = Injector(load_settings(path))
    watcher = SettingsWatcher(path, injector.apply)
    path.unlink()
    assert not watcher.check()
    assert not watcher.check()
    assert [r.getMessage() for r in fusefs_log] == ["settings rejected, keeping the previous ones"]
    assert injector.settings == settings()


def test_the_watcher_thread_applies_a_change_by_itself(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    settings(read_ms=1.0).save(path)
    injector = Injector(load_settings(path))
    watcher = SettingsWatcher(path, injector.apply, interval=0.01)
    thread = watcher.start()
    try:
        settings(read_ms=9.0).save(path)
        wait_until(lambda: injector.settings.luns["data"].read_ms == 9.0, "the watcher to reload")
    finally:
        watcher.stop()
    assert not thread.is_alive()


# --- the filesystem operations, called directly --------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def labfs(tmp_path: Path, clock: FakeClock) -> LabFS:
    backing = tmp_path / "backing"
    backing.mkdir()
    (backing / "data.img").write_bytes(bytes(range(256)) * 64)
    (backing / "notes.txt").write_bytes(b"hello")
    (backing / "subdir").mkdir()
    (backing / "link.img").symlink_to(backing / "data.img")
    return LabFS(backing, Injector(settings(read_ms=2.0, write_ms=1.0), clock=clock, sleep=clock.sleep))


def test_only_the_regular_files_of_the_backing_directory_are_exposed(labfs: LabFS) -> None:
    assert sorted(labfs.readdir("/", 0)) == sorted([".", "..", "data.img", "notes.txt"])
    assert labfs.getattr("/")["st_mode"] & 0o170000 == 0o040000
    attrs = labfs.getattr("/data.img")
    assert attrs["st_size"] == 256 * 64
    assert isinstance(attrs["st_mtime"], int), "use_ns: times in integer nanoseconds"
    for missing in ("/nope.img", "/subdir", "/link.img", "/subdir/x", "/.."):
        with pytest.raises(OSError) as info:
            labfs.getattr(missing)
        assert info.value.errno == errno.ENOENT, missing


def test_reads_and_writes_reach_the_backing_file_through_the_injector(labfs: LabFS, clock: FakeClock) -> None:
    fh = labfs.open("/data.img", os.O_RDWR | os.O_DIRECT)
    try:
        assert labfs.read("/data.img", 4, 256, fh) == bytes([0, 1, 2, 3])
        assert labfs.write("/data.img", b"abcd", 8, fh) == 4
        assert labfs.read("/data.img", 4, 8, fh) == b"abcd"
        assert labfs.getattr("/data.img", fh)["st_size"] == 256 * 64
    finally:
        labfs.release("/data.img", fh)
    # 2 ms per read and 1 ms per write, plus 4 bytes at 100 MiB/s each.
    assert clock.sleeps == pytest.approx([0.002, 0.001, 0.002], rel=1e-3)
    other = labfs.open("/notes.txt", os.O_RDONLY)
    try:
        assert labfs.read("/notes.txt", 5, 0, other) == b"hello"
    finally:
        labfs.release("/notes.txt", other)
    assert len(clock.sleeps) == 3, "a file with no LUN settings gets no delay"


def test_names_cannot_change_but_sizes_and_times_can(labfs: LabFS) -> None:
    refusals: list[Callable[[], object]] = [
        lambda: labfs.create("/new.img", 0o644, os.O_RDWR),
        lambda: labfs.mknod("/new.img", 0o644, 0),
        lambda: labfs.mkdir("/d", 0o755),
        lambda: labfs.unlink("/data.img"),
        lambda: labfs.rmdir("/subdir"),
        lambda: labfs.rename("/data.img", "/x.img"),
        lambda: labfs.symlink("/s", "/data.img"),
        lambda: labfs.link("/l", "/data.img"),
        lambda: labfs.chmod("/data.img", 0o600),
        lambda: labfs.chown("/data.img", 1, 1),
    ]
    for refuse in refusals:
        with pytest.raises(OSError) as info:
            refuse()
        assert info.value.errno == errno.EPERM
    assert labfs.truncate("/data.img", 4096) == 0
    assert labfs.getattr("/data.img")["st_size"] == 4096
    assert labfs.utimens("/data.img", (1_000_000_123, 2_000_000_456)) == 0
    attrs = labfs.getattr("/data.img")
    assert (attrs["st_atime"], attrs["st_mtime"]) == (1_000_000_123, 2_000_000_456)
    before = time.time_ns()
    labfs.utimens("/data.img", ((1 << 30) - 2, (1 << 30) - 1))  # touch -m: atime kept, mtime now
    attrs = labfs.getattr("/data.img")
    assert attrs["st_atime"] == 1_000_000_123
    assert attrs["st_mtime"] >= before - 10_000_000  # coarse filesystem clocks
    assert labfs.statfs("/")["f_bsize"] > 0
    assert labfs.fsync("/data.img", 0, 0) == 0


def test_image_files_map_to_luns() -> None:
    assert lun_of("sqlserver1_data.img") == "sqlserver1_data"
    assert lun_of(".img") is None
    assert lun_of("notes.txt") is None


# --- which libfuse mfusepy runs on ---------------------------------------------------------------


def test_the_daemon_runs_mfusepy_on_libfuse3_even_where_libfuse2_is_found_first() -> None:
    """mfusepy on its own takes libfuse 2 when a host has both (its find_library order), which
    refuses the daemon's libfuse 3 mount options; the daemon's loader takes libfuse 3. In a fresh
    interpreter: mfusepy picks its library once, at import."""
    if importlib.util.find_spec("mfusepy") is None:
        pytest.skip("mfusepy is not installed (pip install ./lab)")
    try:
        ctypes.CDLL(LIBFUSE3)
    except OSError:
        pytest.skip(f"{LIBFUSE3} is not installed (Debian: fuse3)")
    code = (
        "from lunlat_lab.daemon.libfuse import mfusepy_on_libfuse3\n"
        "m = mfusepy_on_libfuse3()\n"
        "print(m.fuse_version_major, m._libfuse_path)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FUSE_LIBRARY_PATH", "FUSE_LIBRARY_NAME")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.split() == ["3", LIBFUSE3]


def test_a_host_without_libfuse3_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libfuse, "LIBFUSE3", "libfuse3-not-here.so.3")
    with pytest.raises(LibfuseError) as err:
        libfuse.require_libfuse3()
    message = str(err.value)
    assert "\n" not in message
    assert "libfuse 3 is not installed" in message and "fuse3" in message
