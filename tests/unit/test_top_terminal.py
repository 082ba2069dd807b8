"""`lunlat top` as a user runs it: batch frames, --url against a running exporter, the live view in
a real terminal (tmux), bad input.

The fake host's /proc/diskstats is advanced by known amounts right after a frame is shown, so the
next frame must show exactly what the counters imply: Δtime / Δoperations for the averages, and
Δoperations over the interval the frame itself reports for the rates.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import stub_exporter
from tests.support.exporter_process import (
    LOOPBACK,
    LUNLAT_PORT,
    NODE_EXPORTER_PORT,
    ExporterProcess,
    lunlat_serve,
)
from tests.support.fake_host import FakeHost
from tests.support.polling import wait_until
from tests.support.top_frames import Frame, parse_frame, read_frame
from tests.unit.test_cli import assert_clean_error, lunlat

CONFIG = """\
luns:
  - match: {alias: ora_data}
    database: ORCL
    role: data
    workload: oltp
  - match: {device: sda}
    database: ORCL
    role: log
    workload: oltp
"""
GOALS = "overrides:\n  - match: {role: log}\n    goal_ms: 0.4\n"
DATA_WWID = "3600a098038303053453f463045727a41"
SECTORS_PER_MIB = 2048
# What one step adds, per kernel device: the map's reads at 2.5 ms (above its 1 ms goal), writes at
# 0.5 ms; the log disk's writes at 0.5 ms (above its 0.4 ms goal), reads at 0.3 ms.
STEP = {
    "dm-0": {"reads": 1000, "read_ms": 2500, "writes": 200, "write_ms": 100, "read_sectors": 100 * SECTORS_PER_MIB},
    "sda": {"reads": 10, "read_ms": 3, "writes": 400, "write_ms": 200, "write_sectors": 8 * SECTORS_PER_MIB},
}  # fmt: skip


@dataclasses.dataclass
class Lab:
    host: FakeHost
    config: Path
    goals: Path

    def flags(self) -> list[str]:
        return [
            f"--path.procfs={self.host.procfs}",
            f"--path.sysfs={self.host.sysfs}",
            f"--config.file={self.config}",
        ]

    def advance(self, times: int = 1) -> None:
        """Add `times` steps to the counters and publish them in one rename (never half a file)."""
        for device, step in STEP.items():
            old = self.host.stats[device]
            changes = {name: getattr(old, name) + times * value for name, value in step.items()}
            self.host.stats[device] = dataclasses.replace(old, **changes)
        publish(self.host)


def publish(host: FakeHost) -> None:
    for path, text in (
        (host.procfs / "diskstats", host.diskstats_text()),
        (host.procfs / "1" / "mountinfo", host.mountinfo_text()),
    ):
        temporary = path.with_name(path.name + ".new")
        temporary.write_text(text)
        temporary.replace(path)


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    host = FakeHost(tmp_path / "host")
    host.add_scsi_disk("sda")
    for path in ("sdb", "sdc"):
        host.add_scsi_disk(path, wwid="naa." + DATA_WWID[1:])
    host.add_multipath("dm-0", alias="ora_data", wwid=DATA_WWID, paths=["sdb", "sdc"])
    publish(host)
    config = tmp_path / "lunlat.yml"
    config.write_text(CONFIG)
    goals = tmp_path / "goals.yaml"
    goals.write_text(GOALS)
    return Lab(host, config, goals)


def assert_step_shown(frame: Frame, times: int) -> None:
    """The frame shows `times` steps over its own interval: rates exact to the digit printed."""
    data, log = frame.rows["ora_data"], frame.rows["sda"]
    assert (data["database"], data["role"], data["workload"]) == ("ORCL", "data", "oltp")
    assert (log["database"], log["role"], log["workload"]) == ("ORCL", "log", "oltp")
    # Averages do not depend on the interval: exact.
    assert (data["r_await"], data["w_await"]) == ("2.50", "0.50")
    assert (log["r_await"], log["w_await"]) == ("0.30", "0.50")
    # Rates: Δ / the interval printed (to the ms), within the rounding of the two printed values.
    for row, column, delta in (
        (data, "r/s", STEP["dm-0"]["reads"]),
        (data, "w/s", STEP["dm-0"]["writes"]),
        (log, "w/s", STEP["sda"]["writes"]),
        (data, "rMB/s", 100),
        (log, "wMB/s", 8),
    ):
        expected = times * delta / frame.seconds
        decimals = 1 if column.endswith("/s") and "MB" not in column else 2
        slack = 0.5 * 10**-decimals + expected * 0.0006 / frame.seconds
        assert abs(float(row[column]) - expected) <= slack, (column, row, frame.seconds)


def assert_idle_shown(frame: Frame) -> None:
    for lun in ("ora_data", "sda"):
        row = frame.rows[lun]
        assert (row["r/s"], row["w/s"], row["r_await"], row["w_await"]) == ("0.0", "0.0", "-", "-")


def run_batch(lab: Lab, *source: str) -> list[Frame]:
    """Three one-second frames: idle, one step, two steps (advanced right after each frame)."""
    argv = [sys.executable, "-m", "lunlat", "top", "--batch", "--count=3", "--interval=1", *source]
    argv.append(f"--goals={lab.goals}")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            frames = [read_frame(proc.stdout)]
            lab.advance(1)
            frames.append(read_frame(proc.stdout))
            lab.advance(2)
            frames.append(read_frame(proc.stdout))
            assert proc.stdout.read() == ""
            assert proc.wait() == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            watchdog.cancel()
    return frames


def test_batch_frames_show_what_the_counters_imply(lab: Lab) -> None:
    frames = run_batch(lab, *lab.flags())
    assert [f.number for f in frames] == [1, 2, 3]
    assert frames[0].header[:8] == ["LUN", "database", "role", "workload", "r/s", "w/s", "r_await", "w_await"]
    assert sorted(frames[0].rows) == ["ora_data", "sda"]  # the map by its alias; not its two paths
    assert_idle_shown(frames[0])
    assert_step_shown(frames[1], 1)
    assert_step_shown(frames[2], 2)
    assert frames[2].rows["ora_data"]["r_p99"] == "n/a"  # no histograms locally


def test_url_mode_reads_a_running_exporter(lab: Lab, tmp_path: Path) -> None:
    with ExporterProcess(
        lunlat_serve(*lab.flags()), tmp_path / "serve.log", port_pattern=LUNLAT_PORT
    ) as exporter:
        frames = run_batch(lab, f"--url={exporter.url()}")
    assert_idle_shown(frames[0])
    assert_step_shown(frames[1], 1)
    assert_step_shown(frames[2], 2)
    assert frames[1].rows["sda"]["w_p99"] == "n/a"  # an exporter without biolatency


# A node_exporter built from source (go install, on PATH) first, else Debian's package.
NODE_EXPORTER_NAMES = ("node_exporter", "prometheus-node-exporter")


def _node_exporter(lab: Lab, tmp_path: Path) -> ExporterProcess:
    found = next((shutil.which(n) for n in NODE_EXPORTER_NAMES if shutil.which(n)), None)
    if found is None:
        pytest.skip(f"node_exporter not installed (none of {', '.join(NODE_EXPORTER_NAMES)} on PATH)")
    udev = tmp_path / "udev"
    udev.mkdir()
    return ExporterProcess(
        [
            found,
            f"--path.procfs={lab.host.procfs}",
            f"--path.sysfs={lab.host.sysfs}",
            f"--path.udev.data={udev}",
            "--collector.disable-defaults",
            "--collector.diskstats",
            f"--web.listen-address={LOOPBACK}:0",
        ],
        tmp_path / "node_exporter.log",
        port_pattern=NODE_EXPORTER_PORT,
        name="node_exporter",
    )


@pytest.mark.peer
def test_url_mode_joins_node_exporters_counters_to_lunlats_luns(lab: Lab, tmp_path: Path) -> None:
    """The goals' host layer from node_exporter: lunlat runs without its counters and names the
    LUNs; top shows node_exporter's counters under them, joined by device as the rules join them."""
    lab.goals.write_text(GOALS + "host_layer: {source: node_exporter, selector: 'job=\"node\"'}\n")
    with (
        _node_exporter(lab, tmp_path) as node,
        ExporterProcess(
            lunlat_serve(*lab.flags(), "--no-collector.diskstats.counters"),
            tmp_path / "serve.log",
            port_pattern=LUNLAT_PORT,
        ) as exporter,
    ):
        assert "lunlat_device_reads" not in exporter.scrape().text
        frames = run_batch(lab, f"--url={exporter.url()}", f"--exporter.url={node.url()}")
    # The map by its alias and the log disk; never its two paths, which node_exporter lists too.
    assert sorted(frames[0].rows) == ["ora_data", "sda"]
    assert_idle_shown(frames[0])
    assert_step_shown(frames[1], 1)
    assert_step_shown(frames[2], 2)


def test_url_mode_without_the_counters_names_the_fix(lab: Lab, tmp_path: Path) -> None:
    with ExporterProcess(
        lunlat_serve(*lab.flags(), "--no-collector.diskstats.counters"),
        tmp_path / "serve.log",
        port_pattern=LUNLAT_PORT,
    ) as exporter:
        # Whatever the goals say: lunlat's /metrics names LUNs and has no counter to show.
        result = lunlat("top", "--batch", "--count=1", "--interval=0.2", f"--url={exporter.url()}")
        assert_clean_error(result, 2, "publishes no device counters")
        assert "--exporter.url" in result.stderr and len(result.stderr.splitlines()) == 1
        lab.goals.write_text("host_layer: {source: node_exporter, selector: 'job=\"node\"'}\n")
        result = lunlat("top", "--batch", f"--goals={lab.goals}", f"--url={exporter.url()}")
        assert_clean_error(result, 2, "--exporter.url http://HOST:9100/metrics")
    result = lunlat("top", "--batch", f"--exporter.url={exporter.url()}", *lab.flags())
    assert_clean_error(result, 2, "give lunlat's /metrics as --url too")


def test_local_mode_reads_the_kernels_counters_whatever_the_host_layer(lab: Lab) -> None:
    """With node_exporter as the goals' host layer lunlat's config turns its counters off; top on
    the host still reads /proc/diskstats, the counters node_exporter reads."""
    lab.config.write_text(CONFIG + "diskstats:\n  counters: false\n")
    lab.goals.write_text(GOALS + "host_layer: {source: node_exporter, selector: 'job=\"node\"'}\n")
    frames = run_batch(lab, *lab.flags())
    assert sorted(frames[0].rows) == ["ora_data", "sda"]
    assert_step_shown(frames[1], 1)


def test_windows_exporters_host_layer_is_refused_naming_the_report(lab: Lab) -> None:
    lab.goals.write_text("host_layer: {source: windows_exporter, selector: 'job=\"windows\"'}\n")
    result = lunlat("top", "--batch", f"--goals={lab.goals}", *lab.flags())
    assert_clean_error(result, 2, "the goals' host layer is windows_exporter's")
    assert "lunlat report" in result.stderr and len(result.stderr.splitlines()) == 1


def _exposition(read_buckets: tuple[int, int, int]) -> str:
    below, upto2, total = read_buckets
    labels = 'lun="ora_data",device="dm-0"'
    return (
        "# TYPE lunlat_device_reads_completed_total counter\n"
        f"lunlat_device_reads_completed_total{{{labels}}} {total}\n"
        "# TYPE lunlat_device_io_latency_seconds histogram\n"
        f'lunlat_device_io_latency_seconds_bucket{{{labels},op="read",le="0.001"}} {below}\n'
        f'lunlat_device_io_latency_seconds_bucket{{{labels},op="read",le="0.002"}} {upto2}\n'
        f'lunlat_device_io_latency_seconds_bucket{{{labels},op="read",le="+Inf"}} {total}\n'
        f'lunlat_device_io_latency_seconds_bucket{{{labels},op="write",le="0.001"}} 3\n'
        f'lunlat_device_io_latency_seconds_bucket{{{labels},op="write",le="+Inf"}} 3\n'
    )


@pytest.fixture
def histogram_exporter() -> Iterator[str]:
    """/metrics with a read histogram: the first scrape, then 50 reads under 1 ms and 50 in 1-2 ms."""
    answers = [_exposition((10, 10, 10)), _exposition((60, 110, 110))]
    with stub_exporter.serving(
        "/metrics", lambda: answers.pop(0) if len(answers) > 1 else answers[0]
    ) as port:
        yield f"http://{LOOPBACK}:{port}/metrics"


def test_p99_from_the_exporters_histogram(histogram_exporter: str) -> None:
    result = lunlat("top", "--batch", "--count=1", "--interval=0.2", f"--url={histogram_exporter}")
    assert result.returncode == 0, result.stderr
    frame = parse_frame(result.stdout.rstrip("\n").split("\n"))
    row = frame.rows["ora_data"]
    # rank 99 of 100 reads: 49 of the 50 in (1 ms, 2 ms], interpolated as histogram_quantile does.
    assert row["r_p99"] == "1.98"
    assert row["w_p99"] == "-"  # a histogram, but no write in the interval
    assert (row["database"], row["w_await"]) == ("-", "-")


def test_bad_input_is_one_line_and_exit_2(lab: Lab, tmp_path: Path) -> None:
    closed = _closed_port()
    result = lunlat("top", "--batch", f"--url=http://127.0.0.1:{closed}/metrics")
    assert_clean_error(result, 2, f"cannot read http://127.0.0.1:{closed}/metrics")
    assert len(result.stderr.splitlines()) == 1
    result = lunlat("top", "--batch", *lab.flags(), "--filter=db(")
    assert_clean_error(result, 2, "--filter: bad regular expression 'db('")
    assert len(result.stderr.splitlines()) == 1
    bad = tmp_path / "bad.yml"
    bad.write_text("luns:\n  - match: {device: sda}\n    role: dta\n")
    result = lunlat("top", "--batch", f"--config.file={bad}", f"--path.procfs={lab.host.procfs}")
    assert_clean_error(result, 2, f"config error: {bad}:3: luns[0].role:")
    assert len(result.stderr.splitlines()) == 1
    result = lunlat("top", "--batch", f"--path.procfs={tmp_path / 'none'}")
    assert_clean_error(result, 2, "--path.procfs:")
    result = lunlat("top", "--batch", "--sort=nonsense")
    assert_clean_error(result, 2, "--sort")


def _closed_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- the live view in tmux ---------------------------------------------------------------------


class Tmux:
    """One tmux server of our own (its own socket) running one session."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.name, *args], capture_output=True, text=True, check=True, timeout=10
        )
        return result.stdout

    def screen(self, colours: bool = False) -> str:
        return self("capture-pane", "-p", *(["-e"] if colours else []), "-t", self.name)

    def wait_for(self, pattern: str, timeout: float = 15.0) -> str:
        found: list[str] = []

        def shown() -> bool:
            found[:] = [self.screen()]
            return re.search(pattern, found[0], re.MULTILINE) is not None

        try:
            wait_until(shown, f"{pattern!r} on the screen", timeout=timeout, poll=0.1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- screen ---\n{found[0] if found else ''}") from None
        return found[0]

    def frame(self, number: int) -> Frame:
        screen = self.wait_for(rf"^lunlat top #{number} ")
        lines = screen.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("lunlat top #"))
        body = [line for line in lines[start:-1] if line.strip()]
        return parse_frame([body[0], body[1], *(line for line in body[2:] if not line.startswith("q quit"))])


@pytest.fixture
def tmux(lab: Lab) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux (Debian: apt-get install tmux)")
    session = Tmux(f"lunlat-top-test-{os.getpid()}")
    try:
        yield session
    finally:
        subprocess.run(
            ["tmux", "-L", session.name, "kill-session", "-t", session.name], check=False, capture_output=True
        )
        subprocess.run(["tmux", "-L", session.name, "kill-server"], check=False, capture_output=True)


def start_view(tmux: Tmux, lab: Lab, *extra: str) -> None:
    argv = [
        sys.executable,
        "-m",
        "lunlat",
        "top",
        "--interval=1",
        f"--goals={lab.goals}",
        *lab.flags(),
        *extra,
    ]
    # The shell reports how top ended, then waits, so the pane (and what top left on it) stays.
    command = " ".join(f"'{a}'" for a in argv) + '; echo "top exited $?"; sleep 60'
    tmux("new-session", "-d", "-s", tmux.name, "-x", "150", "-y", "20", command)


# A number drawn in a foreground colour (SGR 31-37: 1 red, 2 green, 3 yellow; 39 is the default).
COLOURED = r"\x1b\[3([0-7])m\s*([0-9.]+)"


def test_live_view_numbers_colours_keys_and_exit(tmux: Tmux, lab: Lab) -> None:
    start_view(tmux, lab)
    assert_idle_shown(tmux.frame(1))
    lab.advance(1)
    shown = tmux.frame(2)
    assert_step_shown(shown, 1)
    # The judged columns coloured at each LUN's goal (no histogram: every I/O judged): the map's 2.50 ms
    # reads red (goal 1 ms), its 0.50 ms writes green; the log disk's 0.50 ms writes red (goal 0.4 ms).
    # The averages beside them stay uncoloured: what breaches is the judged latency's to show.
    coloured = tmux.screen(colours=True)
    data = next(line for line in coloured.splitlines() if "ora_data" in line)
    log = next(line for line in coloured.splitlines() if re.search(r"\bsda\b", line))
    assert re.findall(COLOURED, data) == [("1", "2.50"), ("2", "0.50")], repr(data)
    assert ("1", "0.50") in re.findall(COLOURED, log), repr(log)

    tmux("send-keys", "-t", tmux.name, "s")  # LUN -> database
    tmux.wait_for(r"sort database")
    tmux("send-keys", "-t", tmux.name, "/")
    tmux.wait_for(r"^filter \(regex")
    tmux("send-keys", "-t", tmux.name, "role=?log|^sda$", "Enter")
    screen = tmux.wait_for(r"luns 1/2 sort database filter")
    assert "\nsda " in screen and "ora_data" not in screen
    tmux("send-keys", "-t", tmux.name, "/", "(", "Enter")  # a bad regex: said, the filter stays
    screen = tmux.wait_for(r"bad regular expression")
    assert "luns 1/2" in screen
    tmux("send-keys", "-t", tmux.name, "/", "Enter")  # empty clears it
    tmux.wait_for(r"luns 2/2 ")

    tmux("send-keys", "-t", tmux.name, "q")
    screen = tmux.wait_for(r"^top exited 0$")
    assert "Traceback" not in screen and "r_await" not in screen  # the view's screen is gone
    assert tmux("display-message", "-p", "-t", tmux.name, "#{alternate_on}").strip() == "0"


def test_live_view_survives_resize_and_luns_coming_and_going_and_ctrl_c(tmux: Tmux, lab: Lab) -> None:
    start_view(tmux, lab)
    tmux.frame(1)
    tmux("resize-window", "-t", tmux.name, "-x", "40", "-y", "5")
    time.sleep(0.3)
    tmux("resize-window", "-t", tmux.name, "-x", "150", "-y", "20")
    number = int(re.findall(r"^lunlat top #(\d+) ", tmux.wait_for(r"^lunlat top #"), re.MULTILINE)[0])
    assert "ora_data" in tmux.screen()

    # A new LUN: shown from its second sample on. A vanished one: gone, the rest still updated.
    lab.host.add_scsi_disk("sdd")
    publish(lab.host)
    screen = tmux.wait_for(r"^sdd ", timeout=10)
    assert "ora_data" in screen and f"#{number} " not in screen
    lab.host.remove_block_device("sda")
    publish(lab.host)
    seen = tmux.frame(int(re.findall(r"^lunlat top #(\d+) ", screen, re.MULTILINE)[0]) + 2)
    assert sorted(seen.rows) == ["ora_data", "sdd"]

    tmux("send-keys", "-t", tmux.name, "C-c")
    screen = tmux.wait_for(r"^top exited 0$")
    assert "Traceback" not in screen and "r_await" not in screen
    assert tmux("display-message", "-p", "-t", tmux.name, "#{alternate_on}").strip() == "0"
