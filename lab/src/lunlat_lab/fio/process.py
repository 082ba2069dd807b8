"""Running fio: start it on a job file, wait for it, stop it (by handle or by pid)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil

from lunlat_lab.fio import FioError
from lunlat_lab.fio.report import load

JOB_FILE = "jobs.fio"
LOG_FILE = "fio.log"


def start(job_text: str, workdir: Path, output: Path) -> subprocess.Popen[bytes]:
    """Write the job file into `workdir` and start fio on it, writing its JSON report to `output`.

    fio runs in its own session (process group), so stop() can end the job processes it forks, and a
    terminal's Ctrl-C reaches the lab command rather than fio. Its stdout and stderr go to
    `workdir`/fio.log (a file, not a pipe a chatty fio could fill and block on).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    jobs = workdir / JOB_FILE
    jobs.write_text(job_text)
    # A report left by an earlier run must not pass for this run's.
    output.unlink(missing_ok=True)
    argv = ["fio", "--output-format=json", f"--output={output}", str(jobs)]
    with (workdir / LOG_FILE).open("wb") as log:
        try:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except FileNotFoundError:
            raise FioError("fio is not installed (Debian package fio)") from None


def _log_tail(proc: subprocess.Popen[bytes], limit: int = 2000) -> str:
    # start() put the log beside the job file, which is fio's last argument.
    args = proc.args
    if not isinstance(args, list) or not args:
        return ""
    try:
        return (Path(str(args[-1])).parent / LOG_FILE).read_text(errors="replace")[-limit:].strip()
    except OSError:
        return ""


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """End a run started by start(): SIGTERM makes fio end its jobs and write its JSON report (exit
    code 128); after `timeout` s (fio stuck, e.g. on a dead FUSE daemon) SIGKILL its whole process
    group, which leaves no report. Returns fio's exit code (negative: killed by that signal)."""
    if proc.poll() is None:
        # The main process only: it tells its job processes to end and then writes the report.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # The whole group: job processes outlive a killed main process and would hold the LUN.
            # Before reaping the main process, so its pid (the group id) cannot have been reused.
            _kill_group(proc.pid)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise FioError(f"fio (pid {proc.pid}) did not end after SIGKILL") from None
    return proc.returncode


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """stop() for a run known only by its pid (the lab's state file): a pid that is no longer fio
    (exited, reused by another program) is left alone."""
    try:
        proc = psutil.Process(pid)
        if proc.name() != "fio":
            return
        pgid = os.getpgid(pid)
        proc.send_signal(signal.SIGTERM)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return
    except psutil.AccessDenied:
        raise FioError(f"not allowed to stop fio (pid {pid}): run as the user who started it") from None
    try:
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        if pgid == pid:
            _kill_group(pgid)
        else:
            proc.kill()
        try:
            proc.wait(timeout)
        except psutil.TimeoutExpired:
            raise FioError(f"fio (pid {pid}) did not end after SIGKILL") from None


def wait(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for a bounded run to finish by itself; stop it and raise FioError if it takes longer
    than `timeout` s or fails."""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise FioError(f"fio did not finish within {timeout:g}s; stopped it. {_log_tail(proc)}") from None
    if code != 0:
        raise FioError(f"fio exited with code {code}: {_log_tail(proc) or 'no output'}")


def run(job_text: str, workdir: Path, output: Path, timeout: float) -> dict[str, Any]:
    """A bounded run: start, wait (at most `timeout` s), and return fio's JSON report."""
    wait(start(job_text, workdir, output), timeout)
    return load(output)
