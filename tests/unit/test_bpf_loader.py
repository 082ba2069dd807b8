"""The biolatency engine's own BPF tooling without a kernel: BTF read from a blob built here by the
format's documentation (Documentation/bpf/btf.rst), the assembler's encoding against the
instruction-set document's bytes, and the programs' layout."""

from __future__ import annotations

import struct

import pytest

from lunlat.sources.bpf import asm, programs
from lunlat.sources.bpf.btf import (
    KIND_ENUM,
    KIND_INT,
    KIND_PTR,
    KIND_STRUCT,
    KIND_TYPEDEF,
    KIND_UNION,
    Btf,
    BtfError,
)


def _btf(types: list[tuple[str, int, int, int, bool, list[tuple[str, int, int]]]]) -> bytes:
    """A BTF blob: per type (name, kind, vlen-ish payload, size_or_type, kind_flag, members)."""
    strings = b"\0"
    offsets: dict[str, int] = {"": 0}

    def name(text: str) -> int:
        nonlocal strings
        if text not in offsets:
            offsets[text] = len(strings)
            strings += text.encode() + b"\0"
        return offsets[text]

    body = b""
    for type_name, kind, int_bits, size_or_type, kind_flag, members in types:
        info = (kind << 24) | len(members) | (int(kind_flag) << 31)
        body += struct.pack("<3I", name(type_name), info, size_or_type)
        if kind == KIND_INT:
            body += struct.pack("<I", int_bits)
        for m_name, m_type, m_offset in members:
            if kind == KIND_ENUM:  # name_off and a signed 32-bit value
                body += struct.pack("<Ii", name(m_name), m_offset)
            else:
                body += struct.pack("<3I", name(m_name), m_type, m_offset)
    header = struct.pack("<HBBI4I", 0xEB9F, 1, 0, 24, 0, len(body), len(body), len(strings))
    return header + body + strings


# ids: 1 u32, 2 u64, 3 pointer to 4, 4 struct disk, 5 typedef u64 as u64_t, 6 anonymous union,
# 7 struct request (with a bitfield when kind_flag is set).
def _kernel_like(kind_flag: bool = False) -> bytes:
    bitfield = (3 << 24) | 96 if kind_flag else 96
    return _btf([
        ("unsigned int", KIND_INT, 32, 4, False, []),
        ("u64", KIND_INT, 64, 8, False, []),
        ("", KIND_PTR, 0, 4, False, []),
        ("gendisk", KIND_STRUCT, 0, 8, False, [("major", 1, 0), ("first_minor", 1, 32)]),
        ("u64_t", KIND_TYPEDEF, 0, 2, False, []),
        ("", KIND_UNION, 0, 8, False, [("start_time_ns", 5, 0), ("other", 2, 0)]),
        ("request", KIND_STRUCT, 0, 32, kind_flag, [("q", 3, 0), ("cmd_flags", 1, 64), ("flags", 1, bitfield), ("", 6, 128)]),
        ("rqf_flags", KIND_ENUM, 0, 4, False, [("__RQF_STARTED", 0, 0), ("__RQF_FLUSH_SEQ", 0, 1), ("__RQF_IO_STAT", 0, 8)]),
    ])  # fmt: skip


def test_member_offsets_sizes_typedefs_and_anonymous_unions() -> None:
    btf = Btf(_kernel_like())
    assert (btf.field("request", "q").offset, btf.field("request", "q").size) == (0, 8)
    assert (btf.field("request", "cmd_flags").offset, btf.field("request", "cmd_flags").size) == (8, 4)
    start = btf.field("request", "start_time_ns")  # inside an anonymous union, through a typedef
    assert (start.offset, start.size) == (16, 8)
    assert btf.field("gendisk", "first_minor").offset == 4
    assert btf.has_member("request", "q") and not btf.has_member("request", "rq_disk")


def test_enumerators_are_read_by_enum_and_name() -> None:
    btf = Btf(_kernel_like())
    assert btf.enumerator("rqf_flags", "__RQF_IO_STAT") == 8
    assert btf.enumerator("rqf_flags", "__RQF_FLUSH_SEQ") == 1
    with pytest.raises(BtfError, match="no __RQF_PM in enum rqf_flags"):
        btf.enumerator("rqf_flags", "__RQF_PM")


def test_what_is_missing_or_unreadable_is_named() -> None:
    btf = Btf(_kernel_like())
    with pytest.raises(BtfError, match="no member rq_disk"):
        btf.field("request", "rq_disk")
    with pytest.raises(BtfError, match="no struct request_queue"):
        btf.field("request_queue", "disk")
    with pytest.raises(BtfError, match="bitfield"):
        Btf(_kernel_like(kind_flag=True)).field("request", "flags")
    blob = _kernel_like()
    with pytest.raises(BtfError, match="not BTF"):
        Btf(b"\0" * 24 + blob[24:])
    with pytest.raises(BtfError, match="past the end"):
        Btf(blob[:40])
    with pytest.raises(BtfError, match="shorter than its header"):
        Btf(b"\x9f\xeb")


def test_instructions_encode_as_the_instruction_set_document_gives() -> None:
    p = asm.Program()
    p.alu(asm.MOV, asm.R0, 0)  # r0 = 0: opcode 0xb7 (ALU64 | K | MOV)
    p.load(8, asm.R6, asm.R1, 16)  # r6 = *(u64 *)(r1 + 16): 0x79, dst 6, src 1
    p.atomic_add(asm.R0, 8, asm.R1)  # lock *(u64 *)(r0 + 8) += r1: 0xdb, imm 0 (BPF_ADD)
    p.map_fd(asm.R1, 7)  # r1 = map fd 7: 0x18 with src 1 (BPF_PSEUDO_MAP_FD), then a zero slot
    p.jump(asm.JEQ, asm.R0, 0, "out")
    p.call(programs.MAP_LOOKUP_ELEM)  # 0x85, imm 1
    p.label("out")
    p.exit()  # 0x95
    code = p.assemble()
    slots = [struct.unpack("<BBhi", code[i : i + 8]) for i in range(0, len(code), 8)]
    assert slots == [
        (0xB7, 0x00, 0, 0),
        (0x79, 0x16, 16, 0),
        (0xDB, 0x10, 8, 0),
        (0x18, 0x11, 0, 7),
        (0x00, 0x00, 0, 0),
        (0x15, 0x00, 1, 0),  # jump over the call: the offset counts from the next instruction
        (0x85, 0x00, 0, 1),
        (0x95, 0x00, 0, 0),
    ]


def test_labels_are_checked() -> None:
    p = asm.Program()
    p.goto("nowhere")
    with pytest.raises(ValueError, match="undefined label nowhere"):
        p.assemble()
    p.label("here")
    with pytest.raises(ValueError, match="defined twice"):
        p.label("here")


def test_both_programs_assemble_for_either_disk_layout() -> None:
    """With struct request.rq_disk (kernels before 5.18) and with the queue's disk; a layout whose
    members lie far apart reads them one by one. The kernel's verifier checks them in the kernel test."""
    near = programs.Offsets(24, 44, 104, None, 0, 104, 0, 4, rq_flags=28, io_stat_bit=8, flush_seq_bit=1)
    old = programs.Offsets(24, 44, 104, 96, 0, 0, 0, 4)
    far = programs.Offsets(24, 44, 400, None, 0, 104, 8, 12)
    for offsets in (near, old, far):
        for build in (programs.done, programs.complete, programs.issue):
            if build is programs.done and not offsets.accounting_known:
                with pytest.raises(ValueError, match="rqf_flags"):
                    build(offsets, 3, 4)  # without the flags' bits there is no diskstats test to make
                continue
            code = build(offsets, 3, 4)
            assert len(code) % 8 == 0 and code[-8] == 0x95  # ends in exit
    # One helper call reads the request when its members are near each other, four when not.
    calls = [len([i for i in range(0, len(c), 8) if c[i] == 0x85 and c[i + 4] == programs.PROBE_READ_KERNEL])
             for c in (programs.issue(near, 3, 4), programs.issue(far, 3, 4))]  # fmt: skip
    assert calls[0] + 3 == calls[1]
