"""The lunlat command: exit codes and messages for bad input, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from lunlat.cli import main
from tests.support import hang_guard
from tests.support.skip_unless_installed import needs

LINE = "   8       0 sda 4245 110 316590 2212 3470 1680 48514 3868 0 2788 6076 0 0 0 0 7 11\n"


def lunlat(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`lunlat ARGS…` run to its end (tests/support/hang_guard.py: failing once it has slept 15 s in
    all, however long CI's idle cgroup keeps it waiting for a CPU), its output as text."""
    done = hang_guard.run([sys.executable, "-m", "lunlat", *args], env=env)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.fixture
def procfs(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    (root / "1").mkdir(parents=True)
    (root / "diskstats").write_text(LINE)
    (root / "1" / "mountinfo").write_text("")
    return root


def assert_clean_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr


def test_check_config_valid_and_invalid(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text("luns:\n  - match: {device: sda}\n    role: data\n")
    result = lunlat("check-config", str(good))
    assert result.returncode == 0 and "valid (1 luns entries)" in result.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text("luns:\n  - match: {device: sda}\n    role: dta\n")
    assert_clean_error(lunlat("check-config", str(bad)), 2, f"{bad}:3: luns[0].role:")
    assert_clean_error(lunlat("check-config", str(tmp_path / "absent.yml")), 2, "cannot read")


def test_serve_refuses_bad_flags_and_config(tmp_path: Path, procfs: Path) -> None:
    assert_clean_error(lunlat("serve", "--web.listen-address=nonsense"), 2, "--web.listen-address")
    assert_clean_error(lunlat("serve", "--log.level=verbose"), 2, "--log.level")
    assert_clean_error(lunlat("serve", "--web.max-requests=-3"), 2, "--web.max-requests")
    assert_clean_error(lunlat("serve", "--collector.topology.refresh-interval=0"), 2, "refresh-interval")
    assert_clean_error(lunlat("serve", "--web.telemetry-path=metrics"), 2, "must start with /")
    assert_clean_error(lunlat("serve", f"--path.procfs={tmp_path / 'nowhere'}"), 2, "--path.procfs")
    bad = tmp_path / "bad.yml"
    bad.write_text("diskstats:\n  include: '('\n")
    assert_clean_error(
        lunlat("serve", f"--path.procfs={procfs}", f"--config.file={bad}"), 2, "diskstats.include", ":2:"
    )


def test_serve_reports_a_port_in_use(procfs: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = lunlat("serve", f"--path.procfs={procfs}", f"--web.listen-address=127.0.0.1:{port}")
    assert_clean_error(result, 1, "cannot listen", str(port))


def test_serve_scrapes_logs_json_and_stops_on_sigterm(procfs: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0", f"--path.procfs={procfs}",
            f"--path.sysfs={tmp_path / 'sys'}", "--log.format=json"]  # fmt: skip
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stderr is not None
            first = json.loads(proc.stderr.readline())
            assert first["msg"] == "listening" and first["level"] == "info"
            with urllib.request.urlopen(f"http://127.0.0.1:{first['port']}/metrics", timeout=10) as resp:
                body = resp.read().decode()
            assert (
                'lunlat_device_reads_completed_total{lun="sda",device="sda",kind="lun",database="",role="",workload=""} 4245'
                in body
            )
            assert (
                'lunlat_device_read_time_seconds_total{lun="sda",device="sda",kind="lun",database="",role="",workload=""} 2212e-3'
                in body
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
            rest = [json.loads(line) for line in proc.stderr.read().splitlines() if line.strip()]
            assert any(r["msg"] == "shutting down" and r["signal"] == "SIGTERM" for r in rest)
        finally:
            if proc.poll() is None:
                proc.kill()


@needs("oracledb")
def test_serve_with_an_unreachable_oracle_target_still_serves_the_host_layer(
    procfs: Path, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "lunlat.yaml"
    config.write_text(
        f"oracle:\n  - name: Oracle\n    dsn: 127.0.0.1:{port}/ORCL\n    user: lunlat\n"
        "    password_env: LUNLAT_TEST_CLI_ORACLE_PASSWORD\n    timeout_seconds: 1\n"
    )
    env = {**os.environ, "LUNLAT_TEST_CLI_ORACLE_PASSWORD": "cli-secret-value"}
    checked = lunlat("check-config", str(config), env=env)  # check-config reads the password source
    assert checked.returncode == 0 and "1 Oracle targets" in checked.stdout
    argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0", f"--path.procfs={procfs}",
            f"--path.sysfs={tmp_path / 'sys'}", "--log.format=json", f"--config.file={config}"]  # fmt: skip
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            assert proc.stderr is not None
            first = json.loads(proc.stderr.readline())
            assert first["sources"] == "diskstats,oracle:Oracle"
            with urllib.request.urlopen(f"http://127.0.0.1:{first['port']}/metrics", timeout=10) as resp:
                body = resp.read().decode()
            assert (
                'lunlat_device_reads_completed_total{lun="sda",device="sda",kind="lun",database="",role="",workload=""} 4245'
                in body
            )
            assert 'lunlat_source_up{source="oracle:Oracle"} 0' in body
            assert 'lunlat_source_errors_total{source="oracle:Oracle",reason="connect_failed"} 1' in body
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
            logs = proc.stderr.read()
            assert "DPY-6005" in logs and "cli-secret-value" not in logs
        finally:
            if proc.poll() is None:
                proc.kill()


@needs("oracledb")
def test_serve_warns_of_an_unreadable_password_file_and_still_serves(procfs: Path, tmp_path: Path) -> None:
    # The file may be mounted later (a Kubernetes secret): serve warns and starts; check-config refuses.
    config = tmp_path / "lunlat.yaml"
    config.write_text(
        "mssql:\n  - name: SQL1\n    server: 127.0.0.1,1\n    user: lunlat\n"
        f"    password_file: {tmp_path / 'not-yet'}\n    timeout_seconds: 1\n"
    )
    assert_clean_error(lunlat("check-config", str(config)), 2, "mssql[0].password_file", ":5:")
    argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0", f"--path.procfs={procfs}",
            f"--path.sysfs={tmp_path / 'sys'}", "--log.format=json", f"--config.file={config}"]  # fmt: skip
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stderr is not None
            warning = json.loads(proc.stderr.readline())
            assert warning["level"] == "warn" and warning["msg"] == "database password not readable yet"
            assert warning["key"] == "mssql[0].password_file" and "No such file" in warning["err"]
            started = json.loads(proc.stderr.readline())
            assert started["sources"] == "diskstats,mssql:SQL1"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize(
    ("command", "now"),
    [("rules", "lunlat-rules generate"), ("dashboards", "lunlat-dashboards generate"), ("lab", "lunlat-lab")],
)
def test_commands_that_left_lunlat_say_where_they_went(
    command: str,
    now: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The generators and the lab are distributions of their own: the old spelling names the new one."""
    monkeypatch.chdir(tmp_path)
    assert main([command, "generate"]) == 2
    assert f"`lunlat {command}` is now `{now}" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written
