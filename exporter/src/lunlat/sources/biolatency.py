"""Per-I/O latency histograms of the published LUNs from the kernel's block tracepoints (issue 17).

Engine: two small BPF programs lunlat loads itself through bpf(2) (sources/bpf/: the kernel's BTF
for struct offsets, the system call, an assembler; docs/metrics.md, "Per-I/O latency histograms", says why).
They run on the raw tracepoints block_rq_issue and block_rq_complete; per I/O they look up the
device's slot in a hash map (only published devices are there: the filter runs in the kernel) and
add to that slot's per-CPU counters: a log2 bucket and the summed latency at completion, the summed
queue time at issue. lunlat reads the counters at scrape time. Nothing per I/O crosses into user
space, and no per-request state is kept: the latency is the kernel's own `now - rq->start_time_ns`,
what diskstats' time counts (sources/bpf/programs.py cites each fact the programs rely on).

Counted apart, as `lunlat_source_errors_total{source="biolatency"}` reasons:
- `untimed_io`: a completion of a published device whose request had no start time (I/O statistics
  off for its queue: diskstats does not count it either).
- `missed_io`: program runs the kernel skipped because the same program was already running on that
  CPU (kernel/trace/bpf_trace.c __bpf_trace_run: `bpf_prog_inc_misses_counter`; the count is
  `recursion_misses` in the program fd's /proc/self/fdinfo, kernel/bpf/syscall.c
  bpf_prog_show_fdinfo). Such an I/O is in diskstats but not in the histogram.
- `map_full`: a published device left untraced because `max_devices` slots are in use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lunlat import contract, logs
from lunlat.config import BiolatencyConfig
from lunlat.model import Family, LabelSet
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.bpf import programs, syscall
from lunlat.sources.bpf.btf import VMLINUX, Btf, BtfError
from lunlat.sources.bpf.programs import BUCKETS, NS_AT, QUEUE_AT, UNTIMED_AT, VALUE_SIZE
from lunlat.sources.factory import BuildError, Context
from lunlat.sources.published import PublishedDevice, PublishedDevices

log = logs.get(__name__)

MINORBITS = programs.MINORBITS  # include/linux/kdev_t.h: the kernel's dev_t is major << 20 | minor
OPS: tuple[str, ...] = contract.BIO_OPS  # index 0 read, 1 write, as the programs number them
WORDS = VALUE_SIZE // 8  # u64 counters per (device, op) and CPU
RECHECK_UNAVAILABLE = 60.0  # how often a load that failed (no permission yet, say) is tried again
# Linux capabilities (include/uapi/linux/capability.h): loading tracing programs and reading kernel
# memory from them needs CAP_BPF and CAP_PERFMON (kernel 5.8+), or CAP_SYS_ADMIN, or root.
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39
# Raw tracepoints (include/trace/events/block.h): block_io_done since kernel 6.5 (block/blk-mq.c,
# blk_account_io_done), the other two in every kernel with raw tracepoints.
DONE, COMPLETE, ISSUE = "block_io_done", "block_rq_complete", "block_rq_issue"


def kernel_dev(major: int, minor: int) -> int:
    return major << MINORBITS | minor


def format_le(bound: float) -> str:
    """Each bound is an exact binary scaling of 0.001, so repr prints "0.001", "0.512", "7.8125e-06"."""
    return repr(bound)


LE_VALUES: tuple[str, ...] = tuple(format_le(b) for b in contract.BIO_BUCKETS)


@dataclass(frozen=True, slots=True)
class Counters:
    """One device's and op's counters, summed over CPUs: per bucket (the last is +Inf), ns, queue ns."""

    buckets: tuple[int, ...] = (0,) * BUCKETS
    ns: int = 0
    queue_ns: int = 0
    untimed: int = 0

    @classmethod
    def from_percpu(cls, raw: bytes) -> Counters:
        """Sum an element read from the per-CPU map: each CPU's VALUE_SIZE bytes in turn."""
        words = memoryview(raw).cast("Q")
        sums = [sum(words[i::WORDS]) for i in range(WORDS)]
        return cls(tuple(sums[:BUCKETS]), sums[NS_AT // 8], sums[QUEUE_AT // 8], sums[UNTIMED_AT // 8])

    def cumulative(self) -> tuple[list[int], int]:
        """Counts below each contract bound and the total."""
        out, running = [], 0
        for count in self.buckets[:-1]:
            running += count
            out.append(running)
        return out, running + self.buckets[-1]


def families(
    counters: Mapping[tuple[int, int], Counters], devices: Mapping[tuple[int, int], PublishedDevice]
) -> list[Family]:
    """The histogram and queue-time families of `devices` (keyed (dev_t, op)), zeros for a device with
    no I/O yet so its series exist from the start (2 ops x (18 buckets + _sum + _count + queue))."""
    hist = Family(contract.DEVICE_IO_LATENCY)
    queue = Family(contract.DEVICE_IO_QUEUE_TIME)
    names = (*contract.BIO_LABELS, "le")
    empty = Counters()
    for (major, minor), device in devices.items():
        dev = kernel_dev(major, minor)
        for op_index, op in enumerate(OPS):
            c = counters.get((dev, op_index), empty)
            values = (device.lun, device.device, op)
            labels = LabelSet(contract.BIO_LABELS, values)
            below, total = c.cumulative()
            for le, count in zip(LE_VALUES, below, strict=True):
                hist.add(LabelSet(names, (*values, le)), count, "_bucket")
            hist.add(LabelSet(names, (*values, "+Inf")), total, "_bucket")
            hist.add(labels, c.ns / 1e9, "_sum")
            hist.add(labels, total, "_count")
            queue.add(labels, c.queue_ns / 1e9)
    return [hist, queue]


# --- the engine -----------------------------------------------------------------------------------


def _effective_capabilities(status: Path = Path("/proc/self/status")) -> int:
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def unavailable_cause(
    euid: int | None = None, capabilities: int | None = None, btf: Path = VMLINUX
) -> str | None:
    """Why the programs cannot be loaded here, with the fix, or None. Checked before a load so the
    log names the cause rather than an errno."""
    if not sys.platform.startswith("linux"):
        return "needs Linux (eBPF and the block tracepoints); nothing to fix on this platform"
    if syscall.syscall_number() is None:
        return f"no bpf(2) system call number known for {os.uname().machine}"
    caps = _effective_capabilities() if capabilities is None else capabilities
    privileged = (os.geteuid() if euid is None else euid) == 0 or bool(caps & (1 << CAP_SYS_ADMIN))
    if not privileged and not (caps & (1 << CAP_BPF) and caps & (1 << CAP_PERFMON)):
        return (
            "loading BPF programs needs root or CAP_BPF and CAP_PERFMON: run lunlat as root, grant "
            "those capabilities (systemd: AmbientCapabilities=CAP_BPF CAP_PERFMON) or turn biolatency off"
        )
    if not btf.exists():
        return f"the kernel has no BTF ({btf} is missing: CONFIG_DEBUG_INFO_BTF, kernel 5.2+); turn biolatency off"
    return None


class Engine:
    """The loaded programs and maps; published devices get a slot each in the kernel's device map.

    Loaded at the first `sync` (the kernel's BTF takes about half a second to read), again a minute
    after a failed load. Every kernel object is a file descriptor: `close()` detaches and frees all.
    """

    def __init__(self, config: BiolatencyConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._clock = clock
        self._lock = threading.Lock()
        self._fds: list[int] = []
        self._programs: list[int] = []
        self._devices_fd = -1
        self._stats_fd = -1
        self._cpus = 0
        self._slots: dict[int, int] = {}  # kernel dev_t -> slot
        self.tracepoints: list[str] = []  # what the programs are attached to
        self._free: list[int] = []
        self.unavailable: str | None = None
        self._tried_at: float | None = None
        self._closed = False

    @property
    def config(self) -> BiolatencyConfig:
        return self._config

    def load(self) -> str | None:
        """Load and attach unless done; the cause when it cannot (kept until the next try)."""
        with self._lock:
            if self._programs or self._closed:
                return None
            now = self._clock()
            if self._tried_at is not None and now - self._tried_at < RECHECK_UNAVAILABLE:
                return self.unavailable
            self._tried_at = now
            self.unavailable = unavailable_cause() or self._load()
            return self.unavailable

    def _load(self) -> str | None:
        try:
            offsets = programs.Offsets.of(Btf.kernel())
            self._cpus = syscall.possible_cpus()
            size = self._config.max_devices
            self._devices_fd = syscall.create_map(syscall.MAP_TYPE_HASH, 4, 4, size, "lunlat_devices")
            self._fds.append(self._devices_fd)
            self._stats_fd = syscall.create_map(
                syscall.MAP_TYPE_PERCPU_ARRAY, 4, VALUE_SIZE, size * len(OPS), "lunlat_io"
            )
            self._fds.append(self._stats_fd)
            self._attach(offsets)
        except (BtfError, OSError, ValueError) as exc:
            self._close_fds()
            if isinstance(exc, OSError) and exc.errno in (errno.EPERM, errno.EACCES):
                return f"the kernel refused: {exc} (root, or CAP_BPF and CAP_PERFMON, and no lockdown)"
            return f"cannot load the BPF programs: {exc}"
        self._slots, self._free = {}, list(range(self._config.max_devices - 1, -1, -1))
        log.info(
            "biolatency programs attached",
            tracepoints=",".join(self.tracepoints),
            max_devices=self._config.max_devices,
        )
        return None

    def _attach(self, offsets: programs.Offsets) -> None:
        """The completion program on block_io_done where the kernel has it (6.5+) and its BTF names the
        flags diskstats tests, else on block_rq_complete; the issue program on block_rq_issue."""
        choices = [(DONE, programs.done)] if offsets.accounting_known else []
        choices.append((COMPLETE, programs.complete))
        for tracepoint, build in choices:
            code = build(offsets, self._devices_fd, self._stats_fd)
            prog = syscall.load_program(syscall.PROG_TYPE_RAW_TRACEPOINT, code, f"lunlat_{tracepoint[6:]}")
            self._fds.append(prog)
            try:
                self._fds.append(syscall.attach_raw_tracepoint(tracepoint, prog))
            except OSError as exc:
                if exc.errno == errno.ENOENT and tracepoint == DONE:
                    continue  # a kernel before 6.5: the next choice
                raise
            self._programs.append(prog)
            self.tracepoints.append(tracepoint)
            break
        code = programs.issue(offsets, self._devices_fd, self._stats_fd)
        prog = syscall.load_program(syscall.PROG_TYPE_RAW_TRACEPOINT, code, "lunlat_rq_issue")
        self._fds.append(prog)
        self._fds.append(syscall.attach_raw_tracepoint(ISSUE, prog))
        self._programs.append(prog)
        self.tracepoints.append(ISSUE)

    def sync(self, devices: list[int]) -> list[int]:
        """Trace exactly these devices (kernel dev_t); the ones left out for want of a slot."""
        with self._lock:
            if not self._programs:
                return []
            wanted = set(devices)
            for dev in [d for d in self._slots if d not in wanted]:
                syscall.delete(self._devices_fd, struct.pack("<I", dev))
                self._free.append(self._slots.pop(dev))
            left_out = []
            zeros = bytes(VALUE_SIZE * self._cpus)
            for dev in devices:
                if dev in self._slots:
                    continue
                if not self._free:
                    left_out.append(dev)
                    continue
                slot = self._free.pop()
                for op in range(len(OPS)):  # a reused slot starts from zero before the kernel sees it
                    syscall.update(self._stats_fd, struct.pack("<I", slot * len(OPS) + op), zeros)
                syscall.update(self._devices_fd, struct.pack("<I", dev), struct.pack("<I", slot))
                self._slots[dev] = slot
            return left_out

    def counters(self) -> dict[tuple[int, int], Counters]:
        """Every traced device's counters, keyed (dev_t, op)."""
        with self._lock:
            out = {}
            for dev, slot in self._slots.items():
                for op in range(len(OPS)):
                    raw = syscall.lookup(
                        self._stats_fd, struct.pack("<I", slot * len(OPS) + op), VALUE_SIZE * self._cpus
                    )
                    out[(dev, op)] = Counters.from_percpu(raw) if raw is not None else Counters()
            return out

    def missed(self) -> int:
        """The programs' recursion misses so far (see the module docstring)."""
        with self._lock:
            return sum(int(syscall.fdinfo(fd).get("recursion_misses", "0") or 0) for fd in self._programs)

    def program_fds(self) -> list[int]:
        return list(self._programs)

    def _close_fds(self) -> None:
        for fd in reversed(self._fds):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds, self._programs, self.tracepoints = [], [], []

    def close(self) -> None:
        """Detach the programs and free the maps; idempotent."""
        with self._lock:
            self._closed = True
            self._close_fds()


# --- the source -----------------------------------------------------------------------------------


class BiolatencySource:
    """lunlat_device_io_latency_seconds and lunlat_device_io_queue_time_seconds_total per published LUN."""

    name = "biolatency"
    error_reasons: tuple[str, ...] = ("unavailable", "untimed_io", "missed_io", "map_full")
    timeout: float | None = None

    def __init__(self, engine: Engine, published: PublishedDevices, board_wait: float = 2.0) -> None:
        self._engine = engine
        self._published = published
        self._board_wait = board_wait
        self._untimed = 0  # untimed completions counted so far, over the traced devices
        self._missed = 0
        self._left_out: frozenset[int] = frozenset()
        self._unavailable_counted = False

    def collect(self) -> SourceResult:
        cause = self._engine.load()
        if cause is not None:
            count = 0 if self._unavailable_counted else 1
            self._unavailable_counted = True
            raise SourceError("unavailable", f"biolatency is off: {cause}", count=count)
        self._unavailable_counted = False
        _version, devices = self._published.wait(self._board_wait)
        if self._engine.config.only_with_role:
            devices = {k: d for k, d in devices.items() if d.role}
        errors: Counter[str] = Counter()
        try:
            left_out = self._engine.sync([kernel_dev(*k) for k in devices])
            counters = self._engine.counters()
        except OSError as exc:
            raise SourceError("unavailable", f"reading the BPF maps failed: {exc}") from None
        new = frozenset(left_out) - self._left_out
        if new:
            errors["map_full"] += len(new)
            log.warning(
                "biolatency: devices left untraced, all max_devices slots in use",
                devices=len(left_out),
                max_devices=self._engine.config.max_devices,
            )
        self._left_out = frozenset(left_out)
        untimed = sum(c.untimed for c in counters.values())
        errors["untimed_io"] += max(0, untimed - self._untimed)
        self._untimed = untimed
        missed = self._engine.missed()
        errors["missed_io"] += max(0, missed - self._missed)
        self._missed = missed
        traced = {k: d for k, d in devices.items() if kernel_dev(*k) not in self._left_out}
        return SourceResult(families(counters, traced), +errors)

    def carry_over(self, previous: object) -> None:
        """After a reload with the same biolatency settings, take over the loaded programs and what
        was counted (base.CarriesState): the histograms go on without a counter reset. The
        predecessor gets the unloaded engine, so retiring it detaches nothing that runs."""
        if isinstance(previous, BiolatencySource) and previous._engine.config == self._engine.config:
            self._engine, previous._engine = previous._engine, self._engine
            self._untimed, self._missed, self._left_out = (
                previous._untimed,
                previous._missed,
                previous._left_out,
            )

    def close(self) -> None:
        self._engine.close()


def build(context: Context) -> list[BiolatencySource] | BuildError:
    """The biolatency source when enabled. What the host lacks (permission, BTF, Linux) is not a
    build error: the source runs and reports `lunlat_source_up 0` naming the cause, and every other
    source serves. Only a contradiction on the command line is: biolatency names LUNs by the
    diskstats topology, so an explicit --collector.host.source=psutil cannot have it."""
    config = context.biolatency()
    if not config.enabled:
        return []
    if context.settings.host_source == "psutil":
        return BuildError(
            "--collector.biolatency needs the diskstats host source to name LUNs: drop --collector.host.source=psutil"
        )
    return [BiolatencySource(Engine(config), context.published)]
