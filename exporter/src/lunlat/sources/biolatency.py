"""Per-I/O latency histograms of the published LUNs from the kernel's block tracepoints (issue 17).

Engine: bpftrace as a child process (README, "Per-I/O latency histograms"). It attaches to the
tracepoints block:block_rq_insert, block_rq_merge, block_rq_issue and block_rq_complete, keeps each
request's start time in a BPF hash map keyed by (dev, sector), adds each issued read's and write's
queue time (start to issue) to a cumulative in-kernel sum, and every completed one to a log2
histogram and the summed latency. The queue time is summed at issue, not carried to completion in
a second map: one map update and a lookup and delete fewer per I/O (bench/biolatency_cost.py).
Every `interval_seconds` it prints those maps as JSON lines (`-f json`); lunlat keeps the latest line
of each map and parses it at scrape time. Nothing per I/O crosses into user space.

Facts relied on, each from its source:
- tracepoint fields (include/trace/events/block.h, classes block_rq and block_rq_completion):
  `dev` is the request's whole disk (`disk_devt(rq->q->disk)`: a partition's I/O is its disk's),
  `sector` its first sector (`blk_rq_pos`), `rwbs` its flags as letters (block/blktrace.c
  `blk_fill_rwbs`: an optional 'F' for a preflush, then the op: 'R' read, 'W' write, 'D' discard,
  'F' flush, 'N' other; then 'F' FUA, 'A' readahead, 'S' sync, 'M' meta). `dev` is the kernel's
  dev_t, `major << 20 | minor` (include/linux/kdev_t.h, MINORBITS 20).
- blk-mq may issue a request straight to the driver without inserting it (block/blk-mq.c,
  blk_mq_try_issue_directly): no block_rq_insert, so a request's start is its insert time when one
  was seen, else its issue time. A request merged into another (block_rq_merge fires for the one
  merged away, block/blk-merge.c attempt_merge) is never issued: its insert time is dropped there.
- block_rq_complete may fire more than once for one request when a driver completes it in parts
  (blk_update_request, its kernel-doc): the first part times it, later parts find no start and are
  counted as `untimed_io`.
- The kernel runs no second BPF program on a CPU while one runs there: a tracepoint firing meanwhile
  (a completion interrupting the issue program) is skipped and counted as a miss of that program
  (kernel/trace/bpf_trace.c trace_call_bpf, `bpf_prog_active`; the count is `recursion_misses` in
  the program fd's /proc/PID/fdinfo, kernel/bpf/syscall.c bpf_prog_show_fdinfo). Such an I/O is in
  diskstats but not in the histogram: the misses are counted as `missed_io` (measured here: 1 or 2
  in about 800,000 reads at 150k IOPS on a tmpfs loop device).
- bpftrace 0.17 (docs/reference_guide.md of its v0.17.0 tag): `args->FIELD` reads a tracepoint field,
  `nsecs` is a nanosecond timestamp, `hist()` is a log2 histogram, `sum()` and `count()`
  aggregate per CPU, `interval:s:N` fires every N seconds on one CPU, `strncmp()` compares the
  first n characters, BPFTRACE_MAP_KEYS_MAX (default 4096) is the entries of every map; `-f json`
  prints one JSON object per line: `{"type": "hist", "data": {"@name": {"k1,k2": [{"min": a, "max": b,
  "count": n}, ...]}}}` for a histogram (its tests/runtime/outputs/hist_multiple.json), `{"type":
  "map", "data": {"@name": {"k1,k2": v}}}` for a map, `{"type": "attached_probes", "data":
  {"probes": n}}` once the probes are attached; bpftrace refuses to run as any user but root
  ("bpftrace currently only supports running as the root user.", src/main.cpp).
- The histogram's unit is ms/1024 (ns * 1024 / 10^6, integer division): log2 bucket k holds
  [2^k, 2^(k+1)) units = [2^(k-10), 2^(k-9)) ms, so 1 ms (2^10 units, exactly 10^6 ns) is an edge
  and every contract.BIO_BUCKETS bound is one. A bucket holds its lower edge and excludes its upper
  one, so `le` here is an exclusive bound (an I/O of exactly 1,000,000 ns counts above 1 ms).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from lunlat import contract, logs
from lunlat.config import BiolatencyConfig
from lunlat.model import Family, LabelSet
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.factory import BuildError, Context
from lunlat.sources.published import PublishedDevice, PublishedDevices

log = logs.get(__name__)

MINORBITS = 20  # include/linux/kdev_t.h: the kernel's dev_t is major << 20 | minor
UNITS_PER_SECOND = 1_024_000  # the histogram counts in ms/1024
# Each contract bound in histogram units: 2^(k+10) for 1 ms x 2^k, all exact integers.
BOUND_UNITS: tuple[int, ...] = tuple(round(b * UNITS_PER_SECOND) for b in contract.BIO_BUCKETS)
assert all(u == 1 << (u.bit_length() - 1) for u in BOUND_UNITS), "every bound is a power of two in units"
OPS: tuple[str, ...] = contract.BIO_OPS  # index 0 read, 1 write, as the script numbers them
# A line longer than this is not bpftrace's (a 2,000-LUN host prints ~5 MB for the histogram).
MAX_LINE = 64 << 20
STDERR_LINES = 20  # the child's last lines of stderr kept for the log
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0  # restart delays after the child dies, doubling
STABLE_AFTER = 60.0  # a child that ran this long restarts after BACKOFF_FIRST again
RECHECK_UNAVAILABLE = 60.0  # how often a missing prerequisite (bpftrace installed later) is re-checked
TRACEFS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))  # where bpftrace reads formats

# Only reads and writes: 'R' or 'W' first, or 'W' after a preflush 'F' (blk_fill_rwbs).
_RW = '(strncmp(args->rwbs, "R", 1) == 0 || strncmp(args->rwbs, "W", 1) == 0 || strncmp(args->rwbs, "FW", 2) == 0)'
SCRIPT = """
tracepoint:block:block_rq_insert /RW/ { @ins[args->dev, args->sector] = nsecs; }
tracepoint:block:block_rq_merge { delete(@ins[args->dev, args->sector]); }
tracepoint:block:block_rq_issue /RW/ {
  $s = @ins[args->dev, args->sector];
  if ($s == 0) { $s = nsecs; } else { delete(@ins[args->dev, args->sector]); }
  @start[args->dev, args->sector] = $s;
  @queue[args->dev, strncmp(args->rwbs, "R", 1) == 0 ? 0 : 1] = sum(nsecs - $s);
}
tracepoint:block:block_rq_complete /RW/ {
  $s = @start[args->dev, args->sector];
  if ($s != 0) {
    $op = strncmp(args->rwbs, "R", 1) == 0 ? 0 : 1;
    $d = nsecs - $s;
    @lat[args->dev, $op] = hist($d * 1024 / 1000000);
    @ns[args->dev, $op] = sum($d);
    delete(@start[args->dev, args->sector]);
  } else {
    @untimed[args->dev] = count();
  }
}
interval:s:INTERVAL { print(@lat); print(@ns); print(@queue); print(@untimed); }
""".replace("RW", _RW)
PRINTED = ("@lat", "@ns", "@queue", "@untimed")

# The child's parent death signal must be set in the child itself, between fork and exec.
# Popen's preexec_fn is unsafe in a threaded program (the subprocess docs), so a tiny interpreter
# does it and execs bpftrace: PR_SET_PDEATHSIG (1, linux/prctl.h) survives execve for a program that
# is not set-user-ID (prctl(2)), and fires when the thread that forked it ends: the engine's own
# supervisor thread, which lives as long as the engine. Checking the parent after the prctl closes
# the race with a parent that died first.
_TRAMPOLINE = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "os.getppid() == int(sys.argv[1]) or os._exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
_LINE_HEAD = re.compile(rb'\{"type": "(\w+)", "data": \{"(@\w+)"')


class BadOutputError(ValueError):
    """A line of the child's output that is not what bpftrace prints."""


@dataclass(frozen=True, slots=True)
class Maps:
    """The parsed cumulative maps: keys are (kernel dev_t, op index); untimed by dev_t."""

    hist: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)  # (max units, count)
    ns: dict[tuple[int, int], int] = field(default_factory=dict)
    queue: dict[tuple[int, int], int] = field(default_factory=dict)
    untimed: dict[int, int] = field(default_factory=dict)


def _key(text: str, width: int) -> tuple[int, ...]:
    parts = text.split(",")
    if len(parts) != width or not all(p.isdigit() for p in parts):
        raise BadOutputError(f"map key {text[:40]!r} is not {width} non-negative integers")
    return tuple(map(int, parts))


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise BadOutputError(f"{str(value)[:40]!r} is not a count")
    return value


def parse_map(line: bytes) -> tuple[str, dict[str, object]]:
    """(map name, its entries) of one printed map line; BadOutputError for anything else."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadOutputError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("type") not in ("hist", "map"):
        raise BadOutputError("not a printed map")
    data = obj.get("data")
    if not isinstance(data, dict) or len(data) != 1:
        raise BadOutputError("a printed map has one name")
    name, entries = next(iter(data.items()))
    if not isinstance(entries, dict):
        raise BadOutputError(f"{name}: entries are not an object")
    return name, entries


def parse_hist(entries: Mapping[str, object]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """bpftrace's log2 buckets per key as (inclusive max in units, count); the negative bucket (no
    "min", max -1) cannot occur for a time difference but parses."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for text, buckets in entries.items():
        dev, op = _key(text, 2)
        if op >= len(OPS) or not isinstance(buckets, list):
            raise BadOutputError(f"histogram key {text!r}: unknown op or no bucket list")
        parsed: list[tuple[int, int]] = []
        for bucket in buckets:
            if not isinstance(bucket, dict) or type(bucket.get("max")) is not int:
                raise BadOutputError(f"histogram key {text!r}: a bucket without an integer max")
            parsed.append((bucket["max"], _count(bucket.get("count"))))
        out[(dev, op)] = parsed
    return out


def parse_sums(entries: Mapping[str, object]) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for text, value in entries.items():
        dev, op = _key(text, 2)
        if op >= len(OPS):
            raise BadOutputError(f"key {text!r}: unknown op")
        out[(dev, op)] = _count(value)
    return out


def parse_untimed(entries: Mapping[str, object]) -> dict[int, int]:
    return {_key(text, 1)[0]: _count(value) for text, value in entries.items()}


def cumulative(buckets: list[tuple[int, int]]) -> tuple[list[int], int]:
    """Counts at or below each contract bound (exclusive, see the module doc) and the total.

    A bpftrace bucket [2^k, 2^(k+1) - 1] lies below bound B = 2^j units when its max < B: the
    buckets are powers of two and so are the bounds, so no bucket straddles one.
    """
    counts = [0] * len(BOUND_UNITS)
    total = 0
    for top, count in buckets:
        total += count
        for i, bound in enumerate(BOUND_UNITS):
            if top < bound:
                counts[i] += count
    return counts, total


def kernel_dev(major: int, minor: int) -> int:
    return major << MINORBITS | minor


def format_le(bound: float) -> str:
    """Each bound is an exact binary scaling of 0.001, so repr prints "0.001", "0.512", "7.8125e-06"."""
    return repr(bound)


LE_VALUES: tuple[str, ...] = tuple(format_le(b) for b in contract.BIO_BUCKETS)


def families(maps: Maps, devices: Mapping[tuple[int, int], PublishedDevice]) -> list[Family]:
    """The histogram and queue-time families of `devices`, zeros for a device with no I/O yet so its
    series exist from the start (every published device: 2 ops x (18 buckets + _sum + _count + queue))."""
    hist = Family(contract.DEVICE_IO_LATENCY)
    queue = Family(contract.DEVICE_IO_QUEUE_TIME)
    names = (*contract.BIO_LABELS, "le")
    for (major, minor), device in devices.items():
        dev = kernel_dev(major, minor)
        for op_index, op in enumerate(OPS):
            key = (dev, op_index)
            values = (device.lun, device.device, op)
            labels = LabelSet(contract.BIO_LABELS, values)
            counts, total = cumulative(maps.hist.get(key, []))
            for le, count in zip(LE_VALUES, counts, strict=True):
                hist.add(LabelSet(names, (*values, le)), count, "_bucket")
            hist.add(LabelSet(names, (*values, "+Inf")), total, "_bucket")
            hist.add(labels, maps.ns.get(key, 0) / 1e9, "_sum")
            hist.add(labels, total, "_count")
            queue.add(labels, maps.queue.get(key, 0) / 1e9)
    return [hist, queue]


# --- the child ------------------------------------------------------------------------------------


def _euid() -> int:
    return os.geteuid()


def unavailable_cause(config: BiolatencyConfig, euid: int | None = None) -> str | None:
    """Why bpftrace cannot run here, with the fix, or None. Each is checked before a start so the
    log names the cause instead of bpftrace's own error."""
    if not sys.platform.startswith("linux"):
        return "needs Linux (eBPF and the block tracepoints); nothing to fix on this platform"
    if (config.bpftrace or shutil.which("bpftrace")) is None:
        return (
            "bpftrace is not installed: apt-get install bpftrace (Debian, Ubuntu) or set biolatency.bpftrace"
        )
    if config.bpftrace is not None and not os.access(config.bpftrace, os.X_OK):
        return f"biolatency.bpftrace {config.bpftrace!r} is not an executable file"
    if (_euid() if euid is None else euid) != 0:
        return (
            "bpftrace runs only as root (it refuses other users): run lunlat as root or turn biolatency off"
        )
    if not any((d / "events/block/block_rq_issue").is_dir() for d in TRACEFS):
        return (
            "tracefs is not mounted (no /sys/kernel/tracing/events/block): mount -t tracefs nodev "
            "/sys/kernel/tracing (systemd mounts it at boot: sys-kernel-tracing.mount)"
        )
    return None


def recursion_misses(pid: int, procfs: Path = Path("/proc")) -> int:
    """The summed `recursion_misses` of the BPF programs process `pid` holds (their fds' fdinfo,
    kernel/bpf/syscall.c bpf_prog_show_fdinfo); 0 for what cannot be read (the process ended)."""
    total = 0
    try:
        entries = list((procfs / str(pid) / "fdinfo").iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            text = entry.read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        if "prog_type:" not in text:
            continue
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name == "recursion_misses" and value.strip().isdigit():
                total += int(value)
    return total


@dataclass(slots=True)
class EngineState:
    attached: bool = False  # the running child printed attached_probes
    generation: int = 0  # children started so far
    exits: int = 0  # children that ended without being asked to
    bad_lines: int = 0  # output lines that were not bpftrace's
    unavailable: str | None = None
    last_exit: str = ""


class Engine:
    """Runs and restarts the bpftrace child; keeps the latest line of each printed map.

    One supervisor thread owns the child: it starts it (in a new session, so lunlat's terminal
    signals do not reach it and its whole group can be ended), reads its output, and after it dies
    starts it again after 1 s, 2 s … 60 s. `close()` ends the group (SIGTERM, then SIGKILL).
    """

    def __init__(
        self,
        config: BiolatencyConfig,
        clock: Callable[[], float] = time.monotonic,
        procfs: Path = Path("/proc"),
    ) -> None:
        self._config = config
        self._procfs = procfs
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._state = EngineState()
        self._lines: dict[str, bytes] = {}  # map name -> latest printed line, of the running child
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._thread: threading.Thread | None = None

    @property
    def config(self) -> BiolatencyConfig:
        return self._config

    def start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                # Checked here too (cheap: PATH, euid, a directory), so the first scrape already says
                # what is missing rather than that bpftrace is starting.
                self._state.unavailable = unavailable_cause(self._config)
                self._thread = threading.Thread(target=self._supervise, name="biolatency", daemon=True)
                self._thread.start()

    def state(self) -> tuple[EngineState, dict[str, bytes]]:
        with self._lock:
            s = self._state
            return EngineState(
                s.attached, s.generation, s.exits, s.bad_lines, s.unavailable, s.last_exit
            ), dict(self._lines)

    def missed(self) -> tuple[int, int]:
        """(generation, the running child's BPF programs' recursion misses so far): tracepoint hits
        the kernel skipped (see the module docstring); (generation, 0) while no child runs."""
        with self._lock:
            proc, generation = self._proc, self._state.generation
        return generation, (recursion_misses(proc.pid, self._procfs) if proc is not None else 0)

    def count_bad(self, lines: int = 1) -> None:
        with self._lock:
            self._state.bad_lines += lines

    def argv(self) -> list[str]:
        script = SCRIPT.replace("INTERVAL", str(round(self._config.interval_seconds)))
        bpftrace = self._config.bpftrace or shutil.which("bpftrace") or "bpftrace"
        return [
            sys.executable,
            "-I",
            "-S",
            "-c",
            _TRAMPOLINE,
            str(os.getpid()),
            bpftrace,
            "-f",
            "json",
            "-e",
            script,
        ]

    def _supervise(self) -> None:
        backoff = BACKOFF_FIRST
        while not self._stop.is_set():
            cause = unavailable_cause(self._config)
            with self._lock:
                self._state.unavailable = cause
            if cause is not None:
                self._stop.wait(RECHECK_UNAVAILABLE)
                continue
            started = self._clock()
            self._run_child()
            if self._stop.is_set():
                break
            if self._clock() - started >= STABLE_AFTER:
                backoff = BACKOFF_FIRST
            log.warning(
                "bpftrace exited; restarting",
                after_seconds=backoff,
                status=self._state.last_exit,
                stderr=" | ".join(self._stderr)[-500:],
            )
            self._stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _run_child(self) -> None:
        env = dict(os.environ, BPFTRACE_MAP_KEYS_MAX=str(self._config.max_map_keys))
        self._stderr.clear()
        try:
            proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # its own process group: killpg ends it and anything it starts
            )
        except OSError as exc:
            with self._lock:
                self._state.exits += 1
                self._state.last_exit = f"cannot start: {exc.strerror or exc}"
            return
        with self._lock:
            self._proc = proc
            self._state.generation += 1
            self._state.attached = False
            self._lines = {}
        assert proc.stdout is not None and proc.stderr is not None
        errors = threading.Thread(target=self._read_stderr, args=(proc.stderr,), daemon=True)
        errors.start()
        try:
            self._read_stdout(proc.stdout)
        finally:
            if proc.poll() is None:
                _end_group(proc)
            proc.wait()
            errors.join(timeout=5)
            proc.stdout.close()
            proc.stderr.close()
            with self._lock:
                self._proc = None
                self._state.attached = False
                if not self._stop.is_set():
                    self._state.exits += 1
                    self._state.last_exit = f"exit status {proc.returncode}"

    def _read_stdout(self, stream: IO[bytes]) -> None:
        readline = stream.readline
        skipping = False  # inside a line longer than MAX_LINE: drop until its end
        while True:
            line: bytes = readline(MAX_LINE)
            if not line:
                return
            if not line.endswith(b"\n") and len(line) >= MAX_LINE:
                if not skipping:
                    self.count_bad()
                skipping = True
                continue
            if skipping:
                skipping = False
                continue
            self._feed(line)

    def _feed(self, line: bytes) -> None:
        head = _LINE_HEAD.match(line)
        with self._lock:
            if head is not None and head.group(2).decode() in PRINTED:
                self._lines[head.group(2).decode()] = line  # parsed at scrape time: only the latest matters
            elif line.startswith(b'{"type": "attached_probes"'):
                self._state.attached = True
            elif line.strip():
                self._state.bad_lines += 1

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            text = raw[:300].decode("utf-8", "replace").strip()
            # bpftrace says it cannot raise RLIMIT_MEMLOCK where the kernel accounts BPF memory to
            # the cgroup instead (5.11 and later) and then loads fine: not worth keeping.
            if text and "RLIMIT_MEMLOCK" not in text:
                self._stderr.append(text)

    def close(self) -> None:
        """End the child and the supervisor; idempotent."""
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            _end_group(proc)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)


def _end_group(proc: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    """SIGTERM to the child's process group, SIGKILL after `grace` seconds. Its BPF programs and maps
    are file descriptors of the process: the kernel detaches and frees them when it exits."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


# --- the source -----------------------------------------------------------------------------------


class BiolatencySource:
    """lunlat_device_io_latency_seconds and lunlat_device_io_queue_time_seconds_total per published LUN."""

    name = "biolatency"
    error_reasons: tuple[str, ...] = ("unavailable", "child_exited", "bad_output", "untimed_io", "missed_io")
    timeout: float | None = None

    def __init__(self, engine: Engine, published: PublishedDevices, board_wait: float = 2.0) -> None:
        self._engine = engine
        self._published = published
        self._board_wait = board_wait
        self._seen = EngineState()  # what was counted already
        self._untimed: tuple[int, int] = (0, 0)  # (generation, untimed total) last counted
        self._missed: tuple[int, int] = (0, 0)  # (generation, the programs' recursion misses) last counted
        self._maps: tuple[int, Maps] = (0, Maps())  # (generation, the last maps that parsed)
        self._unavailable_counted = False

    def collect(self) -> SourceResult:
        self._engine.start()
        state, lines = self._engine.state()
        errors: Counter[str] = Counter()
        errors["child_exited"] += state.exits - self._seen.exits
        errors["bad_output"] += state.bad_lines - self._seen.bad_lines
        self._seen = state
        if state.unavailable is not None:
            count = 0 if self._unavailable_counted else 1
            self._unavailable_counted = True
            raise SourceError("unavailable", f"biolatency is off: {state.unavailable}", count=count)
        self._unavailable_counted = False
        if not state.attached:
            what = "bpftrace is starting" if state.exits == 0 else f"bpftrace is down ({state.last_exit})"
            raise SourceError("child_exited", what, count=errors["child_exited"])
        maps = self._parse(state.generation, lines, errors)
        untimed = sum(maps.untimed.values())
        last_generation, last_untimed = self._untimed
        errors["untimed_io"] += untimed - last_untimed if last_generation == state.generation else untimed
        self._untimed = (state.generation, untimed)
        generation, missed = self._engine.missed()
        last_generation, last_missed = self._missed
        errors["missed_io"] += missed - last_missed if last_generation == generation else missed
        self._missed = (generation, missed)
        _version, devices = self._published.wait(self._board_wait)
        if self._engine.config.only_with_role:
            devices = {k: d for k, d in devices.items() if d.role}
        return SourceResult(families(maps, devices), +errors)

    def _parse(self, generation: int, lines: Mapping[str, bytes], errors: Counter[str]) -> Maps:
        """The latest maps; a line that does not parse keeps that map's last good value (a new child
        starts from empty maps)."""
        last_generation, maps = self._maps
        if last_generation != generation:
            maps = Maps()
        hist, ns, queue, untimed = maps.hist, maps.ns, maps.queue, maps.untimed
        for name, line in lines.items():
            try:
                got, entries = parse_map(line)
                if got != name:
                    raise BadOutputError(f"{got} printed as {name}")
                if name == "@lat":
                    hist = parse_hist(entries)
                elif name == "@untimed":
                    untimed = parse_untimed(entries)
                elif name == "@ns":
                    ns = parse_sums(entries)
                else:
                    queue = parse_sums(entries)
            except BadOutputError as exc:
                errors["bad_output"] += 1
                log.debug("bad bpftrace output", map=name, err=str(exc))
        maps = Maps(hist, ns, queue, untimed)
        self._maps = (generation, maps)
        return maps

    def carry_over(self, previous: object) -> None:
        """After a reload with the same biolatency settings, take over the running child and what was
        counted (base.CarriesState): its histograms go on without a counter reset. The rebuilt source
        keeps its own board, which the rebuilt diskstats source fills with the new device filter's
        choice; the predecessor gets the unstarted engine, so retiring it ends nothing that runs."""
        if isinstance(previous, BiolatencySource) and previous._engine.config == self._engine.config:
            self._engine, previous._engine = previous._engine, self._engine
            self._seen, self._untimed, self._maps = previous._seen, previous._untimed, previous._maps

    def close(self) -> None:
        self._engine.close()


def build(context: Context) -> list[BiolatencySource] | BuildError:
    """The biolatency source when enabled. What the host lacks (bpftrace, root, tracefs, Linux) is
    not a build error: the source runs and reports `lunlat_source_up 0` naming the cause, and every
    other source serves. Only a contradiction on the command line is: biolatency names LUNs by the
    diskstats topology, so an explicit --collector.host.source=psutil cannot have it."""
    config = context.biolatency()
    if not config.enabled:
        return []
    if context.settings.host_source == "psutil":
        return BuildError(
            "--collector.biolatency needs the diskstats host source to name LUNs: drop --collector.host.source=psutil"
        )
    return [BiolatencySource(Engine(config), context.published)]
