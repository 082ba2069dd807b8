"""The biolatency source's BPF programs, assembled against this kernel's struct offsets.

Hooks (raw tracepoints, include/trace/events/block.h): the completion program on block_io_done
(args: rq; kernel 6.5+), which blk_account_io_done fires where diskstats counts (block/blk-mq.c), or,
on older kernels, on block_rq_complete (args: rq, error, nr_bytes; in blk_update_request, before the
request's bios complete); the issue program on block_rq_issue (args: rq). A raw tracepoint hands the
program the arguments only, with none of a classic tracepoint's record formatting (the letters of
`rwbs`, the task name), which is most of what a classic tracepoint costs per event.

Timing is the kernel's own: `rq->start_time_ns` is what diskstats' time counts from (blk_account_io_done
adds `now - req->start_time_ns`), set when the request is accounted; 0 where I/O statistics are off
for the queue (then diskstats counts nothing either: such completions are counted as untimed). So no
per-request map is kept at all: per I/O, one lookup of the device's slot and one of its per-CPU
counters, at completion and at issue.

- What diskstats counts (on block_io_done): requests whose `rq_flags` have RQF_IO_STAT and not
  RQF_FLUSH_SEQ (blk_account_io_done's test; the bits are `enum rqf_flags` in include/linux/blk-mq.h,
  read from BTF, as they moved between kernels). On block_rq_complete: a request completed in parts
  fires it once per part (blk_update_request traces before it consumes `nr_bytes`), so the part that
  ends it counts, `nr_bytes >= rq->__data_len`; a part of 0 bytes (a flush sequence ending a write
  already completed) is not an I/O.
- Read or write only: `req_op` is `cmd_flags & REQ_OP_MASK`, the low 8 bits (include/linux/blk_types.h:
  REQ_OP_BITS 8, REQ_OP_READ 0, REQ_OP_WRITE 1).
- The device is the request's whole disk, `rq->q->disk` (`rq->rq_disk` on kernels before 5.18, taken
  when the BTF has it), as `major << 20 | first_minor` (include/linux/kdev_t.h MINORBITS 20): a
  partition's I/O is its disk's, as the tracepoints' `dev` is. Only devices in the `devices` map (the
  published LUNs) are counted: the filter runs in the kernel.
- Buckets: the latency in ms/1024 units (ns * 1024 / 10^6), compared with each contract bound in
  those units, 2^(k+10) for 1 ms x 2^k: bucket i holds latencies below bound i and at or above bound
  i-1, the last one everything at or above the top bound (so `le` is exclusive: an I/O of exactly
  1,000,000 ns counts above 1 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

from lunlat import contract
from lunlat.sources.bpf import asm
from lunlat.sources.bpf.asm import JEQ, JGT, JLT, JNE, R0, R1, R2, R3, R6, R7, R8, R9, R10
from lunlat.sources.bpf.btf import Btf, BtfError

UNITS_PER_SECOND = 1_024_000  # ms/1024
BOUND_UNITS: tuple[int, ...] = tuple(round(b * UNITS_PER_SECOND) for b in contract.BIO_BUCKETS)
assert all(u == 1 << (u.bit_length() - 1) for u in BOUND_UNITS), "every bound is a power of two in units"
BUCKETS = len(BOUND_UNITS) + 1  # the last one: at or above the top bound (+Inf)
# One per-CPU counter element per (device slot, op): the buckets, then the summed latency, the summed
# queue time (start to issue) and the completions that had no start time, all u64.
NS_AT, QUEUE_AT, UNTIMED_AT = 8 * BUCKETS, 8 * BUCKETS + 8, 8 * BUCKETS + 16
VALUE_SIZE = 8 * BUCKETS + 24
OPS_PER_DEVICE = len(contract.BIO_OPS)  # element index = slot * 2 + op (0 read, 1 write)
MINORBITS = 20

# Helper ids, include/uapi/linux/bpf.h (___BPF_FUNC_MAPPER order).
MAP_LOOKUP_ELEM, KTIME_GET_NS, PROBE_READ_KERNEL = 1, 5, 113
REQ_OP_MASK = 0xFF

# Stack slots (offsets from r10). The request's members are read in one span (one helper call, the
# costliest step of the programs) when they lie within REQUEST_SPAN_MAX bytes of each other.
_SCRATCH, _POINTER, _DISK, _DEV_KEY, _STATS_KEY = -8, -16, -24, -32, -40
REQUEST_SPAN_MAX = 256
_REQUEST = -48 - REQUEST_SPAN_MAX


@dataclass(frozen=True, slots=True)
class Offsets:
    """The struct members the programs read, from the running kernel's BTF."""

    cmd_flags: int
    data_len: int
    start_time_ns: int
    rq_disk: int | None  # struct request.rq_disk (before 5.18), else the queue's disk below
    q: int
    q_disk: int
    major: int
    first_minor: int
    # struct request.rq_flags and the bits of enum rqf_flags diskstats tests (kernel 6.x); None where
    # the kernel has no such enum (the flags were macros): then only block_rq_complete is used.
    rq_flags: int | None = None
    io_stat_bit: int | None = None
    flush_seq_bit: int | None = None

    @classmethod
    def of(cls, btf: Btf) -> Offsets:
        """BtfError naming the member when this kernel lacks one."""
        rq_disk = btf.field("request", "rq_disk").offset if btf.has_member("request", "rq_disk") else None
        try:
            flags: tuple[int | None, ...] = (
                btf.field("request", "rq_flags").offset,
                btf.enumerator("rqf_flags", "__RQF_IO_STAT"),
                btf.enumerator("rqf_flags", "__RQF_FLUSH_SEQ"),
            )
        except BtfError:
            flags = (None, None, None)
        return cls(
            cmd_flags=btf.field("request", "cmd_flags").offset,
            data_len=btf.field("request", "__data_len").offset,
            start_time_ns=btf.field("request", "start_time_ns").offset,
            rq_disk=rq_disk,
            q=btf.field("request", "q").offset,
            q_disk=0 if rq_disk is not None else btf.field("request_queue", "disk").offset,
            major=btf.field("gendisk", "major").offset,
            first_minor=btf.field("gendisk", "first_minor").offset,
            rq_flags=flags[0],
            io_stat_bit=flags[1],
            flush_seq_bit=flags[2],
        )

    @property
    def accounting_known(self) -> bool:
        """Whether the program on block_io_done can test the flags diskstats tests."""
        return None not in (self.rq_flags, self.io_stat_bit, self.flush_seq_bit)

    def request_members(self) -> dict[str, tuple[int, int]]:
        """(offset, size) of each member of struct request the programs use."""
        disk = ("rq_disk", (self.rq_disk, 8)) if self.rq_disk is not None else ("q", (self.q, 8))
        members = {
            "cmd_flags": (self.cmd_flags, 4),
            "data_len": (self.data_len, 4),
            "start_time_ns": (self.start_time_ns, 8),
            disk[0]: disk[1],
        }
        if self.rq_flags is not None:
            members["rq_flags"] = (self.rq_flags, 4)
        return members


def _read(p: asm.Program, slot: int, size: int, base: int, offset: int) -> None:
    """*(slot) = the `size` bytes at kernel address base + offset (zeros if unreadable)."""
    p.mov(R1, R10)
    p.alu(asm.ADD, R1, slot)
    p.alu(asm.MOV, R2, size)
    p.mov(R3, base)
    p.alu(asm.ADD, R3, offset)
    p.call(PROBE_READ_KERNEL)


class _Request:
    """The request's members, read into the stack once (or one by one when they lie too far apart)
    and loaded from there. Expects the request in R6."""

    def __init__(self, p: asm.Program, o: Offsets) -> None:
        self._p = p
        self._members = o.request_members()
        first = min(off for off, _ in self._members.values())
        last = max(off + size for off, size in self._members.values())
        self._slots: dict[str, int] = {}
        if last - first <= REQUEST_SPAN_MAX:
            _read(p, _REQUEST, last - first, R6, first)
            self._slots = {name: _REQUEST + off - first for name, (off, _) in self._members.items()}
        else:
            for i, (name, (off, size)) in enumerate(self._members.items()):
                slot = _REQUEST + 8 * i
                _read(p, slot, size, R6, off)
                self._slots[name] = slot

    def load(self, dst: int, name: str) -> None:
        self._p.load(self._members[name][1], dst, R10, self._slots[name])

    def disk(self) -> str:
        return "rq_disk" if "rq_disk" in self._members else "q"


def _op_or_out(p: asm.Program, rq: _Request) -> None:
    """R9 = the request's op; to `out` unless a read or a write."""
    rq.load(R9, "cmd_flags")
    p.alu(asm.AND, R9, REQ_OP_MASK)
    p.jump(JGT, R9, 1, "out")


def _counters_or_out(p: asm.Program, o: Offsets, rq: _Request, devices_fd: int, stats_fd: int) -> None:
    """R0 = this CPU's counters of the request's (device, op); to `out` for a device not published.
    Expects the op in R9."""
    rq.load(R7, rq.disk())
    if rq.disk() == "q":
        _read(p, _POINTER, 8, R7, o.q_disk)
        p.load(8, R7, R10, _POINTER)
    p.jump(JEQ, R7, 0, "out")  # no disk (a passthrough request)
    if abs(o.first_minor - o.major) == 4:  # adjacent ints: one read
        low = min(o.major, o.first_minor)
        _read(p, _DISK, 8, R7, low)
        major_at, minor_at = _DISK + o.major - low, _DISK + o.first_minor - low
    else:
        _read(p, _DISK, 4, R7, o.major)
        _read(p, _SCRATCH, 4, R7, o.first_minor)
        major_at, minor_at = _DISK, _SCRATCH
    p.load(4, R1, R10, major_at)
    p.alu(asm.LSH, R1, MINORBITS)
    p.load(4, R2, R10, minor_at)
    p.alu_reg(asm.OR, R1, R2)
    _lookup_or_out(p, devices_fd, _DEV_KEY, R1)
    p.load(4, R1, R0, 0)  # the device's slot
    p.alu(asm.MUL, R1, OPS_PER_DEVICE)
    p.alu_reg(asm.ADD, R1, R9)
    _lookup_or_out(p, stats_fd, _STATS_KEY, R1)


def _lookup_or_out(p: asm.Program, map_fd: int, slot: int, key: int) -> None:
    """R0 = the element of map `map_fd` whose u32 key is in register `key` (stored at `slot`); to
    `out` when there is none."""
    p.store(4, R10, slot, key)
    p.map_fd(R1, map_fd)
    p.mov(R2, R10)
    p.alu(asm.ADD, R2, slot)
    p.call(MAP_LOOKUP_ELEM)
    p.jump(JEQ, R0, 0, "out")


def _out(p: asm.Program) -> None:
    p.label("out")
    p.alu(asm.MOV, R0, 0)
    p.exit()


def _time_into_buckets(p: asm.Program, rq: _Request) -> None:
    """With this CPU's counters in R6: the time since the request's start into its bucket and the
    sum, or the untimed count when it has no start."""
    p.call(KTIME_GET_NS)
    p.mov(R8, R0)  # now
    rq.load(R1, "start_time_ns")
    p.jump(JEQ, R1, 0, "untimed")
    p.jump_reg(JGT, R1, R8, "untimed")  # a start after now cannot be timed
    p.alu_reg(asm.SUB, R8, R1)  # latency, ns
    p.atomic_add(R6, NS_AT, R8)
    p.mov(R1, R8)
    p.alu(asm.MUL, R1, 1024)
    p.alu(asm.DIV, R1, 1_000_000)  # ms/1024 units
    p.alu(asm.MOV, R2, 0)
    for bound in BOUND_UNITS:
        p.jump(JLT, R1, bound, "bucket")
        p.alu(asm.ADD, R2, 8)
    p.label("bucket")
    p.alu_reg(asm.ADD, R6, R2)
    p.alu(asm.MOV, R1, 1)
    p.atomic_add(R6, 0, R1)
    p.goto("out")
    p.label("untimed")
    p.alu(asm.MOV, R1, 1)
    p.atomic_add(R6, UNTIMED_AT, R1)
    _out(p)


def done(o: Offsets, devices_fd: int, stats_fd: int) -> bytes:
    """block_io_done (kernel 6.5+, args: rq): fired by blk_account_io_done, where diskstats counts, so
    it counts what diskstats counts: requests with RQF_IO_STAT and without RQF_FLUSH_SEQ (block/blk-mq.c
    blk_account_io_done; include/linux/blk-mq.h enum rqf_flags), once each, at diskstats' own moment."""
    if not o.accounting_known:
        raise ValueError("block_io_done needs the rqf_flags bits from BTF")
    assert o.io_stat_bit is not None and o.flush_seq_bit is not None
    io_stat, flush_seq = 1 << o.io_stat_bit, 1 << o.flush_seq_bit
    p = asm.Program()
    p.load(8, R6, R1, 0)  # args[0]: the request
    rq = _Request(p, o)
    rq.load(R1, "rq_flags")
    p.alu(asm.AND, R1, io_stat | flush_seq)
    p.jump(JNE, R1, io_stat, "out")  # not accounted in diskstats either
    _op_or_out(p, rq)
    _counters_or_out(p, o, rq, devices_fd, stats_fd)
    p.mov(R6, R0)  # the counters (R0 is the helper's result)
    _time_into_buckets(p, rq)
    return p.assemble()


def complete(o: Offsets, devices_fd: int, stats_fd: int) -> bytes:
    """block_rq_complete (args: rq, error, nr_bytes), where block_io_done is not: the latency into its
    bucket and the sum, or the untimed count."""
    p = asm.Program()
    p.load(8, R6, R1, 0)  # args[0]: the request
    p.load(8, R8, R1, 16)  # args[2]: nr_bytes
    p.jump(JEQ, R8, 0, "out")
    rq = _Request(p, o)
    _op_or_out(p, rq)
    rq.load(R1, "data_len")
    p.jump_reg(JLT, R8, R1, "out")  # a part that does not end the request
    _counters_or_out(p, o, rq, devices_fd, stats_fd)
    p.mov(R6, R0)  # the counters (R0 is the helper's result)
    _time_into_buckets(p, rq)
    return p.assemble()


def issue(o: Offsets, devices_fd: int, stats_fd: int) -> bytes:
    """block_rq_issue: the time since the request's start into the queue-time sum."""
    p = asm.Program()
    p.load(8, R6, R1, 0)  # args[0]: the request
    rq = _Request(p, o)
    _op_or_out(p, rq)
    _counters_or_out(p, o, rq, devices_fd, stats_fd)
    p.mov(R6, R0)
    p.call(KTIME_GET_NS)
    p.mov(R8, R0)
    rq.load(R1, "start_time_ns")
    p.jump(JEQ, R1, 0, "out")
    p.jump_reg(JGT, R1, R8, "out")
    p.alu_reg(asm.SUB, R8, R1)
    p.atomic_add(R6, QUEUE_AT, R8)
    _out(p)
    return p.assemble()
