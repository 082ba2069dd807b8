"""What the biolatency source costs: CPU per I/O in the kernel (its BPF programs) and in lunlat's
process, at the highest IOPS a loop device on tmpfs gives, and the scrape cost per LUN; side by side
with the programs of another revision (--peer REV, e.g. aa6a81d, the last hand-assembled ones),
alternating runs on the same device.

Not a test (never timed assertions). Needs root and fio, losetup. Run:
`sudo .venv/bin/python bench/biolatency_cost.py [--runs 5] [--seconds 6] [--peer REV]`.
The peer is that revision's exporter/src (`git archive`), imported by a child process of its own:
each run of either side is a child, so each loads its own programs and reads its own programs' fds.

BPF run time: with the sysctl kernel.bpf_stats_enabled = 1 the kernel sums each program's run time
and run count, shown as run_time_ns / run_cnt in /proc/<pid>/fdinfo/<fd> of the program's fd
(kernel/bpf/syscall.c, bpf_prog_show_fdinfo). The process's own CPU is utime + stime of
/proc/self/stat (proc(5)): the programs run in the kernel, so this is what reading costs. Each run
also measures fio without the programs attached, for the IOPS ratio.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from lunlat.config import BiolatencyConfig
from lunlat.exposition import render
from lunlat.sources.biolatency import Engine, families, kernel_dev
from lunlat.sources.published import PublishedDevice

TICKS = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


def fdinfo(fd: int) -> dict[str, str]:
    """/proc/self/fdinfo/<fd> as key -> value (kernel/bpf/syscall.c bpf_prog_show_fdinfo)."""
    pairs = (line.partition(":") for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines())
    return {k.strip(): v.strip() for k, _, v in pairs}


def prog_stats(fds: list[int]) -> tuple[int, int]:
    """(run_time_ns, run_cnt) summed over these program fds."""
    infos = [fdinfo(fd) for fd in fds]
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
    """Seconds per LUN for a scrape's share: read the counters (6 map lookups per LUN), families, render."""
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


def peer_source(rev: str, into: Path) -> Path:
    """That revision's exporter/src, extracted (git archive) into `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "exporter/src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "exporter" / "src"


def child_run(device: str, seconds: int, src: Path | None) -> dict[str, float]:
    """one_run in a child process importing lunlat from `src` (None: this checkout's)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    out = subprocess.run(
        [sys.executable, __file__, "--child", device, "--seconds", str(seconds)],
        capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def report(name: str, runs: list[dict[str, float]]) -> dict[str, float]:
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{name}:")
    for key, value in med.items():
        print(f"  median {key}: {value:.3f}   (runs: {', '.join(f'{r[key]:.3f}' for r in runs)})")
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--peer", help="a git revision whose programs run side by side")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a device: one run, JSON on stdout
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child, args.seconds)))
        return
    if os.geteuid() != 0 or shutil.which("fio") is None:
        raise SystemExit("needs root and fio")
    Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1")
    tmp = Path(tempfile.mkdtemp(prefix="lunlat-bench-", dir="/dev/shm"))
    peer = peer_source(args.peer, tmp / "peer") if args.peer else None
    image = tmp / "lun.img"
    with image.open("wb") as f:
        f.truncate(512 << 20)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    runs: list[dict[str, float]] = []
    peer_runs: list[dict[str, float]] = []
    try:
        for _ in range(args.runs):  # alternating, so that both see the same machine
            runs.append(child_run(device, args.seconds, None))
            if peer is not None:
                peer_runs.append(child_run(device, args.seconds, peer))
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)
        Path("/proc/sys/kernel/bpf_stats_enabled").write_text("0")
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"runs: {args.runs} x {args.seconds} s fio 4k randread QD16 on a tmpfs loop device")
    med = report("this checkout", runs)
    if peer_runs:
        peer_med = report(f"peer {args.peer}", peer_runs)
        ratio = med["bpf_ns_per_io"] / peer_med["bpf_ns_per_io"]
        print(f"BPF ns per I/O, this checkout / peer: {ratio:.2f}")
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
