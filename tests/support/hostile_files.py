"""Things that stand where a file should be (a FIFO, /dev/zero, a socket), and how to test against
them without wedging or exhausting the test run when the code under test regresses.

- `lunlat_argv(...)` runs `lunlat` with a ceiling on its heap (RLIMIT_DATA): code that reads
  /dev/zero to the end dies of MemoryError at 1 GiB instead of taking the machine's memory.
- `run_lunlat(...)` runs such a `lunlat` and fails once it has slept `PROMPTLY` seconds in all: a
  hang sleeps, a command starved of CPU (CI's idle cgroup) does not (tests/support/hang_guard.py).
- `finishes(...)` runs a call in a thread and fails the test when it does not return in time; a
  reader stuck on the FIFO is then released (a writer opens and closes it: the reader sees EOF), so
  no thread stays stuck behind the test.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tests.support import hang_guard

T = TypeVar("T")

MEMORY_CEILING = 1 << 30
_LIMITED = (
    "import resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_DATA, ({MEMORY_CEILING}, {MEMORY_CEILING})); "
    "from lunlat.cli import main; sys.exit(main(sys.argv[1:]))"
)
# Generous: a refusal takes milliseconds, a hang never ends.
PROMPTLY = 15.0


def lunlat_argv(*args: str) -> list[str]:
    """argv of `lunlat ARGS…` run by this Python with its heap capped at MEMORY_CEILING."""
    return [sys.executable, "-c", _LIMITED, *args]


def run_lunlat(*args: str) -> subprocess.CompletedProcess[bytes]:
    """`lunlat ARGS…` as `lunlat_argv` runs it, its output captured; failing the test once it has
    slept PROMPTLY seconds in all (tests/support/hang_guard.py: a starved CPU does not count)."""
    return hang_guard.run(lunlat_argv(*args), blocked_limit=PROMPTLY)


def make_fifo(path: Path) -> Path:
    """A FIFO at `path` (whatever was there is replaced) that nobody writes to."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def release(fifo: Path) -> None:
    """Wake every reader blocked on `fifo`: open it for writing and close it (they read EOF)."""
    with contextlib.suppress(OSError):  # ENXIO: nobody is reading, nothing to wake
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def finishes(call: Callable[[], T], fifo: Path | None = None, timeout: float = PROMPTLY) -> T:
    """`call()`'s result (or its exception), provided it returns within `timeout` seconds."""
    outcome: list[T] = []
    failure: list[Exception] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        if fifo is not None:
            release(fifo)
            thread.join(5)
        raise AssertionError(f"still running after {timeout} s: a file must not wedge it")
    if failure:
        raise failure[0]
    return outcome[0]
