"""Polling the settings file and putting each new valid version in force."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path

from lunlat import logs
from lunlat_lab.settings import Settings, SettingsError, load_settings

log = logs.get("lunlat.lab.daemon.watcher")  # under the `lunlat` logger that logs.setup() configures

SETTINGS_POLL_SECONDS = 0.2
FileSignature = tuple[int, int, int, int] | str


def file_signature(path: Path) -> FileSignature:
    """What changes when the file is rewritten or replaced (or why it cannot be read)."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"missing: {exc.strerror}"
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class SettingsWatcher:
    """Polls the settings file and puts each new valid version in force.

    A change is seen by inode, mtime, ctime and size together, so an atomic replace (write + rename)
    within one mtime tick is still noticed. A file that cannot be used keeps the previous settings
    and logs one line per bad version, not one per poll.
    """

    def __init__(
        self,
        path: Path,
        apply: Callable[[Settings], None],
        interval: float = SETTINGS_POLL_SECONDS,
        seen: FileSignature | None = None,
        announce: bool = True,
    ) -> None:
        """`seen`: the file's signature when the settings in force were read (default: now).
        `announce`: log `settings reloaded` once applied; False when `apply` only hands the settings
        on and whoever puts them in force says so (the native engine)."""
        self.path = path
        self._apply = apply
        self._interval = interval
        self._seen = seen if seen is not None else file_signature(path)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._announce = announce

    def check(self) -> bool:
        """One poll; True when new settings were put in force."""
        signature = file_signature(self.path)
        if signature == self._seen:
            return False
        self._seen = signature
        try:
            settings = load_settings(self.path)
        except SettingsError as exc:
            log.warning("settings rejected, keeping the previous ones", err=str(exc))
            return False
        self._apply(settings)
        if not self._announce:
            return True
        log.info(
            "settings reloaded",
            luns=len(settings.luns),
            arrays=len(settings.arrays),
        )
        return True

    def run(self) -> None:
        # Stop signals belong to libfuse's handler in the main thread: a signal landing here would
        # set libfuse's exit flag without waking its loop, and the daemon would not stop.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        while not self._stop.wait(self._interval):
            try:
                self.check()
            except Exception:  # the watcher must outlive any surprise; the daemon keeps serving
                log.error("settings watcher error", exc_info=True)

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, name="settings-watcher", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self._interval + 1)
