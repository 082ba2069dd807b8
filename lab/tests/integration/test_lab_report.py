"""`lunlat-lab scenario --prometheus.url` on the real kernel: the phases it records, the report it
runs at the end, every host-layer cell of that report against a direct PromQL computation and
between fio's own completion and total latency of the same phase and LUN."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integration.test_lab import ACCURACY_LAB, TOLERANCE, write_lab
from lunlat import contract
from lunlat_lab import commands
from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess
from tests.support.lab_host import lab_skip_reason

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[3]
GOALS = REPO / "alerts" / "goals.yaml"
MEASURED_S = 20.0
WARMUP_S = 3.0
# The report's cell and the direct PromQL are the same arithmetic on the same samples: equal up to
# the float formatting of the CSV and the report's own rounding of the window to whole seconds.
EXACT = 1e-6
# fio's completion latency vs the report, below: the exporter-vs-fio tolerance of test_lab.py (5 %), on LUNs
# set to 0.5 ms and more (every LUN here, in both phases; CONFIGURED).
MIN_LUN_MS = 0.5

# ACCURACY_LAB (fast at 0.5 ms, slow at 2 ms, 4K random at QD1, uncapped) with two phases of the
# same workload; the test moves the delays with set-latency as the second phase starts.
LAB = (
    ACCURACY_LAB
    + """\
  phases:
    first: [probe]
    second: [probe]
"""
)
# The delays of the second phase, read/write ms: fast becomes the slow one.
SECOND = {"fast": 2.5, "slow": 1.0}
CONFIGURED = {"first": {"fast": 0.5, "slow": 2.0}, "second": SECOND}  # ms, ACCURACY_LAB's then SECOND


@pytest.fixture(autouse=True)
def _hosts() -> None:
    reason = lab_skip_reason() or prometheus_server.missing()
    if reason:
        pytest.skip(reason)


def test_scenario_records_its_phases_and_its_report_matches_promql_and_fio(tmp_path: Path) -> None:
    lab_dir = tmp_path / "lab"
    try:
        _run(tmp_path, lab_dir)
    finally:
        commands.down(lab_dir)


def _run(tmp_path: Path, lab_dir: Path) -> None:
    state = commands.up(write_lab(tmp_path / "lab.yaml", LAB), lab_dir)
    exporter_argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0",
                     f"--config.file={state.exporter_config}"]  # fmt: skip
    output = tmp_path / "out"
    with ExporterProcess(exporter_argv, tmp_path / "exporter.log", port_pattern=LUNLAT_PORT) as exporter:
        prom = prometheus_server.start(
            tmp_path / "prometheus", prometheus_server.config([f"{LOOPBACK}:{exporter.port}"], "1s")
        )
        try:
            api = prometheus_server.api(prom)
            api.wait_for_series(contract.DEVICE_READS.name, 2, 60)
            argv = [sys.executable, "-m", "lunlat_lab", "scenario", f"--state-dir={lab_dir}",
                    f"--exporter=http://{LOOPBACK}:{exporter.port}/metrics", f"--duration={MEASURED_S:g}",
                    f"--warmup={WARMUP_S:g}", f"--output={output}", f"--prometheus.url={api.base}",
                    f"--goals={GOALS}"]  # fmt: skip
            started = time.monotonic()
            lines = _scenario(argv, lab_dir)
            print(f"scenario + report: {time.monotonic() - started:.1f}s")
            _check(output, api, lines, {lun: Path(dev).name for lun, dev in state.loops.items()})
        finally:
            prom.stop()


def _scenario(argv: list[str], lab_dir: Path) -> list[str]:
    """Run `lab scenario`; as the second phase starts (its warm-up), move the delays."""
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("phase second:"):
                for lun, ms in SECOND.items():
                    commands.set_latency(lab_dir, lun, ms, ms, None)
        proc.wait(timeout=60)
    print("\n".join(lines))
    assert proc.returncode == 0, "\n".join(lines)
    return lines


def _check(output: Path, api: prometheus_server.PromApi, lines: list[str], devices: dict[str, str]) -> None:
    with (output / "phases.csv").open() as f:
        phases = list(csv.DictReader(f))
    assert [p["phase"] for p in phases] == ["first", "second"]
    for p in phases:
        assert float(p["end"]) - float(p["start"]) == pytest.approx(MEASURED_S, abs=1.0)
    # The command line printed names exactly these windows.
    command = next(line for line in lines if line.strip().startswith("lunlat report "))
    for p in phases:
        assert f"--phase {p['phase']}={p['start_rfc3339']}..{p['end_rfc3339']}" in command
    assert f"--from {phases[0]['start_rfc3339']} --to {phases[-1]['end_rfc3339']}" in command
    with (output / "results.csv").open() as f:
        fio = {
            (r["phase"], r["lun"], r["op"]): (
                float(r["fio_clat_mean_ms"]),
                float(r["fio_lat_mean_ms"]),
                int(r["fio_ios"]),
            )
            for r in csv.DictReader(f)
        }
    with (output / "report" / "tables.csv").open() as f:
        cells = [r for r in csv.DictReader(f) if r["layer"] == "host"]
    assert (output / "report" / "index.html").stat().st_size > 0
    by_device = {dev: lun for lun, dev in devices.items()}
    seen: dict[tuple[str, str, str], float] = {}
    report_lines = []
    for cell in cells:
        if cell["device"] not in by_device:
            continue  # another block device of this host with I/O in the window (a loop device left attached)
        lun = by_device[cell["device"]]  # the exporter labels the lab's LUNs by device
        phase = next(p for p in phases if p["phase"] == cell["phase"])
        key = (cell["phase"], lun, cell["op"])
        avg_ms = float(cell["avg_latency_seconds"]) * 1000
        # The report's own query: increase() over the phase rounded to whole seconds, at its end.
        window = f"{round(float(phase['end']) - float(phase['start']))}s"
        time_metric, ops_metric = (
            (contract.DEVICE_READ_TIME.name, contract.DEVICE_READS.name)
            if cell["op"] == "read"
            else (contract.DEVICE_WRITE_TIME.name, contract.DEVICE_WRITES.name)
        )
        selector = f'{{device="{cell["device"]}"}}'
        promql = f"increase({time_metric}{selector}[{window}]) / increase({ops_metric}{selector}[{window}])"
        (direct,) = api.query(promql, float(phase["end"]))
        direct_ms = float(direct["value"][1]) * 1000
        fio_ms, total_ms, ios = fio[key]
        report_lines.append(
            f"{key}: report {avg_ms:.4f} ms, PromQL {direct_ms:.4f} ms, fio {fio_ms:.4f} ms (lat {total_ms:.4f})"
        )
        assert avg_ms == pytest.approx(direct_ms, rel=EXACT), report_lines[-1]
        assert CONFIGURED[cell["phase"]][lun] >= MIN_LUN_MS
        # Between fio's two figures: the block layer's time starts inside io_submit(), before fio's
        # clat does, and ends before fio's lat (results.csv, docs/lab.md). Beside the other lanes the
        # report came out 12 % above clat (0.530 against 0.471 ms, a fresh-clone CI run of
        # 2026-11-29); test_lab.py, run alone, holds the exporter to clat within TOLERANCE.
        # /proc/diskstats sums whole milliseconds: a mean over `ios` I/Os is off by up to 1/ios ms.
        assert fio_ms * (1 - TOLERANCE) <= avg_ms <= total_ms + 1 / ios, report_lines[-1]
        seen[key] = avg_ms
    print("\n".join(report_lines))
    assert set(seen) == {
        (p, lun, op) for p in ("first", "second") for lun in devices for op in ("read", "write")
    }
    # The phases are told apart: the delays moved between them, and the report shows it.
    for op in ("read", "write"):
        assert seen[("first", "slow", op)] > 2 * seen[("first", "fast", op)], report_lines
        assert seen[("second", "fast", op)] > 1.5 * seen[("second", "slow", op)], report_lines
