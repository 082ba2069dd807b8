"""fio's JSON report read as the lab's results: per job and per LUN, reads and writes apart."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lunlat_lab.fio import FioError
from lunlat_lab.fio.names import COPY_SUFFIX, split_name


def load(path: Path) -> dict[str, Any]:
    """fio's JSON report from an --output file. fio writes its own messages into that file before
    the JSON (e.g. `fio: terminating on signal 15` after process.stop()), and some versions text after it:
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
    # Total latency (lat_ns), mean over `samples`; None where the report has none. fio times an I/O
    # from the io_u's creation (start_time) to its completion, and clat only from issue_time, which
    # its libaio engine takes after io_submit() returns (engines/libaio.c, fio_libaio_queued, called
    # from fio_libaio_commit): a block request starts inside io_submit(), so only lat holds all of
    # the block layer's time. Vincent Fu (fio maintainer), "How does fio measure latency", the
    # fio-blog wiki: slat = issue_time - start_time, clat = completion - issue_time.
    lat_mean_s: float | None = None


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
        lat_mean_s=None
        if any(p.lat_mean_s is None for p in items)
        else sum((p.lat_mean_s or 0.0) * p.samples for p in items) / samples,
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


def _required_number(where: str, obj: Mapping[str, Any], key: str) -> float:
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
    ios = int(_required_number(where, stats, "total_ios"))
    # fio >= 3.0 reports nanoseconds (clat_ns); older versions microseconds (clat).
    if "clat_ns" in stats:
        clat, scale, key = _mapping(where, stats, "clat_ns"), 1e-9, "clat_ns"
    else:
        clat, scale, key = _mapping(where, stats, "clat"), 1e-6, "clat"
    samples = int(_required_number(f"{where} {key}", clat, "N"))
    mean = _required_number(f"{where} {key}", clat, "mean") * scale if samples else 0.0
    percentiles: dict[float, float] = {}
    raw = clat.get("percentile")
    if samples and isinstance(raw, dict):
        for percent, value in raw.items():
            try:
                percentiles[float(percent)] = float(value) * scale
            except (TypeError, ValueError):
                raise FioError(f"fio report: {where} has a bad percentile {percent!r}: {value!r}") from None
    total_key = "lat_ns" if key == "clat_ns" else "lat"
    total = stats.get(total_key)
    lat_mean = None
    if isinstance(total, dict) and samples:
        lat_mean = _required_number(f"{where} {total_key}", total, "mean") * scale
    return OpResult(ios, samples, mean, dict(sorted(percentiles.items())), lat_mean)


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
            split_name(name)
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
        workload, lun = split_name(name)
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
