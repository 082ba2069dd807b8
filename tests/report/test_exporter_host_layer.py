"""`lunlat report` with the goals' host layer read from another exporter (`host_layer: node_exporter`
or `windows_exporter`, docs/host-layer.md): a real Prometheus holding backfilled series as those
exporters print them beside lunlat's (names, roles, database files), and the report's host rows are
the exporter's latency under lunlat's LUN, database and role, through the rules' own PromQL
(`lunlat.promql.layers.host_layer`)."""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.goals import load_goals
from lunlat.report.api import Prometheus
from lunlat.report.collect import Collector, parse_phases
from tests.report import synthetic
from tests.report.backfill import backfilled
from tests.support import prometheus_server


@dataclass(frozen=True, slots=True)
class Stack:
    api: prometheus_server.PromApi
    start: int
    end: int


def _start() -> int:
    now = int(time.time())
    return now - 2 * 3600 - now % 60  # whole minutes, well inside the default retention


def _run(stack: Stack, out: Path) -> subprocess.CompletedProcess[str]:
    """`lunlat report` of the whole range in three phases, with the goals in `out`/goals.yaml."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lunlat",
            "report",
            f"--prometheus.url={stack.api.base}",
            f"--from={stack.start}",
            f"--to={stack.end}",
            *(f"--phase={name}={begin}..{end}" for name, begin, end in synthetic.bounds(stack.start)),
            f"--goals={out / 'goals.yaml'}",
            f"--output={out / 'report'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _report(stack: Stack, goals: str, out: Path) -> list[dict[str, str]]:
    (out / "goals.yaml").write_text(goals, encoding="utf-8")
    done = _run(stack, out)
    assert done.returncode == 0, done.stderr
    with (out / "report" / "tables.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# --- node_exporter ------------------------------------------------------------------------------

NODE_GOALS = """\
selector: 'job="lunlat"'
host_layer:
  source: node_exporter
  selector: 'job="node"'
"""


@pytest.fixture(scope="module")
def node_stack() -> Iterator[Stack]:
    start = _start()
    with backfilled(synthetic.openmetrics(start, host="node_exporter")) as api:
        end = start + len(synthetic.PHASES) * synthetic.PHASE_SECONDS
        assert api.query("count(node_disk_reads_completed_total)", at=end), "backfill not loaded"
        yield Stack(api, start, end)


@pytest.fixture(scope="module")
def node_rows(node_stack: Stack) -> Iterator[list[dict[str, str]]]:
    with tempfile.TemporaryDirectory(prefix="lunlat-report-out-") as out:
        yield _report(node_stack, NODE_GOALS, Path(out))


def test_node_exporter_host_rows_are_its_latency_under_lunlats_luns(node_rows: list[dict[str, str]]) -> None:
    rows = [r for r in node_rows if r["layer"] == "host"]
    luns = {lun.lun: lun for lun in synthetic.LUNS}
    # Every LUN with I/O, once: never the path device (sdb), the host's own disk (sda, no
    # lunlat_lun_info) or another host's dm-0 (10x slower).
    expected = synthetic.cells_with_io()
    assert {(r["phase"], r["lun"], r["op"]) for r in rows if r["avg_latency_seconds"]} == expected
    for row in rows:
        lun = luns[row["lun"]]
        iops, latency = synthetic.load_at(lun, row["phase"], row["op"])
        # lunlat's job and instance (the rules' series), the LUN's roles, and its device.
        assert (row["instance"], row["database"], row["role"], row["workload"], row["device"]) == (
            synthetic.INSTANCE,
            lun.database,
            lun.role,
            lun.workload,
            lun.device,
        )
        assert float(row["iops"]) == pytest.approx(iops, rel=1e-9, abs=1e-9)
        assert float(row["throughput_bytes"]) == pytest.approx(iops * synthetic.IO_BYTES, rel=1e-9, abs=1e-9)
        if iops:
            assert float(row["avg_latency_seconds"]) == pytest.approx(latency, rel=1e-9)


def test_node_exporter_database_rows_keep_the_device_of_their_lun(node_rows: list[dict[str, str]]) -> None:
    rows = [r for r in node_rows if r["layer"] == "db"]
    devices = {lun.lun: lun.device for lun in synthetic.LUNS if lun.engine}
    assert rows and {r["lun"] for r in rows} == set(devices)
    assert all(r["device"] == devices[r["lun"]] for r in rows)


# --- windows_exporter ---------------------------------------------------------------------------

WIN_JOB = "lunlat-win"
WIN_INSTANCE = "monitor:9422"  # lunlat runs beside, not on, the SQL Server host
WIN_GOALS = f"""\
selector: 'job="{WIN_JOB}"'
host_layer:
  source: windows_exporter
  selector: 'job="windows"'
"""
# (SQL Server's volume_mount_point as lunlat publishes it in `lun`, windows_exporter's `volume`:
# the same path without the trailing backslash, prometheus-community/windows_exporter
# internal/collector/logical_disk/logical_disk.go getAllMountedVolumes; docs/host-layer.md), role, load.
VOLUMES: tuple[tuple[str, str, str, tuple[tuple[float, float, float, float], ...]], ...] = (
    ("D:\\", "D:", "data", ((200, 0.0005, 50, 0.0004), (240, 0.0009, 50, 0.0004), (260, 0.0012, 60, 0.0005))),
    (
        "C:\\MountPoints\\Log1\\",
        "C:\\MountPoints\\Log1",
        "log",
        ((10, 0.0003, 80, 0.0006), (10, 0.0003, 80, 0.0007), (10, 0.0003, 90, 0.0009)),
    ),
)
# windows_exporter's logical_disk counters (docs/collector.logical_disk.md, label `volume`): the
# latency sums are the raw numerators of "Avg. Disk sec/Read" and "Avg. Disk sec/Write" in seconds
# (logical_disk.go; lunlat.promql.layers.WINDOWS_LOGICAL_DISK cites the scale), so Δ time / Δ reads is the latency.
WIN_COUNTERS: dict[str, str] = {
    "windows_logical_disk_reads_total": "reads",
    "windows_logical_disk_writes_total": "writes",
    "windows_logical_disk_read_latency_seconds_total": "read_time",
    "windows_logical_disk_write_latency_seconds_total": "write_time",
    "windows_logical_disk_read_bytes_total": "read_bytes",
    "windows_logical_disk_write_bytes_total": "write_bytes",
}
# "% Disk Read Time" as seconds: the disk's busy time, never a latency sum; here 1 s per second.
BUSY = "windows_logical_disk_read_seconds_total"


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\")


def windows_openmetrics(start: int) -> str:
    out: list[str] = []
    # (SQL Server's volume name, windows_exporter's, the load on it)
    luns = [
        (name, volume, synthetic.Lun(name, "", "SQLPROD1", role, "oltp", load))
        for name, volume, role, load in VOLUMES
    ]
    # Another SQL Server's D:, slow: never joined to SQLPROD1's files; and SQLPROD1's C:, no file on it.
    others = [
        ("sqlhost2:9182", "SQLPROD2", "D:", synthetic.Lun("", "", "", "", "", ((100, 0.02, 100, 0.02),) * 3)),
        ("sqlhost1:9182", "SQLPROD1", "C:", synthetic.Lun("", "", "", "", "", ((100, 0.03, 100, 0.03),) * 3)),
    ]
    for name, what in WIN_COUNTERS.items():
        out.append(f"# TYPE {name.removesuffix('_total')} counter")
        for host, database, volume, disk in [
            ("sqlhost1:9182", "SQLPROD1", v, spec) for _, v, spec in luns
        ] + others:
            labels = f'job="windows",instance="{host}",database="{database}",volume="{_esc(volume)}"'
            out.extend(f"{name}{{{labels}}} {v!r} {t}" for t, v in synthetic.counter(disk, start, what))
    out.append(f"# TYPE {BUSY.removesuffix('_total')} counter")
    for _, volume, _spec in luns:
        labels = f'job="windows",instance="sqlhost1:9182",database="SQLPROD1",volume="{_esc(volume)}"'
        out.extend(f"{BUSY}{{{labels}}} {float(t - start)!r} {t}" for t in synthetic.timestamps(start))
    for spec, what in (
        (mssql_metrics.MSSQL_FILE_READS, "reads"),
        (mssql_metrics.MSSQL_FILE_WRITES, "writes"),
        (mssql_metrics.MSSQL_FILE_READ_STALL, "read_time"),
        (mssql_metrics.MSSQL_FILE_WRITE_STALL, "write_time"),
    ):
        out.append(f"# TYPE {spec.name.removesuffix('_total')} counter")
        for name, _volume, load in luns:
            labels = (
                f'job="{WIN_JOB}",instance="{WIN_INSTANCE}",database="SQLPROD1",workload="oltp",db="sales",'
                f'db_instance="SQLHOST1",file="{_esc(name)}sales.mdf",role="{load.role}",lun="{_esc(name)}"'
            )
            series = synthetic.counter(load, start, what, synthetic.DB_EXTRA_SECONDS)
            out.extend(f"{spec.name}{{{labels}}} {v!r} {t}" for t, v in series)
    out.append("# EOF")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def windows_stack() -> Iterator[Stack]:
    start = _start()
    with backfilled(windows_openmetrics(start)) as api:
        end = start + len(synthetic.PHASES) * synthetic.PHASE_SECONDS
        assert api.query("count(windows_logical_disk_reads_total)", at=end), "backfill not loaded"
        yield Stack(api, start, end)


def test_windows_exporter_host_rows_are_each_volumes_latency_under_its_files_lun(
    windows_stack: Stack, tmp_path: Path
) -> None:
    rows = [r for r in _report(windows_stack, WIN_GOALS, tmp_path) if r["layer"] == "host"]
    loads = {lun: (role, load) for lun, _volume, role, load in VOLUMES}
    assert {(r["phase"], r["lun"], r["op"]) for r in rows} == {
        (phase, lun, op) for phase in synthetic.PHASES for lun in loads for op in ("read", "write")
    }
    for row in rows:
        role, load = loads[row["lun"]]
        read_iops, read_lat, write_iops, write_lat = load[synthetic.PHASES.index(row["phase"])]
        iops, latency = (read_iops, read_lat) if row["op"] == "read" else (write_iops, write_lat)
        assert (row["instance"], row["database"], row["role"], row["workload"]) == (
            WIN_INSTANCE,
            "SQLPROD1",
            role,
            "oltp",
        )
        assert float(row["iops"]) == pytest.approx(iops, rel=1e-9)
        assert float(row["throughput_bytes"]) == pytest.approx(iops * synthetic.IO_BYTES, rel=1e-9)
        assert float(row["avg_latency_seconds"]) == pytest.approx(latency, rel=1e-9)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # node_exporter scraped under another job: nothing to read.
        ("", 'no node_exporter series (node_disk_reads_completed_total{job="nodes"})'),
        # A host regex that matches no lunlat instance: the exporter's series are there, none joins.
        ("  lunlat_host: {label: instance, regex: 'other-(.+)'}\n", "none joins lunlat's LUNs"),
    ],
)
def test_a_host_layer_that_reads_nothing_exits_2_naming_the_fix(
    node_stack: Stack, tmp_path: Path, extra: str, message: str
) -> None:
    goals = NODE_GOALS.replace('job="node"', 'job="nodes"') if not extra else NODE_GOALS + extra
    (tmp_path / "goals.yaml").write_text(goals, encoding="utf-8")
    done = _run(node_stack, tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert ("host_layer.selector" in done.stderr) == (not extra)
    assert ("docs/host-layer.md" in done.stderr) == bool(extra)


def test_progress_bar_counts_every_query_with_an_exporters_host_layer(
    node_stack: Stack, tmp_path: Path
) -> None:
    (tmp_path / "goals.yaml").write_text(NODE_GOALS, encoding="utf-8")
    goals = load_goals(tmp_path / "goals.yaml")
    queries: list[str] = []
    collector = Collector(Prometheus(node_stack.api.base), goals, queries.append)
    phases = parse_phases([], node_stack.start, node_stack.end)
    data = collector.collect(node_stack.start, node_stack.end, phases)
    assert len(queries) == collector.queries(phases)
    # The plots' curves are node_exporter's latency too: ora_data's reads at the injected latencies.
    curve = data.latency[(synthetic.INSTANCE, "ora_data")]["read"]
    assert {round(v, 9) for _, v in curve} >= {lat for _, lat, _, _ in synthetic.LUNS[0].load}
