"""The lab's FUSE daemon on the real kernel: a loop device (direct I/O) on one of its files shows the
injected latency in /proc/diskstats; settings change it at run time; an array's slots queue I/O.
The native engine (lab/native/labd.c) by default; the basic behaviour on the Python engine too.

Bounds are about the injected behaviour and generous: what is measured is injection + the I/O path's
own cost (the "overhead floor", printed here and calibrated away by `lab up`), on a shared VM.
Run with `-s` to see the measured numbers.
"""

from __future__ import annotations

import mmap
import os
import random
import re
import statistics
import threading
import time
from pathlib import Path

import pytest

from lunlat import reference_architecture
from lunlat_lab import measure, native, system
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, ENGINES, Engine
from lunlat_lab.settings import ArraySetting, LunSetting, Settings
from tests.support import lab_daemon
from tests.support.lab_daemon import IMAGE_BYTES, StartDaemon, stop

pytestmark = pytest.mark.lab

# The daemon fixture (tests/support/lab_daemon.py, shared with the exporter's biolatency test).
start_daemon = lab_daemon.start_daemon

BLOCK = 8192
BATCHES = 5
IO_TIMEOUT = 120.0  # seconds for one batch of I/O: only reached when the daemon hangs


def lun(array: str, ms: float, jitter: float = 0.0) -> LunSetting:
    return LunSetting(array, ms, ms, jitter)


BASE = Settings(
    luns={
        "zero": lun("wide", 0.0),
        "two": lun("wide", 2.0),
        "spread": lun("wide", 2.0, jitter=1.0),
        "q1": lun("one", 2.0),
        "q2": lun("one", 2.0),
    },
    arrays={"wide": ArraySetting(32, 100_000.0), "one": ArraySetting(1, 100_000.0)},
    overhead_ms={"read": 0.0, "write": 0.0},
)


def run_io(devices: list[str], op: str, count: int, block: int = BLOCK) -> dict[str, measure.Average]:
    """`count` O_DIRECT random I/Os of `block` bytes per entry of `devices`, one thread each, all at
    once (queue depth 1 per thread); the average latency per device as the kernel counted it
    (diskstats)."""
    names = sorted({Path(d).name for d in devices})
    before = measure.from_diskstats()
    errors: list[BaseException] = []

    def worker(device: str, seed: int) -> None:
        buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT requires
        fd = os.open(device, os.O_RDWR | os.O_DIRECT)
        rng = random.Random(seed)
        try:
            for _ in range(count):
                offset = rng.randrange(IMAGE_BYTES // block) * block
                if op == "read":
                    os.preadv(fd, [buf], offset)
                else:
                    os.pwritev(fd, [buf], offset)
        except BaseException as exc:
            errors.append(exc)
            raise
        finally:
            os.close(fd)
            buf.close()

    threads = [threading.Thread(target=worker, args=(d, i), daemon=True) for i, d in enumerate(devices)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + IO_TIMEOUT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "I/O did not finish: the daemon hangs"
    assert not errors, errors
    after = measure.from_diskstats()
    return {name: measure.average(before[name], after[name]) for name in names}


def lowest(ms: float, engine: Engine = DEFAULT_ENGINE) -> float:
    """The least mean diskstats may show for an injected `ms`. The Python engine holds each I/O
    for `ms` less the settings' overhead (0 here), so the kernel's mean is `ms` plus the I/O path.
    The native engine's live calibration (lunlat_lab/daemon/calibration.py) also takes away the
    path's measured cost, aiming the kernel's mean at `ms` itself: it may come out below, by as
    much as the lab promises to hold a cell (the reference's tolerance). Two fresh-clone CI runs
    on 2026-11-30 read 1.990 and 1.970 ms for 2 ms writes against a lower bound of 2.0."""
    if engine == "python":
        return ms
    return ms - max(reference_architecture.TOLERANCE_MS, reference_architecture.TOLERANCE_SHARE * ms)


def latency_ms(devices: list[str], op: str, count: int, batches: int = BATCHES) -> dict[str, float]:
    """Per device, the median over `batches` of the batch's diskstats average: one host stall
    (this VM's neighbours pause it for up to 0.2 s now and then) moves one batch, not the result."""
    per_batch: dict[str, list[float]] = {}
    for _ in range(batches):
        for name, average in run_io(devices, op, count).items():
            value = average.read_ms if op == "read" else average.write_ms
            assert value is not None, f"no {op}s counted on {name}"
            per_batch.setdefault(name, []).append(value)
    return {name: statistics.median(values) for name, values in per_batch.items()}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_loop_device_shows_the_injected_latency(start_daemon: StartDaemon, engine: Engine) -> None:
    daemon = start_daemon(BASE, engine)
    zero, two, spread = daemon.attach("zero"), daemon.attach("two"), daemon.attach("spread")
    report = []
    for op in ("read", "write"):
        floor = latency_ms([zero], op, 200)[Path(zero).name]
        measured = latency_ms([two], op, 100)[Path(two).name]
        jittered = latency_ms([spread], op, 100)[Path(spread).name]
        report.append(
            f"{op}: overhead floor {floor:.3f} ms; 2 ms LUN {measured:.3f} ms, with jitter 1.0 {jittered:.3f} ms"
        )
        # The injected 2 ms, plus the I/O path's own cost unless calibrated away (lowest()).
        assert lowest(2.0, engine) <= measured < 3.5, report[-1]
        # Jitter keeps the mean: lognormal draws with a standard deviation of 2 ms, 100 per batch
        # (standard error 0.2 ms), hence the wider lower bound.
        assert 1.6 <= jittered < 3.5, report[-1]
    print("\n" + "\n".join(report))


def test_a_settings_change_applies_at_run_time_without_remount(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon(BASE)
    device = daemon.attach("two")
    name = Path(device).name
    before = {op: latency_ms([device], op, 60)[name] for op in ("read", "write")}
    daemon.apply(Settings({**BASE.luns, "two": lun("wide", 5.0)}, BASE.arrays, BASE.overhead_ms))
    after = {op: latency_ms([device], op, 40)[name] for op in ("read", "write")}
    print(f"\n2 ms -> 5 ms at run time: before {before}, after {after} (ms)")
    for op in ("read", "write"):
        assert lowest(2.0) <= before[op] < 3.5, (op, before)
        assert lowest(5.0) <= after[op] < 6.5, (op, after)
    assert daemon.process.poll() is None and system.is_mounted(daemon.mountpoint)
    assert system.loops_under(daemon.mountpoint) == {device: str(daemon.mountpoint / "two.img")}


def test_an_array_with_one_slot_queues_io_from_all_its_luns(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon(BASE)
    q1, q2, wide = daemon.attach("q1"), daemon.attach("q2"), daemon.attach("two")
    report = []
    for op in ("read", "write"):
        alone = latency_ms([q1], op, 50)[Path(q1).name]
        # Four threads, two on each LUN of the 1-slot array: each I/O waits for the three ahead.
        shared = latency_ms([q1, q1, q2, q2], op, 25)
        together = [shared[Path(d).name] for d in (q1, q2)]
        # Control: the same four threads on a LUN of a 32-slot array do not queue, so the daemon
        # itself (threads, the kernel's FUSE queue, write locking) does not serialize them.
        wide_alone = latency_ms([wide], op, 50)[Path(wide).name]
        wide_four = latency_ms([wide] * 4, op, 25)[Path(wide).name]
        report.append(
            f"{op}: 1 slot alone {alone:.3f} ms, 4 threads {together[0]:.3f}/{together[1]:.3f} ms; "
            f"32 slots alone {wide_alone:.3f} ms, 4 threads {wide_four:.3f} ms"
        )
        for value in together:
            assert 2.5 * alone <= value <= 5.0 * alone, report[-1]
        assert wide_four < 1.6 * wide_alone, report[-1]
    print("\n" + "\n".join(report))


def _native_daemons(marker: Path) -> list[int]:
    return [
        p.pid
        for p in system.processes_mentioning(str(marker))
        if Path((p.info.get("cmdline") or [""])[0]).name == native.BINARY_NAME
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_sigterm_unmounts_and_logs_start_and_stop(start_daemon: StartDaemon, engine: Engine) -> None:
    daemon = start_daemon(BASE, engine)
    assert bool(_native_daemons(daemon.mountpoint)) == (engine == "native")
    assert sorted(p.name for p in daemon.mountpoint.iterdir()) == sorted(f"{n}.img" for n in BASE.luns)
    with pytest.raises(PermissionError):
        (daemon.mountpoint / "new.img").write_bytes(b"")  # the namespace is fixed
    with pytest.raises(PermissionError):
        (daemon.mountpoint / "zero.img").unlink()
    with pytest.raises(PermissionError):
        (daemon.mountpoint / "dir").mkdir()
    with pytest.raises(PermissionError):
        (daemon.mountpoint / "zero.img").rename(daemon.mountpoint / "renamed.img")
    assert stop(daemon.process) == 0
    assert not system.is_mounted(daemon.mountpoint)
    assert _native_daemons(daemon.mountpoint) == []  # the C daemon stopped with its supervisor
    log = daemon.log_text()
    assert "msg=starting" in log
    assert "msg=mounted" in log
    assert "msg=stopped reason=signal" in log
    assert "Traceback" not in log


@pytest.mark.parametrize("engine", ENGINES)
def test_files_that_are_not_a_configured_luns_image_pass_through(
    start_daemon: StartDaemon, engine: Engine
) -> None:
    """A non-image file and an image without settings are plain files: read and written in place
    (their I/O gets no delay and no slot; how fast is bench/lab_daemon.py's job)."""
    daemon = start_daemon(BASE, engine, extra_files={"notes.txt": b"hello", "spare.img": bytes(IMAGE_BYTES)})
    notes, spare = daemon.mountpoint / "notes.txt", daemon.mountpoint / "spare.img"
    assert notes.read_bytes() == b"hello"
    with notes.open("r+b") as f:
        f.seek(5)
        f.write(b", world")
    assert notes.read_bytes() == b"hello, world"
    assert (daemon.mountpoint.parent / "backing" / "notes.txt").read_bytes() == b"hello, world"
    notes.write_bytes(b"short")  # truncates, then writes: sizes can change, names cannot
    assert notes.read_bytes() == b"short"
    with spare.open("r+b") as f:
        f.seek(IMAGE_BYTES - 4)
        f.write(b"tail")
    assert (daemon.mountpoint.parent / "backing" / "spare.img").read_bytes()[-4:] == b"tail"
    # A loop device on an image with no settings serves I/O too, through the same path.
    device = daemon.attach("spare")
    assert run_io([device], "read", 20)[Path(device).name].reads == 20


def test_a_settings_version_the_native_daemon_cannot_use_is_refused_and_the_old_one_kept(
    start_daemon: StartDaemon,
) -> None:
    """Python validates settings.json before the C daemon sees it: a bad file never reaches it."""
    daemon = start_daemon(BASE)
    device = daemon.attach("two")
    daemon.settings_file.write_text('{"luns": {"two": {"array": "nowhere"}}}')
    system.wait_for(lambda: "settings rejected" in daemon.log_text(), 10, "the rejection")
    read = latency_ms([device], "read", 30, batches=3)[Path(device).name]
    assert lowest(2.0) <= read < 3.5, read
    assert daemon.process.poll() is None


def test_the_native_daemon_classes_each_io_by_size_as_the_kernel_does(start_daemon: StartDaemon) -> None:
    """The live calibration meets the daemon's totals per size class with the kernel's (the
    biolatency programs' classes) one to one: an 8K and a 512K read each reach the daemon as one I/O
    of the same class (labd.c size_class, from the `sizes` line), so each class's windows count
    alike and none is dropped as split. The windows are in the supervisor's debug log."""
    daemon = start_daemon(BASE, "native", log_level="debug")
    zero = daemon.attach("zero")
    for _ in range(3):  # a class's first sight opens its window, the next I/Os close it
        run_io([zero], "read", 100)
        run_io([zero], "read", 40, block=512 * 1024)
        time.sleep(1.5)  # the calibration polls once a second
    if "live calibration on /proc/diskstats" in daemon.log_text():
        pytest.skip("the biolatency BPF engine does not load here: the calibration has no size classes")
    windows = [
        dict(re.findall(r"(\w+)=(\S+)", line))
        for line in daemon.log_text().splitlines()
        if 'msg="calibration window"' in line and "lun=zero op=read " in line
    ]
    by_size = {w["size"]: w for w in windows}
    assert set(by_size) == {"small", "large"}, windows
    for w in windows:
        assert int(w["ios"]) == int(w["daemon_ios"]), w
