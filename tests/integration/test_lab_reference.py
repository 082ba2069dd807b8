"""`lunlat lab scenario --reference` on the real kernel, short: the lab of deploy/lab/lab.yaml set to
the reference's averages (deploy/lab/reference.csv) phase by phase, every cell the reference reports
measured by the exporter within 0.03 ms or 5 % of it."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lunlat import reference
from lunlat.lab import commands
from tests.labhost import lab_skip_reason, memory_backed_dir

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "deploy" / "lab" / "lab.yaml"
REFERENCE = REPO / "deploy" / "lab" / "reference.csv"
# Short phases: the warm-up covers the snapshot copy (lab/fio/jobs.py, 4 s at its capped rate); 20 s
# measured gives the least busy cells (log reads, 5 IOPS) about 100 I/Os each.
WARMUP_S = 5.0
MEASURED_S = 20.0


@pytest.fixture(autouse=True)
def _lab_host() -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)


def test_every_reference_cell_measured_within_its_tolerance(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="lunlat-reference-", dir=memory_backed_dir()))
    lab_dir, output = base / "lab", tmp_path / "out"
    try:
        commands.up(LAB, lab_dir)
        argv = [sys.executable, "-m", "lunlat", "lab", "scenario", f"--state-dir={lab_dir}",
                f"--reference={REFERENCE}", f"--warmup={WARMUP_S:g}", f"--duration={MEASURED_S:g}",
                f"--output={output}"]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        print(done.stdout, done.stderr, f"scenario: {time.monotonic() - started:.1f}s", sep="\n")
        assert done.returncode == 0, done.stderr
    finally:
        commands.down(lab_dir)
        shutil.rmtree(base, ignore_errors=True)
    with (output / "reference.csv").open() as f:
        rows = list(csv.DictReader(f))
    cells = reference.load(REFERENCE)
    # Every cell the reference reports is there, in its order, and none it does not report.
    assert [(r["phase"], r["workload"], r["database"], r["role"], r["op"]) for r in rows] == [
        c.key for c in cells
    ]
    outside = [r for r in rows if r["within_tolerance"] != "yes"]
    assert not outside, "\n".join(
        f"{r['phase']} {r['workload']} {r['database']} {r['role']} {r['op']}: reference {r['reference_ms']}, "
        f"measured {r['measured_ms'] or '-'} ({r['difference_ms'] or '-'} ms)"
        for r in outside
    )
    for row in rows:  # the verdict is the arithmetic of the numbers printed beside it
        assert reference.within(float(row["reference_ms"]), float(row["measured_ms"]))
    assert "reference cells within 0.03 ms or 5%" in done.stdout
