"""`lunlat-lab scenario --reference` on the real kernel, short: the lab of the lab's lab.yaml set to
the reference's averages (lunlat's reference.csv) phase by phase, every cell the reference reports
measured by the exporter within 0.03 ms or 5 % of it; the report the scenario runs (Prometheus
scraping every second) shows the same cells beside the reference."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from lunlat import contract, reference_architecture
from lunlat.reference_architecture import DEFAULT_REFERENCE_FILE
from lunlat_lab import commands
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.holdback import held_back
from tests.support import prometheus_server, steal
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess
from tests.support.lab_host import lab_skip_reason, memory_backed_dir

# `alone`: its tolerance, 0.03 ms, is below what other work moves even when it gives way to the
# lab (an idle cpu cgroup): a fresh-clone CI run on 2026-11-29 ran it beside the other lanes'
# builds (Go, container images) and `lunlat-lab up` calibrated 0.51 ms of overhead per read
# instead of about 0.06, 12 cells off by up to 0.27 ms. .ci/run runs it before anything else.
pytestmark = [pytest.mark.lab, pytest.mark.alone]

REPO = Path(__file__).resolve().parents[3]
LAB = DEFAULT_LAB_FILE
REFERENCE = DEFAULT_REFERENCE_FILE
# Short phases: the warm-up covers the snapshot copy (lab/fio/jobs.py, 4 s at its capped rate) and
# the live calibration's first windows on the snapshot LUNs, which only start once it is done. The
# log readers run at 5 IOPS in lab.yaml (below the alerts' idle guard, for the paging tests): 100
# I/Os in a 20 s phase, whose mean swings by more than 0.03 ms with the host's wake-ups. This short
# version runs them at LOG_READ_IOPS; the cells, targets and tolerance are the reference's.
# Phases of 40 s, not 20: the lab cannot take back a stall of the host's. Traced on 2026-11-29 with
# the daemon's debug windows beside a 4 ms sampler of /proc/stat's steal column: the misses (one
# cell, 0.032 to 0.054 ms high) were each one calibration window 12 to 21 ms over its estimate,
# outside the daemon's hold (kernel minus daemon time), inside a burst of steal on both vCPUs (the
# hypervisor's, about one every 8 s here); one such stall on a cell of 400 I/Os (a log reader, a
# snapshot LUN's 20 writes a second, over 20 s) moves its mean by 0.04 to 0.05 ms, on the 800 of a
# 40 s phase by half that. The live calibration holds such a window off on purpose
# (lab/daemon/calibration.py, the low median): paying it back would pull the next phase low.
WARMUP_S = 8.0
MEASURED_S = 40.0
LOG_READ_IOPS = 20
# The report's cells are Prometheus' increase() over the phase rounded to whole seconds, from the
# samples inside it (scraped every second): the scenario's window give or take a scrape at each end.
REPORT_VS_SCENARIO = 0.05


@pytest.fixture(autouse=True)
def _lab_host() -> None:
    reason = lab_skip_reason() or prometheus_server.missing()
    if reason:
        pytest.skip(reason)


# One run of the short scenario on a fresh lab, strict: the test was a non-strict expected failure
# (a check that could not fail), then a retry loop; a cell that misses is printed with every other
# (_within_tolerance) and with the steal of its phase, which is what issue 39 item 1 needs: the
# cause, not a rerun. The one cause traced since is the hypervisor's steal (above; tests/support/
# steal.py): fresh-clone CI runs on 2026-11-29/30 missed cells in the phases that lost 7, 9 and 26 %
# of both CPUs to it, and in no phase that lost 3.4 % or less; a trial here on 2026-11-30 with every
# phase run twice missed 8 cells at 7.5 % and none of the same phase's 20 alone at 0.5 %
# (docs/lab.md, on `--reference`). So a phase that lost more than STEAL_BOUND, or had one burst
# as long as its sparsest cell can absorb (_budget_s), is measured again, on its own, and judged
# on its first run free of both, whatever its cells read; decided by the steal, never by the
# cells. A phase stolen from in every run cannot be judged: its least
# stolen run is reported, and a miss there skips the test with every run's steal (the project CI
# on 2026-11-30 lost 8 to 17 % of both CPUs in every run of every phase; no run of the lab can
# hold 0.03 ms through that), so a pass always means every cell within and a failure a miss in a
# phase the host left alone.
STEAL_BOUND = 0.02
REMEASURES = 3  # in all: each costs a phase's warm-up and measured seconds (about 50 s)


def test_every_reference_cell_measured_within_its_tolerance(tmp_path: Path) -> None:
    output = tmp_path / "out"
    with steal.sampled() as record:
        stdout, again = _once(tmp_path, output, record)
    with (output / "reference.csv").open() as f:
        rows = list(csv.DictReader(f))
    # Every cell the reference reports is there, in its order, and none it does not report.
    assert [_key(r) for r in rows] == [c.key for c in reference_architecture.load(REFERENCE)]
    assert "reference cells within 0.03 ms or 5%" in stdout
    # The report run by the scenario: the same cells, measured by Prometheus over the same phases.
    with (output / "report" / "reference.csv").open() as f:
        report_rows = list(csv.DictReader(f))
    assert [_key(r) for r in report_rows] == [_key(r) for r in rows]
    judged, unsettled, steals = _judged_runs([output, *again], record)
    # Their windows differ by up to a scrape at each end, and a stall of the host near an end moves
    # one side only: compared in the phases under the steal bound (a fresh-clone CI run on
    # 2026-11-30 read 0.246 against 0.262 in a run that missed 18 cells by up to 0.10 ms; this check
    # came first, so its steal was not printed). The report's own arithmetic is held to PromQL
    # exactly by test_lab_report.py.
    stolen = set(_stolen(output, record))
    for mine, theirs in zip(rows, report_rows, strict=True):
        assert theirs["reference_ms"] == mine["reference_ms"]
        if mine["phase"] not in stolen:
            assert float(theirs["measured_ms"]) == pytest.approx(
                float(mine["measured_ms"]), rel=REPORT_VS_SCENARIO
            ), (_key(mine), steals)
    assert "Against the reference:" in (output / "report" / "index.html").read_text()
    assert sorted(map(_key, judged)) == sorted(map(_key, rows))  # each cell judged once
    _within_tolerance([r for r in judged if r["phase"] not in unsettled], steals)
    _within_tolerance_or_unjudged([r for r in judged if r["phase"] in unsettled], steals)


def _once(tmp_path: Path, output: Path, record: steal.StealRecord) -> tuple[str, list[Path]]:
    """The scenario's stdout, and the output directories of the phases measured again."""
    base = Path(tempfile.mkdtemp(prefix="lunlat-reference-", dir=memory_backed_dir()))
    lab_dir = base / "lab"
    try:
        return _run(tmp_path, lab_dir, output, record)
    finally:
        commands.down(lab_dir)
        shutil.rmtree(base, ignore_errors=True)


def _phases(output: Path) -> list[dict[str, str]]:
    with (output / "phases.csv").open() as f:
        return list(csv.DictReader(f))


def _steal(
    record: steal.StealRecord, output: Path, phase: dict[str, str]
) -> tuple[steal.Steal | None, float, str]:
    """A phase's steal (None: not sampled), its share of the CPU time (not sampled: infinite), and
    why it cannot be judged ("": it can)."""
    got = record.over(float(phase["start"]), float(phase["end"]))
    if got is None:
        return None, float("inf"), "not sampled"
    if got.fraction > STEAL_BOUND:
        return got, got.fraction, "over the bound"
    budget = _budget_s(output, phase["phase"])
    if got.most_in_a_sample >= budget:
        return got, got.fraction, f"a burst of at least the sparsest cell's budget, {1000 * budget:.0f} ms"
    return got, got.fraction, ""


def _budget_s(output: Path, phase: str) -> float:
    """The excess the sparsest judged cell of `phase` takes before it leaves the tolerance, in
    seconds: the tolerance's floor times the I/Os of its LUN (results.csv). One stall of the I/O
    path that long, on one I/O of a reader with one I/O in flight, adds as much to the cell's sum.
    A CI run on 2026-11-30 missed one cell of 806 reads by 0.038 ms (30.6 ms over its sum) in a
    phase that lost 0.9 % of the CPUs, 70 ms of it in its worst second: the share bound alone
    judged it."""
    with (output / "reference.csv").open() as f:
        cells = {_key(r) for r in csv.DictReader(f)}
    with (output / "results.csv").open() as f:
        counts = [
            int(r["exporter_ops"])
            for r in csv.DictReader(f)
            if r["phase"] == phase and _key(r) in cells and r["exporter_ops"]
        ]
    return reference_architecture.TOLERANCE_MS / 1000 * min(counts)


def _stolen(output: Path, record: steal.StealRecord) -> list[str]:
    """The phases of one scenario run that cannot be judged for the host's steal (_steal)."""
    return [phase["phase"] for phase in _phases(output) if _steal(record, output, phase)[2]]


def _judged_runs(
    outputs: list[Path], record: steal.StealRecord
) -> tuple[list[dict[str, str]], list[str], str]:
    """The rows each phase is judged on: those of its first run the steal leaves judgeable, or, when
    none was, of its least stolen run (chosen by the steal, never by the cells); the phases with no
    judgeable run; and every run's steal, phase by phase, saying which run was judged."""
    runs: dict[str, list[tuple[float, str, int, list[dict[str, str]]]]] = {}
    lines = []
    for number, output in enumerate(outputs):
        with (output / "reference.csv").open() as f:
            rows = list(csv.DictReader(f))
        for phase in _phases(output):
            name = phase["phase"]
            got, fraction, why = _steal(record, output, phase)
            told = ", ".join(str(part) for part in (got, why) if part)
            lines.append(f"{name}, run {number + 1}: {told}")
            runs.setdefault(name, []).append(
                (fraction, why, len(lines) - 1, [r for r in rows if r["phase"] == name])
            )
    judged: list[dict[str, str]] = []
    unsettled = []
    for name, tries in runs.items():
        under = [t for t in tries if not t[1]]
        if not under:
            unsettled.append(name)
        _, _, line, rows = under[0] if under else min(tries, key=lambda t: t[0])
        lines[line] += " (judged)"
        judged += rows
    text = (
        f"the host's steal (bound {STEAL_BOUND:.0%} of a phase's CPU time, and no burst in "
        f"{1000 * steal.POLL_S:.0f} ms as long as the sparsest cell's budget): " + "; ".join(lines)
    )
    if unsettled:
        text += f"; stolen from in every run, its least stolen run shown: {', '.join(unsettled)}"
    return judged, unsettled, text


def _key(row: dict[str, str]) -> tuple[str, ...]:
    return (row["phase"], row["workload"], row["database"], row["role"], row["op"])


def _short_lab(tmp_path: Path) -> Path:
    """the lab's lab.yaml with its log readers (`kind: archive`) at LOG_READ_IOPS."""
    data = yaml.safe_load(LAB.read_text(encoding="utf-8"))
    for workload in data["workloads"].values():
        if workload["kind"] == "archive":
            workload["rate_iops"] = LOG_READ_IOPS
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _run(tmp_path: Path, lab_dir: Path, output: Path, record: steal.StealRecord) -> tuple[str, list[Path]]:
    state = commands.up(_short_lab(tmp_path), lab_dir)
    exporter_argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0",
                     f"--config.file={state.exporter_config}"]  # fmt: skip
    # The exporter and Prometheus held back behind the lab's I/O path, as the scenario holds its fio
    # (lunlat_lab.holdback): on two cores their work showed as LUN latency.
    with (
        held_back(f"lunlat-reference-test-{os.getpid()}"),
        ExporterProcess(exporter_argv, tmp_path / "exporter.log", port_pattern=LUNLAT_PORT) as exporter,
    ):
        prom = prometheus_server.start(
            tmp_path / "prometheus", prometheus_server.config([f"{LOOPBACK}:{exporter.port}"], "1s")
        )
        try:
            api = prometheus_server.api(prom)
            api.wait_for_series(contract.DEVICE_READS.name, len(state.loops), 60)
            common = [sys.executable, "-m", "lunlat_lab", "scenario", f"--state-dir={lab_dir}",
                      f"--exporter=http://{LOOPBACK}:{exporter.port}/metrics", f"--reference={REFERENCE}",
                      f"--warmup={WARMUP_S:g}", f"--duration={MEASURED_S:g}"]  # fmt: skip
            stdout = _scenario([*common, f"--output={output}", f"--prometheus.url={api.base}"])
            again: list[Path] = []
            stolen = _stolen(output, record)
            while stolen and len(again) < REMEASURES:
                phase = stolen.pop(0)
                again.append(tmp_path / f"again-{len(again) + 1}")
                _scenario([*common, f"--output={again[-1]}", f"--phases={phase}"])
                if phase in _stolen(again[-1], record):
                    stolen.append(phase)
            return stdout, again
        finally:
            prom.stop()


def _scenario(argv: list[str]) -> str:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    print(done.stdout, done.stderr, f"scenario: {time.monotonic() - started:.1f}s", sep="\n")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _outside(rows: list[dict[str, str]]) -> list[str]:
    return [
        f"{' '.join(_key(r))}: reference {r['reference_ms']}, measured {r['measured_ms'] or '-'} "
        f"({r['difference_ms'] or '-'} ms)"
        for r in rows
        if r["within_tolerance"] != "yes"
    ]


def _within_tolerance(rows: list[dict[str, str]], steal_record: str) -> None:
    outside = _outside(rows)
    # The steal first: CI's closing summary keeps a failure's first lines.
    assert not outside, "\n".join([steal_record, *outside])
    for row in rows:  # the verdict is the arithmetic of the numbers printed beside it
        assert reference_architecture.within(float(row["reference_ms"]), float(row["measured_ms"]))


def _within_tolerance_or_unjudged(rows: list[dict[str, str]], steal_record: str) -> None:
    """The cells of the phases stolen from in every run: within, or the test cannot say."""
    outside = _outside(rows)
    if outside:
        pytest.skip("\n".join(["not judged, the host stole CPU in every run of:", steal_record, *outside]))
    _within_tolerance(rows, steal_record)
