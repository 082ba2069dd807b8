"""fio workloads for the lab: job files from the lab config, fio runs, and fio's own latency per LUN.

fio's completion latency (clat) is the lab's ground truth: the exporter's Δtime/Δops from
/proc/diskstats is checked against it.

Job names are `<workload>@<lun>`; the snapshot copy of a snapshot_oltp workload is
`<workload>-copy@<lun>`. `results()` relies on that form to group fio's jobs by LUN.

fio 3.33 facts this module relies on (checked on this lab's fio, see tests/unit/test_lab_fio.py):
- `rate_iops=N` caps reads and writes *separately* (N each): on `randrw` it lets a job do up to 2N
  IOPS and turns an 80/20 mix into 50/50. A total cap is written as `rate_iops=<reads>,<writes>`
  split by the mix, which also keeps the mix.
- SIGTERM and SIGINT both make fio end its jobs and still write the JSON report; the exit code is
  then 128, and the --output file has the line `fio: terminating on signal N` before the JSON.
- `wait_for=<job>` holds a job until every process of that job is done, without holding the jobs
  defined after it (`stonewall` would hold them all).
- `runtime` counts after `ramp_time`; I/Os during the ramp are not in the report. A run stopped
  during the ramp reports `total_ios` > 0 with no latency samples (`clat_ns.N` = 0).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from lunlat.lab.config import LabConfig, Workload
from lunlat.lab.system import LabError

JOB_FILE = "jobs.fio"
LOG_FILE = "fio.log"
COPY_SUFFIX = "-copy"
COPY_BLOCK = "1M"
# Each snapshot copy is capped so that copies beside the OLTP and DSS load stay below what the
# Python FUSE daemon serves (~5000 requests/s; a 1M write reaches it as several requests of its
# max_write size). At this rate a 128 MiB LUN is copied in 4 s, inside the scenario's default 5 s
# warm-up.
COPY_RATE_MIB_S = 32
# "Open-ended" is a runtime nobody waits for: the run ends when stop() signals fio.
OPEN_ENDED_S = 30 * 24 * 3600
DSS_MIN_BLOCK = 256 * 1024
DSS_MAX_BLOCK = 1024 * 1024
# direct=1 I/O must be a whole number of sectors, else every I/O fails with EINVAL.
SECTOR = 512
# Job names become INI section headers and fio job names: no brackets, spaces, '@' or '='.
_WORKLOAD_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
# Same as LabLun names (lab/config.py): a job name's LUN part is checked against it when parsing.
_LUN_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
_UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


class FioError(LabError):
    """fio failed, did not finish, or wrote a report this module cannot read; the message says which."""


# --- job file ------------------------------------------------------------------------------------


def block_bytes(block_size: str) -> int:
    """Bytes in a Workload.block_size ("8k", "1M", "4096"): fio's k and M are 1024-based by default."""
    match = re.fullmatch(r"(\d+)([kKmM]?)", block_size)
    if match is None:
        raise ValueError(f"block size {block_size!r} is not digits with an optional k or M")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def split_rate(total: int, read_percent: int) -> tuple[int, int]:
    """A per-job total IOPS cap as fio's (reads, writes) caps, split by the read/write mix.

    A direction with a share of the mix never gets 0, which fio reads as "no cap": with tiny totals
    the sum may then exceed `total` by one.
    """
    reads = round(total * read_percent / 100)
    writes = total - reads
    if read_percent > 0:
        reads = max(reads, 1)
    if read_percent < 100:
        writes = max(writes, 1)
    return reads, writes


def _duration(seconds: float) -> str:
    # Milliseconds: fio takes integers with a unit, and whole seconds would round short runs to 0
    # (runtime=0 means no limit to fio).
    return f"{round(seconds * 1000)}ms"


def _filename(device: str) -> str:
    # fio splits `filename` at ':' (several files per job); a literal colon is escaped.
    return device.replace(":", "\\:")


def _rate_option(workload: Workload, rw_mixed: bool) -> list[str]:
    if workload.rate_iops is None:
        return []
    if rw_mixed and 0 < workload.read_percent < 100:
        reads, writes = split_rate(workload.rate_iops, workload.read_percent)
        return [f"rate_iops={reads},{writes}"]
    # One direction only: a single value caps it (the other direction never runs).
    return [f"rate_iops={workload.rate_iops}"]


def _timing(runtime_s: float | None, ramp_s: float) -> list[str]:
    lines = ["time_based", f"runtime={_duration(runtime_s) if runtime_s is not None else f'{OPEN_ENDED_S}s'}"]
    if ramp_s > 0:
        lines.append(f"ramp_time={_duration(ramp_s)}")
    return lines


def _kind_options(name: str, workload: Workload) -> list[str]:
    bs = workload.block_size.lower()
    if workload.kind in ("oltp", "snapshot_oltp"):
        return [
            "rw=randrw",
            f"rwmixread={workload.read_percent}",
            f"bs={bs}",
            "ioengine=libaio",
            f"iodepth={workload.iodepth}",
            f"numjobs={workload.jobs}",
            *_rate_option(workload, rw_mixed=True),
        ]
    if workload.kind == "log":
        # A redo/transaction log writer: one synchronous write at a time, each durable before the
        # next (O_SYNC, like Oracle's O_DSYNC or SQL Server's write-through).
        return [
            "rw=write",
            f"bs={bs}",
            "ioengine=psync",
            "sync=1",
            "iodepth=1",
            f"numjobs={workload.jobs}",
            *_rate_option(workload, rw_mixed=False),
        ]
    if workload.kind == "archive":
        # The log's reader: Oracle's archiver copying a filled redo log, SQL Server's log backup or
        # an availability group's log send: one sequential read at a time.
        return [
            "rw=read",
            f"bs={bs}",
            "ioengine=psync",
            "iodepth=1",
            f"numjobs={workload.jobs}",
            *_rate_option(workload, rw_mixed=False),
        ]
    if workload.kind == "dss":
        size = block_bytes(workload.block_size)
        if not DSS_MIN_BLOCK <= size <= DSS_MAX_BLOCK:
            raise ValueError(
                f"workload {name}: a dss workload reads large blocks, 256k to 1M; block_size is {workload.block_size}"
            )
        return [
            "rw=read",
            f"bs={bs}",
            "ioengine=libaio",
            f"iodepth={workload.iodepth}",
            f"numjobs={workload.jobs}",
            *_rate_option(workload, rw_mixed=False),
        ]
    raise ValueError(f"workload {name}: unknown kind {workload.kind!r}")


def _copy_section(name: str, lun: str, device: str, workload: Workload) -> list[str]:
    # Not time_based: it ends when the whole LUN (size= in [global]) has been written once.
    return [
        f"[{name}{COPY_SUFFIX}@{lun}]",
        f"filename={_filename(device)}",
        "rw=write",
        f"bs={COPY_BLOCK}",
        "ioengine=libaio",
        f"iodepth={workload.iodepth}",
        f"rate={COPY_RATE_MIB_S}m",
    ]


def _check_workloads(config: LabConfig, workloads: list[str], devices: Mapping[str, str]) -> None:
    if not workloads:
        raise ValueError("no workloads: a fio job file needs at least one")
    duplicates = sorted({w for w in workloads if workloads.count(w) > 1})
    if duplicates:
        raise ValueError(f"workloads listed twice: {', '.join(duplicates)}")
    for name in workloads:
        if name not in config.workloads:
            raise ValueError(
                f"unknown workload {name!r}; the lab config has: {', '.join(config.workloads) or 'none'}"
            )
        if not _WORKLOAD_NAME.match(name) or name.endswith(COPY_SUFFIX) or name == "global":
            raise ValueError(
                f"workload name {name!r} cannot name fio jobs: use letters, digits, _ . + - "
                f"(not 'global', not ending in {COPY_SUFFIX!r}, which names snapshot copies)"
            )
        if block_bytes(config.workloads[name].block_size) % SECTOR:
            raise ValueError(
                f"workload {name}: block_size {config.workloads[name].block_size} is not a multiple of "
                f"{SECTOR} bytes, which direct I/O needs"
            )
        luns = config.workloads[name].luns
        twice = sorted({lun for lun in luns if luns.count(lun) > 1})
        if twice:
            raise ValueError(f"workload {name}: LUNs listed twice: {', '.join(twice)}")
        for lun in luns:
            if lun not in devices:
                raise ValueError(
                    f"workload {name}: LUN {lun!r} has no device; devices are given for: "
                    f"{', '.join(sorted(devices)) or 'none'}"
                )
            device = devices[lun]
            if not device or any(c in device for c in "\n\r\0"):
                raise ValueError(f"workload {name}: LUN {lun!r} has an unusable device path {device!r}")


def job_file(
    config: LabConfig,
    workloads: list[str],
    devices: Mapping[str, str],
    runtime_s: float | None,
    ramp_s: float = 0.0,
) -> str:
    """An fio job file running `workloads` (names in config.workloads) on `devices` (LUN -> path).

    One section per (workload, LUN) named `<workload>@<lun>`; numjobs clones of a section share its
    name. `runtime_s` None runs until stop(); otherwise each time-based job runs `ramp_s` unmeasured,
    then `runtime_s` measured. A snapshot_oltp workload first copies the whole LUN (section
    `<workload>-copy@<lun>`), and its OLTP job starts when that copy ends, so a bounded run lasts
    copy + ramp + runtime. Same inputs, same text.
    """
    if runtime_s is not None and not runtime_s >= 0.001:
        raise ValueError(f"runtime must be at least 1 ms, or None for open-ended; got {runtime_s}")
    if not ramp_s >= 0:
        raise ValueError(f"ramp time must be >= 0, got {ramp_s}")
    _check_workloads(config, workloads, devices)
    lines = [
        "; lunlat lab workloads; generated from the lab config, do not edit",
        "[global]",
        "direct=1",
        # A missing loop device must fail the job, not become a new regular file under /dev.
        "allow_file_create=0",
        f"size={config.size_mib * 1024 * 1024}",
        # One report per job (clones included): results() groups them by LUN itself.
        "group_reporting=0",
    ]
    for name in workloads:
        workload = config.workloads[name]
        for lun in workload.luns:
            device = devices[lun]
            lines.append("")
            if workload.kind == "snapshot_oltp":
                lines += _copy_section(name, lun, device, workload)
                lines.append("")
            lines += [f"[{name}@{lun}]", f"filename={_filename(device)}"]
            if workload.kind == "snapshot_oltp":
                lines.append(f"wait_for={name}{COPY_SUFFIX}@{lun}")
            lines += _kind_options(name, workload)
            lines += _timing(runtime_s, ramp_s)
    return "\n".join(lines) + "\n"


def expected_seconds(config: LabConfig, workloads: list[str], runtime_s: float, ramp_s: float = 0.0) -> float:
    """How long a bounded run of job_file(config, workloads, …, runtime_s, ramp_s) lasts when storage
    keeps up: ramp + runtime, after the snapshot copy (the LUN at COPY_RATE_MIB_S) where there is
    one. A copy on slower storage takes longer: callers add their margin to this for a timeout."""
    copy_s = config.size_mib / COPY_RATE_MIB_S
    return max(
        ramp_s + runtime_s + (copy_s if config.workloads[name].kind == "snapshot_oltp" else 0.0)
        for name in workloads
    )


# --- running fio ---------------------------------------------------------------------------------


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


def load(path: Path) -> dict[str, Any]:
    """fio's JSON report from an --output file. fio writes its own messages into that file before
    the JSON (e.g. `fio: terminating on signal 15` after stop()), and some versions text after it:
    the report is the first line-initial JSON object; what follows it is ignored."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise FioError(f"no fio report at {path}: {exc.strerror}") from None
    decoder = json.JSONDecoder()
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.startswith("{"):
            try:
                value, _ = decoder.raw_decode(text, offset)
            except ValueError:
                pass
            else:
                if isinstance(value, dict):
                    return value
        offset += len(line)
    head = text[:300].strip() or "the file is empty (fio killed before it reported?)"
    raise FioError(f"no JSON report in {path}: {head}")


# --- results -------------------------------------------------------------------------------------

OPS = ("read", "write")


@dataclass(frozen=True, slots=True)
class OpResult:
    """One direction (read or write) of one or more fio jobs."""

    ios: int  # completed I/Os (fio's total_ios)
    samples: int  # I/Os in the latency figures (clat_ns.N); fewer than ios only when stopped in ramp
    clat_mean_s: float  # completion latency, mean over `samples`
    # Completion-latency percentiles (percent -> seconds) as fio computed them. Percentiles of
    # several jobs cannot be derived from theirs, so a combination of jobs has none.
    clat_percentiles_s: Mapping[float, float] = field(default_factory=dict)


def combine(parts: Iterable[OpResult]) -> OpResult | None:
    """Several jobs' figures for one direction as one: counts add up, means weighted by samples."""
    items = [p for p in parts if p.ios > 0 or p.samples > 0]
    samples = sum(p.samples for p in items)
    if samples == 0:
        return None
    return OpResult(
        ios=sum(p.ios for p in items),
        samples=samples,
        clat_mean_s=sum(p.clat_mean_s * p.samples for p in items) / samples,
        clat_percentiles_s=items[0].clat_percentiles_s if len(items) == 1 else {},
    )


@dataclass(frozen=True, slots=True)
class JobResult:
    """One job section of the job file; its numjobs clones combined."""

    name: str
    workload: str
    lun: str
    copy: bool  # the snapshot copy of a snapshot_oltp workload
    clones: int
    error: int  # fio's error code (errno), first non-zero among clones; 0 = none
    read: OpResult | None  # None: no completed I/O with a latency sample
    write: OpResult | None

    def op(self, name: str) -> OpResult | None:
        return _op(self.read, self.write, name)


@dataclass(frozen=True, slots=True)
class LunResult:
    """What fio measured on one LUN: its workload jobs combined, weighted by I/O count.

    Snapshot copies are listed in `jobs` but left out of `read`/`write`: a copy prepares the LUN
    before the measured workload starts (during the warm-up when a run has one), so it is not part
    of the steady state compared with the exporter.
    """

    lun: str
    read: OpResult | None
    write: OpResult | None
    jobs: Mapping[str, JobResult]

    def op(self, name: str) -> OpResult | None:
        return _op(self.read, self.write, name)

    @property
    def errors(self) -> dict[str, int]:
        return {name: job.error for name, job in self.jobs.items() if job.error}


def _op(read: OpResult | None, write: OpResult | None, name: str) -> OpResult | None:
    if name == "read":
        return read
    if name == "write":
        return write
    raise ValueError(f"op must be read or write, not {name!r}")


@dataclass(frozen=True, slots=True)
class Results:
    luns: dict[str, LunResult]
    jobs: dict[str, JobResult]
    skipped: dict[str, str]  # fio job name -> why it is not in luns/jobs


def _number(where: str, obj: Mapping[str, Any], key: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FioError(f"fio report: {where} has no number {key!r} (got {value!r})")
    return float(value)


def _mapping(where: str, obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise FioError(f"fio report: {where} has no object {key!r}")
    return value


def _op_result(job: str, op: str, stats: Mapping[str, Any]) -> OpResult:
    where = f"job {job!r} {op}"
    ios = int(_number(where, stats, "total_ios"))
    # fio >= 3.0 reports nanoseconds (clat_ns); older versions microseconds (clat).
    if "clat_ns" in stats:
        clat, scale, key = _mapping(where, stats, "clat_ns"), 1e-9, "clat_ns"
    else:
        clat, scale, key = _mapping(where, stats, "clat"), 1e-6, "clat"
    samples = int(_number(f"{where} {key}", clat, "N"))
    mean = _number(f"{where} {key}", clat, "mean") * scale if samples else 0.0
    percentiles: dict[float, float] = {}
    raw = clat.get("percentile")
    if samples and isinstance(raw, dict):
        for percent, value in raw.items():
            try:
                percentiles[float(percent)] = float(value) * scale
            except (TypeError, ValueError):
                raise FioError(f"fio report: {where} has a bad percentile {percent!r}: {value!r}") from None
    return OpResult(ios, samples, mean, dict(sorted(percentiles.items())))


def _split_name(name: str) -> tuple[str, str]:
    """(workload, lun) from `<workload>@<lun>`; ValueError says why a name is not of that form."""
    workload, at, lun = name.rpartition("@")
    if not at:
        raise ValueError("not a lab job name: no '@' between workload and LUN")
    if not workload:
        raise ValueError("not a lab job name: empty workload before '@'")
    if not _LUN_NAME.match(lun):
        raise ValueError(f"not a lab job name: {lun!r} after '@' is not a LUN name")
    return workload, lun


@dataclass(frozen=True, slots=True)
class _Process:
    """One entry of fio's jobs list: one process (a numjobs clone) of a job section."""

    error: int
    read: OpResult
    write: OpResult


def parse(fio_json: Mapping[str, Any]) -> Results:
    """fio's JSON report as lab results, by LUN and by job.

    A report that lacks what the lab needs (jobs, a job's name, read/write total_ios, clat mean and
    N) raises FioError: a silently partial ground truth would be worse. A job whose name is not
    `<workload>@<lun>` is not the lab's (someone's extra job in the file): it is skipped, and
    `skipped` says why.
    """
    raw_jobs = fio_json.get("jobs")
    if not isinstance(raw_jobs, list):
        raise FioError("fio report has no 'jobs' list")
    processes: dict[str, list[_Process]] = {}
    skipped: dict[str, str] = {}
    for index, raw in enumerate(raw_jobs):
        if not isinstance(raw, dict) or not isinstance(raw.get("jobname"), str):
            raise FioError(f"fio report: job #{index} has no jobname")
        name: str = raw["jobname"]
        try:
            _split_name(name)
        except ValueError as exc:
            skipped[name] = str(exc)
            continue
        error = raw.get("error", 0)
        processes.setdefault(name, []).append(
            _Process(
                error if isinstance(error, int) else -1,
                *(_op_result(name, op, _mapping(f"job {name!r}", raw, op)) for op in OPS),
            )
        )
    jobs: dict[str, JobResult] = {}
    for name in sorted(processes):
        workload, lun = _split_name(name)
        parts = processes[name]
        jobs[name] = JobResult(
            name=name,
            workload=workload.removesuffix(COPY_SUFFIX),
            lun=lun,
            copy=workload.endswith(COPY_SUFFIX),
            clones=len(parts),
            error=next((p.error for p in parts if p.error), 0),
            read=combine(p.read for p in parts),
            write=combine(p.write for p in parts),
        )
    by_lun: dict[str, list[JobResult]] = {}
    for job in jobs.values():
        by_lun.setdefault(job.lun, []).append(job)
    luns: dict[str, LunResult] = {}
    for lun, lun_jobs in sorted(by_lun.items()):
        # Combined from the processes, not from the per-job sums: the same numbers, and an op
        # that a single process did keeps that process's percentiles.
        measured = [p for j in lun_jobs if not j.copy for p in processes[j.name]]
        luns[lun] = LunResult(
            lun=lun,
            read=combine(p.read for p in measured),
            write=combine(p.write for p in measured),
            jobs={j.name: j for j in lun_jobs},
        )
    return Results(luns, jobs, skipped)


def results(fio_json: Mapping[str, Any]) -> dict[str, LunResult]:
    """Per LUN, fio's figures for reads and writes (see parse(); skipped jobs are left out)."""
    return parse(fio_json).luns
