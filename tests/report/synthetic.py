"""Synthetic lunlat series with known latencies, in the exporter's exact names and labels, written
as OpenMetrics for `promtool tsdb create-blocks-from openmetrics` (backfill: no waiting, every
sample where it was put).

Three phases like the reference's (OLTP, + DSS, + snapshot copies), 15 s apart samples, constant
IOPS and latency per LUN, op and phase, so every phase's Δ time / Δ operations is exactly the
latency injected. One data LUN goes above the 1 ms goal in the last phase; a snapshot LUN starts
with the last phase; one LUN has no database; one LUN has a multipath path device whose counters
must not be counted twice (kind="path").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lunlat import contract
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.oracle import ENGINE as ORACLE
from lunlat.engines.oracle import metrics as oracle_metrics

INTERVAL = 15
PHASE_SECONDS = 1200
PHASES: tuple[str, ...] = ("oltp", "oltp+dss", "oltp+dss+snapshot")
JOB = "lunlat"
INSTANCE = "db-host-1:10431"
IO_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Lun:
    lun: str
    device: str
    database: str
    role: str
    workload: str
    # per phase: (read IOPS, read latency s, write IOPS, write latency s)
    load: tuple[tuple[float, float, float, float], ...]
    engine: str = ""  # "oracle" or "mssql": the database layer's file counters too
    path: str = ""  # a multipath path device below the LUN


LUNS: tuple[Lun, ...] = (
    Lun(
        "ora_data",
        "dm-0",
        "Oracle",
        "data",
        "oltp",
        ((200, 0.0005, 50, 0.00035), (240, 0.0006, 50, 0.0003), (260, 0.0007, 60, 0.0004)),
        "oracle",
        "sdb",
    ),
    Lun(
        "ora_log",
        "dm-1",
        "Oracle",
        "log",
        "oltp",
        ((10, 0.0003, 80, 0.0006), (10, 0.0005, 80, 0.0007), (10, 0.0005, 90, 0.0008)),
        "oracle",
    ),
    Lun(
        "sqlserver1_data",
        "dm-2",
        "SQL Server 1",
        "data",
        "oltp",
        ((150, 0.0005, 30, 0.0002), (180, 0.0008, 30, 0.00025), (200, 0.0015, 30, 0.0003)),
        "mssql",
    ),
    Lun(
        "sqlserver1_log",
        "dm-3",
        "SQL Server 1",
        "log",
        "oltp",
        ((12, 0.0002, 70, 0.00018), (12, 0.0003, 70, 0.0002), (12, 0.0003, 70, 0.00024)),
        "mssql",
    ),
    Lun(
        "snap_ora_data",
        "dm-4",
        "Oracle",
        "data",
        "snapshot_oltp",
        ((0, 0, 0, 0), (0, 0, 0, 0), (100, 0.0011, 20, 0.0005)),
    ),
    Lun(
        "scratch",
        "sdz",
        "",
        "",
        "",
        ((20, 0.002, 20, 0.0008), (20, 0.002, 20, 0.0008), (20, 0.002, 20, 0.0008)),
    ),
)
# The one LUN with the per-I/O histogram (its reads, with lunlat's own host layer): the others have none,
# so their judged figure is their average whatever the goals' `judge` says.
HISTOGRAM_LUN = LUNS[0]
# What the database layer adds to the host's latency (its own view includes more of the stack).
DB_EXTRA_SECONDS = 0.0001
# The per-I/O histogram of ora_data reads: share of I/Os per bucket bound, the same in each phase.
ORACLE_FILES = ORACLE.files
ORACLE_WAIT_SHARES: tuple[tuple[float, float], ...] = ((0.000256, 0.3), (0.000512, 0.4), (0.001024, 0.3))
HISTOGRAM_SHARES: tuple[tuple[float, float], ...] = (
    (0.00025, 0.2),
    (0.0005, 0.5),
    (0.001, 0.25),
    (0.002, 0.05),
)


def cells_with_io() -> set[tuple[str, str, str]]:
    """(phase, lun, op) of every LUN with I/O in that phase and direction: the host rows a report of
    these series has, once each."""
    return {
        (phase, lun.lun, op)
        for i, phase in enumerate(PHASES)
        for lun in LUNS
        for op in ("read", "write")
        if lun.load[i][0 if op == "read" else 2] > 0
    }


def load_at(lun: Lun, phase: str, op: str) -> tuple[float, float]:
    """(IOPS, latency in seconds) of `lun` in `phase` for `op` (read or write)."""
    read_iops, read_lat, write_iops, write_lat = lun.load[PHASES.index(phase)]
    return (read_iops, read_lat) if op == "read" else (write_iops, write_lat)


def _labels(**labels: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def timestamps(start: int) -> list[int]:
    return list(range(start, start + len(PHASES) * PHASE_SECONDS + 1, INTERVAL))


def phase_of(start: int, t: int) -> int:
    """The phase an interval ending at `t` belongs to."""
    return min(len(PHASES) - 1, max(0, (t - start - 1) // PHASE_SECONDS))


def bounds(start: int) -> list[tuple[str, int, int]]:
    return [
        (name, start + i * PHASE_SECONDS, start + (i + 1) * PHASE_SECONDS) for i, name in enumerate(PHASES)
    ]


def counter(lun: Lun, start: int, what: str, extra: float = 0.0) -> list[tuple[int, float]]:
    """(t, value) of a counter: `reads`, `writes`, `read_time`, `write_time`, `read_bytes`, `write_bytes`."""
    values, total = [], 0.0
    for t in timestamps(start):
        if t > start:
            read_iops, read_lat, write_iops, write_lat = lun.load[phase_of(start, t)]
            iops, latency = (read_iops, read_lat) if what.startswith("read") else (write_iops, write_lat)
            ops = iops * INTERVAL
            if what.endswith("_time"):
                total += ops * (latency + extra if ops else 0.0)
            elif what.endswith("_bytes"):
                total += ops * IO_BYTES
            else:
                total += ops
        values.append((t, total))
    return values


# node_exporter beside lunlat on the same host (goals `host_layer: node_exporter`): its diskstats
# counters, named as prometheus/node_exporter collector/diskstats_common.go names them, label `device`
# the kernel's name, times in float seconds (collector/diskstats_linux.go: the kernel's milliseconds
# x secondsPerTick = 1/1000) and bytes (sectors x unixSectorSize = 512), as lunlat's own.
NODE_JOB = "node"
NODE_INSTANCE = "db-host-1:9100"
NODE_COUNTERS: dict[str, str] = {
    "node_disk_reads_completed_total": "reads",
    "node_disk_writes_completed_total": "writes",
    "node_disk_read_time_seconds_total": "read_time",
    "node_disk_write_time_seconds_total": "write_time",
    "node_disk_read_bytes_total": "read_bytes",
    "node_disk_written_bytes_total": "write_bytes",
}
# Devices node_exporter publishes that must never reach a LUN: the host's own disk (no
# lunlat_lun_info), and another host's dm-0, ten times slower (a join on the device alone would take it).
ROOT_DISK = Lun("", "sda", "", "", "", ((50, 0.01, 50, 0.01),) * len(PHASES))
OTHER_HOST = ("db-host-2:9100", Lun("", "dm-0", "", "", "", ((300, 0.005, 300, 0.005),) * len(PHASES)))


def openmetrics(start: int, host: str = "lunlat") -> str:
    """The whole data set, one family after the other, `# EOF` last. `host`: whose counters the host
    layer has, lunlat's own (`lunlat`) or node_exporter's (`node_exporter`: lunlat then publishes
    no device counters, as with `--no-collector.diskstats.counters`)."""
    out: list[str] = []

    def family(name: str, kind: str, series: list[tuple[str, list[tuple[int, float]]]]) -> None:
        base = name.removesuffix("_total") if kind == "counter" else name
        out.append(f"# TYPE {base} {kind}")
        for labels, values in series:
            out.extend(f"{name}{{{labels}}} {v!r} {t}" for t, v in values)

    own = {
        contract.DEVICE_READS.name: "reads",
        contract.DEVICE_WRITES.name: "writes",
        contract.DEVICE_READ_TIME.name: "read_time",
        contract.DEVICE_WRITE_TIME.name: "write_time",
        contract.DEVICE_READ_BYTES.name: "read_bytes",
        contract.DEVICE_WRITE_BYTES.name: "write_bytes",
    }
    if host == "node_exporter":
        for name, what in NODE_COUNTERS.items():
            series = []
            for lun in LUNS:
                for device in (lun.device, *((lun.path,) if lun.path else ())):
                    series.append(
                        (
                            _labels(job=NODE_JOB, instance=NODE_INSTANCE, device=device),
                            counter(lun, start, what),
                        )
                    )
            series.append(
                (
                    _labels(job=NODE_JOB, instance=NODE_INSTANCE, device="sda"),
                    counter(ROOT_DISK, start, what),
                )
            )
            other, lun = OTHER_HOST
            series.append(
                (_labels(job=NODE_JOB, instance=other, device=lun.device), counter(lun, start, what))
            )
            family(name, "counter", series)
    for name, what in own.items() if host == "lunlat" else ():
        series = []
        for lun in LUNS:
            series.append(
                (
                    _labels(job=JOB, instance=INSTANCE, lun=lun.lun, device=lun.device),
                    counter(lun, start, what),
                )
            )
            if lun.path:  # the path carries the same I/O: counted once only through kind="lun"
                series.append(
                    (
                        _labels(job=JOB, instance=INSTANCE, lun=lun.lun, device=lun.path),
                        counter(lun, start, what),
                    )
                )
        family(name, "counter", series)
    info = []
    for lun in LUNS:
        for device, kind in ((lun.device, "lun"), *(((lun.path, "path"),) if lun.path else ())):
            labels = _labels(
                job=JOB,
                instance=INSTANCE,
                lun=lun.lun,
                device=device,
                wwid="",
                naa="",
                vendor="LUNLAT",
                model="synthetic",
                paths="",
                database=lun.database,
                role=lun.role,
                workload=lun.workload,
                mountpoint="",
                kind=kind,
            )
            info.append((labels, [(t, 1.0) for t in timestamps(start)]))
    family(contract.LUN_INFO.name, "gauge", info)
    for engine, specs in (
        (
            "oracle",
            # What the report averages for Oracle: its engine's FileLayer (reads are the
            # synchronous single-block reads).
            (
                ORACLE_FILES.reads,
                ORACLE_FILES.writes,
                ORACLE_FILES.read_time,
                ORACLE_FILES.write_time,
            ),
        ),
        (
            "mssql",
            (
                mssql_metrics.MSSQL_FILE_READS,
                mssql_metrics.MSSQL_FILE_WRITES,
                mssql_metrics.MSSQL_FILE_READ_STALL,
                mssql_metrics.MSSQL_FILE_WRITE_STALL,
                mssql_metrics.MSSQL_FILE_READ_BYTES,
                mssql_metrics.MSSQL_FILE_WRITE_BYTES,
            ),
        ),
    ):
        whats = ("reads", "writes", "read_time", "write_time", "read_bytes", "write_bytes")
        for spec, what in zip(specs, whats, strict=False):
            series = [
                (
                    _labels(
                        job=JOB,
                        instance=INSTANCE,
                        database=lun.database,
                        workload=lun.workload,
                        db="PDB1" if engine == "oracle" else "tpcc",
                        db_instance="ORCL1",
                        file=f"/u01/{lun.lun}.dbf",
                        role=lun.role,
                        lun=lun.lun,
                    ),
                    counter(lun, start, what, DB_EXTRA_SECONDS),
                )
                for lun in LUNS
                if lun.engine == engine
            ]
            family(spec.name, "counter", series)
    # The per-I/O histogram of ora_data's reads (host layer): every read is IO_BYTES (8 KiB), so all
    # are in the small size class, their sum the LUN's read time (the judged reads are every read).
    lun = HISTOGRAM_LUN
    reads = counter(lun, start, "reads")
    if host == "lunlat":
        name = contract.DEVICE_IO_LATENCY.name
        out.append(f"# TYPE {name} histogram")
        size = contract.BIO_SIZES[0] if IO_BYTES <= contract.BIO_SMALL_MAX else contract.BIO_SIZES[-1]
        base = _labels(job=JOB, instance=INSTANCE, lun=lun.lun, device=lun.device, op="read", size=size)
        out.extend(_histogram(name, base, HISTOGRAM_SHARES, reads, counter(lun, start, "read_time")))
    # Oracle's wait-event histogram ('db file sequential read', µs power-of-two buckets in seconds).
    name = oracle_metrics.ORACLE_WAIT_DURATION.name
    out.append(f"# TYPE {name} histogram")
    base = _labels(
        job=JOB,
        instance=INSTANCE,
        database="Oracle",
        db="PDB1",
        db_instance="ORCL1",
        event="db file sequential read",
        role="data",
        measure="per_io",
    )
    out.extend(_histogram(name, base, ORACLE_WAIT_SHARES, reads))
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _histogram(
    name: str,
    base: str,
    shares: Sequence[tuple[float, float]],
    counts: Sequence[tuple[int, float]],
    sums: Sequence[tuple[int, float]] | None = None,
) -> list[str]:
    """A histogram's samples over time: each bucket its cumulative share of the count, _sum `sums`
    (at the same times), 0.5 ms per observation without them."""
    lines: list[str] = []
    cumulative = 0.0
    for bound, share in (*shares, (float("inf"), 0.0)):
        cumulative += share
        le = "+Inf" if bound == float("inf") else repr(bound)
        lines.extend(f'{name}_bucket{{{base},le="{le}"}} {round(v * cumulative)!r} {t}' for t, v in counts)
    lines.extend(f"{name}_count{{{base}}} {v!r} {t}" for t, v in counts)
    if sums is None:
        sums = [(t, v * 0.0005) for t, v in counts]
    lines.extend(f"{name}_sum{{{base}}} {v!r} {t}" for t, v in sums)
    return lines
