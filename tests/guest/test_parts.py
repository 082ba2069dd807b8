"""The guest harness's pure parts, without qemu: apt sources of both styles, modules' load order from
their .modinfo, the newc archive the kernel unpacks."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.guest import guest
from tests.support.skip_unless_installed import command

DEB822 = """\
Types: deb
# a comment
URIs: http://archive.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://sources.example/debian
Suites: bookworm

Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: https://third-party.example/linux/debian
Suites: bookworm
Components: stable

Types: deb
Enabled: no
URIs: http://off.example/debian
Suites: bookworm
"""

ONE_LINE = """\
# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://archive.example/debian bookworm main
deb-src http://sources.example/debian bookworm main
deb http://security.example/debian-security bookworm-security main contrib
deb [signed-by=/etc/apt/keyrings/vendor.gpg] https://third-party.example/linux/debian bookworm stable
"""


def test_deb822_sources_are_the_enabled_binary_stanzas() -> None:
    assert list(guest._deb822_sources(DEB822)) == [
        guest._Source("http://archive.example/debian", ["bookworm", "bookworm-updates"], ["main"]),
        guest._Source("http://security.example/debian-security", ["bookworm-security"], ["main"]),
        guest._Source("https://third-party.example/linux/debian", ["bookworm"], ["stable"]),
    ]


def test_one_line_sources_skip_options_comments_and_source_lines() -> None:
    assert list(guest._one_line_sources(ONE_LINE)) == [
        guest._Source("http://archive.example/debian", ["bookworm"], ["main"]),
        guest._Source("http://security.example/debian-security", ["bookworm-security"], ["main", "contrib"]),
        guest._Source("https://third-party.example/linux/debian", ["bookworm"], ["stable"]),
    ]


@pytest.mark.parametrize("text", [DEB822, ONE_LINE], ids=["deb822", "one-line"])
def test_sources_list_names_the_release_and_its_security_suite(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Debian's archives, not a third-party repository under a /debian path, even listed first."""
    parse = guest._deb822_sources if text is DEB822 else guest._one_line_sources
    third_party_first = sorted(parse(text), key=lambda source: "third-party" not in source.uri)
    monkeypatch.setattr(guest, "_host_sources", lambda: iter(third_party_first), raising=True)
    written = guest._sources_list(guest.KERNELS["debian11"]).splitlines()
    keyring = f"[signed-by={guest.ARCHIVE_KEYRING}]"
    assert written == [
        f"deb {keyring} http://archive.example/debian bullseye main",
        f"deb {keyring} http://security.example/debian-security bullseye-security main",
    ]


def test_no_debian_archive_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guest, "_host_sources", lambda: iter([]), raising=True)
    with pytest.raises(guest.GuestUnavailable, match="no Debian archive"):
        guest._sources_list(guest.KERNELS["debian12"])


def _module(tmp_path: Path, name: str, depends: str) -> Path:
    """A real ELF object with a .modinfo section as modpost writes it, built by the host's C compiler."""
    source = tmp_path / f"{name}.c"
    source.write_text(
        f'__attribute__((section(".modinfo"), used)) static const char info[] = '
        f'"license=GPL\\0depends={depends}\\0name={name}";\n'
    )
    target = tmp_path / f"{name.replace('_', '-')}.ko"
    subprocess.run(["cc", "-c", "-o", str(target), str(source)], check=True)
    return target


def test_modules_load_after_what_they_depend_on(tmp_path: Path) -> None:
    command("cc", "gcc")
    files = {
        "9p": _module(tmp_path, "9p", "9pnet,fscache"),
        "9pnet": _module(tmp_path, "9pnet", ""),
        "fscache": _module(tmp_path, "fscache", ""),
        "9pnet_virtio": _module(tmp_path, "9pnet_virtio", "9pnet,virtio_ring"),
        "virtio_ring": _module(tmp_path, "virtio_ring", ""),
    }
    assert guest._module_name(files["9pnet_virtio"]) == "9pnet_virtio"  # the file is 9pnet-virtio.ko
    assert guest._depends(files["9p"]) == ["9pnet", "fscache"]
    assert guest._load_order(["9p", "9pnet_virtio"], files) == [
        "9pnet",
        "fscache",
        "9p",
        "virtio_ring",
        "9pnet_virtio",
    ]
    with pytest.raises(guest.GuestUnavailable, match=r"no module loop\.ko"):
        guest._load_order(["loop"], files)


def test_initramfs_is_a_newc_archive_busybox_reads(tmp_path: Path) -> None:
    """busybox cpio lists what the kernel would unpack: names, modes and sizes."""
    busybox = command("busybox", "busybox-static")
    module = tmp_path / "00-loop.ko"
    module.write_bytes(b"not really a module")
    kernel = guest.Kernel("k", "linux-image-x", "1", "x", tmp_path / "vmlinuz", (module,))
    archive = gzip.decompress(guest._initramfs(kernel))
    listing = subprocess.run(
        [busybox, "cpio", "-t", "-v"], input=archive, capture_output=True, check=True
    ).stdout.decode()
    entries = {line.split()[-1]: line.split() for line in listing.splitlines()}
    assert list(entries) == [
        "bin", "dev", "proc", "sys", "newroot", "control", "modules",
        "dev/console", "bin/busybox", "init", "modules/00-loop.ko",
    ]  # fmt: skip
    assert entries["dev/console"][0] == "crw-------"
    assert entries["init"][0] == "-rwxr-xr-x"
    assert int(entries["bin/busybox"][2]) == guest.BUSYBOX.stat().st_size
    assert int(entries["modules/00-loop.ko"][2]) == len(b"not really a module")
    # /dev/console is character device 5:1 (Documentation/admin-guide/devices.txt): newc's
    # c_rdevmajor and c_rdevminor are the 10th and 11th eight-digit fields after the "070701" magic.
    header = archive[archive.index(b"dev/console\0") - 110 :]
    assert header[:6] == b"070701"
    assert (int(header[6 + 9 * 8 : 6 + 10 * 8], 16), int(header[6 + 10 * 8 : 6 + 11 * 8], 16)) == (5, 1)


def test_host_paths_under_tmp_are_refused_unless_in_outdir() -> None:
    """The guest mounts its own tmpfs on /tmp: a command or directory there would not be found."""
    tmp = Path("/tmp")  # noqa: S108 - paths only compared, no file is made
    python = tmp / "clone" / ".venv" / "bin" / "python"
    with pytest.raises(ValueError, match=rf"{re.escape(str(python))} is under /tmp"):
        guest._check_not_hidden([str(python), "/srv"], None)
    outdir = tmp / "out"
    guest._check_not_hidden([str(outdir / "run.sh"), str(outdir)], outdir)
    guest._check_not_hidden(["python3", "/srv/lunlat", f"{tmp}foo/x"], None)


def test_apt_message_is_the_first_error_or_warning() -> None:
    stderr = (
        "W: Failed to fetch http://archive.example/debian/dists/bullseye/InRelease  Connection refused\n"
        "W: Some index files failed to download. They have been ignored, or old ones used instead.\n"
    )
    assert guest._apt_message(stderr).endswith("InRelease  Connection refused")
    assert guest._apt_message("Reading package lists...\nsomething odd\n") == "something odd"
    assert guest._apt_message("") == "(no message)"


def _unavailable(name: str) -> guest.Kernel:
    raise guest.GuestUnavailable(f"{name}: qemu-system-x86_64 is not installed (Debian: qemu-system-x86)")


@pytest.mark.skipif(os.geteuid() != 0, reason="kernel_or_skip skips first without root")
def test_an_unavailable_kernel_skips_but_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guest, "kernel", _unavailable)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="debian11: qemu-system-x86_64 is not installed"):
        guest.kernel_or_skip("debian11")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="debian11: qemu-system-x86_64 is not installed"):
        guest.kernel_or_skip("debian11")
