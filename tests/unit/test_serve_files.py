"""`lunlat serve` and the files it is given. A password file that cannot be read (a FIFO, /dev/zero,
missing, unreadable) is one warning and a target down with the reason, never a server that does not
start (docs/configuration.md, "serve only warns"); a config or web config that is no regular file is refused at
start, at once, naming the file and what it is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess
from tests.support.exposition_samples import samples
from tests.support.hostile_files import PROMPTLY, lunlat_argv, make_fifo
from tests.support.skip_unless_installed import needs

DISKSTATS = "   8      0 sda 4245 110 316590 2212 3470 1680 48514 3868 0 2788 6076 0 0 0 0 7 11\n"
SECRET_READERS = {
    "fifo": "is a FIFO (named pipe), not a regular file",
    "zero": "is a character device, not a regular file",
    "missing": "No such file or directory",
    "unreadable": "Permission denied",
}


def host(tmp_path: Path) -> list[str]:
    """Flags for a fake /proc with one disk and no sysfs."""
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "diskstats").write_text(DISKSTATS)
    (proc / "1" / "mountinfo").write_text("")
    return [f"--web.listen-address={LOOPBACK}:0", f"--path.procfs={proc}", f"--path.sysfs={tmp_path / 'sys'}"]


def secret_file(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "secret"
    if kind == "fifo":
        make_fifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "unreadable":
        path.write_text("pw\n")
        path.chmod(0)
    return path


# A disk with no config entry: a LUN with no roles.
DISK_SDA = (
    ("database", ""),
    ("device", "sda"),
    ("kind", "lun"),
    ("lun", "sda"),
    ("role", ""),
    ("workload", ""),
)


@needs("oracledb")
@pytest.mark.parametrize("kind", list(SECRET_READERS))
def test_serve_starts_and_serves_the_host_when_a_password_file_cannot_be_read(
    tmp_path: Path, kind: str
) -> None:
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    secret = secret_file(tmp_path, kind)
    config = tmp_path / "lunlat.yml"
    config.write_text(
        f"oracle:\n  - {{name: O, dsn: '127.0.0.1:1/ORCL', user: u, password_file: '{secret}'}}\n",
        encoding="utf-8",
    )
    argv = lunlat_argv("serve", *host(tmp_path), f"--config.file={config}")
    log = tmp_path / "lunlat.log"
    with ExporterProcess(
        argv, log, port_pattern=LUNLAT_PORT, start_timeout=PROMPTLY, name="lunlat"
    ) as exporter:
        for _ in range(2):
            text = exporter.scrape(timeout=PROMPTLY).text
            values = samples(text)
            assert values[("lunlat_source_up", (("source", "diskstats"),))] == 1
            assert values[("lunlat_source_up", (("source", "oracle:O"),))] == 0
            assert ("lunlat_device_reads_completed_total", DISK_SDA) in values
        lines = exporter.log_text().splitlines()
    warned = [line for line in lines if "database password not readable yet" in line]
    assert len(warned) == 1, lines
    assert "target=O" in warned[0] and "key=oracle[0].password_file" in warned[0]
    assert SECRET_READERS[kind] in warned[0]
    # Down with the reason, said once (the scraper logs a persistent failure once).
    failed = [line for line in lines if "source failed" in line and "source=oracle:O" in line]
    assert len(failed) == 1 and f"cannot read {secret}" in failed[0] and SECRET_READERS[kind] in failed[0]
    assert "Traceback" not in "\n".join(lines)


def serve_refused(*flags: str) -> str:
    """stderr of a `lunlat serve` that must exit 2 at once."""
    result = subprocess.run(
        lunlat_argv("serve", f"--web.listen-address={LOOPBACK}:0", *flags),
        capture_output=True,
        text=True,
        timeout=PROMPTLY,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize("flag", ["--config.file", "--web.config.file"])
def test_serve_refuses_a_config_that_is_a_fifo_or_a_device(tmp_path: Path, flag: str) -> None:
    fifo = make_fifo(tmp_path / "fifo.yml")
    zero = tmp_path / "zero.yml"
    zero.symlink_to("/dev/zero")
    kind = "web config" if flag == "--web.config.file" else "config"
    assert serve_refused(f"{flag}={fifo}").startswith(
        f"lunlat: {kind} error: {fifo}: is a FIFO (named pipe), not a regular file"
    )
    assert serve_refused(f"{flag}={zero}").startswith(
        f"lunlat: {kind} error: {zero}: is a character device, not a regular file"
    )
