"""The daemon's command line: `python -m lunlat_lab.daemon [--engine native|python] --backing DIR
--mount DIR --settings FILE`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from lunlat import logs
from lunlat_lab.daemon.calibration import LiveCalibrator
from lunlat_lab.daemon.filesystem import DEFAULT_MAX_INFLIGHT, LabFS, mount
from lunlat_lab.daemon.injector import Injector
from lunlat_lab.daemon.libfuse import LibfuseError, require_libfuse3
from lunlat_lab.daemon.native import DEFAULT_SPIN_US, STOP_SIGNALS, NativeDaemon
from lunlat_lab.daemon.scheduling import (
    DAEMON_NICE,
    lower_timer_slack,
    raise_priority,
    raise_session_priority,
)
from lunlat_lab.daemon.watcher import SettingsWatcher, file_signature
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, ENGINES, parse_engine
from lunlat_lab.native import BuildError
from lunlat_lab.native import binary as native_binary
from lunlat_lab.settings import SettingsError, load_settings
from lunlat_lab.state import LIVE_OVERHEAD_FILE

log = logs.get("lunlat.lab.daemon")  # a fixed name: run with -m, __name__ is __main__

FUSE_LOOP_ENDED = 8  # fuse_main's status when its loop ended with an error or a signal (libfuse 3)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lunlat_lab.daemon",
        description="Mount the lab's latency-injecting FUSE filesystem (foreground; stop with SIGTERM).",
    )
    parser.add_argument(
        "--engine",
        default=DEFAULT_ENGINE,
        choices=ENGINES,
        help=f"native: the C daemon (lab/native/labd.c); python: mfusepy (default {DEFAULT_ENGINE})",
    )
    parser.add_argument("--backing", type=Path, required=True, help="directory holding the <lun>.img files")
    parser.add_argument("--mount", type=Path, required=True, help="empty directory to mount on")
    parser.add_argument("--settings", type=Path, required=True, help="settings JSON (lab/settings.py)")
    parser.add_argument(
        "--max-inflight",
        type=int,
        default=DEFAULT_MAX_INFLIGHT,
        help=f"I/Os served at once over all arrays (default {DEFAULT_MAX_INFLIGHT})",
    )
    parser.add_argument(
        "--log.level",
        dest="log_level",
        choices=tuple(logs.LEVELS),
        default="info",
        help="debug logs each live-calibration window (kernel and daemon means) to fuse.log",
    )
    parser.add_argument(
        "--spin-us",
        type=float,
        default=DEFAULT_SPIN_US,
        help=f"native engine: microseconds spun at the end of each delay (default {DEFAULT_SPIN_US:g})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.setup(args.log_level, "logfmt")
    # Absolute: libfuse changes the working directory when it mounts.
    backing, mountpoint, settings_file = (p.absolute() for p in (args.backing, args.mount, args.settings))
    problems = [f"{flag} {path} is not a directory" for flag, path in
                (("--backing", backing), ("--mount", mountpoint)) if not path.is_dir()]  # fmt: skip
    if args.max_inflight < 1:
        problems.append(f"--max-inflight must be at least 1, got {args.max_inflight}")
    if args.spin_us < 0:
        problems.append(f"--spin-us must not be negative, got {args.spin_us}")
    engine = parse_engine(args.engine)
    binary: Path | None = None
    try:
        require_libfuse3()
        if engine == "native":
            binary = native_binary()  # built when the lab was installed
    except (LibfuseError, BuildError) as exc:
        problems.append(str(exc))
    seen = file_signature(settings_file)  # before reading: a change from now on is noticed
    try:
        settings = load_settings(settings_file)
    except SettingsError as exc:
        problems.append(str(exc))
    if problems:
        log.error("cannot start", err="; ".join(problems))
        return 2
    # Before libfuse starts its workers (or the native daemon), so they inherit it.
    slack = lower_timer_slack()
    prioritized = raise_priority()
    session_prioritized = raise_session_priority()
    log.info(
        "starting",
        engine=engine, mount=str(mountpoint), backing=str(backing), settings=str(settings_file), luns=len(settings.luns), arrays=len(settings.arrays), timer_slack_lowered=slack, nice=DAEMON_NICE if prioritized else os.getpriority(os.PRIO_PROCESS, 0), autogroup_nice_set=session_prioritized, pid=os.getpid(),
    )  # fmt: skip
    if binary is not None:
        return _supervise(
            lambda: NativeDaemon(binary, backing, mountpoint, settings, args.max_inflight, args.spin_us),
            lambda daemon: SettingsWatcher(settings_file, daemon.apply, seen=seen, announce=False),
            lambda daemon: LiveCalibrator(
                mountpoint,
                settings_file.with_name(LIVE_OVERHEAD_FILE),
                daemon.stats,
                daemon.calibrate,
                lambda: dict(daemon.settings.overhead_ms),
            ),
        )
    injector = Injector(settings)
    watcher = SettingsWatcher(settings_file, injector.apply, seen=seen)
    watcher.start()
    try:
        mount(LabFS(backing, injector, args.max_inflight), mountpoint)
        reason = "unmounted"
    except LibfuseError as exc:  # mfusepy imported on another libfuse before (not in this process)
        log.error("cannot start", err=str(exc))
        return 2
    except RuntimeError as exc:
        # mfusepy raises fuse_main's status when it is not 0. 8: the loop ended with an error,
        # which is how libfuse 3 reports the SIGTERM/SIGINT/SIGHUP its own handler caught (libfuse
        # also prints real device errors itself). Lower values: the mount itself failed.
        if str(exc) != str(FUSE_LOOP_ENDED):
            log.error("libfuse failed", fuse_main_status=str(exc))
            return 1
        reason = "signal"
    finally:
        watcher.stop()
    log.info("stopped", reason=reason)
    return 0


def _supervise(
    start: Callable[[], NativeDaemon],
    watch: Callable[[NativeDaemon], SettingsWatcher],
    calibrate: Callable[[NativeDaemon], LiveCalibrator],
) -> int:
    """Run the native daemon until it exits: stop signals are passed on to it (it unmounts), each
    new version of the settings file is sent to it, and each LUN's live overhead (calibration.py)."""
    signalled: list[int] = []
    started: list[NativeDaemon] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        signalled.append(signum)
        for daemon in started:
            daemon.signal(signum)

    # Handlers first: a stop signal that arrives while the daemon starts is passed on, not lost.
    for signum in STOP_SIGNALS:
        signal.signal(signum, forward)
    daemon = start()
    started.append(daemon)
    if signalled:
        daemon.signal(signalled[-1])
    watcher = watch(daemon)
    watcher.start()
    calibrator = calibrate(daemon)
    calibrator.start()
    try:
        status = daemon.wait()
    finally:
        calibrator.stop()
        watcher.stop()
    if status != 0:
        log.error("the native daemon failed", status=status)
        return 1
    log.info("stopped", reason="signal" if signalled else "unmounted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
