"""Live calibration: each LUN's overhead per op and size class, measured from the kernel's own counters.

The daemon holds each I/O for target + transfer - overhead, where the overhead is what an I/O costs
outside the daemon's hold (FUSE round trip, wake-ups, the loop driver). `lab up` measures one figure
for all LUNs; it varies from one `up` to the next and with each LUN's rate and I/O kind (a 5 IOPS
reader pays idle wake-ups, an O_SYNC writer less). So the supervisor measures it per (LUN, op):

    overhead = diskstats' mean latency - the daemon's mean modelled service time, over the same window

and, where the kernel's side has them, per size class: (LUN, op, size class), the classes of the
exporter's biolatency source, which the daemon counts by too (labd.c size_class). What an I/O costs
outside the daemon grows with its bytes (the FUSE round trip copies them), so one figure for a LUN
whose writes mix a snapshot copy's 1 MiB with 8K held the 8K writes too short: in one of twelve strict
reference runs (2026-11-29) the snapshot copies' data writes came out 0.032 and 0.049 ms low.

The daemon's modelled service time runs from its callback receiving the I/O to its slot, plus the
hold the model asked for (labd.c serve()): the wait for the array's slots and the hold, everything
the array model means to show, and nothing else. The difference is therefore only the lab's own
cost, and subtracting it does not feed the measured latency back onto the target: queueing in the
array model stays in the daemon's time, is not part of the estimate, and still shows in diskstats.
What is counted as overhead and removed: the FUSE round trip, the loop driver, anything queued
outside the daemon, and, inside it, a wake-up later than its deadline or a pread/pwrite longer than
its hold (counting the clock's time there left the busiest phases about 0.03 ms high).

Windows: a stream closes a window once it has MIN_IOS completions, or MAX_WINDOW_S seconds with
at least MIN_IOS_SLOW. The kernel's side comes from KernelTimes: nanosecond sums per size class from
the BPF engine where it loads (then short windows, NS_*), else diskstats, whose sums are whole
milliseconds and of every size (then long windows: a window's mean is off by up to 1 ms / its I/Os,
0.05 ms at 20). A window whose kernel and daemon counts disagree by more than COUNT_MISMATCH (the loop
driver split the I/Os) is dropped. On diskstats, so is one whose I/Os average more than
LARGE_IO_BYTES: a snapshot copy's 1 MiB writes cost more outside the daemon than the 8K OLTP writes
that follow them. Each window's figure moves an EWMA
(ALPHA), bounded to [0, MAX_MS], through the low median of the last MEDIAN_OF windows: one window
spiked by a stall on the host (one 64K read of a 20 IOPS log reader took 35 ms outside the daemon in
the short reference test) would otherwise move the estimate by a third of the spike, and the seconds
of over-subtraction while it decays pulled that 20 s phase's mean 0.05 ms below its target; a
lasting change gets through after two windows. Before its first window a (LUN, op) keeps `lab up`'s
figure, which the daemon applies from the settings; its first window starts the EWMA from the other
LUNs' estimates for the op where there are any (Estimator._prior). Only the native engine measures
and applies it (the Python engine keeps `lab up`'s single figure).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lunlat import logs
from lunlat.config import BiolatencyConfig
from lunlat.sources.biolatency import OPS, SIZES, Engine, kernel_dev
from lunlat.sources.diskstats_format import READ_SECTORS, SECTOR_BYTES, WRITE_SECTORS, parse
from lunlat_lab import measure, system
from lunlat_lab.native import ServiceTotals, Stream
from lunlat_lab.state import stream_key, write_live

log = logs.get("lunlat.lab.daemon")

POLL_SECONDS = 1.0
MIN_IOS = 100
MIN_IOS_SLOW = 20
MAX_WINDOW_S = 30.0
# With the kernel's own nanosecond sums (the biolatency source's BPF engine, below) a window needs
# no more completions than its mean needs: the 5 IOPS log readers close one every 4 s, not 20 s.
NS_MIN_IOS, NS_MIN_IOS_SLOW, NS_MAX_WINDOW_S = 20, 10, 5.0
ALPHA = 0.3
MEDIAN_OF = 3
MAX_MS = 2.0
COUNT_MISMATCH = 0.25
# On diskstats (every size in one window), a window whose I/Os average more than this is dropped. The
# lab's steady mixes stay well below it: a DSS LUN's 40/s 512K scans beside 120/s 8K OLTP reads
# average about 134K (their cost is the cell's average: kept). A snapshot copy at its capped rate (32
# 1 MiB writes a second beside 20 8K ones) averages 500K and more: it costs more outside the daemon
# than the 8K writes that follow it, and the estimate it left (0.29 ms against 0.07 at 768K, the
# threshold before) took 15 s to decay. A window holding only the copy's first or last few writes
# (under 7) passes, at most about 0.09 ms high, and the median holds off one such window. Per size
# class (BPF) no window mixes them.
LARGE_IO_BYTES = 256 * 1024
IMAGE_SUFFIX = ".img"


@dataclass(frozen=True, slots=True)
class Sample:
    """Cumulative counters of one (LUN, op) at one moment: the kernel's and the daemon's."""

    at: float  # monotonic seconds
    disk_ios: float
    disk_seconds: float
    daemon_ios: int
    daemon_ns: int
    disk_bytes: float = 0.0


Key = tuple[str, str, str | None]  # (LUN, op, size class or None: every size)
# The kernel's completions and their summed seconds by stream, per device.
KernelCounts = dict[str, dict[Stream, tuple[float, float]]]


class Estimator:
    """The smoothed overhead per (LUN, op, size class), in ms, from successive cumulative samples."""

    def __init__(
        self,
        min_ios: int = MIN_IOS,
        min_ios_slow: int = MIN_IOS_SLOW,
        max_window_s: float = MAX_WINDOW_S,
        alpha: float = ALPHA,
        max_ms: float = MAX_MS,
        median_of: int = MEDIAN_OF,
    ) -> None:
        self.min_ios, self.min_ios_slow, self.max_window_s = min_ios, min_ios_slow, max_window_s
        self.alpha, self.max_ms, self.median_of = alpha, max_ms, median_of
        self._start: dict[Key, Sample] = {}
        self._recent: dict[Key, deque[float]] = {}  # the last windows' measured figures
        self.values: dict[Key, float] = {}  # only streams measured at least once
        self.windows: dict[Key, int] = {}

    def observe(self, lun: str, op: str, sample: Sample, initial: float, size: str | None = None) -> bool:
        """One sample of (LUN, op, size class; None: every size); True when it closed a window and
        the estimate changed. `initial`: the value the EWMA starts from (`lab up`'s figure)."""
        key = (lun, op, size)
        start = self._start.get(key)
        if start is None or sample.disk_ios < start.disk_ios or sample.daemon_ios < start.daemon_ios:
            self._start[key] = sample  # first sight, or counters reset (new device, new daemon)
            return False
        disk_ios = sample.disk_ios - start.disk_ios
        daemon_ios = sample.daemon_ios - start.daemon_ios
        elapsed = sample.at - start.at
        if not (disk_ios >= self.min_ios or (elapsed >= self.max_window_s and disk_ios >= self.min_ios_slow)):
            if elapsed >= self.max_window_s and disk_ios == 0:
                self._start[key] = sample  # idle: the next window starts when I/O does
            return False
        self._start[key] = sample
        if daemon_ios <= 0 or abs(daemon_ios - disk_ios) > COUNT_MISMATCH * disk_ios:
            return False
        if size is None and (sample.disk_bytes - start.disk_bytes) / disk_ios > LARGE_IO_BYTES:
            return False
        disk_ms = (sample.disk_seconds - start.disk_seconds) / disk_ios * 1000
        daemon_ms = (sample.daemon_ns - start.daemon_ns) / daemon_ios / 1e6
        measured = disk_ms - daemon_ms
        if not math.isfinite(measured):
            return False
        previous = self.values[key] if key in self.values else self._prior(op, size, initial)
        windows = self.windows.get(key, 0)
        log.debug(
            "calibration window", lun=lun, op=op, size=size or "all", ios=int(disk_ios),
            daemon_ios=daemon_ios, seconds=round(elapsed, 2), kernel_ms=round(disk_ms, 4),
            daemon_ms=round(daemon_ms, 4), estimate_ms=round(previous, 4),
        )  # fmt: skip
        recent = self._recent.setdefault(key, deque(maxlen=self.median_of))
        recent.append(measured)
        # Low median: of two windows the lower, so a spike in a LUN's second window is held off too.
        measured = statistics.median_low(recent)
        # The first windows weigh as a running mean with `initial` as one sample (1/2, 1/3), then
        # alpha: a short scenario phase converges in a few windows, a long run stays smooth.
        alpha = max(self.alpha, 1 / (windows + 2))
        value = min(max(previous + alpha * (measured - previous), 0.0), self.max_ms)
        self.values[key] = value
        self.windows[key] = windows + 1
        return True

    def _prior(self, op: str, size: str | None, initial: float) -> float:
        """Where a stream's first window starts from: the low median of the other LUNs' estimates
        for the op and size class, measured under the load of the moment, else `initial`. A LUN
        that wakes up late (a snapshot copy in the scenario's last phase) otherwise starts from `lab
        up`'s figure, measured on an idle lab (0.11 ms against 0.07 measured beside the busiest
        phase), and spends its first seconds over-subtracting."""
        others = [value for (_, o, s), value in self.values.items() if (o, s) == (op, size)]
        return statistics.median_low(others) if others else initial

    def reset(self) -> None:
        """Forget the estimates (not the windows' starts): a new `lab up` figure starts them over."""
        self.values.clear()
        self.windows.clear()
        self._recent.clear()

    def overheads(self) -> dict[str, dict[Stream, float]]:
        """The measured estimates by LUN and stream (ms)."""
        result: dict[str, dict[Stream, float]] = {}
        for (lun, op, size), value in self.values.items():
            result.setdefault(lun, {})[(op, size)] = value
        return result


def lun_devices(mountpoint: Path, sysfs: Path = Path("/sys")) -> dict[str, str]:
    """Kernel device name (loopN) by LUN, for the loop devices on `<mountpoint>/<lun>.img`."""
    found = {}
    for device, backing in system.loops_under(mountpoint, sysfs).items():
        name = Path(backing).name
        if Path(backing).parent == mountpoint and name.endswith(IMAGE_SUFFIX):
            found[name.removesuffix(IMAGE_SUFFIX)] = Path(device).name
    return found


def samples(
    at: float,
    devices: dict[str, str],
    disk: KernelCounts,
    daemon: dict[str, ServiceTotals],
    disk_bytes: dict[str, tuple[float, float]] | None = None,
) -> dict[Key, Sample]:
    """The samples of each stream the kernel's side counts, for the LUNs known to both the kernel
    and the daemon. `disk_bytes`: bytes read and written so far by device (disk_bytes()), for the
    streams of every size."""
    result = {}
    for lun, device in devices.items():
        streams, totals = disk.get(device), daemon.get(lun)
        if streams is None or totals is None:
            continue
        moved = (disk_bytes or {}).get(device, (0.0, 0.0))
        for (op, size), (ios, seconds) in streams.items():
            daemon_ios, daemon_ns = totals.of(op, size)
            nbytes = moved[OPS.index(op)] if size is None else 0.0
            result[(lun, op, size)] = Sample(at, ios, seconds, daemon_ios, daemon_ns, nbytes)
    return result


def disk_bytes(procfs: Path = Path("/proc")) -> dict[str, tuple[float, float]]:
    """Bytes read and written so far by device, from /proc/diskstats."""
    table, _ = parse((procfs / "diskstats").read_bytes())
    c = table.columns
    return {
        name: (c[READ_SECTORS][i] * SECTOR_BYTES, c[WRITE_SECTORS][i] * SECTOR_BYTES)
        for i, name in enumerate(table.names)
    }


class KernelTimes:
    """Completions and their summed latency per loop device, in nanoseconds and per size class where
    they can be had.

    /proc/diskstats prints each device's summed time in whole milliseconds (block/genhd.c
    diskstats_show divides the nanosecond sums by NSEC_PER_MSEC), so a window of n completions is off
    by up to 1/n ms; 100-completion windows keep that to 0.01 ms but take a 5 IOPS LUN 20 s. The
    biolatency source's BPF engine (sources/biolatency.py) counts the same completions at the same
    moment as diskstats (block_io_done) with nanosecond sums, per op and size class: used where it
    loads (root, BTF), with short windows; diskstats otherwise (every size in one stream per op).
    """

    def __init__(self, sysfs: Path = Path("/sys")) -> None:
        self._sysfs = sysfs
        self._engine: Engine | None = None
        self._tried = False
        self._numbers: dict[str, int] = {}

    @property
    def nanoseconds(self) -> bool:
        return self._engine is not None

    def _load(self) -> None:
        self._tried = True
        engine = Engine(BiolatencyConfig(enabled=True, max_devices=256))
        cause = engine.load()
        if cause is None:
            self._engine = engine
            log.info("live calibration on the kernel's nanosecond sums (BPF)")
        else:
            engine.close()
            log.info("live calibration on /proc/diskstats (ms sums)", reason=cause)

    def read(self, devices: list[str]) -> KernelCounts:
        if not self._tried:
            self._load()
        if self._engine is None:
            return {
                name: {
                    ("read", None): (c.reads, c.read_seconds),
                    ("write", None): (c.writes, c.write_seconds),
                }
                for name, c in measure.from_diskstats().items()
            }
        numbers = {name: dev for name in devices if (dev := self._number(name)) is not None}
        self._engine.sync(list(numbers.values()))
        counters = self._engine.counters()
        result: KernelCounts = {}
        for name, dev in numbers.items():
            for op_index, op in enumerate(OPS):
                for size_index, size in enumerate(SIZES):
                    c = counters.get((dev, op_index, size_index))
                    if c is not None:
                        result.setdefault(name, {})[(op, size)] = (float(sum(c.buckets)), c.ns / 1e9)
        return result

    def _number(self, name: str) -> int | None:
        """The kernel dev_t of block device `name`, read from sysfs once: a loopN's number is fixed."""
        if name not in self._numbers:
            try:
                major, minor = (self._sysfs / "block" / name / "dev").read_text().split(":")
            except (OSError, ValueError):
                return None
            self._numbers[name] = kernel_dev(int(major), int(minor))
        return self._numbers[name]

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()


class LiveCalibrator:
    """Every POLL_SECONDS: the daemon's totals, then the kernel's (KernelTimes); the estimates that
    changed are sent to the daemon and all of them written to `live_file` for `lab status`."""

    def __init__(
        self,
        mountpoint: Path,
        live_file: Path,
        stats: Callable[[], dict[str, ServiceTotals] | None],
        send: Callable[[dict[str, dict[Stream, float]]], None],
        initial: Callable[[], dict[str, float]],
        interval: float = POLL_SECONDS,
    ) -> None:
        self.mountpoint, self.live_file = mountpoint, live_file
        self._stats, self._send, self._initial = stats, send, initial
        self._interval = interval
        self.estimator = Estimator()
        self.kernel = KernelTimes()
        self._initial_seen: dict[str, float] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> bool:
        """One round; True when an estimate changed."""
        devices = lun_devices(self.mountpoint)
        if not devices:
            return False
        daemon = self._stats()
        if daemon is None:
            return False
        disk = self.kernel.read(sorted(set(devices.values())))
        if self.kernel.nanoseconds and self.estimator.min_ios != NS_MIN_IOS:
            self.estimator.min_ios, self.estimator.min_ios_slow = NS_MIN_IOS, NS_MIN_IOS_SLOW
            self.estimator.max_window_s = NS_MAX_WINDOW_S
        # Bytes only filter the windows of every size (diskstats'); per size class none is needed.
        sizes = None if self.kernel.nanoseconds else disk_bytes()
        initial = self._initial()
        if self._initial_seen is not None and initial != self._initial_seen and self.estimator.values:
            # A new calibrated figure (`lab up` writes it once its probe is done): start from it.
            forgotten = self.estimator.overheads()
            self.estimator.reset()
            self._send({lun: {(op, None): -1.0 for op in OPS} for lun in forgotten})
            write_live(self.live_file, {})
        self._initial_seen = initial
        changed: set[str] = set()
        for (lun, op, size), sample in samples(time.monotonic(), devices, disk, daemon, sizes).items():
            if self.estimator.observe(lun, op, sample, initial.get(op, 0.0), size):
                changed.add(lun)
        if not changed:
            return False
        overheads = self.estimator.overheads()
        self._send({lun: overheads[lun] for lun in sorted(changed)})
        write_live(
            self.live_file,
            {
                lun: {stream_key(*stream): v for stream, v in streams.items()}
                for lun, streams in overheads.items()
            },
        )
        return True

    def run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except Exception:  # calibration must never stop the daemon serving
                log.error("live calibration error", exc_info=True)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="live-calibration", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self._interval + 1)
        self.kernel.close()
