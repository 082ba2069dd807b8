"""Debian's `victoria-metrics` (single node) as a test's central store: the fleet test's and the
sharded fleet's global view."""

from __future__ import annotations

from pathlib import Path

from tests.support.exporter_process import LOOPBACK


def single_node(data: Path) -> list[str]:
    """argv of a single-node VictoriaMetrics keeping its data in `data`, on a port the kernel picks
    (ExporterProcess finds it in the log)."""
    return [
        "victoria-metrics",
        f"-storageDataPath={data}",
        f"-httpListenAddr={LOOPBACK}:0",
        "-retentionPeriod=1d",
        # VictoriaMetrics hides the newest 30 s from queries by default (-search.latencyOffset,
        # docs.victoriametrics.com/victoriametrics/keyconcepts/): tests and rules ask sooner.
        "-search.latencyOffset=1s",
    ]
