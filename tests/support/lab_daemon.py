"""The lab's FUSE daemon as a pytest fixture, for the lab's tests and the exporter's tests that use it
(tests/integration/test_biolatency_kernel.py): starts `python -m lunlat_lab.daemon` on temporary
directories and, whatever happens, detaches its loops, stops it and unmounts."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lunlat_lab import system
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, Engine
from lunlat_lab.settings import Settings

IMAGE_BYTES = 32 * 1024 * 1024


def lab_daemon_skip_reason() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs Linux and root (a FUSE mount and loop devices)"
    missing = [tool for tool in ("fusermount3", "losetup") if shutil.which(tool) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (Debian: fuse3, util-linux)"
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse (load the fuse module, or give the container --device /dev/fuse)"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control: loop devices are not available"
    if importlib.util.find_spec("mfusepy") is None:
        return "mfusepy is not installed (pip install ./lab)"
    # The native daemon is not a reason to skip: installing the lab builds it (lab/hatch_build.py).
    return None


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    log: Path
    mountpoint: Path
    settings_file: Path
    loops: list[str] = field(default_factory=list)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def attach(self, lun_name: str) -> str:
        """A loop device with direct I/O on the LUN's file, detached by the fixture."""
        device = system.attach_loop(self.mountpoint / f"{lun_name}.img")
        self.loops.append(device)
        return device

    def apply(self, settings: Settings) -> None:
        """Replace the settings file as `lab set-latency` does and wait until the daemon says it
        has them in force (its log line), so no I/O of the next batch runs under the old ones."""
        reloads = self.log_text().count("settings reloaded")
        settings.save(self.settings_file)
        system.wait_for(lambda: self.log_text().count("settings reloaded") > reloads, 10, "the reload")


def stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)
    return process.returncode


StartDaemon = Callable[
    ..., Daemon
]  # (settings, engine=DEFAULT_ENGINE, extra_files={}, log_level=None) -> Daemon


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[StartDaemon]:
    """Starts the daemon on tmp dirs; whatever happens, detaches its loops, stops it, unmounts."""
    reason = lab_daemon_skip_reason()
    if reason:
        pytest.skip(reason)
    started: list[Daemon] = []

    def start(
        settings: Settings,
        engine: Engine = DEFAULT_ENGINE,
        extra_files: dict[str, bytes] | None = None,
        log_level: str | None = None,
    ) -> Daemon:
        backing, mountpoint = tmp_path / "backing", tmp_path / "mnt"
        backing.mkdir()
        mountpoint.mkdir()
        for name in settings.luns:
            with (backing / f"{name}.img").open("wb") as image:
                image.truncate(IMAGE_BYTES)
        for name, data in (extra_files or {}).items():
            (backing / name).write_bytes(data)
        settings_file = tmp_path / "settings.json"
        settings.save(settings_file)
        log = tmp_path / "fusefs.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "lunlat_lab.daemon", "--engine", engine, "--backing", str(backing),
                 "--mount", str(mountpoint), "--settings", str(settings_file),
                 *(["--log.level", log_level] if log_level else [])],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        daemon = Daemon(process, log, mountpoint, settings_file)
        started.append(daemon)

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the daemon exited ({process.returncode}):\n{daemon.log_text()}")
            return "msg=mounted" in daemon.log_text() and system.is_mounted(mountpoint)

        system.wait_for(ready, 20, "the FUSE filesystem to mount")
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            try:
                for device in daemon.loops:
                    system.detach_loop(device)
            finally:
                stop(daemon.process)
                system.unmount(daemon.mountpoint)  # only acts if the daemon left its mount behind
