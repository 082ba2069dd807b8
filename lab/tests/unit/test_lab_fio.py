"""fio workloads: job files per kind, fio runs started and stopped, fio's latency read back per LUN.

The results tests run the real fio for a second or two on small files standing in for loop devices,
through the same job_file() the lab uses, and check the per-LUN figures against fio's own per-job ones.
"""

from __future__ import annotations

import configparser
import copy
import errno
import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lunlat_lab.config import LabConfig, LabLun, Latency, Workload
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.fio import FioError, jobs, process, report

LAB_YAML = DEFAULT_LAB_FILE
HAVE_FIO = shutil.which("fio") is not None
needs_fio = pytest.mark.skipif(not HAVE_FIO, reason="fio is not installed (Debian package fio)")
SIZE_MIB = 16


def lun(name: str, workload: str = "oltp") -> LabLun:
    return LabLun(
        name=name, database="D", engine="oracle", role="data", workload=workload,
        latency=Latency(read_ms=0.5, write_ms=0.5),
    )  # fmt: skip


def lab(
    workloads: Mapping[str, Workload], luns: tuple[str, ...] = ("data", "log", "snap", "spare")
) -> LabConfig:
    return LabConfig(size_mib=SIZE_MIB, luns=[lun(n) for n in luns], workloads=dict(workloads))


WORKLOADS = {
    "oltp": Workload(
        kind="oltp", luns=["data"], block_size="8k", read_percent=75, jobs=2, iodepth=2, rate_iops=200
    ),
    "log": Workload(kind="log", luns=["log"], block_size="4k", rate_iops=100),
    "dss": Workload(kind="dss", luns=["data"], block_size="256k", iodepth=2, rate_iops=20),
    "snapshot": Workload(
        kind="snapshot_oltp", luns=["snap"], block_size="8k", read_percent=90, rate_iops=100
    ),
}
ALL = list(WORKLOADS)
DEVICES = {"data": "/dev/loop3", "log": "/dev/loop4", "snap": "/dev/loop5", "spare": "/dev/loop6"}


def ini(text: str) -> configparser.ConfigParser:
    # fio's flags have no value (time_based); fio's options are case-sensitive.
    parser = configparser.ConfigParser(allow_no_value=True, interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def options(text: str, section: str) -> dict[str, str | None]:
    return dict(ini(text)[section])


# --- job file ------------------------------------------------------------------------------------


def test_one_section_per_workload_and_lun_after_global() -> None:
    text = jobs.job_file(lab(WORKLOADS), ALL, DEVICES, 10)
    assert ini(text).sections() == [
        "global", "oltp@data", "log@log", "dss@data", "snapshot-copy@snap", "snapshot@snap",
    ]  # fmt: skip
    assert options(text, "global") == {
        "direct": "1",
        "allow_file_create": "0",
        "size": str(SIZE_MIB * 1024 * 1024),
        "group_reporting": "0",
    }


def test_oltp_is_random_mixed_io_capped_in_total_per_job_at_its_mix() -> None:
    assert options(jobs.job_file(lab(WORKLOADS), ["oltp"], DEVICES, 2.5), "oltp@data") == {
        "filename": "/dev/loop3",
        "rw": "randrw",
        "rwmixread": "75",
        "bs": "8k",
        "ioengine": "libaio",
        "iodepth": "2",
        "numjobs": "2",
        # rate_iops=200 alone would cap reads and writes at 200 each (400 in all, mix 50/50).
        "rate_iops": "150,50",
        "rate_process": "poisson",
        "time_based": None,
        "runtime": "2500ms",
    }


def test_log_is_small_sequential_synchronous_writes() -> None:
    assert options(jobs.job_file(lab(WORKLOADS), ["log"], DEVICES, 1), "log@log") == {
        "filename": "/dev/loop4",
        "rw": "write",
        "bs": "4k",
        "ioengine": "psync",
        "sync": "1",
        "iodepth": "1",
        "numjobs": "1",
        "rate_iops": "100",
        "rate_process": "poisson",
        "time_based": None,
        "runtime": "1000ms",
    }


def test_archive_reads_the_log_sequentially_one_at_a_time() -> None:
    config = lab({"archive": Workload(kind="archive", luns=["log"], block_size="64k", rate_iops=5)})
    assert options(jobs.job_file(config, ["archive"], DEVICES, 1), "archive@log") == {
        "filename": "/dev/loop4",
        "rw": "read",
        "bs": "64k",
        "ioengine": "psync",
        "iodepth": "1",
        "numjobs": "1",
        "rate_iops": "5",
        "rate_process": "poisson",
        "time_based": None,
        "runtime": "1000ms",
    }


def test_dss_is_large_sequential_reads() -> None:
    got = options(jobs.job_file(lab(WORKLOADS), ["dss"], DEVICES, 1), "dss@data")
    assert {k: got[k] for k in ("rw", "bs", "ioengine", "iodepth", "rate_iops")} == {
        "rw": "read", "bs": "256k", "ioengine": "libaio", "iodepth": "2", "rate_iops": "20",
    }  # fmt: skip


@pytest.mark.parametrize("block_size", ["8k", "128k", "2M", "4096"])
def test_dss_refuses_blocks_outside_256k_to_1m(block_size: str) -> None:
    config = lab({"dss": Workload(kind="dss", luns=["data"], block_size=block_size)})
    with pytest.raises(ValueError, match="dss workload reads large blocks"):
        jobs.job_file(config, ["dss"], DEVICES, 1)


def test_snapshot_copies_the_whole_lun_then_runs_oltp_on_it() -> None:
    text = jobs.job_file(lab(WORKLOADS), ["snapshot"], DEVICES, 3, ramp_s=1)
    copy_job = options(text, "snapshot-copy@snap")
    assert copy_job == {
        "filename": "/dev/loop5",
        "rw": "write",
        "bs": "1M",
        "ioengine": "libaio",
        "iodepth": "1",
        "rate": f"{jobs.COPY_RATE_MIB_S}m",
    }
    # Not time_based and no runtime: the copy ends once size= (the LUN, in [global]) is written.
    oltp = options(text, "snapshot@snap")
    assert oltp["wait_for"] == "snapshot-copy@snap"
    assert "stonewall" not in oltp
    assert (oltp["rw"], oltp["rwmixread"], oltp["rate_iops"]) == ("randrw", "90", "90,10")
    assert (oltp["runtime"], oltp["ramp_time"]) == ("3000ms", "1000ms")


def test_expected_seconds_counts_the_snapshot_copy_before_its_oltp() -> None:
    config = lab(WORKLOADS)
    assert jobs.expected_seconds(config, ["oltp", "log"], 10, ramp_s=2) == 12
    copy_s = SIZE_MIB / jobs.COPY_RATE_MIB_S
    assert jobs.expected_seconds(config, ALL, 10, ramp_s=2) == pytest.approx(12 + copy_s)


def test_open_ended_runs_get_a_runtime_nobody_waits_for() -> None:
    got = options(jobs.job_file(lab(WORKLOADS), ["oltp"], DEVICES, None), "oltp@data")
    assert got["runtime"] == f"{jobs.OPEN_ENDED_S}s"
    assert jobs.OPEN_ENDED_S >= 7 * 24 * 3600
    assert "ramp_time" not in got


def test_no_rate_cap_when_the_workload_has_none_and_single_direction_mixes_use_one_value() -> None:
    config = lab({
        "free": Workload(kind="oltp", luns=["data"]),
        "reads": Workload(kind="oltp", luns=["log"], read_percent=100, rate_iops=50),
        "writes": Workload(kind="oltp", luns=["snap"], read_percent=0, rate_iops=50),
    })  # fmt: skip
    text = jobs.job_file(config, ["free", "reads", "writes"], DEVICES, 1)
    assert "rate_iops" not in options(text, "free@data")
    assert "rate_process" not in options(text, "free@data")
    assert options(text, "reads@log")["rate_iops"] == "50"
    assert options(text, "writes@snap")["rate_iops"] == "50"


@given(total=st.integers(1, 100_000), read_percent=st.integers(0, 100))
def test_rate_split_keeps_the_mix_and_never_uncaps_a_direction(total: int, read_percent: int) -> None:
    reads, writes = jobs.split_rate(total, read_percent)
    assert (reads > 0) == (read_percent > 0)
    assert (writes > 0) == (read_percent < 100)
    assert total <= reads + writes <= total + 1
    assert abs(reads - total * read_percent / 100) <= 1


def test_same_inputs_give_the_same_text_whatever_the_devices_order() -> None:
    config = lab(WORKLOADS)
    first = jobs.job_file(config, ALL, DEVICES, 5, ramp_s=2)
    again = jobs.job_file(lab(WORKLOADS), ALL, dict(reversed(DEVICES.items())), 5, ramp_s=2)
    assert first == again


def test_a_colon_in_a_path_is_escaped_for_fio() -> None:
    text = jobs.job_file(lab(WORKLOADS), ["log"], {**DEVICES, "log": "/dev/disk/by-path/pci-0:1"}, 1)
    assert options(text, "log@log")["filename"] == "/dev/disk/by-path/pci-0\\:1"


@pytest.mark.parametrize(
    ("workloads", "devices", "runtime", "ramp", "message"),
    [
        (["oltp"], {k: v for k, v in DEVICES.items() if k != "data"}, 1, 0, "LUN 'data' has no device"),
        (["nope"], DEVICES, 1, 0, "unknown workload 'nope'"),
        (["log", "log"], DEVICES, 1, 0, "listed twice: log"),
        ([], DEVICES, 1, 0, "no workloads"),
        (["log"], DEVICES, 0, 0, "at least 1 ms"),
        (["log"], DEVICES, 0.0001, 0, "at least 1 ms"),
        (["log"], DEVICES, 1, -1, "ramp time"),
        (["log"], {**DEVICES, "log": ""}, 1, 0, "unusable device path"),
    ],
)
def test_bad_inputs_are_clear_value_errors(
    workloads: list[str], devices: dict[str, str], runtime: float, ramp: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        jobs.job_file(lab(WORKLOADS), workloads, devices, runtime, ramp_s=ramp)


@pytest.mark.parametrize("name", ["snap-copy", "global", "has space", "a@b", "x]y"])
def test_workload_names_that_cannot_name_fio_jobs_are_refused(name: str) -> None:
    config = lab({name: Workload(kind="log", luns=["log"])})
    with pytest.raises(ValueError, match="cannot name fio jobs"):
        jobs.job_file(config, [name], DEVICES, 1)


def test_block_sizes_that_direct_io_refuses_are_refused() -> None:
    config = lab({"log": Workload(kind="log", luns=["log"], block_size="1000")})
    with pytest.raises(ValueError, match="not a multiple of 512"):
        jobs.job_file(config, ["log"], DEVICES, 1)


def test_a_lun_listed_twice_in_a_workload_is_refused() -> None:
    config = lab({"log": Workload(kind="log", luns=["log", "log"])})
    with pytest.raises(ValueError, match="LUNs listed twice: log"):
        jobs.job_file(config, ["log"], DEVICES, 1)


@needs_fio
def test_fio_accepts_every_phase_of_the_shipped_lab() -> None:
    config = LabConfig.load(LAB_YAML)
    devices = {lun.name: f"/dev/loop{i}" for i, lun in enumerate(config.luns)}
    for phase, workloads in config.phases.items():
        text = jobs.job_file(config, workloads, devices, None)
        result = subprocess.run(
            ["fio", "--parse-only", "-"], input=text, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, f"{phase}: {result.stderr}"


# --- results from reports ------------------------------------------------------------------------


def op_stats(ios: int, mean_ns: float, percentiles: dict[str, int] | None = None) -> dict[str, Any]:
    clat: dict[str, Any] = {"min": 0, "max": 0, "mean": mean_ns, "stddev": 0.0, "N": ios}
    if percentiles is not None:
        clat["percentile"] = percentiles
    # The total latency: the completion latency and SLAT_NS of submission before it.
    return {"total_ios": ios, "clat_ns": clat, "lat_ns": {**clat, "mean": mean_ns + SLAT_NS if ios else 0.0}}


SLAT_NS = 10_000.0


def report_job(
    name: str, read: tuple[int, float], write: tuple[int, float], error: int = 0
) -> dict[str, Any]:
    return {
        "jobname": name,
        "error": error,
        "read": op_stats(*read, percentiles={"50.000000": int(read[1]), "99.000000": int(read[1] * 3)}),
        "write": op_stats(*write),
        "trim": op_stats(0, 0.0),
    }


REPORT: dict[str, Any] = {
    "fio version": "fio-3.33",
    "jobs": [
        report_job("oltp@data", (300, 400_000.0), (100, 200_000.0)),
        report_job("oltp@data", (100, 800_000.0), (0, 0.0)),  # the second numjobs clone
        report_job("dss@data", (50, 2_000_000.0), (0, 0.0)),
        report_job("snapshot-copy@snap", (0, 0.0), (16, 5_000_000.0)),
        report_job("snapshot@snap", (90, 500_000.0), (10, 300_000.0), error=5),
        report_job("warmup", (10, 1.0), (10, 1.0)),
        report_job("x@Not-A-Lun", (10, 1.0), (10, 1.0)),
    ],
}


def test_a_luns_jobs_combine_weighted_by_io_count() -> None:
    data = report.results(REPORT)["data"]
    assert data.read is not None and data.write is not None
    assert data.read.ios == 450
    assert data.read.clat_mean_s == pytest.approx((300 * 400e-6 + 100 * 800e-6 + 50 * 2000e-6) / 450)
    assert data.write.ios == 100
    assert data.write.clat_mean_s == pytest.approx(200e-6)
    # The total latency (submission and completion) weighs the same way.
    assert data.read.lat_mean_s == pytest.approx(data.read.clat_mean_s + SLAT_NS * 1e-9)
    assert data.write.lat_mean_s == pytest.approx(200e-6 + SLAT_NS * 1e-9)
    # Percentiles of several processes cannot be combined from theirs; one process keeps its own.
    assert data.read.clat_percentiles_s == {}
    assert sorted(data.jobs) == ["dss@data", "oltp@data"]
    oltp = data.jobs["oltp@data"]
    assert (oltp.workload, oltp.lun, oltp.clones, oltp.copy) == ("oltp", "data", 2, False)
    assert oltp.read is not None and oltp.read.ios == 400
    assert oltp.read.clat_mean_s == pytest.approx((300 * 400e-6 + 100 * 800e-6) / 400)
    dss = data.jobs["dss@data"]
    assert dss.read is not None and dss.write is None
    assert dss.read.clat_percentiles_s == {50.0: pytest.approx(2e-3), 99.0: pytest.approx(6e-3)}


def test_a_report_without_total_latency_has_none_and_so_has_a_combination_with_it() -> None:
    bare = {**op_stats(100, 300_000.0)}
    del bare["lat_ns"]
    jobs = [
        {
            "jobname": "oltp@data",
            "error": 0,
            "read": bare,
            "write": op_stats(0, 0.0),
            "trim": op_stats(0, 0.0),
        },
        report_job("oltp@data", (100, 500_000.0), (0, 0.0)),
    ]
    data = report.results({"fio version": "fio-3.33", "jobs": jobs})["data"]
    assert data.read is not None and data.read.clat_mean_s == pytest.approx(400e-6)
    assert data.read.lat_mean_s is None  # one clone without it: no mean of the rest passed off as all


def test_snapshot_copies_are_listed_but_not_in_the_luns_figures() -> None:
    snap = report.results(REPORT)["snap"]
    assert snap.write is not None and snap.write.ios == 10
    assert snap.write.clat_mean_s == pytest.approx(300e-6)
    copy_job = snap.jobs["snapshot-copy@snap"]
    assert (copy_job.copy, copy_job.workload) == (True, "snapshot")
    assert copy_job.write is not None and copy_job.write.ios == 16 and copy_job.read is None
    assert snap.errors == {"snapshot@snap": 5}
    assert snap.op("read") is snap.read
    with pytest.raises(ValueError, match="read or write"):
        snap.op("trim")


def test_jobs_not_named_workload_at_lun_are_skipped_with_the_reason() -> None:
    parsed = report.parse(REPORT)
    assert set(parsed.luns) == {"data", "snap"}
    assert parsed.skipped == {
        "warmup": "not a lab job name: no '@' between workload and LUN",
        "x@Not-A-Lun": "not a lab job name: 'Not-A-Lun' after '@' is not a LUN name",
    }


def broken(edit: str) -> dict[str, Any]:
    edited = copy.deepcopy(REPORT)
    job = edited["jobs"][0]
    if edit == "no jobs":
        del edited["jobs"]
    elif edit == "no jobname":
        del job["jobname"]
    elif edit == "no write":
        del job["write"]
    elif edit == "no total_ios":
        del job["read"]["total_ios"]
    elif edit == "no clat":
        del job["read"]["clat_ns"]
    elif edit == "no N":
        del job["read"]["clat_ns"]["N"]
    elif edit == "text mean":
        job["read"]["clat_ns"]["mean"] = "fast"
    return edited


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("no jobs", "no 'jobs' list"),
        ("no jobname", "job #0 has no jobname"),
        ("no write", "job 'oltp@data' has no object 'write'"),
        ("no total_ios", "job 'oltp@data' read has no number 'total_ios'"),
        ("no clat", "has no object 'clat'"),
        ("no N", "clat_ns has no number 'N'"),
        ("text mean", "has no number 'mean'"),
    ],
)
def test_a_report_missing_what_the_lab_needs_is_an_error(edit: str, message: str) -> None:
    with pytest.raises(FioError, match=message):
        report.results(broken(edit))


def test_reports_of_fio_2_in_microseconds_are_read_too() -> None:
    job = {"jobname": "log@log", "read": {"total_ios": 0, "clat": {"mean": 0.0, "N": 0}},
           "write": {"total_ios": 4, "clat": {"mean": 250.0, "N": 4}}}  # fmt: skip
    result = report.results({"jobs": [job]})["log"]
    assert result.read is None
    assert result.write is not None and result.write.clat_mean_s == pytest.approx(250e-6)


def test_io_without_latency_samples_has_no_average() -> None:
    # A run stopped during its ramp: fio counts the I/Os but has no latency for them.
    job = report_job("oltp@data", (22, 0.0), (0, 0.0))
    job["read"]["clat_ns"]["N"] = 0
    assert report.results({"jobs": [job]})["data"].read is None


def test_load_skips_fio_messages_before_and_text_after_the_report(tmp_path: Path) -> None:
    path = tmp_path / "fio.json"
    body = json.dumps(REPORT, indent=2)
    path.write_text(
        "\nfio: terminating on signal 15\n{not json\n" + body + "\nfio: file hash not empty on exit\n"
    )
    assert report.load(path) == REPORT


@pytest.mark.parametrize(("content", "message"), [("", "file is empty"), ("fio: oops\n", "fio: oops")])
def test_load_without_a_report_is_an_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "fio.json"
    path.write_text(content)
    with pytest.raises(FioError, match=message):
        report.load(path)
    with pytest.raises(FioError, match="no fio report"):
        report.load(tmp_path / "missing.json")


# --- real fio runs -------------------------------------------------------------------------------


def supports_o_direct(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    os.close(fd)
    return True


def file_devices(directory: Path, luns: tuple[str, ...]) -> tuple[dict[str, str], bool]:
    """Regular files standing in for the LUNs (the job file forbids fio to create them), and
    whether their filesystem takes O_DIRECT (tmpfs before Linux 6.6 does not)."""
    devices = {}
    for name in luns:
        path = directory / f"{name}.img"
        with path.open("wb") as f:
            f.truncate(SIZE_MIB * 1024 * 1024)
        devices[name] = str(path)
    return devices, supports_o_direct(directory / f"{luns[0]}.img")


def on_files(text: str, direct: bool) -> str:
    return text if direct else text.replace("direct=1\n", "direct=0\n", 1)


def weighted(jobs: list[dict[str, Any]], op: str) -> tuple[int, float]:
    """fio's own per-process figures combined by hand: (I/Os, clat mean in s weighted by samples)."""
    ios = sum(j[op]["total_ios"] for j in jobs)
    samples = sum(j[op]["clat_ns"]["N"] for j in jobs)
    mean = sum(j[op]["clat_ns"]["mean"] * j[op]["clat_ns"]["N"] for j in jobs) / samples / 1e9
    return ios, mean


RUNTIME_S = 1.5


@needs_fio
def test_results_of_a_real_run_match_fios_per_job_figures(tmp_path: Path) -> None:
    config = lab(WORKLOADS)
    devices, direct = file_devices(tmp_path, ("data", "log", "snap"))
    text = on_files(jobs.job_file(config, ALL, devices, RUNTIME_S), direct)
    started = time.monotonic()
    fio_json = process.run(text, tmp_path / "fio", tmp_path / "fio" / "fio.json", timeout=60)
    elapsed = time.monotonic() - started
    # The snapshot's OLTP waited for the copy (16 MiB at the copy rate) before its 1.5 s.
    assert elapsed >= RUNTIME_S + SIZE_MIB / jobs.COPY_RATE_MIB_S * 0.8
    assert (tmp_path / "fio" / process.JOB_FILE).read_text() == text

    parsed = report.parse(fio_json)
    assert parsed.skipped == {}
    assert set(parsed.luns) == {"data", "log", "snap"}
    raw: dict[str, list[dict[str, Any]]] = {}
    for job in fio_json["jobs"]:
        assert job["error"] == 0, job["jobname"]
        raw.setdefault(job["jobname"], []).append(job)
    assert len(raw["oltp@data"]) == 2  # numjobs=2: two processes under one name

    expected = {"data": {"read", "write"}, "log": {"write"}, "snap": {"read", "write"}}
    for name, result in parsed.luns.items():
        measured = [j for jname, runs in raw.items() if jname.endswith(f"@{name}") and "-copy@" not in jname
                    for j in runs]  # fmt: skip
        for op in ("read", "write"):
            got = result.op(op)
            if op not in expected[name]:
                assert got is None, (name, op)
                continue
            assert got is not None and got.ios > 0, (name, op)
            ios, mean = weighted(measured, op)
            assert (got.ios, got.samples) == (ios, ios), (name, op)
            assert got.clat_mean_s == pytest.approx(mean, rel=1e-9), (name, op)
        for jname, job in result.jobs.items():
            for op in ("read", "write"):
                job_op = job.op(op)
                ios = sum(j[op]["total_ios"] for j in raw[jname])
                assert (job_op.ios if job_op else 0) == ios, (jname, op)
                if job_op is not None and job.clones == 1:
                    fio_p99 = raw[jname][0][op]["clat_ns"]["percentile"]["99.000000"] / 1e9
                    assert job_op.clat_percentiles_s[99.0] == pytest.approx(fio_p99)

    # Every OLTP process is capped at 200 IOPS in all, split 75/25 like its mix.
    for clone in raw["oltp@data"]:
        reads, writes = clone["read"]["total_ios"], clone["write"]["total_ios"]
        assert reads + writes <= 200 * RUNTIME_S * 1.1 + 5
        assert reads / (reads + writes) == pytest.approx(0.75, abs=0.08)
    dss = parsed.luns["data"].jobs["dss@data"]
    assert dss.read is not None and dss.write is None and dss.read.ios <= 20 * RUNTIME_S * 1.1 + 3
    copy_job = parsed.luns["snap"].jobs["snapshot-copy@snap"]
    assert copy_job.copy and copy_job.write is not None and copy_job.write.ios == SIZE_MIB  # 1M blocks
    snap_oltp = parsed.luns["snap"].jobs["snapshot@snap"]
    assert snap_oltp.write is not None and parsed.luns["snap"].write == snap_oltp.write


@needs_fio
def test_stop_ends_an_open_ended_run_and_fio_still_reports(tmp_path: Path) -> None:
    config = lab(WORKLOADS)
    devices, direct = file_devices(tmp_path, ("data",))
    output = tmp_path / "fio" / "fio.json"
    proc = process.start(
        on_files(jobs.job_file(config, ["oltp"], devices, None), direct), tmp_path / "fio", output
    )
    time.sleep(1.0)
    started = time.monotonic()
    code = process.stop(proc, timeout=10)
    assert time.monotonic() - started < 5
    assert code == 128  # fio's exit code after it handled SIGTERM
    result = report.results(report.load(output))["data"]
    assert result.read is not None and result.read.ios > 0
    assert result.write is not None and result.write.ios > 0
    assert process.stop(proc) == 128  # stopping a stopped run is harmless


@needs_fio
def test_stop_pid_stops_a_run_known_only_by_its_pid(tmp_path: Path) -> None:
    devices, direct = file_devices(tmp_path, ("log",))
    output = tmp_path / "fio.json"
    proc = process.start(
        on_files(jobs.job_file(lab(WORKLOADS), ["log"], devices, None), direct), tmp_path, output
    )
    try:
        time.sleep(1.0)
        process.stop_pid(proc.pid, timeout=10)
        proc.wait(5)
    finally:
        process.stop(proc)
    assert report.results(report.load(output))["log"].write is not None
    process.stop_pid(proc.pid)  # gone: nothing to do


@needs_fio
def test_a_run_past_its_timeout_is_stopped_and_reported(tmp_path: Path) -> None:
    devices, direct = file_devices(tmp_path, ("log",))
    text = on_files(jobs.job_file(lab(WORKLOADS), ["log"], devices, None), direct)
    with pytest.raises(FioError, match="did not finish within 1s"):
        process.run(text, tmp_path, tmp_path / "fio.json", timeout=1)
    assert report.results(report.load(tmp_path / "fio.json"))["log"].write is not None


@needs_fio
def test_a_missing_device_fails_the_run_instead_of_creating_a_file(tmp_path: Path) -> None:
    devices = {name: str(tmp_path / f"{name}.img") for name in DEVICES}
    with pytest.raises(FioError, match="allow_file_create"):
        process.run(
            jobs.job_file(lab(WORKLOADS), ["log"], devices, 0.5), tmp_path, tmp_path / "fio.json", timeout=30
        )
    assert not Path(devices["log"]).exists()


def test_start_without_fio_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FioError, match="Debian package fio"):
        process.start("[global]\n", tmp_path, tmp_path / "fio.json")
