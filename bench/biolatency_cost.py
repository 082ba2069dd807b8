"""What the biolatency source costs: CPU per I/O in the kernel (its BPF programs) and in lunlat's
process, at the highest IOPS a loop device on tmpfs gives, and the scrape cost per LUN.

Not a test (never timed assertions). Needs root and fio, losetup. Run:
`sudo .venv/bin/python bench/biolatency_cost.py [--runs 5] [--seconds 6]`.

BPF run time: with the sysctl kernel.bpf_stats_enabled = 1 the kernel sums each program's run time
and run count, shown as run_time_ns / run_cnt in /proc/<pid>/fdinfo/<fd> of the program's fd
(kernel/bpf/syscall.c, bpf_prog_show_fdinfo). The process's own CPU is utime + stime of
/proc/self/stat (proc(5)): the programs run in the kernel, so this is what reading costs. Each run
also measures fio without the programs attached, for the IOPS ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from lunlat.config import BiolatencyConfig
from lunlat.exposition import render
from lunlat.sources.biolatency import Engine, families, kernel_dev
from lunlat.sources.bpf import syscall
from lunlat.sources.published import PublishedDevice

TICKS = os.sysconf("SC_CLK_TCK")


def prog_stats(fds: list[int]) -> tuple[int, int]:
    """(run_time_ns, run_cnt) summed over these program fds."""
    infos = [syscall.fdinfo(fd) for fd in fds]
    return sum(int(i.get("run_time_ns", 0)) for i in infos), sum(int(i.get("run_cnt", 0)) for i in infos)


def cpu_seconds() -> float:
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def dev_of(device: str) -> int:
    major, minor = Path(f"/sys/class/block/{Path(device).name}/dev").read_text().split(":")
    return kernel_dev(int(major), int(minor))


def fio(device: str, seconds: int) -> int:
    out = subprocess.run(
        ["fio", "--name=b", f"--filename={device}", "--rw=randread", "--bs=4k", "--direct=1",
         "--ioengine=libaio", "--iodepth=16", f"--runtime={seconds}", "--time_based", "--output-format=json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    job = json.loads(out[out.index("{") :])["jobs"][0]
    return int(job["read"]["total_ios"])


def one_run(device: str, seconds: int) -> dict[str, float]:
    without = fio(device, seconds)
    engine = Engine(BiolatencyConfig(enabled=True))
    cause = engine.load()
    if cause is not None:
        raise SystemExit(cause)
    try:
        engine.sync([dev_of(device)])
        fds = engine.program_fds()
        ns0, cnt0 = prog_stats(fds)
        cpu0 = cpu_seconds()
        ios = fio(device, seconds)
        ns1, cnt1 = prog_stats(fds)
        cpu1 = cpu_seconds()
        counted = sum(sum(c.buckets) for c in engine.counters().values())
    finally:
        engine.close()
    return {
        "iops": ios / seconds,
        "iops_ratio_to_no_programs": ios / without,
        "bpf_ns_per_io": (ns1 - ns0) / ios,
        "bpf_runs_per_io": (cnt1 - cnt0) / ios,
        "process_cpu_per_s": (cpu1 - cpu0) / seconds,
        "counted_per_completed": counted / ios,
    }


def scrape_cost(luns: int, rounds: int = 20) -> float:
    """Seconds per LUN for a scrape's share: read the counters (2 map lookups per LUN), families, render."""
    engine = Engine(BiolatencyConfig(enabled=True, max_devices=luns))
    cause = engine.load()
    if cause is not None:
        raise SystemExit(cause)
    devices = {(250, i): PublishedDevice(f"lun{i}", f"dm-{i}", "data") for i in range(luns)}
    try:
        engine.sync([kernel_dev(*k) for k in devices])
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            render(families(engine.counters(), devices))
            times.append(time.perf_counter() - start)
    finally:
        engine.close()
    return statistics.median(times) / luns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=6)
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("fio") is None:
        raise SystemExit("needs root and fio")
    Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1")
    tmp = Path(tempfile.mkdtemp(prefix="lunlat-bench-", dir="/dev/shm"))
    image = tmp / "lun.img"
    with image.open("wb") as f:
        f.truncate(512 << 20)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        runs = [one_run(device, args.seconds) for _ in range(args.runs)]
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)
        Path("/proc/sys/kernel/bpf_stats_enabled").write_text("0")
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"runs: {args.runs} x {args.seconds} s fio 4k randread QD16 on a tmpfs loop device")
    for key, value in med.items():
        print(f"median {key}: {value:.3f}   (runs: {', '.join(f'{r[key]:.3f}' for r in runs)})")
    per_io_total = med["bpf_ns_per_io"] + med["process_cpu_per_s"] * 1e9 / med["iops"]
    at_20k = per_io_total * 20_000 / 1e9 * 100
    print(
        f"CPU per I/O (BPF + lunlat's process): {per_io_total:.0f} ns; goal < 1000 ns: {'met' if per_io_total < 1000 else 'NOT met'}"
    )
    print(f"at 20k IOPS: {at_20k:.2f} % of one core; goal < 2 %: {'met' if at_20k < 2 else 'NOT met'}")
    for luns in (10, 1000):
        print(f"scrape cost, {luns} LUNs: {scrape_cost(luns) * 1e6:.1f} µs per LUN (median of 20)")


if __name__ == "__main__":
    main()
