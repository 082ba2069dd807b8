"""SQL Server on Windows: the physical disk under each database volume (group lunlat-windows-disks,
only where goals host_layer is windows_exporter; alerts/tests/test_host_layers.py)."""

from __future__ import annotations

from typing import Any

from lunlat.goals import Goals
from lunlat.promql.layers import LUN_LABELS, physical_disk_layer
from lunlat.promql.recorded import OPS, PHYSICAL_DISK_IOPS, PHYSICAL_DISK_LATENCY, RATE_WINDOWS
from lunlat_rules.promqltext import on as _on
from lunlat_rules.rulefmt import record


def physical_disks(goals: Goals) -> list[dict[str, Any]]:
    """The physical disk under each database volume (windows_exporter's physical_disk through
    logical_disk_info, layers.PhysicalDiskLayer): its IOPS and average latency per op, by the
    volume's labels and `disk`. Recorded to be shown beside the volume's host layer; no goal or
    alert reads them (the volumes are judged)."""
    disks = physical_disk_layer(goals)
    if disks is None:
        return []
    by = [*LUN_LABELS, "disk"]
    rules: list[dict[str, Any]] = []
    for window in RATE_WINDOWS:
        for op in OPS:
            rules.append(
                record(PHYSICAL_DISK_IOPS.format(window=window), disks.operations(op, window), op=op)
            )
        for op in OPS:
            expr = f"{disks.time(op, window)}\n/ {_on(by)}\n  ({disks.operations(op, window)} > 0)"
            rules.append(record(PHYSICAL_DISK_LATENCY.format(op=op, window=window), expr))
    return rules
