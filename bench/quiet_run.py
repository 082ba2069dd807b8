"""Quiet, proven: a long run of a reference phase must page nobody.

The real parts as in tests/alerting/test_e2e_paging.py (tests/alerting/stack.py): the lab's loop LUNs
(the lab's lab.yaml, every LUN at 0.8 ms or, with `--baselines`, at its own: the reference's
baselines) under a reference phase (`--phase`: oltp, the default; oltp+dss, whose 512 KiB
scans share the OLTP data LUNs; oltp+dss+snapshot), the lunlat exporter (with `--biolatency`, its
per-I/O histogram, so reads are judged on their small I/Os as docs/alerting.md "What is judged"
says), the Debian Prometheus
(15 s scrape and evaluation) with alerts/lunlat.rules.yml, the Debian Alertmanager with
alerts/alertmanager.yml's routing and timers, and a webhook receiver. Every LUN is set to 0.8 ms read
and write; the LUNs the phase leaves idle (the snapshot copies) get one slow I/O (5 ms) every few
seconds, below their idle guard (alerts/goals.yaml), so the guard is exercised. After `--duration`
seconds of the phase (counted once every busy LUN is judged) and a drain (what was pending has time
to reach the webhook) it prints:

- the LunLatency* notifications received, each listed; pages are the goal (0): a warning or ticket
  (the flagged average of a LUN whose scans lift it, LunLatencyAverageHigh) is listed, not failed;
- the host's steal time over the run (/proc/stat: steal / all CPU time, and the worst 10 s window);
- per LUN, the exporter's Δtime/Δops over the run and the median and max of Prometheus' 1m average;
  with `--biolatency`, the share of each op's judged I/Os slower than the LUN's goal over the run
  (the per-I/O histogram's bucket at the goal; the small size class where the goal judges small
  I/Os): what the per-I/O SLO counts as bad, so a budget-burn notification can be read against it
  (the objectives: alerts/goals.yaml `slo`).

Exits 1 when any LunLatency* page arrived (with `--strict`: any notification), 2 when it cannot
run, else 0.
Needs root (loop devices, FUSE), fio, prometheus and prometheus-alertmanager.

    .venv/bin/python bench/quiet_run.py                 # 30 minutes of OLTP, ~33 in all
    .venv/bin/python bench/quiet_run.py --duration 180
    .venv/bin/python bench/quiet_run.py --phase oltp+dss+snapshot --biolatency
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's tests/ helpers

from lunlat import contract
from lunlat.goals import duration_seconds, load_goals
from lunlat.reference_architecture import DEFAULT_REFERENCE_FILE
from lunlat_lab import commands, measure
from lunlat_lab.config import LabConfig
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, ENGINES, parse_engine
from lunlat_lab.holdback import held_back
from lunlat_lab.state import LabState
from tests.alerting import e2e, stack
from tests.alerting.stack import AlertingStack, Notification, WebhookReceiver, missing_binaries
from tests.support.lab_host import lab_skip_reason, memory_backed_dir

PHASE = "oltp"
PHASES = ("oltp", "oltp+dss", "oltp+dss+snapshot")
LATENCY_MS = 0.8
SLOW_MS = 5.0  # an idle LUN's rare I/O: 5 times the goal, so only the idle guard keeps it from being judged
IDLE_INTERVAL_S = 3.0
IDLE_BLOCK = 8192
GOALS_FILE = stack.REPO / "alerts" / "goals.yaml"
STEAL_WINDOW_S = 10.0
PROGRESS_S = 60.0
JUDGE_TIMEOUT_S = 180.0
ALERT_PREFIX = "LunLatency"


# --- the host's steal time ---------------------------------------------------------------------------


def cpu_jiffies() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs so far: /proc/stat's `cpu` line, user to steal (guest time
    is already counted in user and nice)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return values[7], sum(values)


def steal_percent(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else 0.0


# --- the idle LUNs' rare slow I/Os -----------------------------------------------------------------


def idle_luns(lab: LabConfig, phase: str) -> list[str]:
    """The lab's LUNs no workload of `phase` touches."""
    busy = {name for w in lab.phases[phase] for name in lab.workloads[w].luns}
    return [lun.name for lun in lab.luns if lun.name not in busy]


def idle_guard(lab: LabConfig, lun: str) -> float:
    """The LUN's idle guard (minimum IOPS to be judged) from the one goal definition."""
    spec = lab.lun(lun)
    labels = {"workload": spec.workload, "database": spec.database, "role": spec.role}
    return load_goals(GOALS_FILE).tier(labels).min_iops


@contextmanager
def rare_ios(devices: list[str], interval: float) -> Iterator[None]:
    """One 8 KiB O_DIRECT I/O on each device every `interval` seconds (reads and writes in turn, at
    random offsets), from a thread, while the block runs."""
    stop = threading.Event()

    def run() -> None:
        buf = mmap.mmap(-1, IDLE_BLOCK)  # page-aligned, as O_DIRECT requires
        fds = [os.open(d, os.O_RDWR | os.O_DIRECT) for d in devices]
        rng = random.Random(1)
        try:
            blocks = [max(1, os.lseek(fd, 0, os.SEEK_END) // IDLE_BLOCK - 1) for fd in fds]
            write = False
            while not stop.wait(interval):
                for fd, count in zip(fds, blocks, strict=True):
                    offset = rng.randrange(count) * IDLE_BLOCK
                    if write:
                        os.pwritev(fd, [buf], offset)
                    else:
                        os.preadv(fd, [buf], offset)
                write = not write
        finally:
            for fd in fds:
                os.close(fd)
            buf.close()

    thread = threading.Thread(target=run, name="rare-ios", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


# --- what the run saw ----------------------------------------------------------------------------


def pages(notifications: list[Notification]) -> list[Notification]:
    return [n for n in notifications if any(a["labels"].get("severity") == "page" for a in n.alerts)]


def latency_notifications(hook: WebhookReceiver) -> list[Notification]:
    return [
        n
        for n in hook.snapshot()
        if any(str(a["labels"].get("alertname", "")).startswith(ALERT_PREFIX) for a in n.alerts)
    ]


def drain_seconds() -> float:
    """How long an alert that went pending at the run's end takes to reach the webhook: the breach
    alert's `for`, two evaluations (the one that sees it, the one that fires it) and the longest
    `group_wait` of the repo's Alertmanager routes."""
    goals = load_goals(GOALS_FILE)
    config = stack.alertmanager_config("http://unused")

    def waits(route: dict[str, Any]) -> Iterator[float]:
        if "group_wait" in route:
            yield duration_seconds(route["group_wait"])
        for child in route.get("routes", []):
            yield from waits(child)

    group_wait = max(waits(config["route"]), default=30.0)  # Alertmanager's own default: 30s
    return duration_seconds(goals.breach.for_) + 2 * duration_seconds(stack.INTERVAL) + group_wait


@dataclass(frozen=True, slots=True)
class Row:
    lun: str
    device: str
    role: str
    workload: str
    average: measure.Average
    prom: dict[str, tuple[float, float] | None]  # op → (median, max) of the 1m average, ms
    over_goal: dict[str, float | None]  # op → share of the I/Os slower than the goal (per-I/O histogram)


def prometheus_1m(
    alerting: AlertingStack, seconds: int, at: float
) -> dict[tuple[str, str], tuple[float, float]]:
    """(device, op) → median and max of the recorded 1m average over the last `seconds`, in ms."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for op in ("read", "write"):
        series = f"lunlat:{op}_latency_seconds:avg1m"
        median = alerting.api.query(f"quantile_over_time(0.5, {series}[{seconds}s]) * 1000", at)
        worst = alerting.api.query(f"max_over_time({series}[{seconds}s]) * 1000", at)
        high = {r["metric"].get("lun", ""): float(r["value"][1]) for r in worst}
        for r in median:
            device = r["metric"].get("lun", "")
            if device in high:
                out[device, op] = (float(r["value"][1]), high[device])
    return out


@dataclass(frozen=True, slots=True)
class Judging:
    """How the goals judge one LUN: its goal and, per op, the size classes judged (every one, or the
    small one)."""

    goal_ms: float
    sizes: dict[str, tuple[str, ...] | None]  # op → judged size classes; None: every one


def judging(lab: LabConfig, lun: str) -> Judging:
    """From the one goal definition, as idle_guard reads the LUN's guard."""
    spec = lab.lun(lun)
    labels = {"workload": spec.workload, "database": spec.database, "role": spec.role}
    goals = load_goals(GOALS_FILE)
    small = contract.BIO_SIZES[:1]
    return Judging(
        goals.tier(labels).goal_ms,
        {op: small if goals.judged_io(labels, op) == "small" else None for op in ("read", "write")},
    )


def over_goal(
    alerting: AlertingStack, seconds: int, at: float, judged: dict[str, Judging]
) -> dict[tuple[str, str], float]:
    """(device, op) → share of the judged I/Os over the last `seconds` slower than the device's goal,
    from the per-I/O histogram (its buckets have an edge at each goal: contract.BIO_BUCKETS)."""
    histogram = contract.DEVICE_IO_LATENCY.name
    window = f"[{seconds}s]"
    counts = alerting.api.query(f"sum by (lun, op, size) (increase({histogram}_count{window}))", at)
    buckets = alerting.api.query(f"sum by (lun, op, size, le) (increase({histogram}_bucket{window}))", at)
    total: dict[tuple[str, str], float] = {}
    within: dict[tuple[str, str], float] = {}
    for into, results in ((total, counts), (within, buckets)):
        for r in results:
            labels = r["metric"]
            how = judged.get(labels["lun"])
            if how is None:
                continue
            sizes = how.sizes[labels["op"]]
            if sizes is not None and labels["size"] not in sizes:
                continue  # not a judged size class
            if "le" in labels and (
                labels["le"] == "+Inf" or abs(float(labels["le"]) * 1000 - how.goal_ms) > 1e-9
            ):
                continue  # not the goal's bucket
            key = (labels["lun"], labels["op"])
            into[key] = into.get(key, 0.0) + float(r["value"][1])
    return {key: 1.0 - within.get(key, 0.0) / count for key, count in total.items() if count > 0}


def print_table(rows: list[Row], seconds: float) -> None:
    def ms(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else "-"

    def pair(value: tuple[float, float] | None) -> str:
        return f"{value[0]:.3f} / {value[1]:.3f}" if value is not None else "-"

    def share(value: float | None) -> str:
        return f"{value * 100:.2f}" if value is not None else "-"

    print(
        f"{'LUN':22} {'device':8} {'role':5} {'workload':14} {'read ms':>8} {'r IOPS':>7} "
        f"{'write ms':>8} {'w IOPS':>7}   {'1m read med / max':>17}   {'1m write med / max':>18}"
        f"   {'r >goal %':>9} {'w >goal %':>9}"
    )
    for r in rows:
        a = r.average
        print(
            f"{r.lun:22} {r.device:8} {r.role:5} {r.workload:14} {ms(a.read_ms):>8} "
            f"{a.reads / seconds:>7.1f} {ms(a.write_ms):>8} {a.writes / seconds:>7.1f}   "
            f"{pair(r.prom['read']):>17}   {pair(r.prom['write']):>18}"
            f"   {share(r.over_goal['read']):>9} {share(r.over_goal['write']):>9}"
        )


def describe(notification: Notification) -> str:
    def what(labels: dict[str, str]) -> str:
        # A budget burn is per database and role, with no LUN.
        if "lun" in labels:
            return f"lun={labels['lun']}"
        return f"database={labels.get('database')} role={labels.get('role')}"

    alerts = ", ".join(
        f"{a['labels'].get('alertname')} {a.get('status')} {what(a['labels'])} "
        f"op={a['labels'].get('op', '')} severity={a['labels'].get('severity')}"
        for a in notification.alerts
    )
    return f"{notification.receiver} ({notification.status}): {alerts}"


# --- the run -----------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of OLTP (default 1800)")
    parser.add_argument(
        "--idle-interval",
        type=float,
        default=IDLE_INTERVAL_S,
        help=f"seconds between an idle LUN's slow I/Os (default {IDLE_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help=f"the lab's FUSE daemon (default {DEFAULT_ENGINE})",
    )
    parser.add_argument(
        "--phase", choices=PHASES, default=PHASE, help=f"the reference phase (default {PHASE})"
    )
    parser.add_argument(
        "--biolatency",
        action="store_true",
        help="run the exporter with --collector.biolatency (root, BPF): reads judged on their small I/Os",
    )
    parser.add_argument("--strict", action="store_true", help="fail on any notification, not only pages")
    parser.add_argument(
        "--baselines",
        action="store_true",
        help=f"keep the lab's own latencies (lab.yaml: the reference's baselines, with the lab's spread) "
        f"instead of {LATENCY_MS} ms on every LUN",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="every busy LUN at the reference's averages of the phase, as `lunlat-lab scenario --reference` "
        "sets them (no spread, no queueing in the arrays)",
    )
    parser.add_argument(
        "--no-hold-back",
        dest="hold_back",
        action="store_false",
        help="leave what the run starts beside the lab's I/O path as it is, instead of in an idle cpu "
        "cgroup (lunlat_lab.holdback)",
    )
    return parser.parse_args()


def set_latencies(state_dir: Path, lab: LabConfig, idle: list[str], args: argparse.Namespace) -> None:
    """The idle LUNs' rare slow I/O; the busy ones at LATENCY_MS, the lab's baselines (--baselines) or
    the reference's averages of the phase (--reference)."""
    for lun in lab.luns:
        if lun.name in idle:
            commands.set_latency(state_dir, lun.name, SLOW_MS, SLOW_MS, None)
        elif not (args.baselines or args.reference):
            commands.set_latency(state_dir, lun.name, LATENCY_MS, LATENCY_MS, None)
    if args.reference:
        commands.reference_phase(state_dir, args.phase, DEFAULT_REFERENCE_FILE)


def main() -> int:
    args = parse_args()
    engine = parse_engine(args.engine)
    phase = args.phase
    problem = lab_skip_reason() or (
        f"missing {', '.join(missing_binaries())}" if missing_binaries() else None
    )
    if problem:
        print(f"cannot run: {problem}", file=sys.stderr)
        return 2
    lab = commands.load_lab(e2e.LAB_CONFIG)
    idle = idle_luns(lab, phase)
    guards = {lun: idle_guard(lab, lun) for lun in idle}
    rate = 1.0 / args.idle_interval
    too_fast = [f"{lun} (guard {g:g} IOPS)" for lun, g in guards.items() if rate >= g]
    if too_fast:
        print(f"cannot run: one I/O every {args.idle_interval:g} s is not below the idle guard of "
              f"{', '.join(too_fast)}", file=sys.stderr)  # fmt: skip
        return 2
    drain = drain_seconds()
    print(
        f"quiet run ({engine} lab engine{', biolatency' if args.biolatency else ''}): {args.duration:g} s of "
        f"phase {phase} with "
        + (
            "every LUN at the lab's baselines; "
            if args.baselines
            else "every busy LUN at the reference's averages of the phase; "
            if args.reference
            else f"every LUN at {LATENCY_MS} ms read and write; "
        )
        + f"idle LUNs {', '.join(idle)}: one {SLOW_MS:g} ms I/O every {args.idle_interval:g} s "
        f"({rate:.2f} IOPS, idle guard {', '.join(sorted({f'{g:g}' for g in guards.values()}))} IOPS); "
        f"then {drain:g} s of drain",
        flush=True,
    )
    state_dir = Path(tempfile.mkdtemp(prefix="lunlat-quiet-", dir=memory_backed_dir()))
    hold = ExitStack()
    try:
        commands.up(e2e.LAB_CONFIG, state_dir, engine)
        # The lab stands for the array: what the run starts from here on (fio, the exporter,
        # Prometheus, Alertmanager) gives way to its I/O path (lunlat_lab.holdback says why).
        if args.hold_back:
            group = hold.enter_context(held_back(f"lunlat-quiet-run-{os.getpid()}"))
            print(f"held back: {group or 'no (no cpu cgroup with cpu.idle here)'}", flush=True)
        set_latencies(state_dir, lab, idle, args)
        commands.phase(state_dir, phase)
        state = LabState.load(state_dir)
        assert state is not None
        with (
            rare_ios([state.loops[lun] for lun in idle], args.idle_interval),
            tempfile.TemporaryDirectory(prefix="lunlat-stack-") as workdir,
            WebhookReceiver() as hook,
            AlertingStack(
                Path(workdir),
                state.exporter_config,
                hook.url,
                exporter_args=("--collector.biolatency",) if args.biolatency else (),
            ) as alerting,
        ):
            judged = alerting.wait_for_series(
                "lunlat:latency_above_goal:bool", e2e.OLTP_JUDGED, timeout=JUDGE_TIMEOUT_S
            )
            print(f"{len(judged)} read/write streams judged; the run starts", flush=True)
            rows, seconds, steals = run(alerting, hook, state, lab, args.duration)
            time.sleep(drain)
            end = time.time()
            prom = prometheus_1m(alerting, round(seconds), end - drain)
            bad = over_goal(
                alerting, round(seconds), end - drain, {r.device: judging(lab, r.lun) for r in rows}
            )
            rows = [
                Row(r.lun, r.device, r.role, r.workload, r.average,
                    {op: prom.get((r.device, op)) for op in ("read", "write")},
                    {op: bad.get((r.device, op)) for op in ("read", "write")})
                for r in rows
            ]  # fmt: skip
            received = latency_notifications(hook)
    finally:
        commands.down(state_dir)
        hold.close()

    total, windows = steals
    paged = pages(received)
    print(f"\n{ALERT_PREFIX}* pages: {len(paged)} (goal 0); all notifications: {len(received)}")
    for n in received:
        print(f"  {describe(n)}")
    print(
        f"steal: {total:.1f} % of all CPU time over the run ({os.cpu_count()} CPUs); "
        f"worst {STEAL_WINDOW_S:g} s window {max(windows, default=0.0):.1f} %, "
        f"median window {statistics.median(windows) if windows else 0.0:.1f} %"
    )
    print(f"per LUN over the run ({seconds:.0f} s): the exporter's Δtime/Δops; Prometheus' 1m average (ms)")
    print_table(rows, seconds)
    return 1 if (received if args.strict else paged) else 0


def run(
    alerting: AlertingStack, hook: WebhookReceiver, state: LabState, lab: LabConfig, duration: float
) -> tuple[list[Row], float, tuple[float, list[float]]]:
    """`duration` seconds of the phase: the exporter's counters at both ends, steal in 10 s windows."""
    before = measure.from_exposition(alerting.exporter.scrape().text)
    start = time.monotonic()
    first = last = cpu_jiffies()
    windows: list[float] = []
    next_progress = start + PROGRESS_S
    while (now := time.monotonic()) < start + duration:
        time.sleep(min(STEAL_WINDOW_S, start + duration - now))
        sample = cpu_jiffies()
        windows.append(steal_percent(last, sample))
        last = sample
        if time.monotonic() >= next_progress:
            next_progress += PROGRESS_S
            print(
                f"  {time.monotonic() - start:5.0f} s: steal {steal_percent(first, last):.1f} %, "
                f"{ALERT_PREFIX}* notifications {len(latency_notifications(hook))}",
                flush=True,
            )
    after = measure.from_exposition(alerting.exporter.scrape().text)
    seconds = time.monotonic() - start
    rows = []
    for lun in lab.luns:
        device = Path(state.loops[lun.name]).name
        if device in before and device in after:
            average = measure.average(before[device], after[device])
            rows.append(Row(lun.name, device, lun.role, lun.workload, average, {}, {}))
    return rows, seconds, (steal_percent(first, last), windows)


if __name__ == "__main__":
    sys.exit(main())
