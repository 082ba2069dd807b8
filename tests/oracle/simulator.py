"""The server side of the Oracle emulation: files, instances, their counters, and a workload.

`Database` holds what the dynamic performance views show: the files (datafiles, tempfiles, redo
members, control files) with their containers and ASM disks, and per instance the V$IOSTAT_FILE,
V$SYSTEM_EVENT, V$EVENT_HISTOGRAM_MICRO and V$ASM_DISK_STAT counters. `Database.advance` runs a
`Load` for some simulated seconds: every individual I/O it draws is counted once in each place
Oracle counts it (the file's IOSTAT row, the wait event, the event's histogram bucket, the ASM
disks under the file), so the views agree with each other exactly.

Times are kept as whole nanoseconds internally and shown in Oracle's units (integer ms in
V$IOSTAT_FILE, integer µs in TIME_WAITED_MICRO, centiseconds in TIME_WAITED/AVERAGE_WAIT, seconds
as a fraction in V$ASM_DISK_STAT) by flooring at read time, so long runs never drift.

`rows` builds what a view shows of this state; `VIEWS` lists the documented columns of each view.
"""

from __future__ import annotations

import math
import random
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Protocol

Role = Literal["data", "temp", "log", "control"]
Direction = Literal["read", "write"]
Row = dict[str, object]

MIB = 1 << 20


# --- latency distributions -------------------------------------------------------------------


class Latency(Protocol):
    """Draws `n` wait durations: a map from duration (µs) to how many waits took it."""

    def sample(self, rng: random.Random, n: int) -> Counter[float]: ...


@dataclass(frozen=True, slots=True)
class Constant:
    """Every wait takes exactly `micros` µs."""

    micros: float

    def __post_init__(self) -> None:
        if not self.micros >= 0:
            raise ValueError(f"latency {self.micros!r} µs is not >= 0")

    def sample(self, rng: random.Random, n: int) -> Counter[float]:
        return Counter({self.micros: n}) if n > 0 else Counter()


@dataclass(frozen=True, slots=True, init=False)
class Choice:
    """Each wait takes one of the given durations (µs), drawn with the given weights."""

    choices: tuple[tuple[float, float], ...]

    def __init__(self, choices: Iterable[tuple[float, float]]) -> None:
        items = tuple((float(micros), float(weight)) for micros, weight in choices)
        if not items or any(not m >= 0 or not w >= 0 for m, w in items) or sum(w for _, w in items) <= 0:
            raise ValueError(f"choices {items!r}: need (µs >= 0, weight >= 0) pairs, some weight > 0")
        object.__setattr__(self, "choices", items)

    def sample(self, rng: random.Random, n: int) -> Counter[float]:
        if n <= 0:
            return Counter()
        values = [micros for micros, _ in self.choices]
        weights = [weight for _, weight in self.choices]
        return Counter(rng.choices(values, weights, k=n))


@dataclass(frozen=True, slots=True)
class LogNormal:
    """Log-normal waits around `median_micros` (a storage device's usual long tail)."""

    median_micros: float
    sigma: float = 0.5

    def sample(self, rng: random.Random, n: int) -> Counter[float]:
        mu = math.log(self.median_micros)
        return Counter(round(rng.lognormvariate(mu, self.sigma), 3) for _ in range(max(n, 0)))


# --- the load --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IO:
    """One stream of I/O of an instance: `rate` requests per second for `role` files.

    A share `large_fraction` of the requests is multiblock (`large_bytes`), the rest single block
    (`small_bytes`). The requests are spread evenly over `files` (paths; default every file of the
    role, except PDB$SEED's, and for redo the members of the instance's own thread). Each request
    is one wait of `event` (default: the event Oracle waits on for that role, direction and size).
    """

    role: Role
    direction: Direction
    rate: float
    latency: Latency
    large_fraction: float = 0.0
    small_bytes: int = 8192
    large_bytes: int = MIB
    files: tuple[str, ...] | None = None
    event: str | None = None
    # The container whose sessions wait for this I/O (V$CON_SYSTEM_EVENT's CON_ID): a test's choice,
    # not an Oracle fact. None: the root in a CDB, CON_ID 0 in a non-CDB.
    container: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ("data", "temp", "log", "control") or self.direction not in ("read", "write"):
            raise ValueError(f"unknown stream {self.role}/{self.direction}")
        if not self.rate >= 0 or not 0 <= self.large_fraction <= 1:
            raise ValueError("rate must be >= 0 and large_fraction within [0, 1]")
        if self.files is not None:
            object.__setattr__(self, "files", tuple(self.files))
        if self.event is not None and self.event not in EVENTS:
            raise ValueError(f"unknown wait event {self.event!r}")


@dataclass(frozen=True, slots=True)
class Commits:
    """`rate` commits per second; each waits 'log file sync' = a log write's latency (drawn from
    the load's first log write stream) plus `overhead` (LGWR post, CPU)."""

    rate: float
    overhead: Latency = Constant(100.0)


class Load:
    """What the instance does while simulated time passes: I/O streams, commits, and (unless
    `background` is False) a few idle and non-I/O waits every real instance shows."""

    __slots__ = ("background", "commits", "standby", "streams", "transport")

    def __init__(
        self,
        *streams: IO,
        commits: Commits | None = None,
        background: bool = True,
        standby: Latency | None = None,
        transport: Literal["SYNC", "ASYNC"] = "SYNC",
    ) -> None:
        if transport not in ("SYNC", "ASYNC"):
            raise ValueError(f"redo transport {transport!r} is SYNC or ASYNC")
        self.streams = streams
        self.commits = commits
        self.background = background
        # A Data Guard standby: every redo write is also sent to it. SYNC: one 'SYNC Remote Write'
        # wait of this latency each (LGWR's SYNC RFSWRITE: network plus the standby's redo write;
        # Oracle Database Reference 12.1, C.3.156), and commits wait for it. ASYNC: one 'ASYNC Remote
        # Write' wait each (TTnn's asynchronous streaming RFSWRITE; Database Reference 12.2, C.3.3),
        # and commits do not wait for it (Data Guard Concepts and Administration 12.2, 7.1: the
        # asynchronous mode sends redo asynchronously with respect to transaction commitment). One
        # ASYNC wait per redo write is this emulation's choice, not an Oracle fact: the reference
        # gives only the time, so tests check its time and labels, never time / waits. No local
        # file I/O either way: the standby's disks are not this host's LUNs.
        self.standby = standby
        self.transport = transport

    @classmethod
    def uniform(cls, micros: float, rate: float = 100.0, commits: float = 0.0) -> Load:
        """Every role reads and writes at `rate` per second, every wait exactly `micros` µs."""
        latency = Constant(micros)
        streams = [
            IO(role, direction, rate, latency)
            for role in ("data", "temp", "log", "control")
            for direction in ("read", "write")
        ]
        return cls(*streams, commits=Commits(commits) if commits else None)


# --- wait events -----------------------------------------------------------------------------

WAIT_CLASSES: dict[str, tuple[int, int]] = {  # name: (WAIT_CLASS_ID, WAIT_CLASS#)
    "Other": (1893977003, 0),
    "Concurrency": (3875070507, 4),
    "Commit": (3386400367, 5),
    "Idle": (2723168908, 6),
    "Network": (2000153315, 7),
    "User I/O": (1740759767, 8),
    "System I/O": (4108307767, 9),
}


@dataclass(frozen=True, slots=True)
class EventInfo:
    number: int  # EVENT#
    event_id: int  # EVENT_ID: a stand-in (CRC-32 of the name), not Oracle's hash
    wait_class: str
    foreground: bool  # waited by user sessions (counted in the _FG columns)


def _events(*specs: tuple[str, str, bool]) -> dict[str, EventInfo]:
    return {
        name: EventInfo(100 + i, zlib.crc32(name.encode()), wait_class, fg)
        for i, (name, wait_class, fg) in enumerate(specs)
    }


EVENTS = _events(
    ("db file sequential read", "User I/O", True),
    ("db file scattered read", "User I/O", True),
    ("db file parallel read", "User I/O", True),
    ("direct path read", "User I/O", True),
    ("direct path read temp", "User I/O", True),
    ("direct path write", "User I/O", True),
    ("direct path write temp", "User I/O", True),
    ("db file single write", "User I/O", False),
    ("db file parallel write", "System I/O", False),
    ("log file parallel write", "System I/O", False),
    ("log file sync", "Commit", True),
    ("log file sequential read", "System I/O", False),
    ("control file sequential read", "System I/O", True),
    ("control file parallel write", "System I/O", False),
    # Data Guard SYNC transport (Oracle Database Reference 12.1, C.3.156 "SYNC Remote Write": LGWR's
    # SYNC RFSWRITE to a standby). Its wait class is not in that page; "System I/O" here is this
    # emulation's choice (the source reads no wait class).
    ("SYNC Remote Write", "System I/O", False),
    # Data Guard ASYNC transport (Oracle Database Reference 12.2, C.3.3 "ASYNC Remote Write": TTnn's
    # asynchronous streaming RFSWRITE). Its wait class is this emulation's choice, as above.
    ("ASYNC Remote Write", "System I/O", False),
    # Exadata cell I/O (Oracle Exadata System Software User's Guide, "Monitoring Cell Disk I/O Using
    # Database Statistics and Wait Events"). Their wait class is this emulation's choice (User I/O;
    # the lunlat source reads the events by name).
    ("cell single block physical read", "User I/O", True),
    ("cell multiblock physical read", "User I/O", True),
    ("cell list of blocks physical read", "User I/O", True),
    ("cell smart table scan", "User I/O", True),
    ("cell smart index scan", "User I/O", True),
    # An I/O event lunlat does not list, for the per-class series: class User I/O (Oracle Database
    # True Cache User's Guide 23ai, appendix C "True Cache Wait Events",
    # https://docs.oracle.com/en/database/oracle/oracle-database/23/odbtc/true-cache-wait-events.html).
    ("True Cache: single block fetch", "User I/O", True),
    ("rdbms ipc message", "Idle", False),
    ("SQL*Net message from client", "Idle", True),
    ("latch: shared pool", "Concurrency", True),
)


# The one event whose wait is one synchronous single-block read of a data file ("db file sequential
# read": blocks is 1, the wait time is the time the I/O takes; Oracle Database Reference,
# Descriptions of Wait Events). Only these land in V$IOSTAT_FILE's SMALL_SYNC_READ_* columns here;
# a single-block read inside "db file parallel read" is an asynchronous batch.
SYNC_SINGLE_BLOCK_READS = frozenset({"db file sequential read"})


def default_event(role: Role, direction: Direction, large: bool) -> str:
    if role == "data":
        if direction == "read":
            return "direct path read" if large else "db file sequential read"
        return "db file parallel write"
    if role == "temp":
        return f"direct path {direction} temp"
    if role == "log":
        return "log file parallel write" if direction == "write" else "log file sequential read"
    return "control file parallel write" if direction == "write" else "control file sequential read"


def bucket_micro(ns: int) -> int:
    """V$EVENT_HISTOGRAM_MICRO bucket of a wait: the power of two b with b/2 <= µs < b (1: < 1 µs)."""
    micros = ns // 1000
    return 1 if micros == 0 else 1 << micros.bit_length()


def wait_time_format(bound: int) -> str:
    def unit(value: int, name: str) -> str:
        return f"{value} {name}{'' if value == 1 else 's'}"

    if bound < 1000:
        return unit(bound, "microsecond")
    if bound < 1_000_000:
        return unit(bound // 1000, "millisecond")
    seconds = bound // 1_000_000
    if seconds < 60:
        return unit(seconds, "second")
    return f"{unit(seconds // 60, 'minute')} {unit(seconds % 60, 'second')}"


def oracle_timestamp(when: datetime) -> str:
    """LAST_UPDATE_TIME's text form: 06-JAN-25 08.00.00.000000 AM +00:00."""
    return when.strftime("%d-%b-%y %I.%M.%S.%f %p +00:00").upper()


# --- counters --------------------------------------------------------------------------------

IO_KINDS = ("small_read", "small_write", "small_sync_read", "large_read", "large_write")


@dataclass(slots=True)
class IoCounters:
    """One V$IOSTAT_FILE row: requests, service time (ns) and bytes per kind."""

    reqs: dict[str, int] = field(default_factory=lambda: dict.fromkeys(IO_KINDS, 0))
    ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(IO_KINDS, 0))
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(IO_KINDS, 0))

    def add(self, kind: str, count: int, ns: int, size: int) -> None:
        self.reqs[kind] += count
        self.ns[kind] += count * ns
        self.bytes[kind] += count * size


@dataclass(slots=True)
class EventCounters:
    waits: int = 0
    timeouts: int = 0
    ns: int = 0
    fg_waits: int = 0
    fg_timeouts: int = 0
    fg_ns: int = 0
    buckets: dict[int, int] = field(default_factory=dict)
    updated: dict[int, datetime] = field(default_factory=dict)

    def add(self, ns: int, count: int, foreground: bool, now: datetime, timeouts: int = 0) -> None:
        self.waits += count
        self.ns += count * ns
        self.timeouts += timeouts
        if foreground:
            self.fg_waits += count
            self.fg_ns += count * ns
            self.fg_timeouts += timeouts
        bound = bucket_micro(ns)
        self.buckets[bound] = self.buckets.get(bound, 0) + count
        self.updated[bound] = now


@dataclass(slots=True)
class DiskCounters:
    reads: int = 0
    writes: int = 0
    read_ns: int = 0
    write_ns: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


# --- layout ----------------------------------------------------------------------------------


@dataclass(slots=True)
class DbFile:
    role: Role
    path: str
    file_no: int  # FILE# (datafile, tempfile), GROUP# (redo member), 0 (control file)
    con_id: int
    created: datetime
    thread: int = 1  # redo thread of a log member
    size: int = 512 * MIB


@dataclass(frozen=True, slots=True)
class Container:
    con_id: int
    name: str
    open_mode: str


@dataclass(frozen=True, slots=True)
class AsmDisk:
    group_number: int  # 0: a candidate disk, in no disk group
    disk_number: int
    group: str  # '' for a candidate
    path: str

    @property
    def name(self) -> str | None:
        return f"{self.group}_{self.disk_number:04d}" if self.group else None


@dataclass(slots=True)
class Instance:
    inst_id: int
    name: str
    host: str
    thread: int
    startup: datetime
    status: Literal["OPEN", "RESTARTING"] = "OPEN"
    generation: int = 0  # bumped by every restart: sessions of an older generation are dead
    iostat: dict[tuple[Role, int], IoCounters] = field(default_factory=dict)
    events: dict[str, EventCounters] = field(default_factory=dict)
    con_events: dict[tuple[int, str], EventCounters] = field(default_factory=dict)  # (CON_ID, event)
    disks: dict[str, DiskCounters] = field(default_factory=dict)
    # Other ASM clients' I/O on the disks (another database on the same disk group), as this node's
    # ASM instance counts it: in V$ASM_DISK_STAT, not in this instance's V$ASM_DISK_IOSTAT rows.
    foreign_disks: dict[str, DiskCounters] = field(default_factory=dict)
    carry: dict[object, float] = field(default_factory=dict)  # fractional requests not yet issued
    turn: dict[object, int] = field(default_factory=dict)  # round-robin position per spread

    def reset(self, now: datetime) -> None:
        self.startup = now
        self.generation += 1
        for table in (
            self.iostat,
            self.events,
            self.con_events,
            self.disks,
            self.foreign_disks,
            self.carry,
            self.turn,
        ):
            table.clear()


class Database:
    """Files, containers, ASM disks and instances of one (possibly RAC, possibly CDB) database."""

    def __init__(
        self,
        name: str,
        instances: Sequence[str],
        cdb: bool,
        pdbs: Sequence[str],
        asm_groups: Mapping[str, Sequence[str]],
        asm_candidates: Sequence[str],
        seed: int,
        start: datetime,
    ) -> None:
        self.name = name
        self.now = start
        self.cdb = cdb
        self.rng = random.Random(seed)
        self.dbid = zlib.crc32(name.encode())
        if cdb:
            names = ["CDB$ROOT", "PDB$SEED", *pdbs]
            modes = ["READ WRITE", "READ ONLY", *["READ WRITE"] * len(pdbs)]
            self.containers = [
                Container(i + 1, n.upper(), m) for i, (n, m) in enumerate(zip(names, modes, strict=True))
            ]
        else:
            self.containers = [Container(0, name.upper(), "READ WRITE")]
        self.groups = {group.upper(): number for number, group in enumerate(asm_groups, start=1)}
        self.disks = [
            AsmDisk(self.groups[group.upper()], i, group.upper(), path)
            for group, paths in asm_groups.items()
            for i, path in enumerate(paths)
        ]
        self.disks += [AsmDisk(0, i, "", path) for i, path in enumerate(asm_candidates)]
        started = start - timedelta(days=1)
        self.instances = {
            i: Instance(i, inst_name, f"dbhost{i}", i, started)
            for i, inst_name in enumerate(instances, start=1)
        }
        self.files: list[DbFile] = []

    # --- layout ---------------------------------------------------------------------------------

    def con_id(self, container: str | None) -> int:
        if container is None:
            return self.containers[0].con_id
        for c in self.containers:
            if c.name == container.upper():
                return c.con_id
        raise KeyError(f"no container {container!r} (have {[c.name for c in self.containers]})")

    def file(self, path: str) -> DbFile | None:
        return next((f for f in self.files if f.path == path), None)

    def add(self, role: Role, path: str, con_id: int = 0, file_no: int | None = None, thread: int = 1) -> int:
        if self.file(path) is not None:
            raise ValueError(f"{path} is already a database file")
        if file_no is None:
            # FILE# is CDB-wide; Oracle hands out the lowest free number again after a drop.
            taken = {f.file_no for f in self.files if f.role == role}
            file_no = next(n for n in range(1, len(taken) + 2) if n not in taken)
        self.files.append(DbFile(role, path, file_no, con_id, self.now, thread))
        return file_no

    def drop(self, path: str) -> None:
        found = self.file(path)
        if found is None:
            raise KeyError(f"{path} is not a database file")
        self.files.remove(found)
        if found.role in ("data", "temp"):
            for inst in self.instances.values():
                inst.iostat.pop((found.role, found.file_no), None)

    def of_role(self, role: Role) -> list[DbFile]:
        return sorted((f for f in self.files if f.role == role), key=lambda f: (f.file_no, f.path))

    def disks_of(self, path: str) -> list[AsmDisk]:
        """The ASM disks a file is striped over: every disk of its disk group (+GROUP/…)."""
        if not path.startswith("+"):
            return []
        group = path[1:].split("/", 1)[0].upper()
        return [d for d in self.disks if d.group == group]

    def open_instances(self) -> list[Instance]:
        return [inst for inst in self.instances.values() if inst.status == "OPEN"]

    # --- the workload ---------------------------------------------------------------------------

    def advance(self, seconds: float, load: Load | None, inst_ids: Iterable[int] | None = None) -> None:
        if not seconds >= 0:
            raise ValueError(f"cannot go back in time ({seconds!r} s)")
        self.now += timedelta(seconds=seconds)
        chosen = self.instances.keys() if inst_ids is None else list(inst_ids)
        for inst_id in chosen:
            inst = self.instances[inst_id]
            if load is not None and inst.status == "OPEN":
                self._simulate(inst, seconds, load)

    def _whole(self, inst: Instance, key: object, amount: float) -> int:
        total = inst.carry.get(key, 0.0) + amount
        whole = math.floor(total + 1e-9)
        inst.carry[key] = total - whole
        return whole

    def _shares(self, inst: Instance, key: object, parts: int, count: int) -> list[int]:
        """`count` split over `parts` as evenly as possible, the remainder rotating."""
        base, rest = divmod(count, parts)
        start = inst.turn.get(key, 0)
        inst.turn[key] = (start + rest) % parts
        return [base + (1 if (i - start) % parts < rest else 0) for i in range(parts)]

    def _stream_files(self, inst: Instance, stream: IO) -> list[DbFile]:
        if stream.files is not None:
            given = [self.file(path) for path in stream.files]
            found = [f for f in given if f is not None and f.role == stream.role]
            if len(found) != len(given):
                raise ValueError(f"not all {stream.role} files of the database: {stream.files}")
            return found
        files = [f for f in self.of_role(stream.role) if not (self.cdb and f.con_id == 2)]
        if stream.role == "log":
            own = [f for f in files if f.thread == inst.thread]
            files = own or files
        return files

    def _simulate(self, inst: Instance, seconds: float, load: Load) -> None:
        log_latency: Latency | None = None
        for index, stream in enumerate(load.streams):
            if stream.role == "log" and stream.direction == "write" and log_latency is None:
                log_latency = stream.latency
            files = self._stream_files(inst, stream)
            if not files:
                continue
            # Carried fractions are kept per stream shape (not per object: loads are rebuilt freely).
            key = (index, stream.role, stream.direction, stream.files, stream.event, stream.large_fraction)
            total = self._whole(inst, ("io", key), stream.rate * seconds)
            large = min(total, self._whole(inst, ("large", key), total * stream.large_fraction))
            for is_large, count in ((False, total - large), (True, large)):
                event = stream.event or default_event(stream.role, stream.direction, is_large)
                for micros, n in sorted(stream.latency.sample(self.rng, count).items()):
                    ns = round(micros * 1000)
                    self._wait(inst, event, ns, n, con_id=self._waiting_con_id(stream.container))
                    self._io(inst, stream, files, is_large, ns, n, event)
                    self._standby_waits(inst, load, stream, n)
        if load.commits is not None and load.commits.rate > 0:
            if log_latency is None:
                raise ValueError("commits need a log write stream (their 'log file sync' includes the write)")
            n = self._whole(inst, ("commits",), load.commits.rate * seconds)
            writes = list(log_latency.sample(self.rng, n).elements())
            writes = self._with_standby(load, writes)
            extra = list(load.commits.overhead.sample(self.rng, n).elements())
            self.rng.shuffle(extra)
            for micros, count in sorted(Counter(w + o for w, o in zip(writes, extra, strict=True)).items()):
                self._wait(inst, "log file sync", round(micros * 1000), count)
        if load.background:
            for event, per_second, micros in (
                ("rdbms ipc message", 3.0, 300_000.0),
                ("SQL*Net message from client", 5.0, 20_000.0),
                ("latch: shared pool", 0.1, 35.0),
            ):
                n = self._whole(inst, ("bg", event), per_second * seconds)
                if n:
                    idle = EVENTS[event].wait_class == "Idle"
                    self._wait(inst, event, round(micros * 1000), n, timeouts=n if idle else 0)

    def _standby_waits(self, inst: Instance, load: Load, stream: IO, n: int) -> None:
        """A redo write also sent to a standby: one 'SYNC Remote Write' (or 'ASYNC Remote Write') wait each."""
        if load.standby is None or (stream.role, stream.direction) != ("log", "write"):
            return
        event = f"{load.transport} Remote Write"
        for remote, m in sorted(load.standby.sample(self.rng, n).items()):
            self._wait(inst, event, round(remote * 1000), m)

    def _with_standby(self, load: Load, writes: list[float]) -> list[float]:
        """The redo write each commit waits for, the standby's included when there is one.

        "A transaction cannot commit until all redo ... has been successfully sent to every enabled
        redo transport destination that uses the synchronous redo transport mode" (Data Guard
        Concepts and Administration 12.2, 7.1,
        https://docs.oracle.com/database/122/SBYDB/oracle-data-guard-redo-transport-services.htm):
        the commit waits for the slower of the local and the remote write (this emulation's model
        of the two running side by side)."""
        if load.standby is None or load.transport == "ASYNC":
            return writes
        remote = list(load.standby.sample(self.rng, len(writes)).elements())
        self.rng.shuffle(remote)
        return [max(w, r) for w, r in zip(writes, remote, strict=True)]

    def _waiting_con_id(self, container: str | None) -> int:
        """CON_ID of the container a wait is counted in (V$CON_SYSTEM_EVENT): 0 in a non-CDB. A wait
        of no container (background processes: LGWR, DBWR) is counted in CDB$ROOT, CON_ID 1: this
        emulation's choice, no Oracle page found says where (docs/oracle.md, "Limits of what the
        views say")."""
        if not self.cdb:
            return 0
        return self.con_id(container) if container is not None else 1

    def _wait(
        self, inst: Instance, event: str, ns: int, count: int, timeouts: int = 0, con_id: int | None = None
    ) -> None:
        counters = inst.events.setdefault(event, EventCounters())
        counters.add(ns, count, EVENTS[event].foreground, self.now, timeouts)
        where = self._waiting_con_id(None) if con_id is None else con_id
        per_container = inst.con_events.setdefault((where, event), EventCounters())
        per_container.add(ns, count, EVENTS[event].foreground, self.now, timeouts)

    def _io(
        self, inst: Instance, stream: IO, files: list[DbFile], large: bool, ns: int, count: int, event: str
    ) -> None:
        size = stream.large_bytes if large else stream.small_bytes
        kind = f"{'large' if large else 'small'}_{stream.direction}"
        spread = ("files", stream.role, stream.direction)
        if stream.role in ("data", "temp"):
            for f, n in zip(files, self._shares(inst, spread, len(files), count), strict=True):
                if n:
                    row = inst.iostat.setdefault((f.role, f.file_no), IoCounters())
                    row.add(kind, n, ns, size)
                    if event in SYNC_SINGLE_BLOCK_READS and not large:
                        # Its wait is the read's full latency (docs/emulated-facts.md, Oracle).
                        row.add("small_sync_read", n, ns, 0)
                    self._disk_io(inst, f, stream.direction, ns, n, size)
            return
        # Redo and control files: one V$IOSTAT_FILE row for all. A redo write goes to every member
        # of one group (the groups take turns, as log switches do), a control file write to every
        # control file; a read to one member.
        inst.iostat.setdefault((stream.role, 0), IoCounters()).add(kind, count, ns, size)
        groups: dict[int, list[DbFile]] = {}
        for f in files:
            groups.setdefault(f.file_no, []).append(f)
        for members, n in zip(groups.values(), self._shares(inst, spread, len(groups), count), strict=True):
            if stream.direction == "write":
                per_member = [n] * len(members)
            else:
                per_member = self._shares(inst, (*spread, members[0].file_no), len(members), n)
            for f, k in zip(members, per_member, strict=True):
                if k:
                    self._disk_io(inst, f, stream.direction, ns, k, size)

    def other_client_io(self, path: str, reads: int, read_micros: float, inst_id: int = 1) -> None:
        """Another database (another ASM client) reads the ASM disk `path` `reads` times, each taking
        `read_micros`: V$ASM_DISK_STAT counts it, this database's V$ASM_DISK_IOSTAT rows do not."""
        c = self.instances[inst_id].foreign_disks.setdefault(path, DiskCounters())
        c.reads += reads
        c.read_ns += round(reads * read_micros * 1000)
        c.bytes_read += reads * 8192

    def _disk_io(
        self, inst: Instance, f: DbFile, direction: Direction, ns: int, count: int, size: int
    ) -> None:
        """ASM: the file's I/O spread over the disks of its disk group."""
        disks = self.disks_of(f.path)
        if not disks:
            return
        shares = self._shares(inst, ("disks", disks[0].group, direction), len(disks), count)
        for disk, n in zip(disks, shares, strict=True):
            c = inst.disks.setdefault(disk.path, DiskCounters())
            if direction == "read":
                c.reads += n
                c.read_ns += n * ns
                c.bytes_read += n * size
            else:
                c.writes += n
                c.write_ns += n * ns
                c.bytes_written += n * size


# --- what the views show ----------------------------------------------------------------------
#
# VIEWS lists, per V$ view (the GV$ form adds INST_ID first), the columns and types of the Oracle
# Database Reference 19c, CON_ID included. `rows(db, view, inst)` gives one instance's rows as
# column -> value maps (columns a builder leaves out are NULL), in Oracle's units: V$IOSTAT_FILE
# service times in whole ms, TIME_WAITED_MICRO in whole µs, TIME_WAITED and AVERAGE_WAIT in
# (rounded) centiseconds, V$ASM_DISK_STAT times in seconds.

# Rows V$IOSTAT_FILE always has besides the data and temp files (FILE_NO 0, CON_ID 0). The
# FILETYPE_NAME spellings (these, 'Data File' and 'Temp File') are the thirteen a peer's integration
# test accepts from real 21c and 23ai servers (Checkmk/checkmk packages/mk-oracle/tests/test_ora_sql.rs,
# test_io_stats_query); the Database Reference lists none. The FILETYPE_IDs are the emulation's.
OTHER_FILETYPES: tuple[tuple[int, str], ...] = (
    (0, "Other"),
    (1, "Control File"),
    (3, "Log File"),
    (4, "Archive Log"),
    (9, "Data File Backup"),
    (10, "Data File Incremental Backup"),
    (11, "Archive Log Backup"),
    (12, "Data File Copy"),
    (17, "Flashback Log"),
    (18, "Data Pump Dump File"),
)
_CONSOLIDATED: dict[str, Role] = {"Control File": "control", "Log File": "log"}
_SIZED = tuple(k for k in IO_KINDS if k != "small_sync_read")


# Views that answer no rows to a session logged into a PDB. Oracle Database Reference, V$ASM_DISK_STAT:
# "In an Oracle Database instance, this view returns 0 rows when queried from a PDB"
# (https://docs.oracle.com/en/database/oracle/oracle-database/23/refrn/V-ASM_DISK_STAT.html).
EMPTY_IN_PDB: frozenset[str] = frozenset({"V$ASM_DISK_STAT"})
# Views that show a PDB session its own container's rows only: "When queried from a PDB, wait event
# data in that PDB are returned" (Database Reference, V$CON_SYSTEM_EVENT; V$CON_EVENT_HISTOGRAM_MICRO).
OWN_ROWS_IN_PDB: frozenset[str] = frozenset({"V$CON_SYSTEM_EVENT", "V$CON_EVENT_HISTOGRAM_MICRO"})
# The first major release whose Database Reference documents a view (views not listed: every
# release the source supports). V$CON_EVENT_HISTOGRAM_MICRO: 18c reference 7.131
# (https://docs.oracle.com/en/database/oracle/oracle-database/18/refrn/V-CON_EVENT_HISTOGRAM_MICRO.html);
# no 12.2 page for it was found, so an older release is modelled without it.
SINCE_MAJOR: dict[str, int] = {"V$CON_EVENT_HISTOGRAM_MICRO": 18}
# Nothing else of a PDB login or of a release is modelled (docs/emulated-facts.md), but the non-CDB
# architecture's end after 19c (emulation.NON_CDB_UNTIL).


def exists(view: str, major: int) -> bool:
    """Whether the V$ view `view` (upper case, without the G) exists in major release `major`."""
    return major >= SINCE_MAJOR.get(view, 0)


def rows(db: Database, view: str, inst: Instance, pdb: int | None = None) -> list[Row]:
    """Rows of the V$ view `view` (upper case, without the G) as instance `inst` shows them to a
    session in the CDB root or a non-CDB, or to one logged into the PDB whose CON_ID is `pdb`."""
    if pdb is not None and view in EMPTY_IN_PDB:
        return []
    out = _BUILDERS[view](db, inst)
    if pdb is not None and view in OWN_ROWS_IN_PDB:
        out = [row for row in out if row["CON_ID"] == pdb]
    return out


def _iostat(db: Database, inst: Instance) -> list[Row]:
    def row(ftype: tuple[int, str], file_no: int, con_id: int, counters: IoCounters | None, path: str) -> Row:
        c = counters or IoCounters()
        asm = path.startswith("+")
        return {
            "FILE_NO": file_no,
            "FILETYPE_ID": ftype[0],
            "FILETYPE_NAME": ftype[1],
            **{f"{k.upper()}_MEGABYTES": c.bytes[k] // MIB for k in _SIZED},
            **{f"{k.upper()}_REQS": c.reqs[k] for k in IO_KINDS},
            **{f"{k.upper()}_SERVICETIME": c.ns[k] // 1_000_000 for k in _SIZED},  # ms, floored
            "SMALL_SYNC_READ_LATENCY": c.ns["small_sync_read"] // 1_000_000,
            "ASYNCH_IO": "ASYNC_ON" if ftype[1] in ("Data File", "Temp File", "Log File") else "ASYNC_OFF",
            "ACCESS_METHOD": ("ASM_MANAGED" if asm else "OS_LIB") if path else None,
            "RETRIES_ON_ERROR": 0,
            "CON_ID": con_id,
        }

    out = [
        row((2, "Data File"), f.file_no, f.con_id, inst.iostat.get(("data", f.file_no)), f.path)
        for f in db.of_role("data")
    ]
    out += [
        row((6, "Temp File"), f.file_no, f.con_id, inst.iostat.get(("temp", f.file_no)), f.path)
        for f in db.of_role("temp")
    ]
    for ftype in OTHER_FILETYPES:
        role = _CONSOLIDATED.get(ftype[1])
        members = db.of_role(role) if role else []
        counters = inst.iostat.get((role, 0)) if role else None
        out.append(row(ftype, 0, 0, counters, members[0].path if members else ""))
    return out


def _system_event(db: Database, inst: Instance) -> list[Row]:
    # From a CDB root (and in a non-CDB) V$SYSTEM_EVENT is instance-wide, CON_ID 0 (Oracle Database
    # Reference, V$SYSTEM_EVENT: docs/emulated-facts.md).
    return _event_rows(((0, event), c) for event, c in inst.events.items())


def _con_system_event(db: Database, inst: Instance) -> list[Row]:
    # V$CON_SYSTEM_EVENT: one row per container and event, with the container's CON_ID (0 in a
    # non-CDB; Oracle Database Reference, V$CON_SYSTEM_EVENT).
    return _event_rows(inst.con_events.items())


def _event_rows(counted: Iterable[tuple[tuple[int, str], EventCounters]]) -> list[Row]:
    out: list[Row] = []
    for (con_id, event), c in counted:
        info = EVENTS[event]
        class_id, class_no = WAIT_CLASSES[info.wait_class]
        micros, fg_micros = c.ns // 1000, c.fg_ns // 1000
        out.append(
            {
                "EVENT": event,
                "TOTAL_WAITS": c.waits,
                "TOTAL_TIMEOUTS": c.timeouts,
                "TIME_WAITED": round(c.ns / 10_000_000),  # centiseconds: coarse on purpose
                "AVERAGE_WAIT": round(c.ns / 10_000_000 / c.waits, 2) if c.waits else 0,
                "TIME_WAITED_MICRO": micros,
                "TOTAL_WAITS_FG": c.fg_waits,
                "TOTAL_TIMEOUTS_FG": c.fg_timeouts,
                "TIME_WAITED_FG": round(c.fg_ns / 10_000_000),
                "AVERAGE_WAIT_FG": round(c.fg_ns / 10_000_000 / c.fg_waits, 2) if c.fg_waits else 0,
                "TIME_WAITED_MICRO_FG": fg_micros,
                "EVENT_ID": info.event_id,
                "WAIT_CLASS_ID": class_id,
                "WAIT_CLASS#": class_no,
                "WAIT_CLASS": info.wait_class,
                "CON_ID": con_id,
            }
        )
    return out


def _histogram(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "EVENT#": EVENTS[event].number,
            "EVENT": event,
            "WAIT_TIME_FORMAT": wait_time_format(bound),
            "WAIT_TIME_MICRO": bound,
            "WAIT_COUNT": count,
            "LAST_UPDATE_TIME": oracle_timestamp(c.updated[bound]),
            "CON_ID": 0,
        }
        for event, c in inst.events.items()
        for bound, count in sorted(c.buckets.items())
        if count > 0
    ]


def _con_histogram(db: Database, inst: Instance) -> list[Row]:
    # V$CON_EVENT_HISTOGRAM_MICRO: V$EVENT_HISTOGRAM_MICRO's buckets per container, CON_ID as in
    # V$CON_SYSTEM_EVENT (0 in a non-CDB; Database Reference 18c, V$CON_EVENT_HISTOGRAM_MICRO).
    return [
        {
            "EVENT#": EVENTS[event].number,
            "EVENT": event,
            "WAIT_TIME_FORMAT": wait_time_format(bound),
            "WAIT_TIME_MICRO": bound,
            "WAIT_COUNT": count,
            "LAST_UPDATE_TIME": oracle_timestamp(c.updated[bound]),
            "CON_ID": con_id,
        }
        for (con_id, event), c in inst.con_events.items()
        for bound, count in sorted(c.buckets.items())
        if count > 0
    ]


def _all_clients(inst: Instance, path: str) -> DiskCounters:
    """A disk's counters as its ASM instance keeps them: this database's I/O and every other client's."""
    own, other = inst.disks.get(path) or DiskCounters(), inst.foreign_disks.get(path) or DiskCounters()
    return DiskCounters(
        *(
            getattr(own, f) + getattr(other, f)
            for f in ("reads", "writes", "read_ns", "write_ns", "bytes_read", "bytes_written")
        )
    )


def _asm_disk_iostat(db: Database, inst: Instance) -> list[Row]:
    # Per ASM client; "If this view is queried from the database instance, only the rows for that
    # instance are shown" (Oracle Database Reference, V$ASM_DISK_IOSTAT,
    # https://docs.oracle.com/en/database/oracle/oracle-database/21/refrn/V-ASM_DISK_IOSTAT.html):
    # this instance's own I/O per disk of a mounted group; times in seconds.
    out: list[Row] = []
    for d in db.disks:
        if d.group_number == 0:
            continue
        c = inst.disks.get(d.path) or DiskCounters()
        out.append(
            {
                "INSTNAME": inst.name,
                "DBNAME": db.name,
                "GROUP_NUMBER": d.group_number,
                "DISK_NUMBER": d.disk_number,
                "FAILGROUP": d.name,
                "READS": c.reads,
                "WRITES": c.writes,
                "READ_ERRS": 0,
                "WRITE_ERRS": 0,
                "READ_TIME": round(c.read_ns / 1e9, 6),
                "WRITE_TIME": round(c.write_ns / 1e9, 6),
                "BYTES_READ": c.bytes_read,
                "BYTES_WRITTEN": c.bytes_written,
                "CON_ID": 0,
            }
        )
    return out


def _asm_disk(db: Database, inst: Instance) -> list[Row]:
    out: list[Row] = []
    for d in db.disks:
        c = _all_clients(inst, d.path)
        member = d.group_number != 0
        out.append(
            {
                "GROUP_NUMBER": d.group_number,
                "DISK_NUMBER": d.disk_number,
                "COMPOUND_INDEX": (d.group_number << 24) | d.disk_number,
                "INCARNATION": 4042322160 if member else 0,
                "MOUNT_STATUS": "OPENED" if member else "CLOSED",
                "HEADER_STATUS": "MEMBER" if member else "CANDIDATE",
                "MODE_STATUS": "ONLINE",
                "STATE": "NORMAL",
                "REDUNDANCY": "UNKNOWN",
                "LIBRARY": "System",
                "OS_MB": 102400,
                "TOTAL_MB": 102400 if member else 0,
                "FREE_MB": 61440 if member else 0,
                "HOT_USED_MB": 0,
                "COLD_USED_MB": 40960 if member else 0,
                "NAME": d.name,
                "FAILGROUP": d.name,
                "PATH": d.path,
                "CREATE_DATE": db.instances[1].startup - timedelta(days=30) if member else None,
                "MOUNT_DATE": inst.startup if member else None,
                "REPAIR_TIMER": 0,
                "READS": c.reads,
                "WRITES": c.writes,
                "READ_ERRS": 0,
                "WRITE_ERRS": 0,
                "READ_TIMEOUT": 0,
                "WRITE_TIMEOUT": 0,
                "READ_TIME": round(c.read_ns / 1e9, 6),  # seconds, a fraction
                "WRITE_TIME": round(c.write_ns / 1e9, 6),
                "BYTES_READ": c.bytes_read,
                "BYTES_WRITTEN": c.bytes_written,
                "PREFERRED_READ": "U",
                "HASH_VALUE": zlib.crc32(d.path.encode()),
                "HOT_READS": 0,
                "HOT_WRITES": 0,
                "HOT_BYTES_READ": 0,
                "HOT_BYTES_WRITTEN": 0,
                "COLD_READS": c.reads,
                "COLD_WRITES": c.writes,
                "COLD_BYTES_READ": c.bytes_read,
                "COLD_BYTES_WRITTEN": c.bytes_written,
                "VOTING_FILE": "N",
                "SECTOR_SIZE": 512,
                "LOGICAL_SECTOR_SIZE": 512,
                "FAILGROUP_TYPE": "REGULAR",
                "WRITE_STATE": "ONLINE",
                "CON_ID": 0,
            }
        )
    return out


def _asm_diskgroup(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "GROUP_NUMBER": number,
            "NAME": group,
            "SECTOR_SIZE": 512,
            "LOGICAL_SECTOR_SIZE": 512,
            "BLOCK_SIZE": 4096,
            "ALLOCATION_UNIT_SIZE": 4 * MIB,
            "STATE": "CONNECTED",
            "TYPE": "EXTERN",
            "TOTAL_MB": 102400 * sum(1 for d in db.disks if d.group == group),
            "FREE_MB": 61440 * sum(1 for d in db.disks if d.group == group),
            "HOT_USED_MB": 0,
            "COLD_USED_MB": 40960 * sum(1 for d in db.disks if d.group == group),
            "REQUIRED_MIRROR_FREE_MB": 0,
            "USABLE_FILE_MB": 61440 * sum(1 for d in db.disks if d.group == group),
            "OFFLINE_DISKS": 0,
            "COMPATIBILITY": "19.0.0.0.0",
            "DATABASE_COMPATIBILITY": "19.0.0.0.0",
            "VOTING_FILES": "N",
            "CON_ID": 0,
        }
        for group, number in db.groups.items()
    ]


def _instance(db: Database, inst: Instance) -> list[Row]:
    rac = len(db.instances) > 1
    return [
        {
            "INSTANCE_NUMBER": inst.inst_id,
            "INSTANCE_NAME": inst.name,
            "HOST_NAME": inst.host,
            "VERSION": "19.0.0.0.0",
            "VERSION_LEGACY": "19.0.0.0.0",
            "VERSION_FULL": "19.24.0.0.0",
            "STARTUP_TIME": inst.startup.replace(microsecond=0),
            "STATUS": "OPEN",
            "PARALLEL": "YES" if rac else "NO",
            "THREAD#": inst.thread,
            "ARCHIVER": "STARTED",
            "LOG_SWITCH_WAIT": None,
            "LOGINS": "ALLOWED",
            "SHUTDOWN_PENDING": "NO",
            "DATABASE_STATUS": "ACTIVE",
            "INSTANCE_ROLE": "PRIMARY_INSTANCE",
            "ACTIVE_STATE": "NORMAL",
            "BLOCKED": "NO",
            "CON_ID": 0,
            "INSTANCE_MODE": "REGULAR",
            "EDITION": "EE",
            "FAMILY": None,
            "DATABASE_TYPE": "RAC" if rac else "SINGLE",
        }
    ]


def _containers(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "CON_ID": c.con_id,
            "DBID": db.dbid if c.con_id <= 1 else zlib.crc32(c.name.encode()),
            "CON_UID": db.dbid if c.con_id <= 1 else zlib.crc32(c.name.encode()),
            "GUID": zlib.crc32(c.name.encode()).to_bytes(4, "big") * 4,
            "NAME": c.name,
            "OPEN_MODE": c.open_mode,
            "RESTRICTED": "NO",
            "OPEN_TIME": inst.startup,
            "TOTAL_SIZE": sum(f.size for f in db.files if f.con_id == c.con_id and f.role == "data"),
            "BLOCK_SIZE": 8192,
            "RECOVERY_STATUS": "ENABLED",
            "APPLICATION_ROOT": "NO",
            "APPLICATION_PDB": "NO",
            "APPLICATION_SEED": "NO",
            "PROXY_PDB": "NO",
            "LOCAL_UNDO": 1,
            "CREATION_TIME": db.instances[1].startup - timedelta(days=30),
            "PDB_COUNT": len(db.containers) - 2 if c.con_id == 1 else 0,
            "MEMBER_CDB": "NO",
        }
        for c in db.containers
    ]


def _datafile(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "FILE#": f.file_no,
            "CREATION_CHANGE#": 1000 + f.file_no,
            "CREATION_TIME": f.created,
            "TS#": f.file_no - 1,
            "RFILE#": f.file_no,
            "STATUS": "SYSTEM" if f.file_no == 1 else "ONLINE",
            "ENABLED": "READ WRITE" if f.con_id != 2 else "READ ONLY",
            "CHECKPOINT_CHANGE#": 5_000_000,
            "CHECKPOINT_TIME": db.now.replace(microsecond=0),
            "BYTES": f.size,
            "BLOCKS": f.size // 8192,
            "CREATE_BYTES": 0,
            "BLOCK_SIZE": 8192,
            "NAME": f.path,
            "PLUGGED_IN": 0,
            "BLOCK1_OFFSET": 8192,
            "AUX_NAME": "NONE",
            "PLUGGED_READONLY": "NO",
            "PLUGIN_CHANGE#": 0,
            "PLUGIN_RESETLOGS_CHANGE#": 0,
            "CON_ID": f.con_id,
        }
        for f in db.of_role("data")
    ]


def _tempfile(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "FILE#": f.file_no,
            "CREATION_CHANGE#": 2000 + f.file_no,
            "CREATION_TIME": f.created,
            "TS#": 3,
            "RFILE#": 1,
            "STATUS": "ONLINE",
            "ENABLED": "READ WRITE",
            "BYTES": f.size,
            "BLOCKS": f.size // 8192,
            "CREATE_BYTES": f.size,
            "BLOCK_SIZE": 8192,
            "NAME": f.path,
            "CON_ID": f.con_id,
        }
        for f in db.of_role("temp")
    ]


def _logfile(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "GROUP#": f.file_no,
            "STATUS": None,
            "TYPE": "ONLINE",
            "MEMBER": f.path,
            "IS_RECOVERY_DEST_FILE": "NO",
            "CON_ID": 0,
        }
        for f in db.of_role("log")
    ]


def _controlfile(db: Database, inst: Instance) -> list[Row]:
    return [
        {
            "STATUS": None,
            "NAME": f.path,
            "IS_RECOVERY_DEST_FILE": "NO",
            "BLOCK_SIZE": 16384,
            "FILE_SIZE_BLKS": 1180,
            "CON_ID": 0,
        }
        for f in db.of_role("control")
    ]


def _database(db: Database, inst: Instance) -> list[Row]:
    # CDB: YES in a CDB, NO in a non-CDB (Oracle Database Reference, V$DATABASE, 12.1 and later:
    # https://docs.oracle.com/en/database/oracle/oracle-database/19/refrn/V-DATABASE.html). One row
    # per instance, the database's; CON_ID 0 ("rows that pertain to the entire CDB", or a non-CDB).
    return [
        {
            "DBID": db.dbid,
            "NAME": db.name,
            "DATABASE_ROLE": "PRIMARY",
            "CDB": "YES" if db.cdb else "NO",
            "CON_ID": 0,
        }
    ]


def _dual(db: Database, inst: Instance) -> list[Row]:
    return [{"DUMMY": "X"}]


_BUILDERS: dict[str, Callable[[Database, Instance], list[Row]]] = {
    "V$IOSTAT_FILE": _iostat,
    "V$SYSTEM_EVENT": _system_event,
    "V$CON_SYSTEM_EVENT": _con_system_event,
    "V$EVENT_HISTOGRAM_MICRO": _histogram,
    "V$CON_EVENT_HISTOGRAM_MICRO": _con_histogram,
    "V$ASM_DISK_STAT": _asm_disk,
    "V$ASM_DISK": _asm_disk,
    "V$ASM_DISK_IOSTAT": _asm_disk_iostat,
    "V$ASM_DISKGROUP_STAT": _asm_diskgroup,
    "V$ASM_DISKGROUP": _asm_diskgroup,
    "V$INSTANCE": _instance,
    "V$CONTAINERS": _containers,
    "V$DATABASE": _database,
    "V$DATAFILE": _datafile,
    "V$TEMPFILE": _tempfile,
    "V$LOGFILE": _logfile,
    "V$CONTROLFILE": _controlfile,
    "DUAL": _dual,
}


# --- the documented columns ------------------------------------------------------------------


def _columns(spec: str) -> tuple[tuple[str, str], ...]:
    items = (item.split(None, 1) for item in spec.replace("\n", " ").split(",") if item.strip())
    return tuple((name, kind.strip()) for name, kind in items)


_ASM_DISK = _columns("""GROUP_NUMBER NUMBER, DISK_NUMBER NUMBER, COMPOUND_INDEX NUMBER, INCARNATION NUMBER,
    MOUNT_STATUS VARCHAR2(7), HEADER_STATUS VARCHAR2(12), MODE_STATUS VARCHAR2(7), STATE VARCHAR2(8),
    REDUNDANCY VARCHAR2(7), LIBRARY VARCHAR2(64), OS_MB NUMBER, TOTAL_MB NUMBER, FREE_MB NUMBER,
    HOT_USED_MB NUMBER, COLD_USED_MB NUMBER, NAME VARCHAR2(30), FAILGROUP VARCHAR2(30),
    FAILGROUP_LABEL VARCHAR2(64), LABEL VARCHAR2(31), PATH VARCHAR2(256), UDID VARCHAR2(64),
    PRODUCT VARCHAR2(32), CREATE_DATE DATE, MOUNT_DATE DATE, REPAIR_TIMER NUMBER, READS NUMBER,
    WRITES NUMBER, READ_ERRS NUMBER, WRITE_ERRS NUMBER, READ_TIMEOUT NUMBER, WRITE_TIMEOUT NUMBER,
    READ_TIME NUMBER, WRITE_TIME NUMBER, BYTES_READ NUMBER, BYTES_WRITTEN NUMBER,
    PREFERRED_READ VARCHAR2(1), HASH_VALUE NUMBER, HOT_READS NUMBER, HOT_WRITES NUMBER,
    HOT_BYTES_READ NUMBER, HOT_BYTES_WRITTEN NUMBER, COLD_READS NUMBER, COLD_WRITES NUMBER,
    COLD_BYTES_READ NUMBER, COLD_BYTES_WRITTEN NUMBER, VOTING_FILE VARCHAR2(1), SECTOR_SIZE NUMBER,
    LOGICAL_SECTOR_SIZE NUMBER, FAILGROUP_TYPE VARCHAR2(7), WRITE_STATE VARCHAR2(10),
    SITE_NAME VARCHAR2(30), SITE_GUID RAW(16), SITE_STATUS VARCHAR2(7), CON_ID NUMBER""")

_ASM_DISKGROUP = _columns("""GROUP_NUMBER NUMBER, NAME VARCHAR2(30), SECTOR_SIZE NUMBER,
    LOGICAL_SECTOR_SIZE NUMBER, BLOCK_SIZE NUMBER, ALLOCATION_UNIT_SIZE NUMBER, STATE VARCHAR2(11),
    TYPE VARCHAR2(6), TOTAL_MB NUMBER, FREE_MB NUMBER, HOT_USED_MB NUMBER, COLD_USED_MB NUMBER,
    REQUIRED_MIRROR_FREE_MB NUMBER, USABLE_FILE_MB NUMBER, OFFLINE_DISKS NUMBER,
    COMPATIBILITY VARCHAR2(60), DATABASE_COMPATIBILITY VARCHAR2(60), VOTING_FILES VARCHAR2(1),
    CON_ID NUMBER""")

VIEWS: dict[str, tuple[tuple[str, str], ...]] = {
    "V$IOSTAT_FILE": _columns("""FILE_NO NUMBER, FILETYPE_ID NUMBER, FILETYPE_NAME VARCHAR2(28),
        SMALL_READ_MEGABYTES NUMBER, SMALL_WRITE_MEGABYTES NUMBER, LARGE_READ_MEGABYTES NUMBER,
        LARGE_WRITE_MEGABYTES NUMBER, SMALL_READ_REQS NUMBER, SMALL_WRITE_REQS NUMBER,
        SMALL_SYNC_READ_REQS NUMBER, LARGE_READ_REQS NUMBER, LARGE_WRITE_REQS NUMBER,
        SMALL_READ_SERVICETIME NUMBER, SMALL_WRITE_SERVICETIME NUMBER, SMALL_SYNC_READ_LATENCY NUMBER,
        LARGE_READ_SERVICETIME NUMBER, LARGE_WRITE_SERVICETIME NUMBER, ASYNCH_IO VARCHAR2(9),
        ACCESS_METHOD VARCHAR2(11), RETRIES_ON_ERROR NUMBER, CON_ID NUMBER"""),
    "V$SYSTEM_EVENT": _columns("""EVENT VARCHAR2(64), TOTAL_WAITS NUMBER, TOTAL_TIMEOUTS NUMBER,
        TIME_WAITED NUMBER, AVERAGE_WAIT NUMBER, TIME_WAITED_MICRO NUMBER, TOTAL_WAITS_FG NUMBER,
        TOTAL_TIMEOUTS_FG NUMBER, TIME_WAITED_FG NUMBER, AVERAGE_WAIT_FG NUMBER,
        TIME_WAITED_MICRO_FG NUMBER, EVENT_ID NUMBER, WAIT_CLASS_ID NUMBER, WAIT_CLASS# NUMBER,
        WAIT_CLASS VARCHAR2(64), CON_ID NUMBER"""),
    # The 12.1 column list (12.1 reference 7.119; later releases add CPU and CPU_FG, never read).
    "V$CON_SYSTEM_EVENT": _columns("""EVENT VARCHAR2(64), TOTAL_WAITS NUMBER, TOTAL_TIMEOUTS NUMBER,
        TIME_WAITED NUMBER, AVERAGE_WAIT NUMBER, TIME_WAITED_MICRO NUMBER, TOTAL_WAITS_FG NUMBER,
        TOTAL_TIMEOUTS_FG NUMBER, TIME_WAITED_FG NUMBER, AVERAGE_WAIT_FG NUMBER,
        TIME_WAITED_MICRO_FG NUMBER, EVENT_ID NUMBER, WAIT_CLASS_ID NUMBER, WAIT_CLASS# NUMBER,
        WAIT_CLASS VARCHAR2(64), CON_ID NUMBER"""),
    "V$EVENT_HISTOGRAM_MICRO": _columns("""EVENT# NUMBER, EVENT VARCHAR2(64),
        WAIT_TIME_FORMAT VARCHAR2(30), WAIT_TIME_MICRO NUMBER, WAIT_COUNT NUMBER,
        LAST_UPDATE_TIME VARCHAR2(64), CON_ID NUMBER"""),
    "V$CON_EVENT_HISTOGRAM_MICRO": _columns("""EVENT# NUMBER, EVENT VARCHAR2(64),
        WAIT_TIME_FORMAT VARCHAR2(30), WAIT_TIME_MICRO NUMBER, WAIT_COUNT NUMBER,
        LAST_UPDATE_TIME VARCHAR2(73), CON_ID NUMBER"""),
    "V$ASM_DISK_STAT": _ASM_DISK,
    "V$ASM_DISK": _ASM_DISK,
    # Oracle Database Reference 21c, V$ASM_DISK_IOSTAT (the columns lunlat's emulation fills and a few more).
    "V$ASM_DISK_IOSTAT": _columns("""INSTNAME VARCHAR2(64), DBNAME VARCHAR2(8), CLUSTERNAME VARCHAR2(31),
        GROUP_NUMBER NUMBER, DISK_NUMBER NUMBER, FAILGROUP VARCHAR2(30), SITE_NAME VARCHAR2(30),
        READS NUMBER, WRITES NUMBER, READ_ERRS NUMBER, WRITE_ERRS NUMBER, READ_TIMEOUT NUMBER,
        WRITE_TIMEOUT NUMBER, READ_TIME NUMBER, WRITE_TIME NUMBER, BYTES_READ NUMBER,
        BYTES_WRITTEN NUMBER, CON_ID NUMBER"""),
    "V$ASM_DISKGROUP_STAT": _ASM_DISKGROUP,
    "V$ASM_DISKGROUP": _ASM_DISKGROUP,
    "V$INSTANCE": _columns("""INSTANCE_NUMBER NUMBER, INSTANCE_NAME VARCHAR2(16), HOST_NAME VARCHAR2(64),
        VERSION VARCHAR2(17), VERSION_LEGACY VARCHAR2(17), VERSION_FULL VARCHAR2(17), STARTUP_TIME DATE,
        STATUS VARCHAR2(12), PARALLEL VARCHAR2(3), THREAD# NUMBER, ARCHIVER VARCHAR2(7),
        LOG_SWITCH_WAIT VARCHAR2(15), LOGINS VARCHAR2(10), SHUTDOWN_PENDING VARCHAR2(3),
        DATABASE_STATUS VARCHAR2(17), INSTANCE_ROLE VARCHAR2(18), ACTIVE_STATE VARCHAR2(9),
        BLOCKED VARCHAR2(3), CON_ID NUMBER, INSTANCE_MODE VARCHAR2(11), EDITION VARCHAR2(7),
        FAMILY VARCHAR2(80), DATABASE_TYPE VARCHAR2(15)"""),
    "V$CONTAINERS": _columns("""CON_ID NUMBER, DBID NUMBER, CON_UID NUMBER, GUID RAW(16), NAME VARCHAR2(128),
        OPEN_MODE VARCHAR2(10), RESTRICTED VARCHAR2(3), OPEN_TIME TIMESTAMP(3) WITH TIME ZONE,
        CREATE_SCN NUMBER, TOTAL_SIZE NUMBER, BLOCK_SIZE NUMBER, RECOVERY_STATUS VARCHAR2(8),
        SNAPSHOT_PARENT_CON_ID NUMBER, APPLICATION_ROOT VARCHAR2(3), APPLICATION_PDB VARCHAR2(3),
        APPLICATION_SEED VARCHAR2(3), APPLICATION_ROOT_CON_ID NUMBER, APPLICATION_ROOT_CLONE VARCHAR2(3),
        PROXY_PDB VARCHAR2(3), LOCAL_UNDO NUMBER, UNDO_SCN NUMBER, UNDO_TIMESTAMP DATE,
        CREATION_TIME DATE, DIAGNOSTICS_SIZE NUMBER, PDB_COUNT NUMBER, AUDIT_FILES_SIZE NUMBER,
        MAX_SIZE NUMBER, MAX_DIAGNOSTICS_SIZE NUMBER, MAX_AUDIT_SIZE NUMBER, MEMBER_CDB VARCHAR2(3),
        TENANT_ID VARCHAR2(255), UPGRADE_LEVEL NUMBER, GUID_BASE64 VARCHAR2(30)"""),
    "V$DATAFILE": _columns("""FILE# NUMBER, CREATION_CHANGE# NUMBER, CREATION_TIME DATE, TS# NUMBER,
        RFILE# NUMBER, STATUS VARCHAR2(7), ENABLED VARCHAR2(10), CHECKPOINT_CHANGE# NUMBER,
        CHECKPOINT_TIME DATE, UNRECOVERABLE_CHANGE# NUMBER, UNRECOVERABLE_TIME DATE, LAST_CHANGE# NUMBER,
        LAST_TIME DATE, OFFLINE_CHANGE# NUMBER, ONLINE_CHANGE# NUMBER, ONLINE_TIME DATE, BYTES NUMBER,
        BLOCKS NUMBER, CREATE_BYTES NUMBER, BLOCK_SIZE NUMBER, NAME VARCHAR2(513), PLUGGED_IN NUMBER,
        BLOCK1_OFFSET NUMBER, AUX_NAME VARCHAR2(513), FIRST_NONLOGGED_SCN NUMBER,
        FIRST_NONLOGGED_TIME DATE, FOREIGN_DBID NUMBER, FOREIGN_CREATION_CHANGE# NUMBER,
        FOREIGN_CREATION_TIME DATE, PLUGGED_READONLY VARCHAR2(3), PLUGIN_CHANGE# NUMBER,
        PLUGIN_RESETLOGS_CHANGE# NUMBER, PLUGIN_RESETLOGS_TIME DATE, CON_ID NUMBER"""),
    "V$TEMPFILE": _columns("""FILE# NUMBER, CREATION_CHANGE# NUMBER, CREATION_TIME DATE, TS# NUMBER,
        RFILE# NUMBER, STATUS VARCHAR2(7), ENABLED VARCHAR2(10), BYTES NUMBER, BLOCKS NUMBER,
        CREATE_BYTES NUMBER, BLOCK_SIZE NUMBER, NAME VARCHAR2(513), CON_ID NUMBER"""),
    "V$LOGFILE": _columns("""GROUP# NUMBER, STATUS VARCHAR2(7), TYPE VARCHAR2(7), MEMBER VARCHAR2(513),
        IS_RECOVERY_DEST_FILE VARCHAR2(3), CON_ID NUMBER"""),
    "V$CONTROLFILE": _columns("""STATUS VARCHAR2(7), NAME VARCHAR2(513), IS_RECOVERY_DEST_FILE VARCHAR2(3),
        BLOCK_SIZE NUMBER, FILE_SIZE_BLKS NUMBER, CON_ID NUMBER"""),
    # The columns lunlat's emulation models (the view has many more; a statement naming another one
    # fails as an unknown column here, so the model says which it knows).
    "V$DATABASE": _columns("""DBID NUMBER, NAME VARCHAR2(9), DATABASE_ROLE VARCHAR2(16), CDB VARCHAR2(3),
        CON_ID NUMBER"""),
    "DUAL": _columns("DUMMY VARCHAR2(1)"),
}
