"""Reading and writing the files the exporter is given, so that no file can wedge or flood it.

`read_regular` reads a file named by the user (the config, the web config, a password file, a TLS
certificate): only a regular file of bounded size, never a FIFO, device or socket. `write_atomic`
writes so that no reader ever sees half of a file.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

KiB = 1024
MiB = 1024 * KiB
_CHUNK = 64 * KiB

# What a path can be other than a regular file, as a user would call it.
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefusedError(ValueError):
    """A file that was not read: missing, unreadable, not a regular file or too large. `reason` says
    what is wrong and the fix, without the path; str() starts with the path."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def size_text(size: int) -> str:
    """1048576 -> "1 MiB", 65536 -> "64 KiB": how a limit is named in messages."""
    for unit, name in ((MiB, "MiB"), (KiB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _not_regular(path: Path, mode: int, what: str) -> FileRefusedError:
    return FileRefusedError(
        path,
        f"is {_kind(mode)}, not a regular file: the {what} must be a regular file (a symlink to one is fine)",
    )


def _too_large(path: Path, size: int | None, max_bytes: int, what: str) -> FileRefusedError:
    found = f"is {size:,} bytes" if size is not None else "grew while it was read"
    return FileRefusedError(
        path, f"{found}, more than the {size_text(max_bytes)} a {what} may be: is this the right file?"
    )


def read_regular(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file at `path` (symlinks followed), at most `max_bytes` of them.

    Anything else is refused with FileRefusedError naming what it is, before a byte is read: a FIFO would
    block the open and every read ("Normally, opening the FIFO blocks until the other end is opened
    also", fifo(7)), /dev/zero never ends, a directory or socket is no file. The type is checked
    by stat before the open, so a device is never opened at all, and again by fstat on the open
    descriptor, in case the path was replaced in between; the open is non-blocking for that case
    (fifo(7), mkerrisk/man-pages man7/fifo.7: "opening for read only will succeed even if no-one has
    opened on the write side yet"). The size is checked by fstat and by reading at most one byte
    more than allowed, since a file can grow while it is read and /proc files say size 0.
    """
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode, what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise FileRefusedError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode, what)
        if info.st_size > max_bytes:
            raise _too_large(path, info.st_size, max_bytes, what)
        # O_NONBLOCK "has no effect for regular files" today, but "applications should not depend upon
        # blocking behavior" (open(2), mkerrisk/man-pages man2/open.2): cleared, so reads block as usual.
        os.set_blocking(fd, True)
        data = bytearray()
        while len(data) <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - len(data)))
            if not chunk:
                return bytes(data)
            data += chunk
        raise _too_large(path, None, max_bytes, what)
    except OSError as exc:
        raise FileRefusedError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and one rename.

    Prometheus, Grafana, the FUSE daemon or a concurrent `lunlat-lab` command reading `path` sees the
    old content or the new, never a mix; a crash leaves the old file and at worst a stray `.tmp`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


def write_generated(files: dict[Path, str], source: Path, check: bool, command: str) -> int:
    """Write generated files atomically, or with `check` compare them: exit status 1 naming each
    stale or missing one (the mixins' `--check`, which CI runs on the committed files)."""
    if check:
        stale = []
        for path, text in files.items():
            try:
                current = path.read_text(encoding="utf-8")
            except OSError as exc:
                stale.append(f"{path}: cannot read ({exc.strerror})")
                continue
            if current != text:
                stale.append(f"{path} is stale: it differs from what {source} gives")
        for message in stale:
            print(f"{message}; run `{command}`", file=sys.stderr)
        if stale:
            return 1
        print(f"{', '.join(str(p) for p in files)}: up to date with {source}")
        return 0
    for path, text in files.items():
        write_atomic(path, text)
    print(f"{', '.join(str(p) for p in files)}: written from {source}")
    return 0
