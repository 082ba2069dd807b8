"""Per-I/O latency histograms of the published LUNs from the kernel's block tracepoints (issue 17),
by op and size class (issue 36).

Engine: three small BPF programs in C (sources/bpf/biolatency.bpf.c, which cites each kernel fact it
relies on), compiled when lunlat is built and loaded by the distribution's libbpf
(sources/bpf/libbpf.py), which relocates them to the running kernel's BTF. Per I/O they look up the
device's slot in a hash map (only published devices are there: the filter runs in the kernel), keep
the request's bytes from issue to completion, and add to that slot's per-CPU counters of the request's
op and size class: a log2 bucket and the summed latency at completion, the summed queue time at
issue. lunlat reads the counters at scrape time; nothing per I/O crosses into user space.

Which completion hook, from the kernel's BTF (never its version): block_io_done where the kernel has
it and names the request flags diskstats tests (enum rqf_flags), else block_rq_complete.

Counted apart, as `lunlat_source_errors_total{source="biolatency"}` reasons:
- `untimed_io`: a completion of a published device whose request had no start time (I/O statistics
  off for its queue: diskstats does not count it either).
- `missed_io`: program runs the kernel skipped because the same program was already running on that
  CPU (kernel/trace/bpf_trace.c __bpf_trace_run: `bpf_prog_inc_misses_counter`; the count is
  `recursion_misses` in the program fd's /proc/self/fdinfo, kernel/bpf/syscall.c
  bpf_prog_show_fdinfo, where the kernel has it). Such an I/O is in diskstats but not in the histogram.
- `unseen_io`: a completed request of a published device that the completion program never ran
  for although the kernel counted no recursion miss (seen on 6.18: bursts of completions ended in
  the block softirq, each traced by the tracepoint's other probes; docs/metrics.md, "What the kernel
  does not show it"). Counted when the request's struct request is issued again for a new request
  (its size entry is still there with another start), so a lost completion is counted late, at the
  reuse of its tag. Such an I/O is in diskstats but not in the histogram.
- `map_full`: a published device left untraced because `max_devices` slots are in use.
- `unsized_io`: a completion whose size was not seen at issue although the request started after
  its device was published to the programs (more requests in flight than the size map holds):
  counted in the small class. A request started before (in flight when the exporter started, or
  when the device appeared) is classed the same way without an error: its issue was out of sight.
- `unknown_issue_prototype`: block_rq_issue fired with a prototype the program does not know, so no
  queue time and no size was taken for that request.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import resource
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lunlat import ground, logs
from lunlat.config import BiolatencyConfig
from lunlat.model import Family, LabelSet
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.bpf import libbpf, object_path
from lunlat.sources.factory import BuildError, Context
from lunlat.sources.published import PublishedDevice, PublishedDevices

log = logs.get(__name__)

MINORBITS = 20  # include/linux/kdev_t.h: the kernel's dev_t is major << 20 | minor
OPS: tuple[str, ...] = ground.BIO_OPS  # index 0 read, 1 write, as the programs number them
SIZES: tuple[str, ...] = ground.BIO_SIZES  # index 0 small, 1 middle, 2 large, likewise
BUCKETS = len(ground.BIO_BUCKETS) + 1  # the last one: at or above the top bound (+Inf)
# struct counters (biolatency.bpf.c): the buckets, then the summed latency, the summed queue time and
# the completions without a start time, all u64. Element ((slot * OPS) + op) * SIZES + size.
WORDS = BUCKETS + 3
VALUE_SIZE = 8 * WORDS
# The `devices` map's value (biolatency.bpf.c struct published): the slot, padding, and since when the
# device is published in nanoseconds of CLOCK_MONOTONIC (time.monotonic_ns, bpf_ktime_get_ns()'s clock).
DEVICE_VALUE = struct.Struct("<IIQ")
NS_AT, QUEUE_AT, UNTIMED_AT = BUCKETS, BUCKETS + 1, BUCKETS + 2  # word indexes
ELEMENTS_PER_DEVICE = len(OPS) * len(SIZES)
# Requests of the published devices in flight at once whose size the `sizes` map can hold (libbpf-tools'
# biolatency keeps its in-flight map at the same 10,240 entries: MAX_ENTRIES).
SIZES_IN_FLIGHT = 10240
PROBLEMS = ("unsized_io", "unknown_issue_prototype", "unseen_io")  # the `problems` map's indexes
# The `sizes` map's value (biolatency.bpf.c struct issued): the request's start and its bytes.
ISSUED_VALUE = struct.Struct("<QII")
RECHECK_UNAVAILABLE = 60.0  # how often a load that failed (no permission yet, say) is tried again
# Linux capabilities (include/uapi/linux/capability.h): loading tracing programs and reading kernel
# memory from them needs CAP_BPF and CAP_PERFMON (kernel 5.8+), or CAP_SYS_ADMIN, or root.
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39
# The programs (biolatency.bpf.c) and the tracepoints they are attached to (include/trace/events/block.h).
DONE, COMPLETE, ISSUE = "lunlat_io_done", "lunlat_rq_complete", "lunlat_rq_issue"
TRACEPOINTS = {DONE: "block_io_done", COMPLETE: "block_rq_complete", ISSUE: "block_rq_issue"}
VMLINUX = Path("/sys/kernel/btf/vmlinux")


def kernel_dev(major: int, minor: int) -> int:
    return major << MINORBITS | minor


def format_le(bound: float) -> str:
    """Each bound is an exact binary scaling of 0.001, so repr prints "0.001", "0.512", "7.8125e-06"."""
    return repr(bound)


LE_VALUES: tuple[str, ...] = tuple(format_le(b) for b in ground.BIO_BUCKETS)


def size_class(nbytes: int) -> str:
    """The size class of a request of `nbytes` (what biolatency.bpf.c's size_class computes)."""
    if nbytes <= ground.BIO_SMALL_MAX:
        return SIZES[0]
    return SIZES[1] if nbytes < ground.BIO_LARGE_MIN else SIZES[2]


def element(slot: int, op: int, size: int) -> int:
    return (slot * len(OPS) + op) * len(SIZES) + size


@dataclass(frozen=True, slots=True)
class Counters:
    """One device's, op's and size class's counters, summed over CPUs: per bucket (the last is +Inf),
    ns, queue ns, untimed."""

    buckets: tuple[int, ...] = (0,) * BUCKETS
    ns: int = 0
    queue_ns: int = 0
    untimed: int = 0

    @classmethod
    def from_percpu(cls, raw: bytes) -> Counters:
        """Sum an element read from the per-CPU map: each CPU's VALUE_SIZE bytes in turn."""
        words = memoryview(raw).cast("Q")
        sums = [sum(words[i::WORDS]) for i in range(WORDS)]
        return cls(tuple(sums[:BUCKETS]), sums[NS_AT], sums[QUEUE_AT], sums[UNTIMED_AT])

    def __add__(self, other: Counters) -> Counters:
        return Counters(
            tuple(a + b for a, b in zip(self.buckets, other.buckets, strict=True)),
            self.ns + other.ns,
            self.queue_ns + other.queue_ns,
            self.untimed + other.untimed,
        )

    def cumulative(self) -> tuple[list[int], int]:
        """Counts below each contract bound and the total."""
        out, running = [], 0
        for count in self.buckets[:-1]:
            running += count
            out.append(running)
        return out, running + self.buckets[-1]


Key = tuple[int, int, int]  # (dev_t, op index, size index)


def families(
    counters: Mapping[Key, Counters], devices: Mapping[tuple[int, int], PublishedDevice]
) -> list[Family]:
    """The histogram and queue-time families of `devices` (counters keyed (dev_t, op, size)), zeros
    for a device with no I/O yet so its series exist from the start (2 ops x 3 sizes x (18 buckets +
    _sum + _count + queue))."""
    hist = Family(ground.DEVICE_IO_LATENCY)
    queue = Family(ground.DEVICE_IO_QUEUE_TIME)
    names = (*ground.BIO_LABELS, "le")
    empty = Counters()
    for (major, minor), device in devices.items():
        dev = kernel_dev(major, minor)
        device_values = device.label_values()  # once per device, not per op and size
        for op_index, op in enumerate(OPS):
            for size_index, size in enumerate(SIZES):
                c = counters.get((dev, op_index, size_index), empty)
                values = (*device_values, op, size)
                labels = LabelSet(ground.BIO_LABELS, values)
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
    euid: int | None = None,
    capabilities: int | None = None,
    btf: Path = VMLINUX,
    bpf_object: Path | None = None,
) -> str | None:
    """Why the programs cannot be loaded here, with the fix, or None. Checked before a load so the
    log names the cause rather than an errno."""
    if not sys.platform.startswith("linux"):
        return "needs Linux (eBPF and the block tracepoints); nothing to fix on this platform"
    obj = object_path() if bpf_object is None else bpf_object
    if not obj.exists():
        return (
            "this lunlat was built without its BPF object (building it needs clang 15+, bpftool and "
            "libbpf-dev: install them, then reinstall lunlat; the DEB, RPM and image carry it)"
        )
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


def refused_cause(exc: OSError) -> str:
    """What a refused load (EPERM, EACCES) means, with the fix. Kernels before 5.11 charge BPF maps to
    RLIMIT_MEMLOCK (Roman Gushchin's series "bpf: switch to memcg-based memory accounting" moved them to
    memory cgroups in 5.11); libbpf raises the limit itself where it may
    (libbpf.py), so a finite limit left after a refusal is the likely cause for a privileged process."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft != resource.RLIM_INFINITY:
        return (
            f"the kernel refused: {exc}. RLIMIT_MEMLOCK is {soft // 1024} KiB and could not be raised: "
            "kernels before 5.11 charge BPF maps to it. Raise it (systemd: LimitMEMLOCK=infinity, as "
            "deploy/systemd/biolatency.conf does; a shell: ulimit -l unlimited); otherwise root, or "
            "CAP_BPF and CAP_PERFMON, and no kernel lockdown are needed"
        )
    return f"the kernel refused: {exc} (root, or CAP_BPF and CAP_PERFMON, and no kernel lockdown)"


class Engine:
    """The loaded programs and maps; published devices get a slot each in the kernel's device map.

    Loaded at the first `sync`, again a minute after a failed load. Every kernel object belongs to
    the libbpf object: `close()` detaches and frees all.
    """

    def __init__(
        self,
        config: BiolatencyConfig,
        clock: Callable[[], float] = time.monotonic,
        custom_btf: Path | None = None,
    ) -> None:
        """`custom_btf`: relocate the programs against this BTF, not the kernel's (tests only)."""
        self._config = config
        self._clock = clock
        self._custom_btf = custom_btf
        self._lock = threading.Lock()
        self._obj: libbpf.BpfObject | None = None
        self._programs: list[int] = []
        self._devices_fd = -1
        self._io_fd = -1
        self._problems_fd = -1
        self._sizes_fd = -1
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
            self._cpus = libbpf.possible_cpus()
            with libbpf.VmlinuxBtf() as btf:
                done = btf.has("btf_trace_block_io_done", libbpf.BTF_KIND_TYPEDEF) and btf.has_enum(
                    "rqf_flags"
                )
            obj = self._obj = libbpf.BpfObject(object_path(), self._custom_btf)
            completion = DONE if done else COMPLETE
            obj.set_autoload(DONE, done)
            obj.set_autoload(COMPLETE, not done)
            size = self._config.max_devices
            obj.set_max_entries("devices", size)
            obj.set_max_entries("io", size * ELEMENTS_PER_DEVICE)
            obj.set_max_entries("sizes", SIZES_IN_FLIGHT)
            sizes = (("io", VALUE_SIZE), ("devices", DEVICE_VALUE.size), ("sizes", ISSUED_VALUE.size))
            for name, size in sizes:
                if obj.value_size(name) != size:
                    raise ValueError(
                        f"the BPF object's {name} values are {obj.value_size(name)} bytes, this lunlat "
                        f"writes {size}: the object is from another lunlat build; reinstall lunlat"
                    )
            obj.load()
            for program in (completion, ISSUE):
                obj.attach(program)
                self._programs.append(obj.program_fd(program))
                self.tracepoints.append(TRACEPOINTS[program])
            self._devices_fd, self._io_fd = obj.map_fd("devices"), obj.map_fd("io")
            self._problems_fd, self._sizes_fd = obj.map_fd("problems"), obj.map_fd("sizes")
        except (OSError, ValueError) as exc:
            self._close_object()
            if isinstance(exc, OSError) and exc.errno in (errno.EPERM, errno.EACCES):
                return refused_cause(exc)
            return f"cannot load the BPF programs: {exc}"
        self._slots, self._free = {}, list(range(self._config.max_devices - 1, -1, -1))
        log.info(
            "biolatency programs attached",
            tracepoints=",".join(self.tracepoints),
            max_devices=self._config.max_devices,
        )
        return None

    def sync(self, devices: list[int]) -> list[int]:
        """Trace exactly these devices (kernel dev_t); the ones left out for want of a slot."""
        with self._lock:
            if not self._programs:
                return []
            wanted = set(devices)
            for dev in [d for d in self._slots if d not in wanted]:
                libbpf.delete(self._devices_fd, struct.pack("<I", dev))
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
                # A reused slot starts from zero before the kernel sees it.
                for index in range(element(slot, 0, 0), element(slot + 1, 0, 0)):
                    libbpf.update(self._io_fd, struct.pack("<I", index), zeros)
                # Published from now: a request started before was issued out of sight, its size unknown
                # without a problem (biolatency.bpf.c, struct published).
                value = DEVICE_VALUE.pack(slot, 0, time.monotonic_ns())
                libbpf.update(self._devices_fd, struct.pack("<I", dev), value)
                self._slots[dev] = slot
            return left_out

    def counters(self) -> dict[Key, Counters]:
        """Every traced device's counters, keyed (dev_t, op, size)."""
        with self._lock:
            out = {}
            for dev, slot in self._slots.items():
                for op in range(len(OPS)):
                    for size in range(len(SIZES)):
                        key = struct.pack("<I", element(slot, op, size))
                        raw = libbpf.lookup(self._io_fd, key, VALUE_SIZE * self._cpus)
                        out[(dev, op, size)] = Counters.from_percpu(raw) if raw is not None else Counters()
            return out

    def problems(self) -> dict[str, int]:
        """The programs' counted problems so far (PROBLEMS), summed over CPUs."""
        with self._lock:
            if self._problems_fd < 0:
                return {}
            out = {}
            for index, name in enumerate(PROBLEMS):
                raw = libbpf.lookup(self._problems_fd, struct.pack("<I", index), 8 * self._cpus)
                out[name] = sum(memoryview(raw).cast("Q")) if raw is not None else 0
            return out

    def requests_kept(self) -> dict[bytes, bytes]:
        """The `sizes` map: each request of the published devices whose issue the programs saw and
        whose completion they have not (key: the struct request's address; value: ISSUED_VALUE).
        Those in flight, and those whose completion was not seen (`unseen_io` once their struct
        request is issued again): on an idle device every one is an unseen completion."""
        with self._lock:
            if self._sizes_fd < 0:
                return {}
            kept: dict[bytes, bytes] = {}
            # While requests come and go the kernel's walk starts over when the last key is gone
            # (bpf(2), BPF_MAP_GET_NEXT_KEY): a key seen again ends it, as does the map's size.
            for key in itertools.islice(libbpf.keys(self._sizes_fd, 8), SIZES_IN_FLIGHT):
                if key in kept:
                    break
                value = libbpf.lookup(self._sizes_fd, key, ISSUED_VALUE.size)
                if value is not None:
                    kept[key] = value
            return kept

    def keep_request(self, key: bytes, value: bytes) -> None:
        """Put an entry back into `sizes` as if its completion had not been seen (tests only)."""
        with self._lock:
            libbpf.update(self._sizes_fd, key, value)

    def missed(self) -> int:
        """The programs' recursion misses so far (see the module docstring)."""
        with self._lock:
            return sum(int(libbpf.fdinfo(fd).get("recursion_misses", "0") or 0) for fd in self._programs)

    def program_fds(self) -> list[int]:
        return list(self._programs)

    def _close_object(self) -> None:
        if self._obj is not None:
            with contextlib.suppress(OSError):
                self._obj.close()
        self._obj = None
        self._programs, self.tracepoints = [], []
        self._devices_fd = self._io_fd = self._problems_fd = self._sizes_fd = -1

    def close(self) -> None:
        """Detach the programs and free the maps; idempotent."""
        with self._lock:
            self._closed = True
            self._close_object()


# --- the source -----------------------------------------------------------------------------------


class BiolatencySource:
    """lunlat_device_io_latency_seconds and lunlat_device_io_queue_time_seconds_total per published LUN."""

    name = "biolatency"
    error_reasons: tuple[str, ...] = ("unavailable", "untimed_io", "missed_io", "map_full", *PROBLEMS)
    timeout: float | None = None

    def __init__(self, engine: Engine, published: PublishedDevices, board_wait: float = 2.0) -> None:
        self._engine = engine
        self._published = published
        self._board_wait = board_wait
        self._untimed = 0  # untimed completions counted so far, over the traced devices
        self._missed = 0
        self._problems: dict[str, int] = {}  # the programs' problem counts so far
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
            problems = self._engine.problems()
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
        for name, count in problems.items():
            errors[name] += max(0, count - self._problems.get(name, 0))
        self._problems = problems
        traced = {k: d for k, d in devices.items() if kernel_dev(*k) not in self._left_out}
        return SourceResult(families(counters, traced), +errors)

    def carry_over(self, previous: object) -> None:
        """After a reload with the same biolatency settings, take over the loaded programs and what
        was counted (base.CarriesState): the histograms go on without a counter reset. The
        predecessor gets the unloaded engine, so retiring it detaches nothing that runs."""
        if isinstance(previous, BiolatencySource) and previous._engine.config == self._engine.config:
            self._engine, previous._engine = previous._engine, self._engine
            self._untimed, self._missed, self._problems, self._left_out = (
                previous._untimed,
                previous._missed,
                previous._problems,
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
