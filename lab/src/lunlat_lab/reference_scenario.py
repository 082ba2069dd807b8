"""`lab scenario --reference`: the reference's cells (lunlat/reference_architecture.py) on the lab's LUNs.

One mapping: a reference cell (phase, workload, database, role, op) is the lab LUNs whose labels in
the lab description (database, role, workload) are the cell's, nothing else names them.
"""

from __future__ import annotations

from pathlib import Path

from lunlat.reference_architecture import Key, ReferenceCell
from lunlat_lab import measure
from lunlat_lab.config import LabConfig, LabLun
from lunlat_lab.settings import ArraySetting

# In reference mode every LUN is set to the average the reference measured on its array, under that
# phase's load: the array's queueing is already in those numbers. The lab's own model (an I/O waits
# for one of the array's `slots`, then holds it for its latency plus its size at `bandwidth_mib_s`)
# would add its queueing and transfer time on top, and the measured averages would sit above the set
# values by an amount that depends on the load, not on the reference. So the arrays get as many
# slots as the settings allow (no I/O of the lab's workloads ever waits: they have far fewer in
# flight) and a bandwidth at which the largest I/O (a 1 MiB snapshot copy write) adds 1 us: each I/O
# then takes its LUN's set value, whatever its size and whatever else runs.
REFERENCE_ARRAY = ArraySetting(slots=256, bandwidth_mib_s=1_000_000.0)
# And without spread (jitter 0): the reference gives averages only, and a spread would move a
# phase's average by its standard error, jitter / sqrt(I/Os): 3 % at the lab's jitter of 0.3 for the
# 100 log reads (5 IOPS) of a 20 s phase. The comparison would judge the dice, not the lab.
REFERENCE_JITTER = 0.0


def luns_of(lab: LabConfig, cell: ReferenceCell) -> list[LabLun]:
    """The lab LUNs a reference cell stands for: those labelled with its database, role and workload."""
    return [
        lun
        for lun in lab.luns
        if (lun.database, lun.role, lun.workload) == (cell.database, cell.role, cell.workload)
    ]


def targets(lab: LabConfig, cells: list[ReferenceCell], phase: str) -> dict[str, dict[str, float]]:
    """Per lab LUN, the reference's ms per op in `phase` (only the ops and LUNs it reports)."""
    out: dict[str, dict[str, float]] = {}
    for cell in cells:
        if cell.phase == phase:
            for lun in luns_of(lab, cell):
                out.setdefault(lun.name, {})[cell.op] = cell.ms
    return out


def measured(
    lab: LabConfig,
    loops: dict[str, str],
    phase: str,
    before: dict[str, measure.Counters],
    after: dict[str, measure.Counters],
) -> dict[Key, float | None]:
    """Each (phase, workload, database, role, op) cell's average over the window, ms: Δ time / Δ
    operations summed over the cell's LUNs (weighted by operations, as the report's cells are)."""
    sums: dict[Key, list[float]] = {}
    for lun in lab.luns:
        name = Path(loops.get(lun.name, "")).name
        if name not in before or name not in after:
            continue
        b, a = before[name], after[name]
        for op, ops, seconds in (
            ("read", a.reads - b.reads, a.read_seconds - b.read_seconds),
            ("write", a.writes - b.writes, a.write_seconds - b.write_seconds),
        ):
            total = sums.setdefault((phase, lun.workload, lun.database, lun.role, op), [0.0, 0.0])
            total[0] += seconds
            total[1] += ops
    return {key: (seconds / ops * 1000 if ops > 0 else None) for key, (seconds, ops) in sums.items()}
