"""fio job files for the lab's workloads, written from the lab description (same inputs, same text)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from lunlat_lab.config import LabConfig, Workload
from lunlat_lab.fio.names import COPY_SUFFIX, WORKLOAD_NAME, copy_name, job_name

COPY_BLOCK = "1M"
# Each snapshot copy is capped so that copies beside the OLTP and DSS load stay below what the
# Python FUSE daemon serves (~5000 requests/s; a 1M write reaches it as several requests of its
# max_write size). At this rate a 128 MiB LUN is copied in 4 s, inside the scenario's default 5 s
# warm-up.
COPY_RATE_MIB_S = 32
# "Open-ended" is a runtime nobody waits for: the run ends when process.stop() signals fio.
OPEN_ENDED_S = 30 * 24 * 3600
DSS_MIN_BLOCK = 256 * 1024
DSS_MAX_BLOCK = 1024 * 1024
# direct=1 I/O must be a whole number of sectors, else every I/O fails with EINVAL.
SECTOR = 512
_UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


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


# fio's rate limiting is `linear` by default: a job issues at fixed intervals from its start, so jobs
# started together with related rates issue in lockstep (every 4th 120/s read beside every 30/s
# write and each 100/s log write), bursts that queue on the array's slots although the mean load is
# far below them: measured on the OLTP phase at 0.8 ms, 4 slots, the data LUNs' writes came out at
# 1.05-1.28 ms (at 0.85 with 64 slots). Independent clients arrive at random: `poisson` gives each
# job exponentially distributed gaps at the same mean rate (fio HOWTO, rate_process:
# https://fio.readthedocs.io/en/latest/fio_doc.html#cmdoption-arg-rate-process).
RATE_PROCESS = "rate_process=poisson"


def _rate_option(workload: Workload, rw_mixed: bool) -> list[str]:
    if workload.rate_iops is None:
        return []
    if rw_mixed and 0 < workload.read_percent < 100:
        reads, writes = split_rate(workload.rate_iops, workload.read_percent)
        return [f"rate_iops={reads},{writes}", RATE_PROCESS]
    # One direction only: a single value caps it (the other direction never runs).
    return [f"rate_iops={workload.rate_iops}", RATE_PROCESS]


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
        f"[{copy_name(name, lun)}]",
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
        if not WORKLOAD_NAME.match(name) or name.endswith(COPY_SUFFIX) or name == "global":
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
    name. `runtime_s` None runs until process.stop(); otherwise each time-based job runs `ramp_s` unmeasured,
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
        "; lunlat-lab workloads; generated from the lab config, do not edit",
        "[global]",
        "direct=1",
        # A missing loop device must fail the job, not become a new regular file under /dev.
        "allow_file_create=0",
        f"size={config.size_mib * 1024 * 1024}",
        # One report per job (clones included): report.results() groups them by LUN itself.
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
            lines += [f"[{job_name(name, lun)}]", f"filename={_filename(device)}"]
            if workload.kind == "snapshot_oltp":
                lines.append(f"wait_for={copy_name(name, lun)}")
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
