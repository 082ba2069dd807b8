"""Member offsets of kernel structs, read from the kernel's own BTF (/sys/kernel/btf/vmlinux).

What compiled CO-RE programs get from libbpf's relocations, done here by lookup: the program is
assembled with the offsets this kernel really has. The format is the kernel's documentation
(Documentation/bpf/btf.rst): a header (magic 0xeB9F, version, flags, hdr_len, then type_off,
type_len, str_off, str_len relative to the end of the header), a type section of `struct btf_type`
records (name_off, info, size/type: info's bits 24-28 are the kind, 0-15 vlen, 31 kind_flag) each
followed by kind-specific data, and a string section. Type ids count from 1 in section order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

VMLINUX = Path("/sys/kernel/btf/vmlinux")
MAGIC = 0xEB9F

# Kinds (Documentation/bpf/btf.rst, "BTF Type Encoding") and the bytes of data after each record.
KIND_INT, KIND_PTR, KIND_ARRAY, KIND_STRUCT, KIND_UNION, KIND_ENUM = 1, 2, 3, 4, 5, 6
KIND_TYPEDEF, KIND_VOLATILE, KIND_CONST, KIND_RESTRICT, KIND_TYPE_TAG = 8, 9, 10, 11, 18
KIND_FUNC_PROTO, KIND_VAR, KIND_DATASEC, KIND_DECL_TAG, KIND_ENUM64 = 13, 14, 15, 17, 19
_FIXED_EXTRA = {KIND_INT: 4, KIND_ARRAY: 12, KIND_VAR: 4, KIND_DECL_TAG: 4}
_PER_VLEN = {
    KIND_STRUCT: 12,
    KIND_UNION: 12,
    KIND_ENUM: 8,
    KIND_FUNC_PROTO: 8,
    KIND_DATASEC: 12,
    KIND_ENUM64: 12,
}
_MODIFIERS = (KIND_TYPEDEF, KIND_VOLATILE, KIND_CONST, KIND_RESTRICT, KIND_TYPE_TAG)


class BtfError(ValueError):
    """The BTF cannot be read or lacks what is asked; the message says which."""


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    type_id: int
    bit_offset: int
    bitfield_size: int  # 0 for an ordinary member


@dataclass(frozen=True, slots=True)
class _Type:
    kind: int
    name: str
    size_or_type: int
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class Field:
    """Where a member lies in its struct and how many bytes it has."""

    offset: int
    size: int


class Btf:
    """The structs and unions of one BTF blob, by name."""

    def __init__(self, data: bytes) -> None:
        if len(data) < 24:
            raise BtfError(f"BTF is {len(data)} bytes, shorter than its header")
        magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
        if magic != MAGIC:
            raise BtfError(f"not BTF (magic {magic:#x}, or not little-endian)")
        type_off, type_len, str_off, str_len = struct.unpack_from("<4I", data, 8)
        types_at, strings_at = hdr_len + type_off, hdr_len + str_off
        if types_at + type_len > len(data) or strings_at + str_len > len(data):
            raise BtfError("BTF sections run past the end of the data")
        self._strings = data[strings_at : strings_at + str_len]
        self._types: list[_Type | None] = [None]  # id 0 is void
        self._by_name: dict[str, list[int]] = {}
        self._data = data
        self._enums: dict[str, list[tuple[int, int]]] = {}  # enum name -> (where its members are, vlen)
        self._parse(data, types_at, types_at + type_len)

    @classmethod
    def kernel(cls, path: Path = VMLINUX) -> Btf:
        try:
            return cls(path.read_bytes())
        except OSError as exc:
            raise BtfError(f"cannot read {path}: {exc.strerror or exc} (kernel built without BTF?)") from None

    def _name(self, offset: int) -> str:
        end = self._strings.find(b"\0", offset)
        if offset >= len(self._strings) or end < 0:
            raise BtfError(f"string offset {offset} is outside the string section")
        return self._strings[offset:end].decode("ascii", "replace")

    def _parse(self, data: bytes, at: int, end: int) -> None:
        while at < end:
            if at + 12 > end:
                raise BtfError("a type record is cut off")
            name_off, info, size_or_type = struct.unpack_from("<3I", data, at)
            at += 12
            kind, vlen, kind_flag = (info >> 24) & 0x1F, info & 0xFFFF, info >> 31
            extra = _FIXED_EXTRA.get(kind, 0) + _PER_VLEN.get(kind, 0) * vlen
            if at + extra > end:
                raise BtfError(f"type {len(self._types)} runs past the type section")
            members: tuple[Member, ...] = ()
            if kind in (KIND_STRUCT, KIND_UNION):
                parsed = []
                for i in range(vlen):
                    m_name, m_type, m_offset = struct.unpack_from("<3I", data, at + 12 * i)
                    # kind_flag: the offset's low 24 bits are the bit offset, the high 8 a bitfield size.
                    bits, size = (m_offset & 0xFFFFFF, m_offset >> 24) if kind_flag else (m_offset, 0)
                    parsed.append(Member(self._name(m_name), m_type, bits, size))
                members = tuple(parsed)
            name = self._name(name_off) if name_off else ""
            self._types.append(_Type(kind, name, size_or_type, members))
            if name and kind in (KIND_STRUCT, KIND_UNION):
                self._by_name.setdefault(name, []).append(len(self._types) - 1)
            elif name and kind == KIND_ENUM:
                self._enums.setdefault(name, []).append((at, vlen))
            at += extra

    def _resolve(self, type_id: int) -> _Type:
        seen = 0
        while True:
            if not 0 < type_id < len(self._types):
                raise BtfError(f"type id {type_id} does not exist")
            t = self._types[type_id]
            assert t is not None
            if t.kind not in _MODIFIERS:
                return t
            type_id, seen = t.size_or_type, seen + 1
            if seen > 32:
                raise BtfError("a typedef chain loops")

    def _size(self, type_id: int) -> int:
        t = self._resolve(type_id)
        if t.kind == KIND_PTR:
            return 8
        if t.kind in (KIND_INT, KIND_ENUM, KIND_ENUM64, KIND_STRUCT, KIND_UNION):
            return t.size_or_type
        raise BtfError(f"no size for a type of kind {t.kind}")

    def _find(self, members: tuple[Member, ...], name: str, base: int) -> tuple[Member, int] | None:
        """The member `name`, looking into anonymous structs and unions (C11 members of the outer)."""
        for m in members:
            if m.name == name:
                return m, base + m.bit_offset
            if not m.name:
                inner = self._resolve(m.type_id)
                if inner.kind in (KIND_STRUCT, KIND_UNION):
                    found = self._find(inner.members, name, base + m.bit_offset)
                    if found is not None:
                        return found
        return None

    def enumerator(self, enum_name: str, member: str) -> int:
        """The value of `member` of `enum enum_name` (members: name_off, then a signed 32-bit value)."""
        for at, vlen in self._enums.get(enum_name, []):
            for i in range(vlen):
                name_off, value = struct.unpack_from("<Ii", self._data, at + 8 * i)
                if self._name(name_off) == member:
                    return int(value)
        raise BtfError(f"the kernel's BTF has no {member} in enum {enum_name}")

    def has_member(self, struct_name: str, member: str) -> bool:
        try:
            self.field(struct_name, member)
        except BtfError:
            return False
        return True

    def field(self, struct_name: str, member: str) -> Field:
        """Byte offset and size of `struct_name.member`; BtfError when either is missing or the member
        is a bitfield (a program reads whole bytes)."""
        # A name may also belong to a forward declaration or an empty struct: the one with members.
        defined = [
            t for i in self._by_name.get(struct_name, []) if (t := self._types[i]) is not None and t.members
        ]
        if not defined:
            raise BtfError(f"the kernel's BTF has no struct {struct_name}")
        t = defined[0]
        found = self._find(t.members, member, 0)
        if found is None:
            raise BtfError(f"struct {struct_name} has no member {member} in this kernel")
        m, bits = found
        if m.bitfield_size or bits % 8:
            raise BtfError(f"{struct_name}.{member} is a bitfield")
        return Field(bits // 8, self._size(m.type_id))
