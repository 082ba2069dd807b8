"""How the biolatency source's BPF object is built: what the build host needs, the flags, the compile.

Standard library only: the build hook (exporter/hatch_build.py) loads this file by path inside pip's
isolated build environment, where lunlat is not importable; tests and deploy/packages/build use it
too. The object is BPF bytecode, the same for every kernel and architecture lunlat runs on: libbpf
relocates its struct accesses to the running kernel's BTF when it loads it (CO-RE), so the wheel
stays pure Python.

Steps, as libbpf-tools build theirs (iovisor/bcc libbpf-tools/Makefile):
1. `bpftool btf dump file /sys/kernel/btf/vmlinux format c` writes vmlinux.h, every kernel type with
   `preserve_access_index` (the build host's kernel: any with BTF, kernel 5.2+ built with
   CONFIG_DEBUG_INFO_BTF; which one does not matter, the accesses are relocated at load).
2. `clang -g -O2 -target bpf` (-g: the BTF and the CO-RE relocations are emitted from debug info;
   clang 15+: `bpf_core_type_matches`, LLVM's BPF_TYPE_MATCHES, which libbpf 1.0+ resolves) with
   libbpf's headers (`bpf/bpf_helpers.h`, `bpf/bpf_core_read.h`, Debian's libbpf-dev).
3. `llvm-strip -g` drops the DWARF and keeps .BTF and .BTF.ext, which libbpf needs (the same Makefile).

LUNLAT_BPF decides what a build without those tools does: `auto` (the default) builds the object
when it can and otherwise says so in one line and builds without it (biolatency then reports itself
unavailable, naming this); `require` (deploy/packages/build and the image) stops the build with
that line; `skip` builds without it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).parent / "src" / "lunlat" / "sources" / "bpf" / "biolatency.bpf.c"
OBJECT_NAME = "biolatency.bpf.o"
VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
MIN_CLANG = 15
BUILD_PACKAGES = ("clang-16", "llvm-16", "bpftool", "libbpf-dev")  # Debian 12; clang 15+ elsewhere
_LIBBPF_HEADER = Path("/usr/include/bpf/bpf_helpers.h")
# bpftool lives in /usr/sbin on Debian and RHEL, outside a normal user's PATH.
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
CFLAGS = ("-g", "-O2", "-target", "bpf", "-Wall", "-Werror")


class BuildError(Exception):
    """The BPF object cannot be built here; one line saying what to install."""


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def _clang_major(clang: str) -> int:
    out = subprocess.run([clang, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"clang version (\d+)", out)
    return int(m.group(1)) if m else 0


def find_clang() -> str | None:
    """The first clang of version 15 or later: `clang`, then the versioned names Debian installs."""
    for name in ("clang", *(f"clang-{v}" for v in range(21, MIN_CLANG - 1, -1))):
        path = shutil.which(name)
        if path and _clang_major(path) >= MIN_CLANG:
            return path
    return None


def find_strip(clang: str) -> str | None:
    """llvm-strip of clang's own LLVM (clang-16 -> llvm-strip-16), else any llvm-strip."""
    suffix = re.search(r"-(\d+)$", clang)
    names = ([f"llvm-strip-{suffix.group(1)}"] if suffix else []) + ["llvm-strip"]
    return next((p for p in map(shutil.which, names) if p), None)


def missing() -> list[str]:
    """What is missing to build the object (empty when it can be built)."""
    out = []
    if find_clang() is None:
        out.append(f"clang {MIN_CLANG} or later")
    if _which("bpftool") is None:
        out.append("bpftool")
    if not _LIBBPF_HEADER.exists():
        out.append("libbpf's headers (libbpf-dev)")
    if not VMLINUX_BTF.exists():
        out.append(f"the build host's kernel BTF ({VMLINUX_BTF})")
    return out


def require_buildable() -> None:
    gaps = missing()
    if gaps:
        raise BuildError(
            "building lunlat's BPF object (biolatency.bpf.c, for --collector.biolatency) needs "
            f"{', '.join(gaps)}: on Debian 12 install {' '.join(BUILD_PACKAGES)} and build again, "
            "or set LUNLAT_BPF=skip to build without it"
        )


def build(target: Path, source: Path = SOURCE) -> Path:
    """Compile `source` into the BPF object `target` (replaced whole: a reader never sees half)."""
    require_buildable()
    clang, bpftool = find_clang(), _which("bpftool")
    assert clang is not None and bpftool is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lunlat-bpf-") as tmp:
        header = Path(tmp) / "vmlinux.h"
        with header.open("w") as out:
            dumped = subprocess.run(
                [bpftool, "btf", "dump", "file", str(VMLINUX_BTF), "format", "c"],
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        if dumped.returncode != 0:
            raise BuildError(f"bpftool could not dump {VMLINUX_BTF}: {dumped.stderr.strip()[-500:]}")
        obj = Path(tmp) / OBJECT_NAME
        compiled = subprocess.run(
            [clang, *CFLAGS, "-I", tmp, "-c", str(source), "-o", str(obj)],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            raise BuildError(f"{Path(clang).name} {source.name} failed: {compiled.stderr.strip()[-2000:]}")
        strip = find_strip(clang)
        if strip is not None:
            stripped = subprocess.run([strip, "-g", str(obj)], capture_output=True, text=True, check=False)
            if stripped.returncode != 0:
                raise BuildError(f"llvm-strip {obj.name} failed: {stripped.stderr.strip()[-500:]}")
        fd, partial = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
        os.close(fd)
        try:
            shutil.copyfile(obj, partial)
            Path(partial).chmod(0o644)  # read by lunlat's own unprivileged user, not only by root
            Path(partial).replace(target)
        finally:
            Path(partial).unlink(missing_ok=True)
    return target


def mode() -> str:
    """LUNLAT_BPF: auto, require or skip (anything else is an error naming the three)."""
    value = os.environ.get("LUNLAT_BPF", "auto").strip().lower() or "auto"
    if value not in ("auto", "require", "skip"):
        raise BuildError(f"LUNLAT_BPF={value!r}: use auto (the default), require or skip")
    return value
