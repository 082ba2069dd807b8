"""Things that stand where a file should be (a FIFO, /dev/zero, a socket), and how to test against
them without wedging or exhausting the test run when the code under test regresses.

- `lunlat_argv(...)` runs `lunlat` with a ceiling on its heap (RLIMIT_DATA): code that reads
  /dev/zero to the end dies of MemoryError at 1 GiB instead of taking the machine's memory.
- `run_lunlat(...)` runs such a `lunlat` and allows `PROMPTLY` from the moment lunlat is imported:
  the refusal is under test, not the interpreter's start, which a starved CI machine once stretched
  past 15 s for seven calls in a row while the refusals themselves take milliseconds.
- `finishes(...)` runs a call in a thread and fails the test when it does not return in time; a
  reader stuck on the FIFO is then released (a writer opens and closes it: the reader sees EOF), so
  no thread stays stuck behind the test.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

MEMORY_CEILING = 1 << 30
_LIMITED = (
    "import resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_DATA, ({MEMORY_CEILING}, {MEMORY_CEILING})); "
    "from lunlat.cli import main; sys.exit(main(sys.argv[1:]))"
)
# Generous: a refusal takes milliseconds, a hang never ends.
PROMPTLY = 15.0
# Python and lunlat's imports: about 0.7 s of CPU here; not what a refusal test judges.
STARTUP = 300.0


def lunlat_argv(*args: str) -> list[str]:
    """argv of `lunlat ARGS…` run by this Python with its heap capped at MEMORY_CEILING."""
    return [sys.executable, "-c", _LIMITED, *args]


def run_lunlat(*args: str) -> subprocess.CompletedProcess[bytes]:
    """`lunlat ARGS…` as `lunlat_argv` runs it, finished within PROMPTLY of lunlat's import (and
    STARTUP for the import itself); its output captured. A run past either is killed and fails the
    test, saying which of the two it outlasted."""
    ready, told = os.pipe()
    code = _LIMITED.replace("; sys.exit(", f"; os.write({told}, b'.'); os.close({told}); sys.exit(")
    started = time.monotonic()
    with subprocess.Popen(
        [sys.executable, "-c", "import os; " + code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(told,),
    ) as process:
        os.close(told)
        try:
            # Imports print nothing, so the output pipes cannot fill while this waits.
            if not select.select([ready], [], [], STARTUP)[0]:
                process.kill()
                raise AssertionError(f"lunlat was not even imported after {STARTUP:.0f} s: {args}")
            imported = time.monotonic() - started
            try:
                out, err = process.communicate(timeout=PROMPTLY)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                raise AssertionError(
                    f"still running {PROMPTLY} s after lunlat was imported ({imported:.1f} s after its "
                    f"start): {args}; a file must not wedge it"
                ) from None
        finally:
            os.close(ready)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


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
