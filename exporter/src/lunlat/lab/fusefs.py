"""The lab's FUSE daemon: a flat passthrough filesystem over the LUN images whose reads and writes
take an injected service time, so a loop device on `<lun>.img` shows that latency in /proc/diskstats.

    python -m lunlat.lab.fusefs --backing DIR --mount DIR --settings FILE

Service model of one I/O on LUN L of array A (see lab/settings.py for the settings file):
wait for one of A's `slots` (FIFO), then hold it for `sample + bytes / bandwidth - overhead` (never
below 0), the real pread/pwrite done inside that time. `sample` is lognormal with the LUN's mean and
coefficient of variation `jitter`. Queueing for slots is how load moves latency: large reads on one
LUN hold A's slots and every other LUN of A waits behind them. Files not in the settings get no delay.
The hold ends at a monotonic deadline, with late wake-ups corrected on average (DeadlineSleeper).

Logs (logfmt, stderr): `msg=starting`, `msg=mounted` (the kernel's INIT is answered: I/O is served
from now on), `msg="settings reloaded"`, `msg="settings rejected, keeping the previous ones"`,
`msg=stopped reason=signal|unmounted`. SIGTERM, SIGINT or SIGHUP make libfuse end its loop (requests
in flight finish first) and unmount, lazily as root: detach the loop devices first, or their I/O
fails from then on. An unmount from outside (fusermount3 -u) also ends the daemon, with status 0.

The pure parts (sampling, service time, the sleeper, the slot queue, the injector, the settings
watcher) are separate from the mfusepy glue (`LabFS`, `mount`) so they are tested without FUSE.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import math
import os
import random
import signal
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from lunlat import logs
from lunlat.lab.config import LabConfig
from lunlat.lab.settings import Settings

log = logs.get("lunlat.lab.fusefs")  # a fixed name: run with -m, __name__ is __main__

Op = Literal["read", "write"]
T = TypeVar("T")

MIB = 1024 * 1024
SETTINGS_POLL_SECONDS = 0.2
# Requests the daemon serves at once (libfuse worker threads, the kernel's background queue). The
# default 10 threads / 12 background requests would queue I/O ahead of the arrays' slots and cap
# every array below its configured size; this is above what the lab's workloads keep in flight.
DEFAULT_MAX_INFLIGHT = 128
PR_SET_TIMERSLACK = 29  # <linux/prctl.h>
FUSE_LOOP_ENDED = 8  # fuse_main's status when its loop ended with an error or a signal (libfuse 3)
_IMAGE_SUFFIX = LabConfig.image_name("")
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2  # <sys/stat.h>


# --- latency sampling and service time (pure) ----------------------------------------------------


def lognormal_params(mean: float, cv: float) -> tuple[float, float]:
    """mu and sigma of the lognormal with this mean and coefficient of variation."""
    sigma2 = math.log1p(cv * cv)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def sample_latency_ms(mean_ms: float, jitter: float, rng: random.Random) -> float:
    """One latency draw: lognormal with mean `mean_ms` and coefficient of variation `jitter`.

    Lognormal because storage latency is positive and right-skewed; mu is shifted by -sigma^2/2 so
    the mean stays `mean_ms` whatever the jitter (the averages the exporter shows are the target).
    """
    if mean_ms <= 0:
        return 0.0
    if jitter <= 0:
        return mean_ms
    mu, sigma = lognormal_params(mean_ms, jitter)
    # normalvariate, not gauss: gauss caches a second value and is not safe across threads.
    return math.exp(rng.normalvariate(mu, sigma))


def service_seconds(latency_ms: float, nbytes: int, bandwidth_mib_s: float, overhead_ms: float) -> float:
    """How long an I/O holds its slot: latency plus transfer time, minus what the I/O path costs
    anyway (FUSE round trip, Python, the loop driver), so diskstats shows the target, not target +
    overhead. Never negative: a target below the overhead comes out at the overhead."""
    transfer_ms = nbytes / (bandwidth_mib_s * MIB) * 1000 if bandwidth_mib_s > 0 else 0.0
    return max(0.0, latency_ms + transfer_ms - overhead_ms) / 1000


class DeadlineSleeper:
    """Sleeps to absolute monotonic deadlines, correcting on average for late wake-ups.

    A sleeping thread wakes late by the timer slack (lowered at start) plus, on an idle virtual CPU,
    the time the host takes to run it again: measured on the lab's 2-core VM, 0.15 ms typical and
    0.6 ms on average, as much as the lab's sub-millisecond targets. So the sleeper keeps a running
    mean of that lateness and wakes that much early. When less time is left than the lateness, it
    sleeps (briefly, so it wakes about `lateness` later) with probability left / lateness and
    otherwise not at all: either way the mean time to wake-up is what was left, which keeps the
    averages diskstats shows on target. Shared by all threads: they see the same CPUs.
    """

    # One wake-up counts at most this late: a host preemption of 10+ ms would otherwise swing the
    # estimate for hundreds of I/Os.
    MAX_LATENESS = 0.002
    WEIGHT = 0.02  # of the newest observation once the first 50 have set the mean
    NAP = 1e-6  # a sleep that just parks the thread (what a short sleep costs is its lateness)

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.lateness = 0.0
        self._observed = 0

    def until(self, deadline: float) -> None:
        now = self._clock()
        left = deadline - now
        if left <= 0:
            return
        lateness = self.lateness
        if left > lateness:
            wake = deadline - lateness
        elif self._rng.random() * lateness < left:
            wake = now + self.NAP
        else:
            return
        self._sleep(wake - now)
        self._observe(self._clock() - wake)

    def _observe(self, late: float) -> None:
        # Unlocked: threads racing here lose an update at worst; a float store is atomic.
        self._observed += 1
        weight = max(self.WEIGHT, 1 / self._observed)
        self.lateness += weight * (min(max(late, 0.0), self.MAX_LATENESS) - self.lateness)


# --- the array's slots (pure) --------------------------------------------------------------------


class SlotQueue:
    """A FIFO counting semaphore whose size can change while threads wait on it.

    A released slot is handed straight to the oldest waiter (no barging), so queueing is fair and
    the wait each I/O sees depends only on what is ahead of it. Shrinking never preempts: slots in
    use above the new size are simply not handed on when released. Growing wakes waiters at once.
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self._lock = threading.Lock()
        self._size = slots
        self._busy = 0
        self._waiters: deque[threading.Lock] = deque()

    @property
    def size(self) -> int:
        return self._size

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def acquire(self) -> None:
        with self._lock:
            if self._busy < self._size and not self._waiters:
                self._busy += 1
                return
            # Each waiter sleeps on its own locked lock, which the releaser unlocks to hand it a slot.
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        waiter.acquire()

    def release(self) -> None:
        with self._lock:
            if self._busy <= 0:
                raise RuntimeError("release of a slot that is not held")
            if self._waiters and self._busy <= self._size:
                self._waiters.popleft().release()  # the slot changes hands: busy stays the same
            else:
                self._busy -= 1

    def resize(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        with self._lock:
            self._size = slots
            while self._waiters and self._busy < self._size:
                self._busy += 1
                self._waiters.popleft().release()

    def __enter__(self) -> SlotQueue:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


# --- settings in force (pure) --------------------------------------------------------------------


class SettingsError(Exception):
    """The settings file cannot be used; the message says why."""


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_settings(settings: Settings) -> list[str]:
    """What makes these settings unusable by the daemon (from_json checks the shape, not values)."""
    problems = []
    for name, array in settings.arrays.items():
        if not isinstance(array.slots, int) or isinstance(array.slots, bool) or array.slots < 1:
            problems.append(f"array {name}: slots must be an integer >= 1, got {array.slots!r}")
        if not _number(array.bandwidth_mib_s) or array.bandwidth_mib_s <= 0:
            problems.append(f"array {name}: bandwidth_mib_s must be > 0, got {array.bandwidth_mib_s!r}")
    for name, lun in settings.luns.items():
        if lun.array not in settings.arrays:
            problems.append(f"LUN {name}: array {lun.array!r} is not in arrays")
        for field, value in (("read_ms", lun.read_ms), ("write_ms", lun.write_ms), ("jitter", lun.jitter)):
            if not _number(value) or value < 0:
                problems.append(f"LUN {name}: {field} must be a number >= 0, got {value!r}")
    for op, value in settings.overhead_ms.items():
        if not _number(value) or value < 0:
            problems.append(f"overhead_ms.{op} must be a number >= 0, got {value!r}")
    return problems


def load_settings(path: Path) -> Settings:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        settings = Settings.from_json(text)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SettingsError(f"{path} is not a valid settings file: {type(exc).__name__}: {exc}") from None
    problems = check_settings(settings)
    if problems:
        raise SettingsError(f"{path}: " + "; ".join(problems))
    return settings


class Injector:
    """The settings in force and one SlotQueue per array; `serve` runs one I/O under the model."""

    def __init__(
        self,
        settings: Settings,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, SlotQueue] = {}
        self._settings = settings
        self._rng = rng or random.Random()
        self._clock = clock
        self.sleeper = DeadlineSleeper(clock, sleep, self._rng)
        self.apply(settings)

    @property
    def settings(self) -> Settings:
        return self._settings

    def queue(self, array: str) -> SlotQueue:
        return self._queues[array]

    def apply(self, settings: Settings) -> None:
        """Put new settings in force. Queues are resized in place (their waiters stay queued) and
        created before the settings that name them are published, so a reader of `settings` always
        finds its array's queue. An array that disappears keeps its queue for I/Os still on it."""
        with self._lock:
            for name, array in settings.arrays.items():
                queue = self._queues.get(name)
                if queue is None:
                    self._queues[name] = SlotQueue(array.slots)
                elif queue.size != array.slots:
                    queue.resize(array.slots)
            self._settings = settings  # one reference swap: each I/O sees old or new, never a mix

    def service_time(self, lun: str, op: Op, nbytes: int) -> float | None:
        """Seconds one I/O holds its array's slot, sampled now; None for a file with no settings."""
        settings = self._settings
        setting = settings.luns.get(lun)
        if setting is None:
            return None
        mean = setting.read_ms if op == "read" else setting.write_ms
        latency = sample_latency_ms(mean, setting.jitter, self._rng)
        bandwidth = settings.arrays[setting.array].bandwidth_mib_s
        return service_seconds(latency, nbytes, bandwidth, settings.overhead_ms.get(op, 0.0))

    def serve(self, lun: str | None, op: Op, nbytes: int, io: Callable[[], T]) -> T:
        """Run `io` (the real pread/pwrite) inside the I/O's service time on its array."""
        setting = self._settings.luns.get(lun) if lun is not None else None
        if lun is None or setting is None:
            return io()
        with self._queues[setting.array]:
            start = self._clock()
            # Sampled once the slot is held: a change made while the I/O queued applies to it.
            seconds = self.service_time(lun, op, nbytes)
            result = io()
            if seconds is not None:
                self.sleeper.until(start + seconds)
        return result


FileSignature = tuple[int, int, int, int] | str


def file_signature(path: Path) -> FileSignature:
    """What changes when the file is rewritten or replaced (or why it cannot be read)."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"missing: {exc.strerror}"
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class SettingsWatcher:
    """Polls the settings file and puts each new valid version in force.

    A change is seen by inode, mtime, ctime and size together, so an atomic replace (write + rename)
    within one mtime tick is still noticed. A file that cannot be used keeps the previous settings
    and logs one line per bad version, not one per poll.
    """

    def __init__(
        self,
        path: Path,
        apply: Callable[[Settings], None],
        interval: float = SETTINGS_POLL_SECONDS,
        seen: FileSignature | None = None,
    ) -> None:
        """`seen`: the file's signature when the settings in force were read (default: now)."""
        self.path = path
        self._apply = apply
        self._interval = interval
        self._seen = seen if seen is not None else file_signature(path)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> bool:
        """One poll; True when new settings were put in force."""
        signature = file_signature(self.path)
        if signature == self._seen:
            return False
        self._seen = signature
        try:
            settings = load_settings(self.path)
        except SettingsError as exc:
            log.warning("settings rejected, keeping the previous ones", err=str(exc))
            return False
        self._apply(settings)
        log.info(
            "settings reloaded",
            luns=len(settings.luns),
            arrays=len(settings.arrays),
        )
        return True

    def run(self) -> None:
        # Stop signals belong to libfuse's handler in the main thread: a signal landing here would
        # set libfuse's exit flag without waking its loop, and the daemon would not stop.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        while not self._stop.wait(self._interval):
            try:
                self.check()
            except Exception:  # the watcher must outlive any surprise; the daemon keeps serving
                log.error("settings watcher error", exc_info=True)

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, name="settings-watcher", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self._interval + 1)


def lower_timer_slack(nanoseconds: int = 1) -> bool:
    """Set this thread's timer slack (inherited by threads it creates later, i.e. libfuse's
    workers): the default 50 us lets the kernel defer each sleep's wake-up by that much, which
    would add to every injected latency. 0 would mean "reset to default", hence 1 ns."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        result = libc.prctl(
            ctypes.c_int(PR_SET_TIMERSLACK), ctypes.c_ulong(nanoseconds), ctypes.c_ulong(0),
            ctypes.c_ulong(0), ctypes.c_ulong(0),
        )  # fmt: skip
    except (OSError, AttributeError):
        return False
    return int(result) == 0


# The lab stands for an array: its service time must not depend on what else the host runs (the
# exporter, Prometheus, Alertmanager, fio). Python's FUSE path costs CPU per I/O, so a daemon that waits
# for a core behind them shows their load as LUN latency. As root, raise the daemon's priority.
DAEMON_NICE = -10


def raise_priority(nice: int = DAEMON_NICE) -> bool:
    """Set this thread's nice value (inherited by the threads it creates later, as with the timer
    slack); False when not allowed (not root)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except (OSError, AttributeError):
        return False
    return True


# --- the filesystem (mfusepy glue) ---------------------------------------------------------------


def lun_of(name: str) -> str | None:
    """The LUN a file serves (`<lun>.img`), or None for any other file."""
    if name.endswith(_IMAGE_SUFFIX) and len(name) > len(_IMAGE_SUFFIX):
        return name[: -len(_IMAGE_SUFFIX)]
    return None


def _error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class LabFS:
    """mfusepy operations: the regular files of `backing`, flat, read and written in place.

    Duck-typed rather than subclassing mfusepy.Operations so this module imports without libfuse
    (mfusepy loads it at import); mfusepy registers exactly the methods defined here, and turns an
    OSError into the negative errno libfuse expects. Names cannot change: no create, unlink or rename
    (EPERM); data, sizes and times can.
    """

    use_ns = True  # times in integer ns (mfusepy warns and loses precision otherwise)

    def __init__(self, backing: Path, injector: Injector, max_inflight: int = DEFAULT_MAX_INFLIGHT) -> None:
        self.backing = backing
        self.injector = injector
        self.max_inflight = max_inflight
        self._luns: dict[int, str | None] = {}  # open file handle -> LUN, looked up once per open
        self._thread = threading.local()

    def _path(self, path: str) -> Path:
        name = path.lstrip("/")
        if not name or "/" in name or name in (".", ".."):
            raise _error(errno.ENOENT)
        return self.backing / name

    @staticmethod
    def _attrs(st: os.stat_result) -> dict[str, Any]:
        return {
            "st_mode": st.st_mode,
            "st_nlink": st.st_nlink,
            "st_size": st.st_size,
            "st_uid": st.st_uid,
            "st_gid": st.st_gid,
            "st_blocks": st.st_blocks,
            "st_blksize": st.st_blksize,
            "st_atime": st.st_atime_ns,
            "st_mtime": st.st_mtime_ns,
            "st_ctime": st.st_ctime_ns,
        }

    def _keep_thread_state(self) -> None:
        """Keep this libfuse worker's Python thread state between callbacks.

        ctypes wraps every callback from a thread Python did not create in PyGILState_Ensure /
        Release, which creates and destroys a thread state (and maps and unmaps its frame stack)
        on every call. One extra Ensure, never released, keeps it alive for the thread's life:
        measured here, a quarter less CPU per I/O and about 25 % more IOPS at queue depth 16.
        A threading.local lives in the thread state, so it says whether this one is already kept.
        """
        if not getattr(self._thread, "kept", False):
            ctypes.pythonapi.PyGILState_Ensure()
            self._thread.kept = True

    # lifecycle

    def init_with_config(self, conn: Any, config: Any) -> None:
        # The kernel sends loop's async direct I/O as background requests, 12 at most by default:
        # raise that so the arrays' slots, not the FUSE connection, decide how many run at once.
        if conn is not None:
            conn.max_background = self.max_inflight
            conn.congestion_threshold = self.max_inflight
        log.info("mounted", max_inflight=self.max_inflight)

    # metadata

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if path == "/":
            return self._attrs(self.backing.stat())
        st = os.fstat(fh) if fh is not None else self._path(path).lstat()
        if not stat.S_ISREG(st.st_mode):
            raise _error(errno.ENOENT)  # only regular files are exposed: the tree is flat
        return self._attrs(st)

    def readdir(self, path: str, fh: int) -> list[str]:
        if path != "/":
            raise _error(errno.ENOTDIR)
        names = [".", ".."]
        with os.scandir(self.backing) as entries:
            names.extend(e.name for e in entries if e.is_file(follow_symlinks=False))
        return names

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.backing)
        return {
            "f_bsize": sv.f_bsize, "f_frsize": sv.f_frsize, "f_blocks": sv.f_blocks, "f_bfree": sv.f_bfree,
            "f_bavail": sv.f_bavail, "f_files": sv.f_files, "f_ffree": sv.f_ffree, "f_favail": sv.f_favail,
            "f_namemax": sv.f_namemax,
        }  # fmt: skip

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            target = self._path(path)
            if not stat.S_ISREG(target.lstat().st_mode):
                raise _error(errno.ENOENT)
            os.truncate(target, length)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        target = self._path(path)
        st = target.lstat()
        now = time.time_ns()
        # libfuse passes `touch`'s "now" and "leave as is" as tv_sec 0 with these tv_nsec markers,
        # which mfusepy folds into plain nanoseconds.
        atime, mtime = (
            now if value == UTIME_NOW else current if value == UTIME_OMIT else value
            for value, current in zip(
                times or (UTIME_NOW, UTIME_NOW), (st.st_atime_ns, st.st_mtime_ns), strict=True
            )
        )
        os.utime(target, ns=(atime, mtime), follow_symlinks=False)
        return 0

    # data

    def open(self, path: str, flags: int) -> int:
        target = self._path(path)
        if not stat.S_ISREG(target.lstat().st_mode):
            raise _error(errno.ENOENT)
        # Only the access mode is passed on: O_DIRECT from the loop driver is about the FUSE file
        # (direct_io already sends every I/O here); on the backing file it would demand aligned
        # buffers and be refused by some filesystems (tmpfs), and the backing is only storage.
        fd = os.open(target, (flags & os.O_ACCMODE) | os.O_CLOEXEC)
        self._luns[fd] = lun_of(target.name)
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._keep_thread_state()
        return self.injector.serve(self._luns.get(fh), "read", size, lambda: os.pread(fh, size, offset))

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._keep_thread_state()
        return self.injector.serve(
            self._luns.get(fh), "write", len(data), lambda: os.pwrite(fh, data, offset)
        )

    def flush(self, path: str, fh: int) -> int:
        return 0  # nothing is buffered here: writes went to the backing file already

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        # Deliberately not passed on: the images are scratch space removed at `lab down`, and a real
        # fsync would add the host disk's latency to the loop device's flushes, which the lab controls.
        return 0

    def release(self, path: str, fh: int) -> int:
        self._luns.pop(fh, None)
        os.close(fh)
        return 0

    # the namespace is fixed: the caller creates the images in the backing directory beforehand

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        raise _error(errno.EPERM)

    def mknod(self, path: str, mode: int, dev: int) -> int:
        raise _error(errno.EPERM)

    def mkdir(self, path: str, mode: int) -> int:
        raise _error(errno.EPERM)

    def unlink(self, path: str) -> int:
        raise _error(errno.EPERM)

    def rmdir(self, path: str) -> int:
        raise _error(errno.EPERM)

    def rename(self, old: str, new: str) -> int:
        raise _error(errno.EPERM)

    def symlink(self, target: str, source: str) -> int:
        raise _error(errno.EPERM)

    def link(self, target: str, source: str) -> int:
        raise _error(errno.EPERM)

    def chmod(self, path: str, mode: int) -> int:
        raise _error(errno.EPERM)

    def chown(self, path: str, uid: int, gid: int) -> int:
        raise _error(errno.EPERM)


def mount(fs: LabFS, mountpoint: Path) -> None:
    """Serve `fs` on `mountpoint` until unmounted or signalled (blocks; libfuse owns the signals)."""
    import mfusepy  # type: ignore[import-untyped]  # noqa: PLC0415 - loads libfuse: only when mounting

    mfusepy.FUSE(
        fs,
        str(mountpoint),
        foreground=True,
        nothreads=False,  # multithreaded: every I/O waits in its own worker thread
        direct_io=True,  # no page cache: every read and write of the loop device reaches `fs`
        fsname="lunlat-lab",
        max_threads=fs.max_inflight,
        # Idle workers are kept: a worker that exits and is re-created costs a thread and a Python
        # thread state, paid on the I/O path.
        max_idle_threads=fs.max_inflight,
    )


# --- command line --------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lunlat.lab.fusefs",
        description="Mount the lab's latency-injecting FUSE filesystem (foreground; stop with SIGTERM).",
    )
    parser.add_argument("--backing", type=Path, required=True, help="directory holding the <lun>.img files")
    parser.add_argument("--mount", type=Path, required=True, help="empty directory to mount on")
    parser.add_argument("--settings", type=Path, required=True, help="settings JSON (lab/settings.py)")
    parser.add_argument(
        "--max-inflight",
        type=int,
        default=DEFAULT_MAX_INFLIGHT,
        help=f"I/Os served at once over all arrays (default {DEFAULT_MAX_INFLIGHT})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.setup("info", "logfmt")
    # Absolute: libfuse changes the working directory when it mounts.
    backing, mountpoint, settings_file = (p.absolute() for p in (args.backing, args.mount, args.settings))
    problems = [f"{flag} {path} is not a directory" for flag, path in
                (("--backing", backing), ("--mount", mountpoint)) if not path.is_dir()]  # fmt: skip
    if args.max_inflight < 1:
        problems.append(f"--max-inflight must be at least 1, got {args.max_inflight}")
    seen = file_signature(settings_file)  # before reading: a change from now on is noticed
    try:
        settings = load_settings(settings_file)
    except SettingsError as exc:
        problems.append(str(exc))
    if problems:
        log.error("cannot start", err="; ".join(problems))
        return 2
    # Before libfuse starts its workers, so they inherit it.
    slack = lower_timer_slack()
    prioritized = raise_priority()
    injector = Injector(settings)
    watcher = SettingsWatcher(settings_file, injector.apply, seen=seen)
    log.info(
        "starting",
        mount=str(mountpoint), backing=str(backing), settings=str(settings_file), luns=len(settings.luns), arrays=len(settings.arrays), timer_slack_lowered=slack, nice=DAEMON_NICE if prioritized else os.getpriority(os.PRIO_PROCESS, 0), pid=os.getpid(),
    )  # fmt: skip
    watcher.start()
    try:
        mount(LabFS(backing, injector, args.max_inflight), mountpoint)
        reason = "unmounted"
    except RuntimeError as exc:
        # mfusepy raises fuse_main's status when it is not 0. 8: the loop ended with an error,
        # which is how libfuse 3 reports the SIGTERM/SIGINT/SIGHUP its own handler caught (libfuse
        # also prints real device errors itself). Lower values: the mount itself failed.
        if str(exc) != str(FUSE_LOOP_ENDED):
            log.error("libfuse failed", fuse_main_status=str(exc))
            return 1
        reason = "signal"
    finally:
        watcher.stop()
    log.info("stopped", reason=reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
