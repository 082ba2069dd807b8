"""A thin ctypes binding to the distribution's libbpf (`libbpf.so.1`): the few calls of its stable 1.x
C API that open, load and attach a compiled BPF object and read its maps.

Why ctypes and not a Python BPF library: lunlat needs a dozen calls; libbpf's API is stable within
its major version (libbpf/libbpf README, "libbpf API stability": "libbpf follows semantic
versioning"), every distribution lunlat supports packages it (Debian and Ubuntu `libbpf1`, RHEL 8
and 9 `libbpf`), and bcc's Python bindings would bring LLVM to every host. Prototypes are those of
libbpf's headers (`bpf/libbpf.h`, `bpf/bpf.h`, `bpf/btf.h`, v1.0+).

Errors: since libbpf 1.0, functions returning a pointer return NULL and set errno, and those returning
an int return a negative errno (libbpf/libbpf README, "libbpf 1.0": "error returning logic is
unified"). Both become `LibbpfError` with the errno and what libbpf printed about it.

RLIMIT_MEMLOCK: before kernel 5.11 BPF maps are charged to it (64 KiB by default, too little for
lunlat's maps). libbpf 1.0+ raises it to infinity itself when the kernel lacks memory-cgroup
accounting of BPF memory (tools/lib/bpf/bpf.c bump_rlimit_memlock, probe_memcg_account), so nothing
here sets it; a process that may not raise its hard limit (no CAP_SYS_RESOURCE, as under
lunlat.service) needs it raised for it: deploy/systemd/biolatency.conf sets LimitMEMLOCK=.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lunlat import logs

log = logs.get(__name__)

# include/uapi/linux/btf.h: BTF_KIND_TYPEDEF 8, BTF_KIND_ENUM 6, BTF_KIND_ENUM64 19 (kernel 6.0+).
BTF_KIND_ENUM, BTF_KIND_TYPEDEF, BTF_KIND_ENUM64 = 6, 8, 19
# include/uapi/linux/bpf.h: BPF_ANY, the update flag that creates or replaces an element.
BPF_ANY = 0
# enum libbpf_print_level (bpf/libbpf.h): LIBBPF_WARN 0, LIBBPF_INFO 1, LIBBPF_DEBUG 2.
_WARN, _INFO = 0, 1
_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
# Where a C `va_list` parameter arrives as a pointer, so vsnprintf can format libbpf's messages:
# x86-64's va_list is an array (System V AMD64 ABI 3.5.7) and AArch64's a struct of more than 16
# bytes, passed by reference (AAPCS64 6.8.2). Elsewhere libbpf's messages are not captured.
_VA_LIST_BY_POINTER = ("x86_64", "aarch64")
INSTALL_HINT = (
    "install libbpf 1.0 or later (Debian 12: apt-get install libbpf1; RHEL: dnf install libbpf); a libbpf "
    "0.x, as some older distributions package, cannot load lunlat's programs"
)


class _OpenOpts(ctypes.Structure):
    """struct bpf_object_open_opts (bpf/libbpf.h, libbpf 1.x), up to the fields used: `sz` tells
    libbpf how much of it this caller knows (its forward/backward compatibility)."""

    _fields_ = (
        ("sz", ctypes.c_size_t),
        ("object_name", ctypes.c_char_p),
        ("relaxed_maps", ctypes.c_bool),
        ("pin_root_path", ctypes.c_char_p),
        ("_removed_attach_prog_fd", ctypes.c_uint32),
        ("kconfig", ctypes.c_char_p),
        ("btf_custom_path", ctypes.c_char_p),
    )


class LibbpfError(OSError):
    """A libbpf call failed: errno, what was being done, and libbpf's own last words."""


class _Lib:
    """libbpf.so.1 with the prototypes lunlat uses, loaded once per process."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path, use_errno=True)
        p, i, u32, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p
        signatures: dict[str, tuple[object, list[object]]] = {
            "libbpf_major_version": (u32, []),
            "libbpf_minor_version": (u32, []),
            "libbpf_set_print": (p, [p]),
            "bpf_object__open_file": (p, [s, p]),
            "bpf_object__load": (i, [p]),
            "bpf_object__close": (None, [p]),
            "bpf_object__find_program_by_name": (p, [p, s]),
            "bpf_object__find_map_by_name": (p, [p, s]),
            "bpf_program__set_autoload": (i, [p, ctypes.c_bool]),
            "bpf_program__attach": (p, [p]),
            "bpf_program__fd": (i, [p]),
            "bpf_link__destroy": (i, [p]),
            "bpf_map__set_max_entries": (i, [p, u32]),
            "bpf_map__value_size": (u32, [p]),
            "bpf_map__fd": (i, [p]),
            "bpf_map_lookup_elem": (i, [i, p, p]),
            "bpf_map_update_elem": (i, [i, p, p, ctypes.c_uint64]),
            "bpf_map_delete_elem": (i, [i, p]),
            "bpf_map_get_next_key": (i, [i, p, p]),
            "libbpf_num_possible_cpus": (i, []),
            "btf__load_vmlinux_btf": (p, []),
            "btf__find_by_name_kind": (ctypes.c_int32, [p, s, u32]),
            "btf__free": (None, [p]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        self.lib = lib
        self.version = (int(lib.libbpf_major_version()), int(lib.libbpf_minor_version()))
        if self.version < (1, 0):
            # 0.x returns errors another way and cannot relocate bpf_core_type_matches (1.0+).
            raise LibbpfError(
                errno.ENOSYS,
                f"libbpf {self.version[0]}.{self.version[1]} at {path} is older than 1.0: {INSTALL_HINT}",
            )
        self._messages: list[str] = []
        self._lock = threading.Lock()
        libc = ctypes.CDLL(None)
        self._vsnprintf = libc.vsnprintf
        self._vsnprintf.restype = ctypes.c_int
        self._vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]
        self._print = _PRINT_FN(self._on_print)  # kept referenced: libbpf holds the pointer
        printer = self._print if platform.machine() in _VA_LIST_BY_POINTER else None
        lib.libbpf_set_print(ctypes.cast(printer, ctypes.c_void_p) if printer else None)

    def _on_print(self, level: int, fmt: bytes, args: int | None) -> int:
        if level > _INFO:
            return 0  # debug: every relocation, too much for a log
        buf = ctypes.create_string_buffer(1024)
        self._vsnprintf(buf, len(buf), fmt, args)
        text = buf.value.decode(errors="replace").rstrip()
        if text:
            self._messages.append(text)
            if level == _WARN:
                log.debug("libbpf", message=text)
        return 0

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        """libbpf's messages printed while inside (one caller at a time)."""
        with self._lock:
            self._messages = []
            try:
                yield self._messages
            finally:
                self._messages = []


@functools.cache
def library() -> _Lib:
    """libbpf, loaded at first use (a failure is not cached: tried again at the next load);
    LibbpfError naming the package to install when it is missing or too old."""
    path = ctypes.util.find_library("bpf") or "libbpf.so.1"
    try:
        return _Lib(path)
    except LibbpfError:
        raise
    except AttributeError as exc:  # libbpf_major_version came with 0.6
        raise LibbpfError(
            errno.ENOSYS, f"libbpf at {path} is older than 1.0 ({exc}): {INSTALL_HINT}"
        ) from None
    except OSError as exc:
        raise LibbpfError(errno.ENOENT, f"cannot load libbpf ({exc}): {INSTALL_HINT}") from None


def _error(code: int, doing: str, messages: list[str]) -> LibbpfError:
    """An error for a libbpf failure: errno's text, then libbpf's last warnings (the verifier's log
    names the instruction it refused)."""
    code = abs(code) or errno.EINVAL
    said = "; ".join(m for m in messages[-6:] if m)
    return LibbpfError(code, f"{doing}: {os.strerror(code)}" + (f" (libbpf: {said})" if said else ""))


def _errno() -> int:
    return ctypes.get_errno() or errno.EINVAL


class VmlinuxBtf:
    """The running kernel's BTF as libbpf reads it (/sys/kernel/btf/vmlinux): what types exist."""

    def __init__(self) -> None:
        self._lib = library()
        with self._lib.capture() as said:
            handle = self._lib.lib.btf__load_vmlinux_btf()
            if not handle:
                raise _error(_errno(), "reading the kernel's BTF", said)
        self._handle: int = handle

    def has(self, name: str, kind: int) -> bool:
        return int(self._lib.lib.btf__find_by_name_kind(self._handle, name.encode(), kind)) > 0

    def has_enum(self, name: str) -> bool:
        return self.has(name, BTF_KIND_ENUM) or self.has(name, BTF_KIND_ENUM64)

    def close(self) -> None:
        if self._handle:
            self._lib.lib.btf__free(self._handle)
            self._handle = 0

    def __enter__(self) -> VmlinuxBtf:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BpfObject:
    """A compiled BPF object: open, choose programs and map sizes, load, attach; every kernel object
    goes with `close()`."""

    def __init__(self, path: Path, custom_btf: Path | None = None) -> None:
        """`custom_btf`: relocate against this BTF instead of the running kernel's (libbpf's
        `btf_custom_path`; tests use it to show a kernel difference no kernel here has)."""
        self._lib = library()
        self._links: list[int] = []
        opts = None
        if custom_btf is not None:
            opts = _OpenOpts(sz=ctypes.sizeof(_OpenOpts), btf_custom_path=str(custom_btf).encode())
        with self._lib.capture() as said:
            pointer = ctypes.cast(ctypes.pointer(opts), ctypes.c_void_p) if opts is not None else None
            obj = self._lib.lib.bpf_object__open_file(str(path).encode(), pointer)
            if not obj:
                raise _error(_errno(), f"opening {path}", said)
        self._obj: int = obj

    def _program(self, name: str) -> int:
        prog = self._lib.lib.bpf_object__find_program_by_name(self._obj, name.encode())
        if not prog:
            raise LibbpfError(errno.ENOENT, f"the BPF object has no program {name}")
        return int(prog)

    def _map(self, name: str) -> int:
        m = self._lib.lib.bpf_object__find_map_by_name(self._obj, name.encode())
        if not m:
            raise LibbpfError(errno.ENOENT, f"the BPF object has no map {name}")
        return int(m)

    def set_autoload(self, program: str, autoload: bool) -> None:
        self._check(self._lib.lib.bpf_program__set_autoload(self._program(program), autoload), "autoload")

    def set_max_entries(self, map_name: str, entries: int) -> None:
        self._check(
            self._lib.lib.bpf_map__set_max_entries(self._map(map_name), entries), f"sizing {map_name}"
        )

    def value_size(self, map_name: str) -> int:
        return int(self._lib.lib.bpf_map__value_size(self._map(map_name)))

    def load(self) -> None:
        with self._lib.capture() as said:
            rc = self._lib.lib.bpf_object__load(self._obj)
            if rc < 0:
                raise _error(rc, "loading the BPF programs", said)

    def attach(self, program: str) -> None:
        with self._lib.capture() as said:
            link = self._lib.lib.bpf_program__attach(self._program(program))
            if not link:
                raise _error(_errno(), f"attaching {program}", said)
        self._links.append(int(link))

    def map_fd(self, map_name: str) -> int:
        return int(self._lib.lib.bpf_map__fd(self._map(map_name)))

    def program_fd(self, program: str) -> int:
        return int(self._lib.lib.bpf_program__fd(self._program(program)))

    @staticmethod
    def _check(rc: int, doing: str) -> None:
        if rc < 0:
            raise _error(rc, doing, [])

    def close(self) -> None:
        """Detach every program and free the object's maps; idempotent."""
        for link in reversed(self._links):
            self._lib.lib.bpf_link__destroy(link)
        self._links = []
        if self._obj:
            self._lib.lib.bpf_object__close(self._obj)
            self._obj = 0


def lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    """The element's bytes, or None when there is none (ENOENT)."""
    lib = library().lib
    out = ctypes.create_string_buffer(value_size)
    rc = lib.bpf_map_lookup_elem(fd, key, out)
    if rc < 0:
        if -rc == errno.ENOENT:
            return None
        raise _error(rc, "reading a BPF map", [])
    return out.raw


def update(fd: int, key: bytes, value: bytes) -> None:
    rc = library().lib.bpf_map_update_elem(fd, key, value, BPF_ANY)
    if rc < 0:
        raise _error(rc, "writing a BPF map", [])


def delete(fd: int, key: bytes) -> None:
    """Remove the element; one that is not there is no error."""
    rc = library().lib.bpf_map_delete_elem(fd, key)
    if rc < 0 and -rc != errno.ENOENT:
        raise _error(rc, "deleting from a BPF map", [])


def keys(fd: int, key_size: int) -> Iterator[bytes]:
    """Every key of a hash map, in the kernel's order (bpf_map_get_next_key from no key: the first)."""
    lib = library().lib
    key: bytes | None = None
    out = ctypes.create_string_buffer(key_size)
    while True:
        rc = lib.bpf_map_get_next_key(fd, key, out)
        if rc < 0:
            if -rc == errno.ENOENT:
                return
            raise _error(rc, "listing a BPF map's keys", [])
        key = out.raw
        yield key


def possible_cpus() -> int:
    """How many per-CPU values a per-CPU map's element has (libbpf_num_possible_cpus)."""
    n = int(library().lib.libbpf_num_possible_cpus())
    if n <= 0:
        raise _error(n, "counting the possible CPUs", [])
    return n


def fdinfo(fd: int) -> dict[str, str]:
    """The kernel's fdinfo of a BPF fd (kernel/bpf/syscall.c bpf_prog_show_fdinfo: `key:\\tvalue`
    lines, among them `recursion_misses` since 5.12 and `run_time_ns`/`run_cnt` with
    kernel.bpf_stats_enabled)."""
    out: dict[str, str] = {}
    try:
        text = Path(f"/proc/self/fdinfo/{fd}").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out
