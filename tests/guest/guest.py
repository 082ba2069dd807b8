"""Debian's kernels booted under qemu (TCG) to run one host command in them.

`kernel(name)` fetches a kernel package of Debian's archive once per machine, through apt with a private
state directory (the machine's apt configuration is left alone), and caches its vmlinuz and the few
modules the guest needs under ~/.cache/lunlat/kernels/<name>/. `run(kernel, argv, ...)` boots it with
an initramfs made here (busybox-static's /bin/busybox, those modules, /init), the host's root file system
shared read-only over virtio-9p and chrooted into, so the command runs with the host's own binaries and
paths; its output and exit code come back over a second, private 9p share.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CACHE = Path.home() / ".cache" / "lunlat" / "kernels"
QEMU = "qemu-system-x86_64"
# busybox-static's binary (Debian package busybox-static, file list): statically linked, so it runs in
# an initramfs that holds no C library.
BUSYBOX = Path("/bin/busybox")
HOST_APT_SOURCES = Path("/etc/apt/sources.list")
HOST_APT_SOURCE_PARTS = Path("/etc/apt/sources.list.d")
# debian-archive-keyring's keyring: it holds the archive signing keys of bullseye and of bookworm
# (both signed InRelease files verify with it: apt-get update fails on a key it lacks).
ARCHIVE_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# Modules the guest loads before it mounts the host's root (their dependencies are added from each
# module's own `depends=` field). Debian's amd64 configs (boot/config-*) build them all as modules
# (=m): CONFIG_VIRTIO_PCI, CONFIG_NET_9P_VIRTIO, CONFIG_9P_FS, CONFIG_BLK_DEV_LOOP, CONFIG_BLK_DEV_NULL_BLK,
# CONFIG_BLK_DEV_RAM. 9p needs fscache on 5.10 and netfs too on 6.1: both come in as dependencies.
GUEST_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "loop", "null_blk", "brd")

# Mount tags of the 9p exports (qemu-system-x86_64(1), -fsdev/-device virtio-9p-pci mount_tag=: the
# guest mounts an export by its tag, Documentation/filesystems/9p.rst "mount -t 9p -o trans=virtio
# <mount_tag> /mnt/9").
TAG_ROOT = "hostroot"
TAG_CONTROL = "control"
TAG_OUT = "outdir"

# Documentation/filesystems/9p.rst, Options: version=9p2000.L is the Linux dialect (uids, symlinks,
# device nodes as Linux has them); msize= the packet payload (5.10's default of 8 KiB makes every read
# of a Python module several round trips). The host's root alone is also mounted cache=loose: "no
# attempts are made at consistency, intended for exclusive, read-only mounts", which it is here
# (readonly=on in _qemu_argv).
NINEP = "trans=virtio,version=9p2000.L,msize=262144"

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# Not an error of the code under test but a machine that lacks something: tests skip on it, saying why.
class GuestUnavailable(Exception):  # noqa: N818
    """qemu, busybox or the kernel cannot be had on this machine (the reason says what to install)."""


class GuestError(Exception):
    """The guest booted but did not bring the command's exit code back (a timeout, a panic, a failed
    mount); the message's first line says what, the rest is the serial console's tail."""


@dataclass(frozen=True)
class KernelSpec:
    name: str
    title: str
    codename: str  # the Debian release's suite; <codename>-security is searched too
    abi: str  # what the kernel's release (uname -r) starts with


@dataclass(frozen=True)
class Kernel:
    name: str
    package: str  # linux-image-5.10.0-46-amd64
    package_version: str  # 5.10.262-1
    release: str  # 5.10.0-46-amd64: uname -r, the directory of lib/modules/
    vmlinuz: Path
    modules: tuple[Path, ...]  # in load order (each after what it depends on)


@dataclass(frozen=True)
class GuestResult:
    returncode: int
    output: str  # the command's stdout and stderr
    console: str  # the whole serial console (kernel log and /init's lines), for diagnosis
    seconds: float  # qemu's wall time, boot to power-off
    boot_seconds: float  # the guest's uptime when the command started (kernel boot, modules, mounts)


KERNELS: dict[str, KernelSpec] = {
    # Debian's kernel images are named linux-image-<version>-<flavour> (Debian Linux Kernel Handbook,
    # ch. 3 "Debian kernel packages", 3.3 "Architecture-dependent packages"), the version being the
    # ABI: 5.10.0-<N> in Debian 11, 6.1.0-<N> in Debian 12, both built with CONFIG_DEBUG_INFO_BTF=y
    # (the packages' boot/config-*).
    "debian11": KernelSpec("debian11", "Debian 11 bullseye", "bullseye", "5.10.0-"),
    "debian12": KernelSpec("debian12", "Debian 12 bookworm", "bookworm", "6.1.0-"),
}


# --- fetching a kernel -----------------------------------------------------------------------------


def kernel(name: str) -> Kernel:
    """The kernel `name` of KERNELS, fetched from Debian's archive on first use and cached; raises
    GuestUnavailable when it (or qemu, or busybox) cannot be had here."""
    spec = KERNELS.get(name)
    if spec is None:
        raise ValueError(f"no kernel named {name!r}; known: {', '.join(KERNELS)}")
    _check_host_tools()
    directory = CACHE / name
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE / f"{name}.lock"):  # one fetch at a time per kernel, across processes
        manifest = directory / "kernel.json"
        if not manifest.exists():
            _fetch(spec, directory)
        return _load(directory)


def kernel_or_skip(name: str) -> Kernel:
    """kernel(name) for a test: where the machine cannot have it (or the test is not root) the test
    skips, saying why; in CI (CI set) an unavailable kernel fails it instead, as
    tests/postgres/test_matrix.py does for its releases: the guests must run there."""
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices in the guest, the host's whole root shared to it)")
    try:
        return kernel(name)
    except GuestUnavailable as unavailable:
        if os.environ.get("CI"):
            pytest.fail(str(unavailable))
        pytest.skip(str(unavailable))


def _check_host_tools() -> None:
    if shutil.which(QEMU) is None:
        raise GuestUnavailable(
            f"{QEMU} is not installed (Debian: apt-get install --no-install-recommends qemu-system-x86)"
        )
    if not BUSYBOX.is_file():
        raise GuestUnavailable(f"{BUSYBOX} is missing (Debian: apt-get install busybox-static)")
    # A dynamically linked program names its loader in a .interp section (elf(5)); the initramfs holds
    # no loader and no C library.
    if _section(BUSYBOX.read_bytes(), b".interp"):
        raise GuestUnavailable(
            f"{BUSYBOX} is dynamically linked (Debian's busybox): apt-get install busybox-static"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load(directory: Path) -> Kernel:
    data = json.loads((directory / "kernel.json").read_text())
    return Kernel(
        name=data["name"],
        package=data["package"],
        package_version=data["package_version"],
        release=data["release"],
        vmlinuz=directory / "vmlinuz",
        modules=tuple(directory / "modules" / module for module in data["modules"]),
    )


def _fetch(spec: KernelSpec, directory: Path) -> None:
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise GuestUnavailable(f"{tool} is not installed: the guest kernels come from Debian's archive")
    shutil.rmtree(directory, ignore_errors=True)  # a fetch that died half-way
    work = directory / "apt"
    work.mkdir(parents=True)
    apt = _Apt(work, _sources_list(spec))
    apt.update()
    package, version = apt.kernel_package(spec)
    deb = apt.download(package, version)
    tree = work / "tree"
    _run_or_unavailable(["dpkg-deb", "-x", str(deb), str(tree)], f"extracting {deb.name}")
    release = package.removeprefix("linux-image-")
    modules = _copy_modules(tree, release, directory / "modules")
    shutil.copyfile(tree / "boot" / f"vmlinuz-{release}", directory / "vmlinuz")
    manifest = {
        "name": spec.name,
        "package": package,
        "package_version": version,
        "release": release,
        "modules": [module.name for module in modules],
    }
    temporary = directory / "kernel.json.tmp"
    temporary.write_text(json.dumps(manifest, indent=2) + "\n")
    temporary.replace(directory / "kernel.json")  # the manifest, last: the cache is complete
    shutil.rmtree(work)  # the package, its tree and apt's lists (~150 MB) are not needed again


def _sources_list(spec: KernelSpec) -> str:
    """One-line sources (sources.list(5)) for the release's suite and its security suite, on the
    archives this machine's own apt sources name."""
    archive, security = _host_archives()
    keyring = f"[signed-by={ARCHIVE_KEYRING}]"
    lines = [f"deb {keyring} {archive} {spec.codename} main"]
    if security is not None:
        # From Debian 11 on the security suite is <codename>-security, no longer <codename>/updates
        # (Debian 11 release notes, ch. 5 "Changed security archive layout").
        lines.append(f"deb {keyring} {security} {spec.codename}-security main")
    return "\n".join(lines) + "\n"


def _host_archives() -> tuple[str, str | None]:
    """The URIs of Debian's archive and of its security archive, as this machine's apt sources name
    them: sources of Debian's component main (a third-party repository under a /debian path, such as
    one for Docker, has components of its own), the security archive's suites ending in -security."""
    archive: str | None = None
    security: str | None = None
    for source in _host_sources():
        if "main" not in source.components or "/debian" not in source.uri:
            continue
        if any(suite.endswith("-security") for suite in source.suites):
            security = security or source.uri
        else:
            archive = archive or source.uri
    if archive is None:
        raise GuestUnavailable(
            f"no Debian archive in {HOST_APT_SOURCES} or {HOST_APT_SOURCE_PARTS}/*.sources: "
            "the guest kernels come from Debian's archive (add a 'deb' source for it)"
        )
    return archive, security


@dataclass(frozen=True)
class _Source:
    uri: str
    suites: list[str]
    components: list[str]


def _host_sources() -> Iterator[_Source]:
    """Each binary source of this machine's apt: deb822 stanzas of sources.list.d/*.sources and one-line
    entries of sources.list and sources.list.d/*.list (sources.list(5))."""
    lists = [HOST_APT_SOURCES, *sorted(HOST_APT_SOURCE_PARTS.glob("*.list"))]
    for path in lists:
        if path.is_file():
            yield from _one_line_sources(path.read_text())
    for path in sorted(HOST_APT_SOURCE_PARTS.glob("*.sources")):
        yield from _deb822_sources(path.read_text())


def _one_line_sources(text: str) -> Iterator[_Source]:
    for line in text.splitlines():
        # "deb [ option1=value1 ... ] uri suite [component1] ..." (sources.list(5), one-line style)
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            yield _Source(words[1], [words[2]], words[3:])


def _deb822_sources(text: str) -> Iterator[_Source]:
    # deb822 style (sources.list(5)): stanzas separated by blank lines, fields Types, URIs, Suites;
    # Enabled: no turns a stanza off; lines starting with # are comments.
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
            for uri in fields.get("uris", "").split():
                yield _Source(uri, fields.get("suites", "").split(), fields.get("components", "").split())


class _Apt:
    """apt-get and apt-cache on a private sources list, state and cache (apt.conf(5): Dir::Etc::
    SourceList and Dir::Etc::SourceParts name the sources, Dir::State the package lists, Dir::Cache the
    downloaded archives), so the machine's own apt configuration and lists are never changed."""

    def __init__(self, work: Path, sources: str) -> None:
        self.work = work
        sources_list = work / "sources.list"
        sources_list.write_text(sources)
        for folder in ("state/lists/partial", "cache/archives/partial", "download"):
            (work / folder).mkdir(parents=True)
        self.options = [
            "-o",
            f"Dir::Etc::SourceList={sources_list}",
            # No sources.list.d: "-" names a directory that does not exist (relative to Dir::Etc),
            # so only the list above is read (seen: apt-get update fetches its suites only).
            "-o",
            "Dir::Etc::SourceParts=-",
            "-o",
            f"Dir::State={work / 'state'}",
            "-o",
            f"Dir::Cache={work / 'cache'}",
        ]

    def update(self) -> None:
        what = "apt-get update of Debian's archive"
        _, stderr = _run_or_unavailable(["apt-get", *self.options, "-qq", "update"], what)
        # A source that cannot be fetched is only a warning ("W: Failed to fetch ...", exit code 0):
        # without a Packages list of main nothing can be found.
        if not any((self.work / "state" / "lists").glob("*_main_binary-*_Packages*")):
            raise GuestUnavailable(f"{what} got no package list: {_apt_message(stderr)} ({REACH})")

    def kernel_package(self, spec: KernelSpec) -> tuple[str, str]:
        """The kernel package linux-image-amd64 depends on in the release, and its version: the
        metapackage "depends on the latest Linux kernel and modules" (its package description), the
        security suite's update included. apt-cache(8): show --no-all-versions prints only the
        candidate version's record. That package is the signed image with its modules, not another
        metapackage (seen in 5.10.0-46 and 6.1.0-56: boot/vmlinuz-*, lib/modules/; Depends kmod,
        linux-base and an initramfs tool)."""
        record, _ = _run_or_unavailable(
            ["apt-cache", *self.options, "show", "--no-all-versions", "linux-image-amd64"],
            f"apt-cache show linux-image-amd64 ({spec.title})",
        )
        match = re.search(r"^Depends: (linux-image-(\S+)-amd64) \(= (\S+)\)", record, re.MULTILINE)
        if match is None or not match.group(2).startswith(spec.abi):
            raise GuestUnavailable(
                f"{spec.title}'s linux-image-amd64 does not depend on a linux-image-{spec.abi}*-amd64 "
                "package (the archive's suites have changed: update KERNELS in tests/guest/guest.py)"
            )
        return match.group(1), match.group(3)

    def download(self, package: str, version: str) -> Path:
        folder = self.work / "download"
        _run_or_unavailable(
            ["apt-get", *self.options, "-qq", "download", f"{package}={version}"],
            f"apt-get download {package}={version}",
            cwd=folder,
        )
        debs = sorted(folder.glob(f"{package}_*.deb"))
        if not debs:
            raise GuestUnavailable(f"apt-get download {package} wrote no .deb (see apt's output)")
        return debs[0]


REACH = "is Debian's archive reachable with this machine's apt sources?"


def _run_or_unavailable(argv: list[str], what: str, cwd: Path | None = None) -> tuple[str, str]:
    """(stdout, stderr) of a successful run; GuestUnavailable naming `what` and apt's first error."""
    result = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False)
    if result.returncode != 0:
        raise GuestUnavailable(f"{what} failed: {_apt_message(result.stderr)} ({REACH})")
    return result.stdout, result.stderr


def _apt_message(text: str) -> str:
    """apt's first error or warning (the cause; later lines sum up), else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    problems = [line for line in lines if line.startswith(("E:", "W:"))]
    return (problems or lines or ["(no message)"])[0 if problems else -1]


# --- the modules the guest loads -------------------------------------------------------------------


def _copy_modules(tree: Path, release: str, target: Path) -> list[Path]:
    """GUEST_MODULES and their dependencies, copied from the package's tree in load order; each file is
    named <order>-<module>.ko so that /init loads them in name order."""
    # Debian 11 and 12 install modules under /lib/modules/<release>/ (merged /usr moved them later).
    roots = [tree / "lib" / "modules" / release, tree / "usr" / "lib" / "modules" / release]
    root = next((candidate for candidate in roots if candidate.is_dir()), None)
    if root is None:
        raise GuestUnavailable(f"the kernel package has no lib/modules/{release} (not a kernel image?)")
    files = {_module_name(path): path for path in root.rglob("*.ko")}
    target.mkdir(parents=True)
    copied = []
    for index, name in enumerate(_load_order(GUEST_MODULES, files)):
        destination = target / f"{index:02d}-{name}.ko"
        shutil.copyfile(files[name], destination)
        copied.append(destination)
    return copied


def _module_name(path: Path) -> str:
    # A module's name is its file's with - made _ (Kbuild's KBUILD_MODNAME, scripts/Makefile.lib
    # name-fix), and depends= lists those names.
    return path.name.removesuffix(".ko").replace("-", "_")


def _load_order(wanted: Iterable[str], files: dict[str, Path]) -> list[str]:
    """Depth-first: every module after the modules it depends on, each once."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        path = files.get(name)
        if path is None:
            raise GuestUnavailable(f"the kernel package has no module {name}.ko (built in, or renamed?)")
        for dependency in _depends(path):
            visit(dependency)
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def _depends(module: Path) -> list[str]:
    """The module's `depends=` field: the modules whose symbols it uses, as modpost records them in the
    .modinfo section (scripts/mod/modpost.c, add_depends; what modinfo -F depends prints). Read here
    because the packages ship no modules.dep (depmod makes it at install) and kmod may be absent."""
    for entry in _section(module.read_bytes(), b".modinfo").split(b"\0"):
        if entry.startswith(b"depends="):
            return [name for name in entry.removeprefix(b"depends=").decode().split(",") if name]
    return []


def _section(elf: bytes, wanted: bytes) -> bytes:
    """The contents of the ELF64 little-endian section `wanted` (elf(5): the header's e_shoff at 0x28,
    e_shentsize, e_shnum and e_shstrndx at 0x3A; each Elf64_Shdr starts sh_name, sh_type, sh_flags,
    sh_addr, sh_offset, sh_size)."""
    (table,) = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)

    def header(index: int) -> tuple[int, int, int]:
        name, _type, _flags, _address, offset, size = struct.unpack_from(
            "<IIQQQQ", elf, table + index * entry_size
        )
        return name, offset, size

    _, names, _ = header(names_index)
    for index in range(count):
        name, offset, size = header(index)
        end = elf.index(b"\0", names + name)
        if elf[names + name : end] == wanted:
            return elf[offset : offset + size]
    return b""


# --- the initramfs ---------------------------------------------------------------------------------

# The guest's PID 1: the kernel runs the initramfs's /init (rdinit=, Documentation/filesystems/
# ramfs-rootfs-initramfs.rst); busybox(1) --install -s makes a symlink for each applet. /control's
# files are written through at once (9p.rst: by default no caches are used), before the power-off.
INIT = rf"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
say() {{ echo "lunlat-guest: $*"; }}
stop() {{ say "error: $*"; poweroff -f; }}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for module in /modules/*.ko; do insmod "$module" || say "insmod $module failed"; done
# 9pnet_virtio finds the exports as virtio-pci probes them: retried for a moment.
mounted() {{
  for try in 1 2 3 4 5 6 7 8 9 10; do mount -t 9p -o "$1" "$2" "$3" 2>/dev/null && return 0; sleep 0.2; done
  mount -t 9p -o "$1" "$2" "$3"
}}
mounted {NINEP},ro,cache=loose {TAG_ROOT} /newroot || stop "cannot mount the host's root ({TAG_ROOT})"
mounted {NINEP} {TAG_CONTROL} /control || stop "cannot mount the control share ({TAG_CONTROL})"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/shm $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t devpts devpts $R/dev/pts
# The host's /tmp stays reachable at /hosttmp: a checkout under it is bound back into the guest's own
# /tmp by the command script (mount(8) --bind, busybox's -o bind).
mkdir -p /hosttmp && mount -o bind $R/tmp /hosttmp
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
mount -t tmpfs -o mode=0755 tmpfs $R/run
mount -t debugfs debugfs $R/sys/kernel/debug || say "no debugfs"
mount -t tracefs tracefs $R/sys/kernel/tracing || say "no tracefs"
mount -t bpf bpf $R/sys/fs/bpf || say "no bpf file system"
mount -t configfs configfs $R/sys/kernel/config || say "no configfs"
# The guest kernel's modules, for a command that reloads one with other parameters (busybox rmmod and
# insmod: the chroot's /lib/modules is the host's, for another kernel).
mkdir -p $R/run/lunlat-guest && cp -r /modules $R/run/lunlat-guest/modules
# The kernel boots with lo down (an init system brings it up); tests talk over 127.0.0.1. No NIC.
ip link set lo up || say "cannot bring loopback up"
say "kernel $(uname -r), modules loaded, host root mounted"
cut -d' ' -f1 /proc/uptime > /control/started
sh /control/command.sh </dev/null >/control/output 2>&1
echo $? > /control/returncode
say "exit code $(cat /control/returncode)"
umount /control
poweroff -f
"""


GUEST_TMP = Path("/tmp")  # noqa: S108 - the guest's mount point, not a file made here
# The checkout these tests run from: kept visible in the guest even where it lies under /tmp (a CI
# clone made with mktemp -d).
CHECKOUT = Path(__file__).resolve().parents[2]


def _kept() -> list[Path]:
    """What the guest binds back from the host's /tmp: the checkout, when it lies there."""
    return [CHECKOUT] if CHECKOUT.is_relative_to(GUEST_TMP) else []


def _check_not_hidden(paths: list[str], outdir: Path | None) -> None:
    """The guest's /tmp is a tmpfs of its own: host paths under it are not there, except outdir's and
    the checkout's. The path itself counts, not where its symbolic links lead (the guest looks the
    path up)."""
    for path in map(Path, paths):
        if not path.is_absolute() or not path.is_relative_to(GUEST_TMP) or path.is_relative_to(CHECKOUT):
            continue
        if outdir is None or not path.is_relative_to(outdir):
            raise ValueError(
                f"{path} is under /tmp, which the guest replaces with its own tmpfs: "
                "use a directory outside /tmp (a clone elsewhere), or pass its folder as outdir"
            )


def _command_script(argv: list[str], env: dict[str, str], cwd: str, outdir: Path | None) -> str:
    """Run by /init (a child shell: an exit ends it, not PID 1): binds the checkout back if it lies
    under /tmp, mounts outdir at its host path (both after /tmp's tmpfs, which may hold them), then
    runs argv in the chroot with exactly `env`, in `cwd`."""
    lines = []
    for kept in _kept():
        target = shlex.quote(f"/newroot{kept}")
        source = shlex.quote(f"/hosttmp/{kept.relative_to(GUEST_TMP)}")
        failed = shlex.quote(f"lunlat-guest: cannot bind {kept} back under the guest's /tmp")
        lines.append(
            f"mkdir -p {target} && mount -o bind {source} {target} || {{ echo {failed}; exit 125; }}"
        )
    if outdir is not None:
        target = shlex.quote(f"/newroot{outdir}")
        failed = shlex.quote(f"lunlat-guest: cannot mount outdir at {outdir}")
        lines.append(
            f"mkdir -p {target} && mount -t 9p -o {NINEP} {TAG_OUT} {target} || {{ echo {failed}; exit 125; }}"
        )
    variables = " ".join(shlex.quote(f"{key}={value}") for key, value in env.items())
    # The host's sh changes directory; its cd exports PWD (kept, as any shell's child has it) and
    # OLDPWD (dropped: it would only name /).
    inner = 'cd "$1" || exit 125; unset OLDPWD; shift; exec "$@"'
    command = " ".join(shlex.quote(word) for word in argv)
    lines.append(
        f"env -i {variables} /bin/chroot /newroot /bin/sh -c {shlex.quote(inner)} lunlat-guest "
        f"{shlex.quote(cwd)} {command}"
    )
    return "\n".join(lines) + "\n"


def _initramfs(kernel: Kernel) -> bytes:
    """A gzip'd newc cpio archive (Documentation/driver-api/early-userspace/buffer-format.rst)."""
    archive = _Cpio()
    for directory in ("bin", "dev", "proc", "sys", "newroot", "control", "modules"):
        archive.add(directory, 0o040755)
    # The kernel opens /dev/console for init's stdin, stdout and stderr before it runs /init (init/
    # main.c, console_on_rootfs); character device 5:1 (Documentation/admin-guide/devices.txt).
    archive.add("dev/console", 0o020600, rdev=(5, 1))
    archive.add("bin/busybox", 0o100755, BUSYBOX.read_bytes())
    archive.add("init", 0o100755, INIT.encode())
    for module in kernel.modules:
        archive.add(f"modules/{module.name}", 0o100644, module.read_bytes())
    return gzip.compress(archive.close(), compresslevel=1)


class _Cpio:
    """The "newc" format: a 110-byte ASCII header ("070701", then 13 eight-digit hex fields), the name
    with its NUL, padded to 4 bytes, the data, padded to 4 bytes; "TRAILER!!!" ends the archive
    (buffer-format.rst, and cpio(5) "New ASCII Format")."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.inode = 1

    def add(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        encoded = name.encode() + b"\0"
        fields = (self.inode, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        self.inode += 1
        self.data += b"070701" + b"".join(f"{field:08X}".encode() for field in fields)
        self.data += encoded
        self._pad()
        self.data += data
        self._pad()

    def close(self) -> bytes:
        self.add("TRAILER!!!", 0)
        return bytes(self.data)

    def _pad(self) -> None:
        self.data += b"\0" * (-len(self.data) % 4)


# --- running a command -----------------------------------------------------------------------------


def run(
    kernel: Kernel,
    argv: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    memory_mib: int = 1024,
    cpus: int = 2,
    outdir: Path | None = None,
) -> GuestResult:
    """Boots `kernel`, runs `argv` (host paths) as root in the host's root file system, and powers off.
    The guest's own modules (Kernel.modules, all loaded) are in /run/lunlat-guest/modules/ there.
    `env` is the command's whole environment besides PWD (default: PATH and HOME); `cwd` its directory
    (default: the caller's, as subprocess's; a directory under /tmp is not there: the guest's /tmp is
    its own tmpfs, apart from `outdir` and this checkout); `outdir`, a host
    directory, is mounted read-write at the same path in the guest. Raises GuestError when the guest
    does not bring the exit code back within `timeout` seconds."""
    _check_host_tools()
    if not argv:
        raise ValueError("argv is empty: give the command to run in the guest")
    if outdir is not None:
        outdir = outdir.resolve()
        if not outdir.is_dir():
            raise ValueError(f"outdir {outdir} is not a directory: create it before run()")
    environment = {"PATH": PATH, "HOME": "/root"} if env is None else env
    directory = cwd or str(Path.cwd())
    _check_not_hidden([argv[0], directory], outdir)
    with tempfile.TemporaryDirectory(prefix="lunlat-guest-") as scratch:
        work = Path(scratch)
        control = work / "control"
        control.mkdir()
        (control / "command.sh").write_text(_command_script(argv, environment, directory, outdir))
        initramfs = work / "initramfs.cpio.gz"
        initramfs.write_bytes(_initramfs(kernel))
        console = work / "console.log"
        qemu = _qemu_argv(kernel, initramfs, console, control, outdir, memory_mib, cpus)
        seconds, stderr = _boot(qemu, timeout)
        log = console.read_text(errors="replace") if console.exists() else ""
        returncode = control / "returncode"
        if seconds is None:
            raise GuestError(
                f"{kernel.name}: the guest did not power off within {timeout:g} s (qemu killed){_tail(log)}"
            )
        if not returncode.exists():
            raise GuestError(
                f"{kernel.name}: the guest stopped without the command's exit code (qemu: "
                f"{stderr.strip() or 'no message'}){_tail(log)}"
            )
        return GuestResult(
            returncode=int(returncode.read_text()),
            output=(control / "output").read_text(errors="replace"),
            console=log,
            seconds=seconds,
            boot_seconds=float((control / "started").read_text()),
        )


def _qemu_argv(
    kernel: Kernel,
    initramfs: Path,
    console: Path,
    control: Path,
    outdir: Path | None,
    memory_mib: int,
    cpus: int,
) -> list[str]:
    """qemu-system-x86_64(1) options, each from the qemu documentation's "Invocation" page."""
    argv = [
        QEMU,
        # -nodefaults: no default devices (VGA, NIC, floppy, CD-ROM, serial); -no-user-config: no
        # configuration files of the machine.
        "-nodefaults",
        "-no-user-config",
        # -accel tcg,thread=multi: the emulator, one host thread per virtual CPU (KVM is not usable).
        "-accel",
        "tcg,thread=multi",
        # -cpu max: every feature TCG can emulate.
        "-cpu",
        "max",
        "-smp",
        str(cpus),
        "-m",
        str(memory_mib),
        "-display",
        "none",
        # -serial file:PATH: the guest's first serial port (ttyS0) written to a file.
        "-serial",
        f"file:{_option_value(console)}",
        "-monitor",
        "none",
        # -no-reboot: exit instead of rebooting (the kernel's panic=-1 reboots at once on a panic).
        "-no-reboot",
        "-kernel",
        str(kernel.vmlinuz),
        "-initrd",
        str(initramfs),
        # Documentation/admin-guide/kernel-parameters.txt: console=ttyS0 (the serial port), panic=-1
        # (reboot at once on a panic: qemu exits, see -no-reboot), rdinit=/init (the initramfs's
        # program to run).
        "-append",
        "console=ttyS0 panic=-1 rdinit=/init",
    ]
    # -fsdev local: a host directory exported over 9p; security_model=none: as passthrough (files
    # keep the guest's credentials) except that failures to set ownership are not reported;
    # readonly=on: the guest cannot write; multidevs=remap: the host's root spans several file
    # systems, whose inode numbers are remapped so that they do not collide in the guest (qemu commit
    # "9p: Added virtfs option 'multidevs=remap|forbid|warn'"). -device virtio-9p-pci exposes the
    # export under its mount_tag.
    exports = [(TAG_ROOT, Path("/"), ",readonly=on,multidevs=remap"), (TAG_CONTROL, control, "")]
    if outdir is not None:
        exports.append((TAG_OUT, outdir, ""))
    for tag, path, options in exports:
        argv += [
            "-fsdev",
            f"local,id={tag},path={_option_value(path)},security_model=none{options}",
            "-device",
            f"virtio-9p-pci,fsdev={tag},mount_tag={tag}",
        ]
    return argv


def _option_value(path: Path) -> str:
    # qemu-system-x86_64(1): in a comma-separated option list a comma of a value is written twice.
    return str(path).replace(",", ",,")


def _boot(qemu: list[str], timeout: float) -> tuple[float | None, str]:
    """Runs qemu to its end: (seconds, qemu's stderr), or (None, stderr) when it was killed at `timeout`."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(qemu, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            process.wait(timeout=timeout)
            seconds: float | None = time.monotonic() - started
        except subprocess.TimeoutExpired:
            seconds = None
        finally:  # also when the caller is interrupted: no qemu outlives run()
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        return seconds, stderr.read()


def _tail(console: str, lines: int = 30) -> str:
    kept = console.splitlines()[-lines:]
    return "\nconsole tail:\n" + "\n".join(kept) if kept else "\n(the serial console is empty)"
