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
from lunlat_lab.native import (
    STATS_REQUEST,
    ServiceTotals,
    Stream,
    encode,
    encode_calibration,
    parse_stats_line,
)
from lunlat_lab.settings import Settings

log = logs.get("lunlat.lab.daemon")

# The spin at the end of each sleep (labd.c, until()). Measured on the lab's 2-core VM
# (bench/lab_daemon.py, 3 runs): a 0.15 ms LUN beside the full phase came out -0.001 ms off target
# without a spin and +0.028 ms with 20 us of it, within the run-to-run spread of the calibration
# (about 0.03 ms). The spin buys nothing measurable and costs CPU, so none by default.
DEFAULT_SPIN_US = 0.0


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
        self.settings = settings  # the last version sent
        self.process = subprocess.Popen(
            [str(binary), "--backing", str(backing), "--mount", str(mountpoint),
             "--max-inflight", str(max_inflight), "--spin-us", repr(spin_us)],
            # stdout: the daemon's answers to `stats` (live calibration); stderr: this process's
            # (the lab's fuse.log).
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        self.apply(settings)

    def apply(self, settings: Settings) -> None:
        """Send a new version; the daemon logs `settings reloaded` once it is in force."""
        with self._lock:
            self.settings = settings
            self._send(encode(settings, self._arrays), "settings")

    def calibrate(self, overheads: dict[str, dict[Stream, float]]) -> None:
        """Each LUN's live overhead per op and size class (ms), in force at once (lab/daemon/calibration.py)."""
        with self._lock:
            self._send(encode_calibration(overheads), "calibration")

    def stats(self) -> dict[str, ServiceTotals] | None:
        """The daemon's cumulative service totals per LUN; None when it does not answer (gone)."""
        with self._lock:
            stdout: IO[bytes] | None = self.process.stdout
            if stdout is None or not self._send(STATS_REQUEST, "stats request"):
                return None
            totals: dict[str, ServiceTotals] = {}
            while True:
                line = stdout.readline()
                if not line:
                    return None
                parsed = parse_stats_line(line.decode())
                if parsed is None:
                    return totals
                totals[parsed[0]] = parsed[1]

    def _send(self, text: str, what: str) -> bool:  # self._lock held
        stdin: IO[bytes] | None = self.process.stdin
        if stdin is None:
            return False
        try:
            stdin.write(text.encode())
            stdin.flush()
        except (BrokenPipeError, ValueError):  # the daemon is gone; wait() reports it
            log.warning("the native daemon is not running; not sent", what=what)
            return False
        return True

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self) -> int:
        return self.process.wait()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
