"""Synthetic lunlat series of LUNs whose I/Os are of several sizes, for the judged figure of `lunlat
report` (issue 37): 8 KiB OLTP reads beside 1 MiB scans, as the issue measured them, written as
OpenMetrics for `promtool tsdb create-blocks-from openmetrics` (tests/report/backfill.py).

Each LUN's load is a list of I/O classes per phase (op, size, IOPS, latency, bytes each). The diskstats
counters are the sum of every class, so a LUN's average blends them; the per-I/O histogram (where the
LUN has one) keeps each class apart in its size class (contract.BIO_SIZES), every I/O of a class in
the first bucket at or above its latency, its _sum the class's exact time.

- `prod_data`: small reads well within goal; in the second phase 1 MiB scans lift the LUN's read
  average over the goal (judged within, the average flagged).
- `dwh_data`: scans with a trickle of small reads, fewer per second than the idle guard: busy on every
  I/O, idle on the judged ones (not judged, the average flagged).
- `legacy_data`: the same blend as `prod_data` on a host without the histogram: judged on every I/O,
  the average, which breaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from lunlat import contract

INTERVAL = 15
PHASE_SECONDS = 600
PHASES: tuple[str, ...] = ("oltp", "oltp+dss")
JOB = "lunlat"
INSTANCE = "db-host-1:10431"
SMALL_BYTES = 8 * 1024
LARGE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Io:
    """A class of I/O of one op and size, at a steady rate and latency."""

    op: str
    bytes: int
    iops: float
    latency: float

    @property
    def size(self) -> str:
        """Its size class, as the biolatency programs class it (contract.BIO_SIZES)."""
        if self.bytes <= contract.BIO_SMALL_MAX:
            return contract.BIO_SIZES[0]
        return contract.BIO_SIZES[-1] if self.bytes >= contract.BIO_LARGE_MIN else contract.BIO_SIZES[1]


@dataclass(frozen=True, slots=True)
class Lun:
    lun: str
    device: str
    database: str
    role: str
    workload: str
    phases: tuple[tuple[Io, ...], ...]  # per phase, its classes of I/O
    histogram: bool  # the host runs the per-I/O histogram for it

    def ios(self, phase: str, op: str, size: str | None = None) -> list[Io]:
        """Its I/O classes of `phase` and `op` (of size class `size` only, when given)."""
        return [
            io for io in self.phases[PHASES.index(phase)] if io.op == op and (size is None or io.size == size)
        ]


def _oltp(scan: bool) -> tuple[Io, ...]:
    """8 KiB reads at 0.4 ms and 8 KiB writes at 0.3 ms; with `scan`, 1 MiB reads at 7.3 ms beside them
    (the issue's loop device: 150 reads/s of 8 KiB, 40/s of 1 MiB)."""
    base = (Io("read", SMALL_BYTES, 150, 0.0004), Io("write", SMALL_BYTES, 40, 0.0003))
    return (*base, Io("read", LARGE_BYTES, 40, 0.0073)) if scan else base


LUNS: tuple[Lun, ...] = (
    Lun("prod_data", "dm-0", "PROD", "data", "oltp", (_oltp(False), _oltp(True)), histogram=True),
    Lun(
        "dwh_data",
        "dm-1",
        "DWH",
        "data",
        "dss",
        (
            (Io("read", LARGE_BYTES, 60, 0.005), Io("read", SMALL_BYTES, 4, 0.0005)),
            (Io("read", LARGE_BYTES, 60, 0.005), Io("read", SMALL_BYTES, 4, 0.0005)),
        ),
        histogram=True,
    ),
    Lun("legacy_data", "dm-2", "LEGACY", "data", "oltp", (_oltp(False), _oltp(True)), histogram=False),
)


def timestamps(start: int) -> list[int]:
    return list(range(start, start + len(PHASES) * PHASE_SECONDS + 1, INTERVAL))


def bounds(start: int) -> list[tuple[str, int, int]]:
    return [
        (name, start + i * PHASE_SECONDS, start + (i + 1) * PHASE_SECONDS) for i, name in enumerate(PHASES)
    ]


def _phase_at(start: int, t: int) -> str:
    """The phase an interval ending at `t` belongs to."""
    return PHASES[min(len(PHASES) - 1, max(0, (t - start - 1) // PHASE_SECONDS))]


def counter(lun: Lun, start: int, op: str, value: str, size: str | None = None) -> list[tuple[int, float]]:
    """(t, value) of a counter of `lun`'s `op` I/Os (of size class `size` only, when given): `ops`,
    `time` (seconds) or `bytes`."""
    out, total = [], 0.0
    for t in timestamps(start):
        if t > start:
            for io in lun.ios(_phase_at(start, t), op, size):
                ops = io.iops * INTERVAL
                total += ops * {"ops": 1.0, "time": io.latency, "bytes": float(io.bytes)}[value]
        out.append((t, total))
    return out


def _labels(**labels: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def openmetrics(start: int) -> str:
    """The whole data set, one family after the other, `# EOF` last."""
    out: list[str] = []

    def family(name: str, kind: str, series: list[tuple[str, list[tuple[int, float]]]]) -> None:
        out.append(f"# TYPE {name.removesuffix('_total')} {kind}")
        for labels, values in series:
            out.extend(f"{name}{{{labels}}} {v!r} {t}" for t, v in values)

    counters = (
        (contract.DEVICE_READS, "read", "ops"),
        (contract.DEVICE_WRITES, "write", "ops"),
        (contract.DEVICE_READ_TIME, "read", "time"),
        (contract.DEVICE_WRITE_TIME, "write", "time"),
        (contract.DEVICE_READ_BYTES, "read", "bytes"),
        (contract.DEVICE_WRITE_BYTES, "write", "bytes"),
    )
    for spec, op, value in counters:
        family(
            spec.name,
            "counter",
            [
                (
                    _labels(job=JOB, instance=INSTANCE, lun=lun.lun, device=lun.device),
                    counter(lun, start, op, value),
                )
                for lun in LUNS
            ],
        )
    info = [
        (
            _labels(
                job=JOB,
                instance=INSTANCE,
                lun=lun.lun,
                device=lun.device,
                database=lun.database,
                role=lun.role,
                workload=lun.workload,
                kind="lun",
            ),
            [(t, 1.0) for t in timestamps(start)],
        )
        for lun in LUNS
    ]
    family(contract.LUN_INFO.name, "gauge", info)
    name = contract.DEVICE_IO_LATENCY.name
    out.append(f"# TYPE {name} histogram")
    for lun in LUNS:
        if not lun.histogram:
            continue
        # Every op and size class the LUN ever does, each its own series (zero while it does none).
        classes = sorted({(io.op, io.size) for ios in lun.phases for io in ios})
        for op, size in classes:
            base = _labels(job=JOB, instance=INSTANCE, lun=lun.lun, device=lun.device, op=op, size=size)
            out.extend(_histogram(name, base, lun, start, op, size))
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _histogram(name: str, base: str, lun: Lun, start: int, op: str, size: str) -> list[str]:
    """One series' samples: each I/O counted in the first bucket at or above its latency."""
    lines: list[str] = []
    for bound in (*contract.BIO_BUCKETS, float("inf")):
        total, values = 0.0, []
        for t in timestamps(start):
            if t > start:
                total += sum(
                    io.iops * INTERVAL for io in lun.ios(_phase_at(start, t), op, size) if io.latency <= bound
                )
            values.append((t, total))
        le = "+Inf" if bound == float("inf") else repr(bound)
        lines.extend(f'{name}_bucket{{{base},le="{le}"}} {v!r} {t}' for t, v in values)
    lines.extend(f"{name}_count{{{base}}} {v!r} {t}" for t, v in counter(lun, start, op, "ops", size))
    lines.extend(f"{name}_sum{{{base}}} {v!r} {t}" for t, v in counter(lun, start, op, "time", size))
    return lines
