"""`lunlat top` on the lab's latency-controlled LUNs: each LUN shows a latency near the one the lab
sets (3 ms and 0.5 ms, plus what a busy shared host adds), on the LUN the config labels."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
from lunlat_lab import commands  # noqa: E402
from tests.support.lab_host import lab_skip_reason  # noqa: E402
from tests.support.top_frames import Frame, parse_frame  # noqa: E402

pytestmark = pytest.mark.lab

LAB = """\
size_mib: 64
arrays:
  fast_array: {slots: 64, bandwidth_mib_s: 100000}
  slow_array: {slots: 64, bandwidth_mib_s: 100000}
luns:
  - {name: fast, database: TOPDB, engine: oracle, role: data, workload: oltp, array: fast_array,
     latency: {read_ms: 0.5, write_ms: 0.5, jitter: 0.1}}
  - {name: slow, database: TOPDB, engine: oracle, role: log, workload: oltp, array: slow_array,
     latency: {read_ms: 3.0, write_ms: 3.0, jitter: 0.1}}
workloads:
  probe: {kind: oltp, luns: [fast, slow], block_size: 8k, read_percent: 90, iodepth: 1, rate_iops: 100}
phases:
  probe: [probe]
"""


@pytest.fixture
def lab_dir(tmp_path: Path) -> Iterator[Path]:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    state_dir = tmp_path / "lab"
    try:
        yield state_dir
    finally:
        commands.down(state_dir)


def test_top_shows_each_lun_near_the_latency_the_lab_sets(tmp_path: Path, lab_dir: Path) -> None:
    config = tmp_path / "lab.yaml"
    config.write_text(textwrap.dedent(LAB))
    state = commands.up(config, lab_dir)
    commands.phase(lab_dir, "probe")
    argv = ["top", "--batch", "--count=2", "--interval=4", f"--config.file={state.exporter_config}"]
    result = subprocess.run(
        [sys.executable, "-m", "lunlat", *argv], capture_output=True, text=True, timeout=60, check=False
    )
    commands.phase(lab_dir, "idle")
    assert result.returncode == 0, result.stderr
    frames = [parse_frame(block.splitlines()) for block in result.stdout.strip().split("\n\n")]
    last: Frame = frames[-1]
    rows = {r["role"]: r for r in last.rows.values() if r["database"] == "TOPDB"}
    assert set(rows) == {"data", "log"}, result.stdout
    # The lab's LUNs are its loop devices, named and labelled from the config `up` wrote.
    assert {rows["data"]["LUN"], rows["log"]["LUN"]} == {Path(state.loops[n]).name for n in ("fast", "slow")}
    fast, slow = float(rows["data"]["r_await"]), float(rows["log"]["r_await"])
    print(result.stdout)
    # 3 ms injected; a busy shared host adds its own on top (as the lab's own set-latency test).
    assert 2.5 < slow < 5.0
    assert slow > 2 * fast
    assert 60 < float(rows["log"]["r/s"]) < 120  # 90 % of 100 IOPS are reads
