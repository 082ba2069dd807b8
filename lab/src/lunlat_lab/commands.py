"""`lunlat-lab up | phase | set-latency | status | down | scenario`."""

from __future__ import annotations

import csv
import mmap
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from lunlat import ground, reference_architecture
from lunlat.files import write_atomic
from lunlat.yamlmodel import ConfigError
from lunlat_lab import exporter_config, measure, native, pgbench, reference_scenario, system
from lunlat_lab.config import LabConfig, Workload
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, Engine
from lunlat_lab.errors import LabError
from lunlat_lab.fio import jobs, process, report
from lunlat_lab.holdback import held_back
from lunlat_lab.settings import Settings, SettingsError
from lunlat_lab.state import LabState, read_live, stream_key

CALIBRATION_IOS = 300
CALIBRATION_BLOCK = 8192
# Paced like the lab's rate-capped workloads: back-to-back I/O finds the CPUs awake and measures
# less overhead than an I/O arriving every few ms pays (VM wake-up cost).
CALIBRATION_PACE_S = 0.004
DAEMON_MODULE = "lunlat_lab.daemon"  # run with -m; also how `down` finds a daemon by its command line
SETTINGS_POLL = 0.6  # > the daemon's settings poll interval: a change is in force after this


def load_lab(path: Path) -> LabConfig:
    try:
        return LabConfig.load(path)
    except ConfigError as exc:
        raise LabError("invalid lab description:\n  " + "\n  ".join(str(p) for p in exc.problems)) from None


def _say(text: str) -> None:
    print(text, flush=True)


# --- up ------------------------------------------------------------------------------------------


def up(
    config_path: Path,
    state_dir: Path,
    engine: Engine = DEFAULT_ENGINE,
    spin_us: float | None = None,
    log_level: str = "info",
) -> LabState:
    """Bring the lab up. `spin_us`: the native daemon's spin at the end of each delay (default its
    own; bench/lab_daemon.py compares). `log_level`: the daemon's, in fuse.log."""
    system.require_host(engine)
    lab = load_lab(config_path)
    leftovers = _leftovers(state_dir)
    if leftovers:
        raise LabError(f"a lab is already up in {state_dir} ({leftovers}); run `lunlat-lab down` first")
    state = LabState(state_dir, config_file=str(config_path.resolve()), engine=engine)
    for directory in (state.backing, state.mountpoint, state.fio_dir):
        directory.mkdir(parents=True, exist_ok=True)
    state.save()
    try:
        spin = [] if spin_us is None else ["--spin-us", repr(spin_us)]
        _bring_up(state, lab, [*spin, "--log.level", log_level])
    except BaseException:
        _say("up failed: undoing what it did")
        down(state_dir)
        raise
    return state


def _leftovers(state_dir: Path) -> str:
    state = LabState(state_dir)
    found = []
    if state.path.exists():
        found.append("a state file")
    if system.loops_under(state.mountpoint):
        found.append("loop devices")
    if system.is_mounted(state.mountpoint):
        found.append("a mount")
    if _lab_processes(state_dir):
        found.append("processes")
    return ", ".join(found)


def _bring_up(state: LabState, lab: LabConfig, daemon_args: list[str]) -> None:
    settings = Settings.from_config(lab)
    settings.save(state.settings)
    pgbench.write_passwords(state.directory, lab)
    write_atomic(state.exporter_config, exporter_config.render(lab, state.directory))
    for lun in lab.luns:
        with (state.backing / LabConfig.image_name(lun.name)).open("wb") as image:
            image.truncate(lab.size_mib * 1024 * 1024)  # sparse: only written blocks take space
    log = (state.directory / "fuse.log").open("ab")
    daemon = subprocess.Popen(
        [sys.executable, "-m", DAEMON_MODULE, "--engine", state.engine, "--backing", str(state.backing), "--mount",
         str(state.mountpoint), "--settings", str(state.settings), *daemon_args],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    log.close()
    state.fuse_pid = system.detach(daemon)
    state.save()

    def mounted() -> bool:
        if daemon.poll() is not None:
            tail = (state.directory / "fuse.log").read_text(errors="replace")[-2000:]
            raise LabError(f"the FUSE daemon exited ({daemon.returncode}):\n{tail}")
        return system.is_mounted(state.mountpoint)

    system.wait_for(mounted, 15, "the FUSE filesystem to mount")
    for lun in lab.luns:
        state.loops[lun.name] = system.attach_loop(state.mountpoint / LabConfig.image_name(lun.name))
        state.save()
    # Now that its devices are known: this lab's only (lunlat_lab.exporter_config).
    write_atomic(state.exporter_config, exporter_config.render(lab, state.directory, state.loops))
    overhead = calibrate(state, lab.luns[0].name, settings)
    replace_settings = Settings(settings.luns, settings.arrays, overhead)
    replace_settings.save(state.settings)
    _say(f"lab up in {state.directory}: {len(state.loops)} LUNs; I/O overhead without injected delay "
         f"{overhead['read']:.3f} ms read, {overhead['write']:.3f} ms write (subtracted from each delay)")  # fmt: skip
    for lun in lab.luns:
        _say(f"  {lun.name:24} {state.loops[lun.name]:12} {lun.database} / {lun.role} / {lun.workload}")
    _say(f"the exporter's config for these LUNs: {state.exporter_config}")


def calibrate(state: LabState, probe_lun: str, settings: Settings) -> dict[str, float]:
    """Measure what an I/O costs with no injected delay (FUSE round trip, Python, loop driver).

    The daemon then sleeps each target minus this, so diskstats shows the configured latency
    rather than latency + overhead. Measured by the kernel's own counters, as the exporter reads them.
    """
    probe = replace(settings.luns[probe_lun], read_ms=0.0, write_ms=0.0, jitter=0.0)
    quiet = Settings({**settings.luns, probe_lun: probe}, settings.arrays, {"read": 0.0, "write": 0.0})
    quiet.save(state.settings)
    time.sleep(SETTINGS_POLL)
    device = state.loops[probe_lun]
    name = Path(device).name
    before = measure.from_diskstats()[name]
    buf = mmap.mmap(-1, CALIBRATION_BLOCK)  # page-aligned, as O_DIRECT requires
    fd = os.open(device, os.O_RDWR | os.O_DIRECT)
    rng = random.Random(1)
    blocks = max(1, (os.lseek(fd, 0, os.SEEK_END) // CALIBRATION_BLOCK) - 1)
    try:
        for _ in range(CALIBRATION_IOS):
            os.preadv(fd, [buf], rng.randrange(blocks) * CALIBRATION_BLOCK)
            time.sleep(CALIBRATION_PACE_S)
        for _ in range(CALIBRATION_IOS):
            os.pwritev(fd, [buf], rng.randrange(blocks) * CALIBRATION_BLOCK)
            time.sleep(CALIBRATION_PACE_S)
    finally:
        os.close(fd)
        buf.close()
    avg = measure.average(before, measure.from_diskstats()[name])
    # Bounded: a pathological probe (a busy host) must not erase real delays.
    return {
        "read": min(max(avg.read_ms or 0.0, 0.0), 2.0),
        "write": min(max(avg.write_ms or 0.0, 0.0), 2.0),
    }


# --- down ----------------------------------------------------------------------------------------


def _lab_processes(state_dir: Path, daemons_only: bool = False) -> list[int]:
    """The lab's processes, all named by state dir: its FUSE daemon (the Python process and, with the
    native engine, its C child), fio runs and a stuck `lab up`; or only the daemons."""
    marker = str(state_dir)
    pids = []
    for proc in system.processes_mentioning(marker):
        cmdline = proc.info.get("cmdline") or []
        text = " ".join(cmdline)
        daemon = DAEMON_MODULE in text or Path(cmdline[0]).name == native.BINARY_NAME
        other = Path(cmdline[0]).name == "fio" or ("lab" in cmdline and "up" in cmdline)
        if daemon or (other and not daemons_only):
            pids.append(proc.pid)
    return pids


def down(state_dir: Path) -> list[str]:
    """Undo everything a lab in `state_dir` made, whatever state it is in. Returns what it did."""
    state = LabState.load(state_dir) or LabState(state_dir)
    done: list[str] = _down_postgres(state)
    # fio first: it holds the loop devices open. Then loops, the mount, the daemon, the files. The
    # daemon serves the loops until they are detached (a native one outlives its killed supervisor).
    daemons = {*(p for p in (state.fuse_pid,) if p), *_lab_processes(state_dir, daemons_only=True)}
    for pid in {*(p for p in (state.fio_pid,) if p), *_lab_processes(state_dir)} - daemons:
        system.stop_process(pid, sig=signal.SIGTERM)
        done.append(f"stopped process {pid}")
    loops = set(system.loops_under(state.mountpoint)) | {
        d for d in state.loops.values() if d in system.loops_under(state.mountpoint)
    }
    for device in sorted(loops):
        system.detach_loop(device)
        done.append(f"detached {device}")
    if system.is_mounted(state.mountpoint):
        system.unmount(state.mountpoint)
        done.append(f"unmounted {state.mountpoint}")
    for pid in {*(p for p in (state.fuse_pid,) if p), *_lab_processes(state_dir)}:
        system.stop_process(pid)
        done.append(f"stopped process {pid}")
    if state_dir.exists():
        shutil.rmtree(state_dir, ignore_errors=True)
        done.append(f"removed {state_dir}")
    return done


def _down_postgres(state: LabState) -> list[str]:
    """pgbench, the servers, their file systems: before the loops they are on go."""
    done = []
    for pid in state.pgbench_pids:
        pgbench.stop_pgbench(pid)
        done.append(f"stopped pgbench {pid}")
    if state.pg_base is None:
        return done
    base = Path(state.pg_base)
    lab = _lab_or_none(state)
    for name in state.pg_clusters:
        workload = lab.workloads.get(name) if lab is not None else None
        if workload is None:
            continue  # the description changed under the lab: the mounts are still unmounted below
        cluster = pgbench.Cluster(base / name, name, workload, pgbench.password_file(state.directory, name))
        cluster.stop()
        done.append(f"stopped PostgreSQL of {name}")
    for mount in sorted(base.glob("*/data")) + sorted(base.glob("*/log")):
        if system.is_mounted(mount):
            system.unmount(mount)
            done.append(f"unmounted {mount}")
    shutil.rmtree(base, ignore_errors=True)
    return done


def _lab_or_none(state: LabState) -> LabConfig | None:
    try:
        return load_lab(Path(state.config_file))
    except (LabError, OSError):
        return None


# --- run-time control ----------------------------------------------------------------------------


def _require_up(state_dir: Path) -> tuple[LabState, LabConfig]:
    state = LabState.load(state_dir)
    if state is None or not state.loops:
        raise LabError(f"no lab is up in {state_dir}; run `lunlat-lab up` first")
    return state, load_lab(Path(state.config_file))


def stop_phase(state: LabState) -> None:
    if state.fio_pid:
        process.stop_pid(state.fio_pid)
    for pid in state.pgbench_pids:
        pgbench.stop_pgbench(pid)
    state.fio_pid = None
    state.pgbench_pids = []
    state.phase = None
    state.save()


def phase(state_dir: Path, name: str) -> LabState:
    state, lab = _require_up(state_dir)
    stop_phase(state)
    if name in ("none", "idle"):
        return state
    if name not in lab.phases:
        raise LabError(
            f"unknown phase {name!r}; the lab config has: {', '.join(lab.phases) or 'none'}, or idle"
        )
    members = lab.phases[name]
    databases = lab.pgbench_workloads(members)
    if databases:
        pgbench.bin_dir()  # before anything starts: the message names what to install
    fio_members = [w for w in members if w not in databases]
    if fio_members:
        workdir = state.fio_dir / name
        workdir.mkdir(parents=True, exist_ok=True)
        text = jobs.job_file(lab, fio_members, state.loops, None)
        proc = process.start(text, workdir, workdir / "fio.json")
        state.fio_pid = system.detach(proc)
        state.phase_output = str(workdir / "fio.json")
    state.phase = name
    state.save()
    for wname, workload in databases.items():
        cluster = _cluster(state, wname, workload)
        if wname not in state.pg_clusters:
            data, log = lab.pgbench_luns(workload)
            _say(f"phase {name}: PostgreSQL of {wname} on {data.name} (data) and {log.name} (pg_wal)")
            state.pg_clusters.append(wname)  # before: a failed prepare still gets undone by `down`
            state.save()
            cluster.prepare(state.loops[data.name], state.loops[log.name])
        else:
            cluster.ensure_running()
        state.pgbench_pids.append(cluster.run_pgbench())
        state.save()
    return state


def _cluster(state: LabState, name: str, workload: Workload) -> pgbench.Cluster:
    if state.pg_base is None:
        state.pg_base = str(pgbench.new_base())
        state.save()
    password = pgbench.password_file(state.directory, name)
    return pgbench.Cluster(Path(state.pg_base) / name, name, workload, password)


def set_latency(state_dir: Path, lun: str, read_ms: float, write_ms: float, jitter: float | None) -> Settings:
    state, _ = _require_up(state_dir)
    settings = Settings.load(state.settings)
    if lun not in settings.luns:
        raise LabError(f"unknown LUN {lun!r}; the lab has: {', '.join(settings.luns)}")
    old = settings.luns[lun]
    new = replace(old, read_ms=read_ms, write_ms=write_ms, jitter=old.jitter if jitter is None else jitter)
    updated = Settings({**settings.luns, lun: new}, settings.arrays, settings.overhead_ms)
    return _save_settings(state, updated, f"set-latency {lun}")


def _save_settings(state: LabState, updated: Settings, what: str) -> Settings:
    """Put `updated` in the daemon's settings file, checked against the lab description's bounds
    (lab/config.py) before the daemon sees it; in force within SETTINGS_POLL."""
    try:
        updated.check()
    except SettingsError as exc:
        raise LabError(f"{what}: {exc}") from None
    updated.save(state.settings)
    return updated


@dataclass(frozen=True, slots=True)
class LunStatus:
    lun: str
    device: str
    database: str
    role: str
    workload: str
    set_read_ms: float
    set_write_ms: float
    live: measure.Average
    # The live calibration's overhead (ms) by stream (state.stream_key; lab/daemon/calibration.py); a
    # stream not measured yet has none and is served with `lab up`'s figure.
    overhead_ms: dict[str, float] = field(default_factory=dict)

    def overhead_of(self, op: str) -> float | None:
        """The op's overhead as `lab status` shows it: its small I/Os' (what OLTP feels) where the
        calibration measures per size class, else the op's of every size."""
        return self.overhead_ms.get(stream_key(op, ground.BIO_SIZES[0]), self.overhead_ms.get(op))


def status(state_dir: Path, window: float = 1.0) -> tuple[LabState, list[LunStatus]]:
    state, lab = _require_up(state_dir)
    settings = Settings.load(state.settings)
    before = measure.from_diskstats()
    time.sleep(window)
    after = measure.from_diskstats()
    live_overhead = read_live(state.live_overhead)
    rows = []
    for lun in lab.luns:
        device = state.loops.get(lun.name, "")
        name = Path(device).name
        live = (
            measure.average(before[name], after[name])
            if name in before and name in after
            else measure.Average(0, None, 0, None)
        )
        s = settings.luns[lun.name]
        rows.append(
            LunStatus(lun.name, device, lun.database, lun.role, lun.workload, s.read_ms, s.write_ms, live,
                      live_overhead.get(lun.name, {}))
        )  # fmt: skip
    return state, rows


def _up_overhead(state: LabState) -> str:
    try:
        over = Settings.load(state.settings).overhead_ms
    except LabError:
        return "figure"
    return f"{over.get('read', 0.0):.3f}/{over.get('write', 0.0):.3f} ms"


def format_status(state: LabState, rows: list[LunStatus], window: float) -> str:
    def ms(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else "-"

    lines = [
        f"lab in {state.directory} ({state.engine} daemon), phase: {state.phase or 'idle'}; live = last {window:g}s from /proc/diskstats",
        f"{'LUN':24} {'device':12} {'database':14} {'role':5} {'workload':14} "
        f"{'set r/w ms':>13} {'live r/w ms':>15} {'r/w IOPS':>13} {'overhead r/w ms':>15}",
    ]
    for r in rows:
        lines.append(
            f"{r.lun:24} {r.device:12} {r.database:14} {r.role:5} {r.workload:14} "
            f"{r.set_read_ms:>6.2f}/{r.set_write_ms:<6.2f} {ms(r.live.read_ms):>7}/{ms(r.live.write_ms):<7} "
            f"{r.live.reads / window:>6.0f}/{r.live.writes / window:<6.0f} "
            f"{ms(r.overhead_of('read')):>7}/{ms(r.overhead_of('write')):<7}"
        )
    lines.append(
        f"overhead: measured live per LUN, op and size class, small I/Os' shown (- : not yet, "
        f"`lab up`'s {_up_overhead(state)} applies)"
    )
    return "\n".join(lines)


# --- scenario ------------------------------------------------------------------------------------

SCENARIO_FIELDS = (
    "phase", "lun", "device", "database", "role", "workload", "op",
    "fio_ios", "fio_clat_mean_ms", "fio_lat_mean_ms", "exporter_ops", "exporter_mean_ms", "difference_percent",
)  # fmt: skip


def scenario(
    state_dir: Path,
    exporter_url: str | None,
    duration: float,
    warmup: float,
    phases: list[str] | None,
    output: Path,
    prometheus_url: str | None = None,
    goals: Path | None = None,
    reference: Path | None = None,
) -> Path:
    """Run the reference phases one after the other; per phase and LUN write fio's own completion
    latency (ground truth) next to what the exporter measured over the same window (results.csv),
    and each phase's measured window (phases.csv) with the `lunlat report` command line for them.
    With `prometheus_url`, run that report into OUTPUT/report at the end.

    With `reference` (lunlat's reference.csv), set each LUN to the reference's averages of each
    phase before its warm-up, and end with the reference's cells beside the measured ones
    (OUTPUT/reference.csv, printed; the report's too).

    What it starts (fio, the exporter where it starts one) and the scrapes it makes run held back
    behind the lab's I/O path where this host allows (lunlat_lab.holdback: the daemon stands for the
    array; beside it, they showed as LUN latency)."""
    with held_back(f"lunlat-lab-scenario-{os.getpid()}") as group:
        _say(f"held back: {group or 'no (no cpu cgroup with cpu.idle here)'}")
        return _scenario(
            state_dir, exporter_url, duration, warmup, phases, output, prometheus_url, goals, reference
        )


def _scenario(
    state_dir: Path,
    exporter_url: str | None,
    duration: float,
    warmup: float,
    phases: list[str] | None,
    output: Path,
    prometheus_url: str | None,
    goals: Path | None,
    reference: Path | None,
) -> Path:
    state, lab = _require_up(state_dir)
    order = phases or list(lab.phases)
    unknown = [p for p in order if p not in lab.phases]
    if unknown:
        raise LabError(f"unknown phases {', '.join(unknown)}; the lab config has {', '.join(lab.phases)}")
    _refuse_pgbench(lab, order)
    cells = _reference_cells(reference)
    stop_phase(state)
    output.mkdir(parents=True, exist_ok=True)
    exporter = _Exporter(exporter_url, state.exporter_config, output)
    rows: list[dict[str, object]] = []
    windows: list[PhaseWindow] = []
    comparisons: list[reference_architecture.Comparison] = []
    baseline = Settings.load(state.settings)
    try:
        for name in order:
            if cells is not None:
                set_reference(state, lab, baseline, cells, name)
            _say(f"phase {name}: {warmup:g}s warm-up, {duration:g}s measured")
            workdir = output / name
            workdir.mkdir(exist_ok=True)
            text = jobs.job_file(lab, lab.phases[name], state.loops, duration, ramp_s=warmup)
            proc = process.start(text, workdir, workdir / "fio.json")
            time.sleep(warmup)
            # The window is between the two scrapes (the exporter reads on request), to the millisecond.
            start = round(time.time(), 3)
            before = measure.from_exposition(exporter.scrape())
            time.sleep(duration)
            end = round(time.time(), 3)
            after = measure.from_exposition(exporter.scrape())
            windows.append(PhaseWindow(name, start, end))
            process.wait(proc, timeout=jobs.expected_seconds(lab, lab.phases[name], duration, warmup) + 60)
            truth = report.results(report.load(workdir / "fio.json"))
            rows.extend(_scenario_rows(name, lab, state, truth, before, after))
            if cells is not None:
                comparisons += _compare_reference(lab, state, cells, name, before, after)
    finally:
        exporter.close()
        if cells is not None:
            _save_settings(state, baseline, "restoring the lab's settings")
    path = _write_results(output / "results.csv", rows)
    write_phases(output / "phases.csv", windows)
    if cells is not None:
        _write_reference(output / "reference.csv", comparisons)
    if not windows:
        return path
    report_dir = output / "report"
    command = report_command(windows, prometheus_url, goals, report_dir, reference)
    _say("the report of these phases:\n  " + command)
    if prometheus_url is not None:
        _run_report(prometheus_url, windows, goals, report_dir, reference)
    return path


def _refuse_pgbench(lab: LabConfig, order: list[str]) -> None:
    """The scenario compares fio's latency with the exporter's: a phase with pgbench has no fio truth."""
    databases = [w for p in order for w in lab.pgbench_workloads(lab.phases[p])]
    if databases:
        raise LabError(
            f"the scenario compares fio's own latency with the exporter's; pgbench workloads "
            f"({', '.join(sorted(set(databases)))}) have none: run their phases with `lunlat-lab phase`"
        )


def _write_results(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SCENARIO_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def reference_phase(state_dir: Path, phase: str, reference: Path) -> None:
    """Every LUN of the lab at `state_dir` at the reference's averages of `phase`, as `scenario
    --reference` sets them (set_reference: no spread, the arrays without queueing)."""
    state, lab = _require_up(state_dir)
    set_reference(state, lab, Settings.load(state.settings), _reference_cells(reference) or [], phase)


def _reference_cells(path: Path | None) -> list[reference_architecture.ReferenceCell] | None:
    if path is None:
        return None
    try:
        return reference_architecture.load(path)
    except reference_architecture.ReferenceError as exc:
        raise LabError(str(exc)) from None


def _compare_reference(
    lab: LabConfig,
    state: LabState,
    cells: list[reference_architecture.ReferenceCell],
    phase: str,
    before: dict[str, measure.Counters],
    after: dict[str, measure.Counters],
) -> list[reference_architecture.Comparison]:
    """The phase's reference cells beside the exporter's averages over its window (the same two
    scrapes as results.csv)."""
    measured = reference_scenario.measured(lab, state.loops, phase, before, after)
    return reference_architecture.compare([c for c in cells if c.phase == phase], measured)


def _write_reference(path: Path, comparisons: list[reference_architecture.Comparison]) -> None:
    write_atomic(path, reference_architecture.csv_text(comparisons))
    _say("the reference beside the exporter's averages over each phase (ms):")
    _say(reference_architecture.format_table(comparisons))


def set_reference(
    state: LabState,
    lab: LabConfig,
    baseline: Settings,
    cells: list[reference_architecture.ReferenceCell],
    phase: str,
) -> None:
    """Each LUN at the reference's averages of `phase` (the ops and LUNs it does not report at the
    lab's own values), without spread, the arrays without queueing (lab/reference_scenario.py says why), through the settings
    file as set-latency writes it; in force before the phase's warm-up starts."""
    wanted = reference_scenario.targets(lab, cells, phase)
    luns = {
        name: replace(
            setting,
            read_ms=wanted.get(name, {}).get("read", setting.read_ms),
            write_ms=wanted.get(name, {}).get("write", setting.write_ms),
            jitter=reference_scenario.REFERENCE_JITTER,
        )
        for name, setting in baseline.luns.items()
    }
    arrays = dict.fromkeys(baseline.arrays, reference_scenario.REFERENCE_ARRAY)
    _save_settings(state, Settings(luns, arrays, baseline.overhead_ms), f"reference values of phase {phase}")
    _say(f"phase {phase}: {len(wanted)} LUNs set to the reference's averages")
    time.sleep(SETTINGS_POLL)


# --- the phases' windows and their report ----------------------------------------------------------

PHASE_FIELDS = ("phase", "start", "end", "start_rfc3339", "end_rfc3339")
PROMETHEUS_PLACEHOLDER = "http://PROMETHEUS:9090"
# How long the scenario waits for Prometheus to have scraped past the last phase's end.
SCRAPE_WAIT_S = 120.0


@dataclass(frozen=True, slots=True)
class PhaseWindow:
    """A phase's measured window (the warm-up excluded), Unix seconds."""

    name: str
    start: float
    end: float


def rfc3339(at: float) -> str:
    """UTC to the millisecond, rounded as phases.csv's Unix seconds are (isoformat would truncate)."""
    seconds, millis = divmod(round(at * 1000), 1000)
    return f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%dT%H:%M:%S}.{millis:03d}Z"


def write_phases(path: Path, windows: list[PhaseWindow]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(PHASE_FIELDS)
        for w in windows:
            writer.writerow((w.name, f"{w.start:.3f}", f"{w.end:.3f}", rfc3339(w.start), rfc3339(w.end)))


def report_args(windows: list[PhaseWindow]) -> tuple[str, str, list[str]]:
    """`--from`, `--to` and the `--phase` specs of `lunlat report` for these windows (millisecond
    RFC 3339, as phases.csv has them)."""
    specs = [f"{w.name}={rfc3339(w.start)}..{rfc3339(w.end)}" for w in windows]
    return rfc3339(windows[0].start), rfc3339(windows[-1].end), specs


def report_command(
    windows: list[PhaseWindow],
    prometheus_url: str | None,
    goals: Path | None,
    output: Path,
    reference: Path | None = None,
) -> str:
    start, end, specs = report_args(windows)
    argv = ["lunlat", "report", "--prometheus.url", prometheus_url or PROMETHEUS_PLACEHOLDER]
    argv += ["--from", start, "--to", end]
    for spec in specs:
        argv += ["--phase", spec]
    if goals is not None:
        argv += ["--goals", str(goals)]
    if reference is not None:
        argv += ["--reference", str(reference)]
    argv += ["--output", str(output)]
    return shlex.join(argv)


def _run_report(
    prometheus_url: str,
    windows: list[PhaseWindow],
    goals: Path | None,
    output: Path,
    reference: Path | None = None,
) -> None:
    from lunlat import contract  # noqa: PLC0415 - only a scenario with --prometheus.url reports
    from lunlat.report import write  # noqa: PLC0415
    from lunlat.report.api import Prometheus, ReportError  # noqa: PLC0415

    # The last phase ended at the exporter's last scrape; Prometheus scrapes on its own clock.
    prometheus, end = Prometheus(prometheus_url, timeout=30), windows[-1].end
    promql = f"max(timestamp({contract.DEVICE_READS.name}))"
    deadline = time.monotonic() + SCRAPE_WAIT_S
    while True:
        try:
            latest = prometheus.query(promql, time.time())
        except ReportError as exc:
            raise LabError(str(exc)) from None
        if latest and float(latest[0]["value"][1]) >= end:
            break
        if time.monotonic() > deadline:
            raise LabError(f"Prometheus at {prometheus_url} has no lunlat sample after the last phase's end")
        time.sleep(0.5)
    start_text, end_text, specs = report_args(windows)
    if write(prometheus_url, start_text, end_text, specs, goals, output, reference=reference) != 0:
        raise LabError("the report failed (above); the phases are in phases.csv")


def _scenario_rows(
    phase_name: str,
    lab: LabConfig,
    state: LabState,
    truth: dict[str, report.LunResult],
    before: dict[str, measure.Counters],
    after: dict[str, measure.Counters],
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for lun in lab.luns:
        device = state.loops[lun.name]
        name = Path(device).name
        if name not in before or name not in after or lun.name not in truth:
            continue
        avg = measure.average(before[name], after[name])
        for op, ops, exporter_ms in (("read", avg.reads, avg.read_ms), ("write", avg.writes, avg.write_ms)):
            result = truth[lun.name].op(op)
            if result is None or result.ios == 0:
                continue
            fio_ms = result.clat_mean_s * 1000
            rows.append({
                "phase": phase_name, "lun": lun.name, "device": device, "database": lun.database,
                "role": lun.role, "workload": lun.workload, "op": op, "fio_ios": result.ios,
                "fio_clat_mean_ms": round(fio_ms, 4),
                "fio_lat_mean_ms": "" if result.lat_mean_s is None else round(result.lat_mean_s * 1000, 4),
                "exporter_ops": int(ops),
                "exporter_mean_ms": round(exporter_ms, 4) if exporter_ms is not None else "",
                "difference_percent": round((exporter_ms - fio_ms) / fio_ms * 100, 2) if exporter_ms else "",
            })  # fmt: skip
    return rows


class _Exporter:
    """The exporter the scenario reads: the one at `url`, or one it starts on the lab's exporter config."""

    def __init__(self, url: str | None, config_file: Path, workdir: Path) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        if url is not None:
            self.url = url
            return
        log = workdir / "exporter.log"
        with log.open("wb") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0",
                 f"--config.file={config_file}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            )  # fmt: skip
        port: list[int] = []

        def listening() -> bool:
            for line in log.read_text(errors="replace").splitlines():
                if "msg=listening" in line:
                    port.append(int(line.split(" port=")[1].split()[0]))
                    return True
            if self._proc is not None and self._proc.poll() is not None:
                raise LabError(f"the exporter exited: {log.read_text(errors='replace')[-1000:]}")
            return False

        system.wait_for(listening, 30, "the exporter to listen")
        self.url = f"http://127.0.0.1:{port[0]}/metrics"

    def scrape(self) -> str:
        import urllib.request  # noqa: PLC0415 - only the scenario scrapes

        with urllib.request.urlopen(self.url, timeout=30) as resp:  # noqa: S310 - a URL the user gave
            return str(resp.read().decode())

    def close(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
