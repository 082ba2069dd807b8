"""The lab on the real kernel: accuracy against fio, interference through the shared array, cleanup."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import lunlat_lab
from lunlat_lab import commands, measure, native, system
from lunlat_lab.daemon_engines import ENGINES, Engine
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.errors import LabError
from lunlat_lab.fio import jobs, process, report
from lunlat_lab.state import LabState
from tests.support.exporter_process import LUNLAT_PORT, ExporterProcess
from tests.support.lab_host import lab_skip_reason

pytestmark = pytest.mark.lab

# The accuracy the lab reaches, exporter vs fio's completion latency (see docs/lab.md).
TOLERANCE = 0.05


@pytest.fixture(autouse=True)
def _lab_host() -> None:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)


def write_lab(path: Path, body: str) -> Path:
    path.write_text("size_mib: 64\n" + textwrap.dedent(body))
    return path


@pytest.fixture
def lab_dir(tmp_path: Path) -> Iterator[Path]:
    state_dir = tmp_path / "lab"
    try:
        yield state_dir
    finally:
        commands.down(state_dir)


ACCURACY_LAB = """\
  arrays:
    fast_array: {slots: 64, bandwidth_mib_s: 100000}
    slow_array: {slots: 64, bandwidth_mib_s: 100000}
  luns:
    - {name: fast, database: D, engine: mssql, role: data, workload: oltp, array: fast_array,
       latency: {read_ms: 0.5, write_ms: 0.5, jitter: 0.3}}
    - {name: slow, database: D, engine: mssql, role: log, workload: oltp, array: slow_array,
       latency: {read_ms: 2.0, write_ms: 2.0, jitter: 0.3}}
  workloads:
    probe: {kind: oltp, luns: [fast, slow], block_size: 4k, read_percent: 50, iodepth: 1}
"""


# `alone` (tests/pytest.ini): beside the other lanes, even in their idle cpu group, fio's own time
# around each I/O swings by more than TOLERANCE of a 0.3 ms LUN: three fresh-clone CI runs here
# (2026-11-28/29) failed the python engine's fast reads at 0.307 ms against fio's 0.289, while four
# runs alone on 2026-11-29 kept every figure within 2.5 % of fio's.
@pytest.mark.alone
@pytest.mark.parametrize("engine", ENGINES)
def test_exporter_average_agrees_with_fio_completion_latency(
    tmp_path: Path, lab_dir: Path, engine: Engine
) -> None:
    config = write_lab(tmp_path / "lab.yaml", ACCURACY_LAB)
    state = commands.up(config, lab_dir, engine)
    assert state.engine == engine
    lab = commands.load_lab(config)
    argv = [
        sys.executable,
        "-m",
        "lunlat",
        "serve",
        "--web.listen-address=127.0.0.1:0",
        f"--config.file={state.exporter_config}",  # written by `up`: the lab's LUNs as luns: entries
    ]
    with ExporterProcess(argv, tmp_path / "exporter.log", port_pattern=LUNLAT_PORT) as exporter:
        before = measure.from_exposition(exporter.scrape().text)
        out = tmp_path / "fio"
        out.mkdir()
        process.run(jobs.job_file(lab, ["probe"], state.loops, 15), out, out / "fio.json", timeout=120)
        after = measure.from_exposition(exporter.scrape().text)
    truth = report.results(report.load(out / "fio.json"))
    seen = []
    measured: dict[tuple[str, str], float] = {}
    for lun in ("fast", "slow"):
        device = Path(state.loops[lun]).name
        avg = measure.average(before[device], after[device])
        for op, ops, exporter_ms in (("read", avg.reads, avg.read_ms), ("write", avg.writes, avg.write_ms)):
            result = truth[lun].op(op)
            assert result is not None and result.ios > 100 and result.lat_mean_s is not None
            assert ops == result.ios, f"{lun} {op}: every fio I/O is one block request (4k random, no merges)"
            assert exporter_ms is not None
            # The probe's libaio requests enter the block layer inside io_submit(), before fio's
            # clat starts (report.OpResult.lat_mean_s): the block layer's mean can exceed clat's
            # (it did, beside other work) but never lat's, fio's whole time from the I/O's creation.
            # lat holds fio's own work around each I/O too (0.03 ms here, 6 % of the fast LUN), so
            # the agreement is with clat from below; from above, the block layer holds the part of
            # io_submit() after the request entered it, which is most of lat - clat when fio's
            # submission is slow (a fresh-clone CI run on 2026-11-30, alone: exporter 0.452 ms, clat
            # 0.417, lat 0.537), as lab/tests/integration/test_lab_report.py bounds its cells.
            # /proc/diskstats sums whole milliseconds (block/genhd.c diskstats_show): a mean over
            # `ops` I/Os is off by up to 1/ops ms.
            fio_ms, total_ms = result.clat_mean_s * 1000, result.lat_mean_s * 1000
            seen.append(
                f"{lun} {op}: exporter {exporter_ms:.4f} ms, fio {fio_ms:.4f} ms (lat {total_ms:.4f})"
            )
            assert exporter_ms <= total_ms + 1 / ops, seen[-1]
            assert exporter_ms >= fio_ms * (1 - TOLERANCE) - 1 / ops, seen[-1]
            measured[(lun, op)] = exporter_ms
    print("\n".join(seen))
    # The injected delays show. How close to target depends on the host: the overhead calibrated at
    # `up` is that of paced I/O, and steal time on a shared VM adds its own (see docs/lab.md, "Limits, measured, not hidden").
    for op in ("read", "write"):
        assert 1.5 < measured[("slow", op)] < 3.0, seen
        assert measured[("slow", op)] > 2 * measured[("fast", op)], seen


INTERFERENCE_LAB = """\
  arrays:
    shared: {slots: 2, bandwidth_mib_s: 50}
  luns:
    - {name: oltp_data, database: D, engine: oracle, role: data, workload: oltp, array: shared,
       latency: {read_ms: 0.5, write_ms: 0.3, jitter: 0.2}}
    - {name: dss_data, database: W, engine: oracle, role: data, workload: dss, array: shared,
       latency: {read_ms: 0.5, write_ms: 0.3, jitter: 0.2}}
  workloads:
    oltp: {kind: oltp, luns: [oltp_data], block_size: 8k, read_percent: 90, iodepth: 1, rate_iops: 100}
    dss: {kind: dss, luns: [dss_data], block_size: 512k, iodepth: 4}
  phases:
    oltp: [oltp]
    oltp+dss: [oltp, dss]
"""


def oltp_read_ms(device: str, seconds: float) -> float:
    name = Path(device).name
    before = measure.from_diskstats()[name]
    time.sleep(seconds)
    avg = measure.average(before, measure.from_diskstats()[name])
    assert avg.read_ms is not None, "OLTP must be reading"
    return avg.read_ms


def test_dss_on_the_shared_array_raises_oltp_latency_and_stopping_it_lowers_it(
    tmp_path: Path, lab_dir: Path
) -> None:
    state = commands.up(write_lab(tmp_path / "lab.yaml", INTERFERENCE_LAB), lab_dir)
    device = state.loops["oltp_data"]
    commands.phase(lab_dir, "oltp")
    time.sleep(1)
    alone = oltp_read_ms(device, 6)
    commands.phase(lab_dir, "oltp+dss")
    time.sleep(1)
    beside_dss = oltp_read_ms(device, 6)
    commands.phase(lab_dir, "oltp")
    time.sleep(1)
    after = oltp_read_ms(device, 6)
    commands.phase(lab_dir, "idle")
    print(f"OLTP read latency: alone {alone:.3f} ms, beside DSS {beside_dss:.3f} ms, after {after:.3f} ms")
    assert beside_dss > 2 * alone
    assert after < beside_dss / 2


def test_set_latency_changes_a_lun_at_run_time(tmp_path: Path, lab_dir: Path) -> None:
    state = commands.up(write_lab(tmp_path / "lab.yaml", INTERFERENCE_LAB), lab_dir, log_level="debug")
    commands.phase(lab_dir, "oltp")
    time.sleep(1)
    base = oltp_read_ms(state.loops["oltp_data"], 4)
    commands.set_latency(lab_dir, "oltp_data", 3.0, 3.0, 0.0)
    time.sleep(1)
    raised = oltp_read_ms(state.loops["oltp_data"], 4)
    assert 2.5 < raised < 5.0  # 3 ms injected; a busy shared host adds its own on top
    # The lab's latency is a target that absorbs the FUSE overhead (1.4 ms measured on a slow host),
    # so the step is 3 ms minus that overhead, not 3 ms: at least 1 ms of change proves it.
    assert raised > base + 1
    _, rows = commands.status(lab_dir, 1.0)
    (row,) = [r for r in rows if r.lun == "oltp_data"]
    assert (row.set_read_ms, row.set_write_ms) == (3.0, 3.0)
    assert row.live.read_ms is not None and row.live.read_ms > 2
    # At debug the live calibration logs each window it measured: the kernel's and the daemon's mean
    # for the LUN and op, the daemon's at least its hold (3 ms less the estimated overhead).
    windows = [
        dict(re.findall(r"(\w+)=(\S+)", line))
        for line in (lab_dir / "fuse.log").read_text().splitlines()
        if 'msg="calibration window"' in line and "lun=oltp_data op=read " in line
    ]
    assert windows
    assert max(float(w["daemon_ms"]) for w in windows) > 2
    assert all(float(w["kernel_ms"]) > 0 and int(w["ios"]) > 0 for w in windows)


def _lab_leftovers(state_dir: Path) -> list[str]:
    found = [f"loop {d}" for d in system.loops_under(state_dir / "mnt")]
    if system.is_mounted(state_dir / "mnt"):
        found.append("mount")
    found += [
        f"process {p.pid}: {p.info.get('cmdline')}" for p in system.processes_mentioning(str(state_dir))
    ]
    if state_dir.exists():
        found.append("state directory")
    return found


def _native_daemons(state_dir: Path) -> list[int]:
    return [
        p.pid
        for p in system.processes_mentioning(str(state_dir))
        if Path((p.info.get("cmdline") or [""])[0]).name == native.BINARY_NAME
    ]


@pytest.mark.parametrize(
    "kill",
    ["", "daemon", "native"],
    ids=["up-killed", "up-and-fuse-daemon-killed", "up-and-native-daemon-killed"],
)
def test_down_after_a_killed_up_leaves_nothing_behind(tmp_path: Path, lab_dir: Path, kill: str) -> None:
    """`daemon`: the daemon `up` started (with the native engine its C child then keeps serving the
    loops); `native`: the C daemon itself (a stale mount)."""
    config = DEFAULT_LAB_FILE
    argv = [sys.executable, "-m", "lunlat_lab", "up", f"--config={config}", f"--state-dir={lab_dir}"]
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as up:
        # Kill it once it has made a FUSE mount and loop devices, while it is still at work.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = LabState.load(lab_dir)
            if state is not None and len(state.loops) >= 2:
                break
            time.sleep(0.01)
        up.send_signal(signal.SIGKILL)
        up.wait()
    state = LabState.load(lab_dir)
    assert state is not None and state.loops, "the kill should land after loop devices exist"
    assert system.loops_under(lab_dir / "mnt")
    if kill == "daemon" and state.fuse_pid:
        os.kill(state.fuse_pid, signal.SIGKILL)
        time.sleep(0.2)
    if kill == "native":
        children = _native_daemons(lab_dir)
        assert children, "the lab runs the native engine by default"
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    done = commands.down(lab_dir)
    assert any("detached" in line for line in done)
    assert _lab_leftovers(lab_dir) == []
    # And down is idempotent.
    assert commands.down(lab_dir) == []


def test_up_refuses_when_a_lab_is_already_there(tmp_path: Path, lab_dir: Path) -> None:
    config = write_lab(tmp_path / "lab.yaml", INTERFERENCE_LAB)
    commands.up(config, lab_dir)
    with pytest.raises(LabError, match="already up"):
        commands.up(config, lab_dir)


def test_lab_refuses_clearly_when_not_root(tmp_path: Path) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "lunlat_lab",
            "up", f"--state-dir={tmp_path / 'lab'}"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path)
    if ("Permission denied" in result.stderr and "lunlat" not in result.stderr) or (
        "No module named lunlat" in result.stderr
    ):
        # e.g. a checkout under a 0700 directory (mktemp -d): the editable install is out of reach
        pytest.skip("the Python environment or the checkout is not readable by an unprivileged user here")
    assert result.returncode == 2, result.stderr
    assert "must run as root" in result.stderr
    assert "Traceback" not in result.stderr


def test_up_without_the_built_daemon_says_how_to_get_it_in_one_line(tmp_path: Path) -> None:
    """An install without the native daemon (the lab's package copied without it, first on the path):
    `up` compiles nothing, refuses, exit 2, one line naming the Debian packages to build it with."""
    packages = tmp_path / "site"
    shutil.copytree(
        Path(lunlat_lab.__file__).parent,
        packages / "lunlat_lab",
        ignore=shutil.ignore_patterns(native.BINARY_NAME, "__pycache__"),
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(packages), *sys.path])}
    argv = [sys.executable, "-m", "lunlat_lab", "up", f"--state-dir={tmp_path / 'lab'}"]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "native lab daemon" in line]
    assert str(packages / "lunlat_lab" / "native" / native.BINARY_NAME) in line
    assert "reinstall lunlat-lab with the Debian packages gcc libfuse3-dev pkg-config installed" in line
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "lab").exists()
    # The Python engine needs none of them.
    python = subprocess.run([*argv, "--engine", "nope"], capture_output=True, text=True, check=False, env=env)
    assert python.returncode == 2 and "unknown engine 'nope'; the lab has: native, python" in python.stderr
