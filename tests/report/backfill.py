"""A real Prometheus holding OpenMetrics series backfilled with `promtool tsdb create-blocks-from
openmetrics`: every sample where it was put, no waiting for scrapes."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import prometheus_server


def skip_without_prometheus() -> None:
    reason = prometheus_server.missing() or (
        None if shutil.which("promtool") else "missing promtool (Debian: prometheus)"
    )
    if reason:
        pytest.skip(reason)


@contextmanager
def backfilled(text: str) -> Iterator[prometheus_server.PromApi]:
    """Prometheus serving `text` (OpenMetrics, `# EOF` last), stopped on exit."""
    skip_without_prometheus()
    with tempfile.TemporaryDirectory(prefix="lunlat-report-") as workdir:
        data = Path(workdir) / "metrics.om"
        data.write_text(text, encoding="utf-8")
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(data),
                str(Path(workdir) / "prometheus-data"),
            ],
            check=True,
            capture_output=True,
        )
        process = prometheus_server.start(Path(workdir), {"global": {"scrape_interval": "15s"}})
        try:
            yield prometheus_server.api(process)
        finally:
            process.stop()
