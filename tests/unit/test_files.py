"""files.read_regular: only a regular file of bounded size is read; anything else is refused at
once, naming what it is."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lunlat.files import FileRefusedError, read_regular, size_text
from tests.support.hostile_files import finishes, make_fifo


def test_a_regular_file_and_a_symlink_to_one_are_read(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    link = tmp_path / "link"
    link.symlink_to(path)
    assert read_regular(path, 100, "test file") == b"x" * 100  # exactly the limit is allowed
    assert read_regular(link, 100, "test file") == b"x" * 100


def test_one_byte_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 101)
    with pytest.raises(FileRefusedError) as err:
        read_regular(path, 100, "test file")
    assert (
        str(err.value)
        == f"{path}: is 101 bytes, more than the 100 bytes a test file may be: is this the right file?"
    )


def test_a_file_larger_than_its_size_says_is_cut_at_the_limit() -> None:
    """/proc files say size 0 and hold more: the read stops one byte past the limit."""
    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("no procfs")
    with pytest.raises(FileRefusedError, match="grew while it was read, more than the 64 bytes"):
        read_regular(status, 64, "test file")


@pytest.mark.parametrize("kind", ["fifo", "zero", "dir", "socket"])
def test_what_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    listener = None
    if kind == "fifo":
        make_fifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "dir":
        path.mkdir()
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
    try:
        with pytest.raises(FileRefusedError) as err:
            finishes(lambda: read_regular(path, 1024, "test file"), path if kind == "fifo" else None)
    finally:
        if listener is not None:
            listener.close()
    names = {
        "fifo": "a FIFO (named pipe)",
        "zero": "a character device",
        "dir": "a directory",
        "socket": "a socket",
    }
    assert err.value.reason == (
        f"is {names[kind]}, not a regular file: the test file must be a regular file (a symlink to one is fine)"
    )


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileRefusedError) as err:
        read_regular(tmp_path / "absent", 1024, "test file")
    assert err.value.reason == "cannot read: No such file or directory"


def test_limits_are_named_in_their_unit() -> None:
    assert [size_text(n) for n in (1 << 20, 64 << 10, 100, 1500)] == [
        "1 MiB",
        "64 KiB",
        "100 bytes",
        "1500 bytes",
    ]
