"""The lab's tail beside other work: what share of a log LUN's writes take over the goal, and how
the way the other work is held back changes it (issue 39, item 1; issue 37's log-write budget).

One lab LUN, a redo log at 0.65 ms with no spread (Oracle's log-write average in the reference's
OLTP phase; `jitter: 0`, so every I/O is held for exactly its set time) under the lab's log writer
(8 KiB O_SYNC writes, 100 a second), read by `lunlat serve --collector.biolatency` (per-I/O
buckets with an edge at 1 ms). Beside it, per variant, `--workers` busy loops in a session of their
own (as another job on the host would be):

- `none`: nothing beside the lab;
- `nice`: the loops at nice 19;
- `idle`: the loops at SCHED_IDLE;
- `cgroup`: the loops in a cpu cgroup marked idle (`cpu.idle` 1, Linux 5.15+, in cgroup v1's cpu
  controller and in v2: the kernel's commit 304000390f88, "sched: Cgroup SCHED_IDLE support": the
  wake-up preemption decision compares the matching entities, so the group as a whole gives way
  to a woken task outside it, a kernel thread included). Tasks in a cgroup other than the root
  are in no autogroup.

Each variant prints its windows (I/Os, mean, share over 1 ms and over 2 ms) and the median share.
With autogroups on (sched(7), "The autogroup feature"; /proc/sys/kernel/sched_autogroup_enabled),
nice and SCHED_IDLE count only within a session: run it with them on and off to see the
difference (the script reports which; it does not change the setting).

    sudo .venv/bin/python bench/lab_tail.py [--windows 4] [--seconds 30] [--workers 2]

Results: docs/benchmarks.md, "The lab's tail".
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lunlat import contract
from lunlat_lab import commands
from lunlat_lab.holdback import idle_cgroup
from tests.support.exporter_process import LUNLAT_PORT, ExporterProcess, lunlat_serve, scrape
from tests.support.exposition_samples import samples
from tests.support.lab_host import lab_skip_reason, memory_backed_dir

GOAL_S = 0.001
HISTOGRAM = contract.DEVICE_IO_LATENCY.name
LAB = """\
size_mib: 64
arrays:
  a: {slots: 64, bandwidth_mib_s: 1000}
luns:
  - {name: redo, database: ORA, engine: oracle, role: log, workload: oltp, array: a,
     latency: {read_ms: 0.65, write_ms: 0.65, jitter: 0}}
workloads:
  log: {kind: log, luns: [redo], block_size: 8k, rate_iops: 100}
phases:
  p: [log]
"""
VARIANTS = ("none", "nice", "idle", "cgroup")
IDLE_GROUP = "lunlat-tail-idle"
BUSY = "while True: pass"
AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")


@dataclass(frozen=True, slots=True)
class Window:
    ios: float
    mean_ms: float
    over_goal: float  # share of the window's writes over GOAL_S
    over_twice: float


def _writes(text: str, device: str) -> tuple[dict[str, float], float]:
    """The write buckets (by `le`, summed over size classes) and the write sum of `device`, read
    with prometheus_client's parser (tests/support/exposition_samples)."""
    buckets: dict[str, float] = {}
    total = 0.0
    for (name, labels), value in samples(text).items():
        named = dict(labels)
        if named.get("device") != device or named.get("op") != "write":
            continue
        if name == f"{HISTOGRAM}_bucket":
            buckets[named["le"]] = buckets.get(named["le"], 0.0) + value
        elif name == f"{HISTOGRAM}_sum":
            total += value
    return buckets, total


def _window(before: tuple[dict[str, float], float], after: tuple[dict[str, float], float]) -> Window:
    (b0, s0), (b1, s1) = before, after
    n = b1["+Inf"] - b0["+Inf"]
    within = b1[repr(GOAL_S)] - b0[repr(GOAL_S)]
    within_twice = b1[repr(2 * GOAL_S)] - b0[repr(2 * GOAL_S)]
    return Window(n, (s1 - s0) / n * 1000, (n - within) / n, (n - within_twice) / n)


@contextmanager
def _load(variant: str, workers: int) -> Iterator[None]:
    group = idle_cgroup(IDLE_GROUP) if variant == "cgroup" else None
    if variant == "cgroup" and group is None:
        raise SystemExit("no cpu cgroup with cpu.idle here: run without the cgroup variant")

    def lower() -> None:
        if variant == "nice":
            os.setpriority(os.PRIO_PROCESS, 0, 19)
        elif variant == "idle":
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        elif group is not None:
            (group / "cgroup.procs").write_text(f"{os.getpid()}\n", encoding="ascii")

    loops = (
        []
        if variant == "none"
        else [
            subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=lower, start_new_session=True)  # noqa: PLW1509
            for _ in range(workers)
        ]
    )
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        if group is not None:
            group.rmdir()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    reason = lab_skip_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    autogroups = AUTOGROUP_SWITCH.read_text().strip() if AUTOGROUP_SWITCH.exists() else "absent"
    print(f"autogroups: {autogroups}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
    base = Path(tempfile.mkdtemp(prefix="lunlat-tail-", dir=memory_backed_dir()))
    config = base / "lab.yaml"
    config.write_text(textwrap.dedent(LAB), encoding="utf-8")
    state_dir = base / "lab"
    exporter: ExporterProcess | None = None
    try:
        commands.up(config, state_dir)
        state = commands.phase(state_dir, "p")
        device = Path(state.loops["redo"]).name
        exporter = ExporterProcess(
            lunlat_serve(f"--config.file={state.exporter_config}", "--collector.biolatency"),
            base / "lunlat.log",
            name="lunlat",
            port_pattern=LUNLAT_PORT,
            start_timeout=60.0,
        )
        exporter.start()
        port = exporter.port

        def read() -> tuple[dict[str, float], float]:
            return _writes(scrape(port).text, device)

        time.sleep(args.seconds)  # the live calibration's first windows
        for variant in args.variants:
            with _load(variant, args.workers):
                time.sleep(5)  # the loops running before the first window
                windows = []
                before = read()
                for _ in range(args.windows):
                    time.sleep(args.seconds)
                    after = read()
                    windows.append(_window(before, after))
                    before = after
            for w in windows:
                print(
                    f"  {variant:5} {w.ios:6.0f} writes  mean {w.mean_ms:.3f} ms  "
                    f"over 1 ms {w.over_goal:6.2%}  over 2 ms {w.over_twice:6.2%}"
                )
            median = statistics.median(w.over_goal for w in windows)
            print(f"{variant}: median share over 1 ms {median:.2%} (load {os.getloadavg()[0]:.2f})")
    finally:
        if exporter is not None:
            exporter.stop()
        commands.down(state_dir)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
