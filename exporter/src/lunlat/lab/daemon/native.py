"""The native engine from the daemon's side: the C daemon (lab/native/labd.c) as a child process,
fed each version of the settings on its stdin.

Python keeps what it does well: reading and validating settings.json (lab/settings.py) and
watching it (watcher.py). The C daemon serves every I/O; it logs `msg=mounted` when the kernel's
INIT is answered and `msg="settings reloaded"` once a new version is in force, and it keeps serving
with the last settings if this process dies (SIGKILL), until `lab down` stops it.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path
from typing import IO

from lunlat import logs
from lunlat.lab.native import encode
from lunlat.lab.settings import Settings

log = logs.get("lunlat.lab.daemon")

# The spin at the end of each sleep (labd.c, until()): measured on the lab's 2-core VM, 20 us of
# spinning after a compensated sleep keeps 0.15 ms targets within 0.02 ms (bench/lab_daemon.py).
DEFAULT_SPIN_US = 20.0


class NativeDaemon:
    """The C daemon, started on `binary` with the first settings; `apply` sends it new ones."""

    def __init__(
        self,
        binary: Path,
        backing: Path,
        mountpoint: Path,
        settings: Settings,
        max_inflight: int,
        spin_us: float = DEFAULT_SPIN_US,
    ) -> None:
        self._arrays: dict[str, int] = {}  # array name -> the daemon's index, stable for its life
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [str(binary), "--backing", str(backing), "--mount", str(mountpoint),
             "--max-inflight", str(max_inflight), "--spin-us", repr(spin_us)],
            stdin=subprocess.PIPE,  # stdout and stderr: this process's (the lab's fuse.log)
        )  # fmt: skip
        self.apply(settings)

    def apply(self, settings: Settings) -> None:
        """Send a new version; the daemon logs `settings reloaded` once it is in force."""
        with self._lock:
            text = encode(settings, self._arrays)
            stdin: IO[bytes] | None = self.process.stdin
            if stdin is None:
                return
            try:
                stdin.write(text.encode())
                stdin.flush()
            except (BrokenPipeError, ValueError):  # the daemon is gone; wait() reports it
                log.warning("the native daemon is not running; settings not sent")

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self) -> int:
        return self.process.wait()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
