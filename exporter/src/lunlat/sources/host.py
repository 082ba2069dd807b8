"""Families of the host layer (docs/contract.md §3), shared by the diskstats and psutil sources."""

from __future__ import annotations

from lunlat import contract
from lunlat.model import Family, LabelList

# The per-device families in contract order, each with the exponent its column is counted in:
# times arrive as integer milliseconds and are exposed exactly (see Family.exponent).
_EXPONENTS: dict[str, int] = {
    contract.DEVICE_READ_TIME.name: -3,
    contract.DEVICE_WRITE_TIME.name: -3,
    contract.DEVICE_IO_TIME.name: -3,
    contract.DEVICE_IO_WEIGHTED_TIME.name: -3,
}


def device_families(labels: LabelList, columns: dict[contract.MetricSpec, list[int]]) -> list[Family]:
    """One family per contract metric present in `columns`; each column is aligned with `labels`.

    Time columns are in milliseconds, everything else in the metric's base unit.
    """
    families = []
    for spec in contract.DEVICE_METRICS:
        column = columns.get(spec)
        if column is None:
            continue
        families.append(Family(spec, exponent=_EXPONENTS.get(spec.name, 0), column=(labels, column)))
    return families
