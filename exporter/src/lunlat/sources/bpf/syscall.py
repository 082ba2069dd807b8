"""The bpf(2) system call through ctypes: maps, program load, raw tracepoint attach.

Every number here is the kernel's UAPI, include/uapi/linux/bpf.h: the commands (enum bpf_cmd), map
and program types, and the layout of `union bpf_attr` for each command used (offsets below). The
system call number is the architecture's (arch/x86/entry/syscalls/syscall_64.tbl: 321;
include/uapi/asm-generic/unistd.h, used by arm64: 280). Each object is a file descriptor: closing it
(or the process ending) detaches a program and frees a map.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
from pathlib import Path

# enum bpf_cmd
MAP_CREATE, MAP_LOOKUP_ELEM, MAP_UPDATE_ELEM, MAP_DELETE_ELEM = 0, 1, 2, 3
PROG_LOAD, RAW_TRACEPOINT_OPEN = 5, 17
# enum bpf_map_type, enum bpf_prog_type
MAP_TYPE_HASH, MAP_TYPE_PERCPU_ARRAY = 1, 6
PROG_TYPE_RAW_TRACEPOINT = 17
ANY = 0  # BPF_ANY: create or update an element
ATTR_SIZE = 128  # zero-filled; the kernel checks that bytes past what it knows are zero
LOG_SIZE = 1 << 16  # the verifier's log, read when a load is refused

_SYSCALL_NUMBERS = {"x86_64": 321, "aarch64": 280}


class BpfError(OSError):
    """A bpf(2) call failed; errno and a message naming the call."""


def syscall_number() -> int | None:
    return _SYSCALL_NUMBERS.get(platform.machine())


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded at first use: importing this module must work where there is none to
    load this way (Windows, where lunlat runs with the psutil host source)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char], what: str) -> int:
    number = syscall_number()
    if number is None:
        raise BpfError(errno.ENOSYS, f"{what}: no bpf(2) number known for {platform.machine()}")
    result = _libc().syscall(ctypes.c_long(number), ctypes.c_int(cmd), attr, ctypes.c_uint(ATTR_SIZE))
    if result < 0:
        code = ctypes.get_errno()
        raise BpfError(code, f"{what}: {os.strerror(code)}")
    return int(result)


def _address(buffer: ctypes.Array[ctypes.c_char]) -> int:
    return ctypes.addressof(buffer)


def create_map(map_type: int, key_size: int, value_size: int, max_entries: int, name: str) -> int:
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    # map_type, key_size, value_size, max_entries, map_flags, inner_map_fd, numa_node, map_name[16]
    struct.pack_into("<5I", attr, 0, map_type, key_size, value_size, max_entries, 0)
    struct.pack_into("16s", attr, 28, name.encode()[:15])
    return _bpf(MAP_CREATE, attr, f"creating map {name}")


def _elem_attr(
    fd: int, key: ctypes.Array[ctypes.c_char], value: ctypes.Array[ctypes.c_char] | None
) -> ctypes.Array[ctypes.c_char]:
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    # map_fd (u32, then 4 bytes of padding), key (u64 pointer), value (u64 pointer), flags (u64)
    struct.pack_into(
        "<IxxxxQQQ", attr, 0, fd, _address(key), _address(value) if value is not None else 0, ANY
    )
    return attr


def update(fd: int, key: bytes, value: bytes) -> None:
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value, len(value))
    _bpf(MAP_UPDATE_ELEM, _elem_attr(fd, k, v), "updating a map element")


def delete(fd: int, key: bytes) -> None:
    k = ctypes.create_string_buffer(key, len(key))
    try:
        _bpf(MAP_DELETE_ELEM, _elem_attr(fd, k, None), "deleting a map element")
    except BpfError as exc:
        if exc.errno != errno.ENOENT:
            raise


def lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    """The element's bytes (for a per-CPU map: every possible CPU's value, each padded to 8 bytes),
    or None when the key has no element."""
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value_size)
    try:
        _bpf(MAP_LOOKUP_ELEM, _elem_attr(fd, k, v), "reading a map element")
    except BpfError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    return v.raw


def load_program(prog_type: int, instructions: bytes, name: str) -> int:
    """Load a program; a refusal carries the end of the verifier's log in its message."""
    insns = ctypes.create_string_buffer(instructions, len(instructions))
    license = ctypes.create_string_buffer(b"GPL")  # probe_read_kernel is a GPL-only helper
    log = ctypes.create_string_buffer(LOG_SIZE)
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    # prog_type, insn_cnt, insns, license, log_level, log_size, log_buf, kern_version, prog_flags, prog_name
    struct.pack_into("<IIQQIIQII", attr, 0, prog_type, len(instructions) // 8, _address(insns),
                     _address(license), 1, LOG_SIZE, _address(log), 0, 0)  # fmt: skip
    struct.pack_into("16s", attr, 48, name.encode()[:15])
    try:
        return _bpf(PROG_LOAD, attr, f"loading program {name}")
    except BpfError as exc:
        tail = log.value.decode("ascii", "replace").strip().splitlines()[-3:]
        raise BpfError(exc.errno, f"{exc.strerror}{': ' if tail else ''}{' | '.join(tail)}") from None


def attach_raw_tracepoint(name: str, prog_fd: int) -> int:
    tracepoint = ctypes.create_string_buffer(name.encode())
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("<QI", attr, 0, _address(tracepoint), prog_fd)  # name (u64 pointer), prog_fd
    return _bpf(RAW_TRACEPOINT_OPEN, attr, f"attaching to raw tracepoint {name}")


def possible_cpus(path: Path = Path("/sys/devices/system/cpu/possible")) -> int:
    """How many values a per-CPU map element has: the kernel sizes them by possible CPUs, a list of
    ranges such as "0-3" or "0,2-5" (Documentation/admin-guide/cputopology.rst)."""
    count = 0
    for part in path.read_text().strip().split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def fdinfo(fd: int) -> dict[str, str]:
    """A BPF object's /proc/self/fdinfo fields (kernel/bpf/syscall.c bpf_prog_show_fdinfo: run_time_ns,
    run_cnt, recursion_misses for a program)."""
    out: dict[str, str] = {}
    try:
        text = Path(f"/proc/self/fdinfo/{fd}").read_text(encoding="ascii", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        name, _, value = line.partition(":")
        out[name.strip()] = value.strip()
    return out
