"""A kernel BTF with one tracepoint's prototype changed, for the biolatency programs' CO-RE decisions
that no kernel obtainable here exercises (block_rq_issue with the request queue first, kernels
5.8 to 5.10.136). Written with libbpf's own BTF API (bpf/btf.h: btf__parse, btf__add_func_proto,
btf__add_func_param, btf__add_ptr, btf__raw_data), so the file is what libbpf itself writes.

Only the tracepoint's typedef is redirected: `btf_trace_<name>` (a typedef of a pointer to the
prototype, as the kernel's BTF has it: include/trace/bpf_probe.h) gets a new pointer to a new
prototype; every other type keeps its id, so the structs the programs read relocate as on the
running kernel.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from lunlat.sources.bpf import libbpf

# include/uapi/linux/btf.h: struct btf_type { __u32 name_off; __u32 info; union { size; type; }; }
_TYPE_FIELD = 2  # u32 index of `type` in struct btf_type
BTF_KIND_STRUCT, BTF_KIND_INT = 4, 1


def _lib() -> ctypes.CDLL:
    lib = libbpf.library().lib
    p, i, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
    for name, restype, argtypes in (
        ("btf__parse", p, [ctypes.c_char_p, p]),
        ("btf__type_by_id", p, [p, u32]),
        ("btf__add_func_proto", i, [p, i]),
        ("btf__add_func_param", i, [p, ctypes.c_char_p, i]),
        ("btf__add_ptr", i, [p, i]),
        ("btf__raw_data", p, [p, ctypes.POINTER(u32)]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def with_prototype(vmlinux: Path, tracepoint: str, params: list[str | None], into: Path) -> Path:
    """`vmlinux`'s BTF with `btf_trace_<tracepoint>` redirected to a prototype whose parameters are,
    after the context `void *`, pointers to the named structs (None: an int), written to `into`."""
    lib = _lib()
    btf = lib.btf__parse(str(vmlinux).encode(), None)
    if not btf:
        raise OSError(ctypes.get_errno(), f"libbpf cannot parse {vmlinux}")
    try:
        typedef = lib.btf__find_by_name_kind(btf, f"btf_trace_{tracepoint}".encode(), libbpf.BTF_KIND_TYPEDEF)
        assert typedef > 0, f"no btf_trace_{tracepoint} in {vmlinux}"
        param_types = []
        for struct in params:
            if struct is None:
                param_types.append(lib.btf__find_by_name_kind(btf, b"int", BTF_KIND_INT))
            else:
                target = lib.btf__find_by_name_kind(btf, struct.encode(), BTF_KIND_STRUCT)
                assert target > 0, f"no struct {struct}"
                param_types.append(lib.btf__add_ptr(btf, target))
        void_pointer = lib.btf__add_ptr(btf, 0)
        # A prototype's parameters are appended to the type added last (btf__add_func_param's doc):
        # every other type is added before it.
        proto = lib.btf__add_func_proto(btf, 0)  # returns void
        assert proto > 0
        assert lib.btf__add_func_param(btf, b"__data", void_pointer) == 0
        for n, type_id in enumerate(param_types):
            assert lib.btf__add_func_param(btf, f"arg{n}".encode(), type_id) == 0
        pointer = lib.btf__add_ptr(btf, proto)
        # The typedef's `type`, in libbpf's own (now modifiable) copy of the types.
        words = ctypes.cast(lib.btf__type_by_id(btf, typedef), ctypes.POINTER(ctypes.c_uint32))
        words[_TYPE_FIELD] = pointer
        size = ctypes.c_uint32()
        raw = lib.btf__raw_data(btf, ctypes.byref(size))
        into.write_bytes(ctypes.string_at(raw, size.value))
        return into
    finally:
        lib.btf__free(btf)
