"""Several "hosts" behind one Prometheus: one `lunlat serve` per host, each with its own flags, all
scraped by one Debian Prometheus evaluating the repo's generated rules (what a breach's `neighbours`
annotation reads across hosts), or rules generated from other goals. Used by the cause tests on
fake hosts and on the lab and by the throughput floor's; `lab_in_phase` brings their lab up."""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.support.lab_host import memory_backed_dir
from tests.support.prometheus_server import PromApi

if TYPE_CHECKING:
    from lunlat_lab.state import LabState


def lab_in_phase(stack: ExitStack, lab_yaml: str, phase: str, prefix: str) -> LabState:
    """A lab of `lab_yaml` (lab.yaml's text) up under a memory-backed directory, in `phase`; brought
    down and removed when `stack` closes."""
    from lunlat_lab import commands  # noqa: PLC0415 - the lab is its own distribution, needed here only

    base = Path(tempfile.mkdtemp(prefix=prefix, dir=memory_backed_dir()))
    stack.callback(shutil.rmtree, base, ignore_errors=True)
    (base / "lab.yaml").write_text(textwrap.dedent(lab_yaml), encoding="utf-8")
    stack.callback(commands.down, base / "lab")
    commands.up(base / "lab.yaml", base / "lab")
    return commands.phase(base / "lab", phase)


def serve_hosts(
    stack: ExitStack, work: Path, flags: dict[str, list[str]], interval: str, rules: Path | None = None
) -> tuple[PromApi, dict[str, str]]:
    """One exporter per host (`flags`: host name -> its `lunlat serve` flags) and a Prometheus scraping
    them every `interval` with the repo's rules (or the file `rules`), each stopped when `stack` closes;
    the server's API and each host's `instance` label."""
    instances = {}
    for name, host_flags in flags.items():
        exporter = ExporterProcess(
            lunlat_serve(*host_flags),
            work / f"lunlat-{name}.log",
            name=f"lunlat-{name}",
            port_pattern=LUNLAT_PORT,
            start_timeout=60.0,
        )
        stack.callback(exporter.stop)
        exporter.start()
        instances[name] = f"{LOOPBACK}:{exporter.port}"
    cfg = prometheus_server.config(list(instances.values()), interval)
    if rules is not None:
        cfg["rule_files"] = [str(rules)]
    server = prometheus_server.start(work / "prometheus", cfg)
    stack.callback(server.stop)
    return prometheus_server.api(server), instances
