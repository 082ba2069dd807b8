"""What the biolatency source costs: CPU per I/O in the kernel (its BPF programs) and in the bpftrace
process, at the highest IOPS a loop device on tmpfs gives, and the scrape cost per LUN.

Not a test (never timed assertions). Needs root, bpftrace, fio, losetup; mounts tracefs in a private
mount namespace when the host has none. Run: `sudo .venv/bin/python bench/biolatency_cost.py [--runs 3]`.

BPF run time: with the sysctl kernel.bpf_stats_enabled = 1 the kernel sums each program's run time
and run count, shown as run_time_ns / run_cnt in /proc/<pid>/fdinfo/<fd> of the program's fd
(kernel/bpf/syscall.c, bpf_prog_show_fdinfo). The bpftrace process's CPU is utime + stime of
/proc/<pid>/stat (proc(5)).
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
from lunlat.sources.biolatency import Engine, Maps, families, kernel_dev
from lunlat.sources.published import PublishedDevice

TICKS = os.sysconf("SC_CLK_TCK")


def prog_stats(pid: int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) summed over the BPF programs pid holds."""
    total_ns = total_cnt = 0
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            text = fdinfo.read_text()
        except OSError:
            continue
        if "prog_type:" not in text:
            continue
        fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        total_ns += int(fields.get("run_time_ns", "0"))
        total_cnt += int(fields.get("run_cnt", "0"))
    return total_ns, total_cnt


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def bpftrace_pid(parent: int) -> int:
    for _ in range(200):
        out = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True, check=False).stdout
        for pid in out.split():
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            if comm == "bpftrace":
                return int(pid)
            for child in subprocess.run(
                ["pgrep", "-P", pid], capture_output=True, text=True, check=False
            ).stdout.split():
                if Path(f"/proc/{child}/comm").read_text().strip() == "bpftrace":
                    return int(child)
        time.sleep(0.1)
    raise SystemExit("bpftrace did not start")


def fio(device: str, seconds: int) -> int:
    out = subprocess.run(
        ["fio", "--name=b", f"--filename={device}", "--rw=randread", "--bs=4k", "--direct=1",
         "--ioengine=libaio", "--iodepth=16", f"--runtime={seconds}", "--time_based", "--output-format=json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    job = json.loads(out[out.index("{") :])["jobs"][0]
    return int(job["read"]["total_ios"])


def wrapper(tmp: Path) -> str | None:
    if Path("/sys/kernel/tracing/events/block").is_dir():
        return None
    script = tmp / "bpftrace"
    script.write_text(
        '#!/bin/sh\nexec unshare -m sh -c \'mount -t tracefs nodev /sys/kernel/tracing && exec bpftrace "$@"\' sh "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def one_run(device: str, bpftrace: str | None, seconds: int) -> dict[str, float]:
    engine = Engine(BiolatencyConfig(enabled=True, interval_seconds=5, bpftrace=bpftrace))
    import lunlat.sources.biolatency as bl  # noqa: PLC0415 - the stand-in tracefs check for the wrapper

    if bpftrace is not None:
        fake = Path(tempfile.mkdtemp()) / "events/block/block_rq_issue"
        fake.mkdir(parents=True)
        bl.TRACEFS = (fake.parents[2], fake.parents[2])
    engine.start()
    try:
        pid = bpftrace_pid(os.getpid())
        while not engine.state()[0].attached:
            time.sleep(0.1)
        ns0, cnt0 = prog_stats(pid)
        cpu0 = cpu_seconds(pid)
        ios = fio(device, seconds)
        ns1, cnt1 = prog_stats(pid)
        cpu1 = cpu_seconds(pid)
    finally:
        engine.close()
    return {
        "iops": ios / seconds,
        "bpf_ns_per_io": (ns1 - ns0) / ios,
        "bpf_runs_per_io": (cnt1 - cnt0) / ios,
        "bpftrace_cpu_per_s": (cpu1 - cpu0) / seconds,
    }


def scrape_cost(luns: int, rounds: int = 20) -> float:
    """Seconds per LUN to turn printed maps into the exposition (parse + families + render)."""
    devices = {(8, i): PublishedDevice(f"lun{i}", f"sd{i}", "data") for i in range(luns)}
    buckets = [{"min": 1 << k, "max": (2 << k) - 1, "count": 7} for k in range(3, 21)]
    hist = {f"{kernel_dev(8, i)},{op}": buckets for i in range(luns) for op in (0, 1)}
    sums = {f"{kernel_dev(8, i)},{op}": 123456789 for i in range(luns) for op in (0, 1)}
    lines = [
        json.dumps({"type": "hist", "data": {"@lat": hist}}).encode(),
        json.dumps({"type": "map", "data": {"@ns": sums}}).encode(),
        json.dumps({"type": "map", "data": {"@queue": sums}}).encode(),
    ]
    from lunlat.sources.biolatency import parse_hist, parse_map, parse_sums  # noqa: PLC0415

    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        h = parse_hist(parse_map(lines[0])[1])
        n = parse_sums(parse_map(lines[1])[1])
        q = parse_sums(parse_map(lines[2])[1])
        render(families(Maps(h, n, q), devices))
        times.append(time.perf_counter() - start)
    return statistics.median(times) / luns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8)
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("bpftrace") is None or shutil.which("fio") is None:
        raise SystemExit("needs root, bpftrace and fio")
    Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1")
    tmp = Path(tempfile.mkdtemp(prefix="lunlat-bench-", dir="/dev/shm"))
    image = tmp / "lun.img"
    with image.open("wb") as f:
        f.truncate(512 << 20)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        bpftrace = wrapper(tmp)
        runs = [one_run(device, bpftrace, args.seconds) for _ in range(args.runs)]
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)
        Path("/proc/sys/kernel/bpf_stats_enabled").write_text("0")
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"runs: {args.runs} x {args.seconds} s fio 4k randread QD16 on a tmpfs loop device")
    for key, value in med.items():
        print(f"median {key}: {value:.3f}   (runs: {', '.join(f'{r[key]:.3f}' for r in runs)})")
    per_io_total = med["bpf_ns_per_io"] + med["bpftrace_cpu_per_s"] * 1e9 / med["iops"]
    at_20k = per_io_total * 20_000 / 1e9 * 100
    print(
        f"CPU per I/O (BPF + bpftrace process): {per_io_total:.0f} ns; goal < 1000 ns: {'met' if per_io_total < 1000 else 'NOT met'}"
    )
    print(f"at 20k IOPS: {at_20k:.2f} % of one core; goal < 2 %: {'met' if at_20k < 2 else 'NOT met'}")
    for luns in (10, 1000):
        print(f"scrape cost, {luns} LUNs: {scrape_cost(luns) * 1e6:.1f} µs per LUN (median of 20)")


if __name__ == "__main__":
    main()
