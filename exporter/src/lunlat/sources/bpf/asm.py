"""Just enough of an eBPF assembler for two small programs: instructions, labels, map references.

The encoding is the kernel's (Documentation/bpf/standardization/instruction-set.rst): 8 bytes per
instruction, opcode (class in the low 3 bits; for ALU and jumps the source bit 0x08 and the
operation in the high 4 bits; for loads and stores the size and mode), then dst_reg in the low and
src_reg in the high nibble of one byte, a signed 16-bit offset and a signed 32-bit immediate; a
64-bit immediate load takes two slots, and with src_reg BPF_PSEUDO_MAP_FD (1) its immediate is a map
file descriptor the kernel replaces with the map (include/uapi/linux/bpf.h). A jump's offset counts
instructions from the one after it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# Classes, sources, sizes, modes.
LD, LDX, STX, ALU64, JMP = 0x00, 0x01, 0x03, 0x07, 0x05
K, X = 0x00, 0x08
W, DW = 0x00, 0x18
IMM, MEM, ATOMIC = 0x00, 0x60, 0xC0
# ALU operations.
ADD, SUB, MUL, DIV, OR, AND, LSH, MOV = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0xB0
# Jump operations.
JA, JEQ, JGT, JNE, CALL, EXIT, JLT = 0x00, 0x10, 0x20, 0x50, 0x80, 0x90, 0xA0
PSEUDO_MAP_FD = 1
R0, R1, R2, R3, R6, R7, R8, R9, R10 = 0, 1, 2, 3, 6, 7, 8, 9, 10
SIZES = {4: W, 8: DW}


@dataclass(slots=True)
class Program:
    """Instructions appended in order; jumps name labels, resolved by `assemble`."""

    slots: list[tuple[int, int, int, int, int]] = field(default_factory=list)  # opcode, dst, src, off, imm
    _labels: dict[str, int] = field(default_factory=dict)
    _jumps: list[tuple[int, str]] = field(default_factory=list)

    def _emit(self, opcode: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> None:
        self.slots.append((opcode, dst, src, off, imm))

    def label(self, name: str) -> None:
        if name in self._labels:
            raise ValueError(f"label {name} defined twice")
        self._labels[name] = len(self.slots)

    def alu(self, op: int, dst: int, imm: int) -> None:
        self._emit(ALU64 | K | op, dst, imm=imm)

    def alu_reg(self, op: int, dst: int, src: int) -> None:
        self._emit(ALU64 | X | op, dst, src)

    def mov(self, dst: int, src: int) -> None:
        self.alu_reg(MOV, dst, src)

    def load(self, size: int, dst: int, src: int, off: int) -> None:
        self._emit(LDX | MEM | SIZES[size], dst, src, off)

    def store(self, size: int, dst: int, off: int, src: int) -> None:
        self._emit(STX | MEM | SIZES[size], dst, src, off)

    def atomic_add(self, dst: int, off: int, src: int) -> None:
        """*(u64 *)(dst + off) += src, atomically (imm 0 is BPF_ADD)."""
        self._emit(STX | ATOMIC | DW, dst, src, off)

    def map_fd(self, dst: int, fd: int) -> None:
        self._emit(LD | IMM | DW, dst, PSEUDO_MAP_FD, imm=fd)
        self._emit(0, 0, 0, 0, 0)  # the second half of the 64-bit immediate

    def jump(self, op: int, dst: int, imm: int, target: str) -> None:
        self._jumps.append((len(self.slots), target))
        self._emit(JMP | K | op, dst, imm=imm)

    def jump_reg(self, op: int, dst: int, src: int, target: str) -> None:
        self._jumps.append((len(self.slots), target))
        self._emit(JMP | X | op, dst, src)

    def goto(self, target: str) -> None:
        self.jump(JA, 0, 0, target)

    def call(self, helper: int) -> None:
        self._emit(JMP | CALL, imm=helper)

    def exit(self) -> None:
        self._emit(JMP | EXIT)

    def assemble(self) -> bytes:
        slots = list(self.slots)
        for at, target in self._jumps:
            if target not in self._labels:
                raise ValueError(f"jump to undefined label {target}")
            opcode, dst, src, _off, imm = slots[at]
            slots[at] = (opcode, dst, src, self._labels[target] - at - 1, imm)
        return b"".join(
            struct.pack("<BBhi", opcode, (src << 4) | dst, off, imm) for opcode, dst, src, off, imm in slots
        )
