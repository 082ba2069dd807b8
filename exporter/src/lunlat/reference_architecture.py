"""The reference architecture's average latencies (reference.csv beside this module, its source in its header)
and a measurement beside them: per phase x workload x database x role x op, the reference's ms, the
measured ms, the difference and whether it is within tolerance.

`lunlat-lab scenario --reference` sets the lab's LUNs to these values and compares what the exporter
measured; `lunlat report --reference` compares the report's table cells (report/page.py `cells`).
Both print and write the same table (`format_table`, `csv_text`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# The reference's averages, shipped with lunlat (package data): the lab's `scenario --reference`
# default, and what `lunlat report --reference` is usually given.
DEFAULT_REFERENCE_FILE = Path(__file__).with_name("reference.csv")
# A measured cell is within when it is this close to the reference's, absolute or relative (the
# larger): 0.03 ms is the resolution of a two-decimal table near its small cells, 5 % the larger ones.
TOLERANCE_MS = 0.03
TOLERANCE_SHARE = 0.05
COLUMNS = ("table", "phase", "workload", "database", "engine", "lun_role", "op", "avg_latency_ms")
COMPARISON_COLUMNS = (
    "phase", "workload", "database", "role", "op", "table",
    "reference_ms", "measured_ms", "difference_ms", "within_tolerance",
)  # fmt: skip

# (phase, workload, database, role, op): the key of a reference cell, as of the report's table cells.
Key = tuple[str, str, str, str, str]


class ReferenceError(ValueError):
    """The reference file cannot be used; the message names the file and the line."""


@dataclass(frozen=True, slots=True)
class ReferenceCell:
    table: str
    phase: str
    workload: str
    database: str
    engine: str
    role: str
    op: str
    ms: float

    @property
    def key(self) -> Key:
        return (self.phase, self.workload, self.database, self.role, self.op)


def load(path: Path) -> list[ReferenceCell]:
    """The reference's cells; lines starting with # are its header (the source)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReferenceError(f"cannot read the reference {path}: {exc.strerror or exc}") from None
    lines = [
        (n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")
    ]
    if not lines or tuple(lines[0][1].split(",")) != COLUMNS:
        raise ReferenceError(f"{path}: the first line that is not a comment must be {','.join(COLUMNS)}")
    cells: list[ReferenceCell] = []
    seen: set[Key] = set()
    for (number, _), row in zip(lines[1:], csv.DictReader(line for _, line in lines), strict=True):
        try:
            ms = float(row["avg_latency_ms"])
        except (TypeError, ValueError):
            raise ReferenceError(f"{path}:{number}: avg_latency_ms is not a number") from None
        if not 0 < ms < 10_000 or row["op"] not in ("read", "write") or None in row.values():
            raise ReferenceError(f"{path}:{number}: want a positive ms and op read or write, got {row}")
        cell = ReferenceCell(
            row["table"], row["phase"], row["workload"], row["database"], row["engine"], row["lun_role"],
            row["op"], ms,
        )  # fmt: skip
        if cell.key in seen:
            raise ReferenceError(f"{path}:{number}: {cell.key} given twice")
        seen.add(cell.key)
        cells.append(cell)
    return cells


def within(reference_ms: float, measured_ms: float) -> bool:
    return abs(measured_ms - reference_ms) <= max(TOLERANCE_MS, TOLERANCE_SHARE * reference_ms)


@dataclass(frozen=True, slots=True)
class Comparison:
    cell: ReferenceCell
    measured_ms: float | None  # None: no I/O measured in that cell

    @property
    def difference_ms(self) -> float | None:
        return None if self.measured_ms is None else self.measured_ms - self.cell.ms

    @property
    def within(self) -> bool:
        """Within tolerance; a cell the reference reports but nothing measured is not."""
        return self.measured_ms is not None and within(self.cell.ms, self.measured_ms)


def compare(cells: list[ReferenceCell], measured: Mapping[Key, float | None]) -> list[Comparison]:
    """Every reference cell beside its measurement (ms). Measured cells the reference does not report
    (a LUN it has no value for) are left out: not judged."""
    return [Comparison(cell, measured.get(cell.key)) for cell in cells]


def _ms(value: float | None, sign: bool = False) -> str:
    return "" if value is None else f"{value:+.3f}" if sign else f"{value:.3f}"


def rows(comparisons: list[Comparison]) -> list[dict[str, str]]:
    return [
        {
            "phase": c.cell.phase,
            "workload": c.cell.workload,
            "database": c.cell.database,
            "role": c.cell.role,
            "op": c.cell.op,
            "table": c.cell.table,
            "reference_ms": f"{c.cell.ms:.2f}",
            "measured_ms": _ms(c.measured_ms),
            "difference_ms": _ms(c.difference_ms, sign=True),
            "within_tolerance": "yes" if c.within else "no",
        }
        for c in comparisons
    ]


def csv_text(comparisons: list[Comparison]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COMPARISON_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows(comparisons))
    return out.getvalue()


def format_table(comparisons: list[Comparison]) -> str:
    """The side-by-side table as text: one line per cell, then how many are within tolerance."""
    head = (
        f"{'phase':18} {'workload':13} {'database':12} {'role':4} {'op':5} {'table':>5} "
        f"{'reference':>9} {'measured':>9} {'diff':>7}  within"
    )
    lines = [head]
    for r in rows(comparisons):
        lines.append(
            f"{r['phase']:18} {r['workload']:13} {r['database']:12} {r['role']:4} {r['op']:5} {r['table']:>5} "
            f"{r['reference_ms']:>9} {r['measured_ms'] or '-':>9} {r['difference_ms'] or '-':>7}  "
            f"{r['within_tolerance']}"
        )
    judged = len(comparisons)
    ok = sum(1 for c in comparisons if c.within)
    lines.append(
        f"{ok} of {judged} reference cells within {TOLERANCE_MS} ms or {TOLERANCE_SHARE:.0%} of the reference (ms)"
    )
    return "\n".join(lines)
