"""Average latency per device between two samples: from /proc/diskstats directly (`lab status`,
calibration) or from the exporter's /metrics (`lab scenario`, which checks the exporter)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from lunlat.sources.diskstats_format import READ_MS, READS, WRITE_MS, WRITES, parse


@dataclass(frozen=True, slots=True)
class Counters:
    reads: float
    read_seconds: float
    writes: float
    write_seconds: float


@dataclass(frozen=True, slots=True)
class Average:
    reads: float  # operations in the window
    read_ms: float | None  # None: no reads, no average (never 0/0)
    writes: float
    write_ms: float | None


def from_diskstats(procfs: Path = Path("/proc")) -> dict[str, Counters]:
    table, _ = parse((procfs / "diskstats").read_bytes())
    c = table.columns
    return {
        name: Counters(c[READS][i], c[READ_MS][i] / 1000, c[WRITES][i], c[WRITE_MS][i] / 1000)
        for i, name in enumerate(table.names)
    }


def from_exposition(text: str) -> dict[str, Counters]:
    """Counters by kernel device name from lunlat's /metrics text."""
    wanted = {
        contract.DEVICE_READS.name: "reads",
        contract.DEVICE_READ_TIME.name: "read_seconds",
        contract.DEVICE_WRITES.name: "writes",
        contract.DEVICE_WRITE_TIME.name: "write_seconds",
    }
    values: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            field = wanted.get(sample.name)
            if field is not None:
                values.setdefault(sample.labels["device"], {})[field] = float(sample.value)
    return {device: Counters(**fields) for device, fields in values.items() if len(fields) == len(wanted)}


def average(before: Counters, after: Counters) -> Average:
    reads = after.reads - before.reads
    writes = after.writes - before.writes
    return Average(
        reads,
        (after.read_seconds - before.read_seconds) / reads * 1000 if reads > 0 else None,
        writes,
        (after.write_seconds - before.write_seconds) / writes * 1000 if writes > 0 else None,
    )
