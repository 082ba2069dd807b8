"""The lab's FUSE daemon engines side by side: what one I/O costs, IOPS, and latency accuracy under
the full phase, measured through loop devices and /proc/diskstats as the exporter reads them.

Not a test (never timed assertions). Needs root, /dev/fuse, loop devices, fio, and for the native
engine gcc, pkg-config and libfuse3-dev. Run it alone on the host (other load moves the figures):

    sudo .venv/bin/python bench/lab_daemon.py [--runs 3] [--seconds 10]

Each run brings a lab up per engine (`lunlat-lab up --engine ...`, calibration included) on the
shipped the lab's lab.yaml plus probe LUNs on arrays of their own, so the probes never queue
behind the lab's workloads for slots:

1. Cost of one I/O: 4K O_DIRECT reads at QD1, back to back, on a LUN set to 0 ms; what diskstats
   shows per read beyond the transfer time (goal for the native engine: at most 50 us).
2. IOPS in all: fio, 4K random reads, 4 LUNs at 0 ms x iodepth 4 (QD16), libaio (goal: 30,000).
3. Accuracy: while the full `oltp+dss+snapshot` phase runs at its configured rates, a LUN set to
   0.15 ms (jitter 0) read at QD1 by fio (4K random, 200 IOPS); diskstats' average read time
   against 0.15 ms + the transfer time (goal: within 0.02 ms).

Prints each figure's median over the runs per engine (and the native engine with a 20 us spin at
the end of each delay, `--spin-us 20`), then the ratio of the engines.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lunlat_lab import commands, measure
from lunlat_lab.daemon_engines import ENGINES, Engine
from lunlat_lab.defaults import DEFAULT_LAB_FILE

REPO = Path(__file__).resolve().parents[1]
LAB = DEFAULT_LAB_FILE
BLOCK = 4096
PROBE_MS = 0.15
PROBE_BANDWIDTH = 400.0  # MiB/s of the probe's own array
MIB = 1024 * 1024
IOPS_LUNS = 4
IOPS_DEPTH = 4
PROBE_RATE = 200

# Probe LUNs appended to the shipped lab: 0 ms LUNs on a wide array, the 0.15 ms one alone.
PROBES = f"""
  - {{name: probe_zero, database: probe, engine: mssql, role: data, workload: probe, array: probe_wide,
     latency: {{read_ms: 0, write_ms: 0, jitter: 0}}}}
  - {{name: probe_fast, database: probe, engine: mssql, role: data, workload: probe, array: probe_own,
     latency: {{read_ms: {PROBE_MS}, write_ms: {PROBE_MS}, jitter: 0}}}}
""" + "".join(
    f"""  - {{name: probe_iops{i}, database: probe, engine: mssql, role: data, workload: probe, array: probe_wide,
     latency: {{read_ms: 0, write_ms: 0, jitter: 0}}}}
"""
    for i in range(IOPS_LUNS)
)
ARRAYS = f"""  probe_wide: {{slots: 64, bandwidth_mib_s: 100000}}
  probe_own: {{slots: 8, bandwidth_mib_s: {PROBE_BANDWIDTH}}}
"""


def lab_file(directory: Path) -> Path:
    text = LAB.read_text()
    text = text.replace("arrays:\n", "arrays:\n" + ARRAYS, 1)
    text = text.replace("luns:\n", "luns:\n" + PROBES.lstrip("\n"), 1)
    path = directory / "lab.yaml"
    path.write_text(text)
    return path


def qd1_read_ms(device: str, count: int) -> float:
    """Average read time in diskstats of `count` back-to-back 4K O_DIRECT reads."""
    name = Path(device).name
    buf = mmap.mmap(-1, BLOCK)
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    blocks = os.lseek(fd, 0, os.SEEK_END) // BLOCK
    rng = random.Random(1)
    before = measure.from_diskstats()[name]
    try:
        for _ in range(count):
            os.preadv(fd, [buf], rng.randrange(blocks) * BLOCK)
    finally:
        os.close(fd)
        buf.close()
    avg = measure.average(before, measure.from_diskstats()[name])
    assert avg.read_ms is not None
    return avg.read_ms


def fio(devices: list[str], seconds: float, iodepth: int, rate: int | None, workdir: Path) -> None:
    job = ["[global]", "ioengine=libaio", "direct=1", "rw=randread", f"bs={BLOCK}", f"iodepth={iodepth}",
           "time_based=1", f"runtime={seconds:g}", "group_reporting=0"]  # fmt: skip
    if rate:
        job.append(f"rate_iops={rate}")
    for i, device in enumerate(devices):
        job += [f"[d{i}]", f"filename={device}"]
    path = workdir / "bench.fio"
    path.write_text("\n".join(job) + "\n")
    subprocess.run(
        ["fio", "--output-format=json", f"--output={workdir / 'bench.json'}", str(path)], check=True
    )


def one_run(engine: Engine, spin_us: float | None, seconds: float, workdir: Path) -> dict[str, float]:
    state_dir = workdir / "lab"
    config = lab_file(workdir)
    figures: dict[str, float] = {}
    state = commands.up(config, state_dir, engine, spin_us)
    try:
        overhead = json.loads(state.settings.read_text())["overhead_ms"]
        figures["calibrated_read_ms"] = overhead["read"]
        # 1. cost of one I/O (transfer time at 100,000 MiB/s: 0.04 us, not subtracted)
        qd1_read_ms(state.loops["probe_zero"], 200)  # warm-up
        figures["cost_us"] = qd1_read_ms(state.loops["probe_zero"], 3000) * 1000
        # 2. IOPS at QD16
        devices = [state.loops[f"probe_iops{i}"] for i in range(IOPS_LUNS)]
        before = measure.from_diskstats()
        started = time.monotonic()
        fio(devices, seconds, IOPS_DEPTH, None, workdir)
        elapsed = time.monotonic() - started
        after = measure.from_diskstats()
        reads = sum(after[Path(d).name].reads - before[Path(d).name].reads for d in devices)
        figures["iops"] = reads / elapsed
        # 3. accuracy beside the full phase
        commands.phase(state_dir, "oltp+dss+snapshot")
        time.sleep(3)
        device = state.loops["probe_fast"]
        before = measure.from_diskstats()
        fio([device], seconds, 1, PROBE_RATE, workdir)
        after = measure.from_diskstats()
        avg = measure.average(before[Path(device).name], after[Path(device).name])
        assert avg.read_ms is not None
        target = PROBE_MS + BLOCK / (PROBE_BANDWIDTH * MIB) * 1000
        figures["probe_ms"] = avg.read_ms
        figures["probe_error_ms"] = avg.read_ms - target
        commands.phase(state_dir, "idle")
    finally:
        commands.down(state_dir)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="per fio measurement")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (loop devices, a FUSE mount)", file=sys.stderr)
        return 2
    variants: list[tuple[str, Engine, float | None]] = [(e, e, None) for e in ENGINES]
    variants.insert(1, ("native spin 20", "native", 20.0))
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in variants}
    shm = Path("/dev/shm")  # noqa: S108 - a parent for mkdtemp: tmpfs, no disk under the images
    base = shm if shm.is_dir() else None
    for run in range(args.runs):
        for label, engine, spin in variants:
            with tempfile.TemporaryDirectory(prefix="lab-bench-", dir=base) as tmp:
                figures = one_run(engine, spin, args.seconds, Path(tmp))
            results[label].append(figures)
            print(
                f"run {run + 1} {label}: " + ", ".join(f"{k} {v:.4f}" for k, v in figures.items()), flush=True
            )

    def median(label: str, key: str) -> float:
        return statistics.median(r[key] for r in results[label])

    rows = [
        ("cost of one 4K read at QD1, 0 ms LUN (us)", "cost_us", "{:.1f}", "native <= 50"),
        ("IOPS in all, 4 LUNs x QD4, 0 ms", "iops", "{:,.0f}", ">= 30,000"),
        (f"{PROBE_MS} ms LUN beside oltp+dss+snapshot (ms)", "probe_ms", "{:.4f}", ""),
        ("  its error vs target + transfer (ms)", "probe_error_ms", "{:+.4f}", "within 0.02"),
        ("calibrated read overhead (ms)", "calibrated_read_ms", "{:.3f}", ""),
    ]
    labels = [label for label, _, _ in variants]
    print(f"\nmedians of {args.runs} runs")
    print(f"{'':46}" + "".join(f"{label:>15}" for label in labels) + f"{'native/python':>15}  goal")
    for title, key, fmt, goal in rows:
        values = [median(label, key) for label in labels]
        ratio = values[0] / values[-1] if values[-1] else float("nan")
        print(f"{title:46}" + "".join(f"{fmt.format(v):>15}" for v in values) + f"{ratio:>15.2f}  {goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
