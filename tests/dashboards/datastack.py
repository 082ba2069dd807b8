"""Real data for the dashboards' queries: the lab's loop LUNs under the reference's phases, an
Oracle database (the emulated v$ views) on ASM disk groups on the lab's Oracle LUNs, a SQL Server
(the wire-level TDS server, through pyodbc and FreeTDS) with its files on the SQL Server 1 LUNs,
one lunlat exporter publishing all three layers, and the Debian Prometheus scraping it with the
repo's recording and alert rules.

The scenario follows the reference: OLTP alone, then DSS scans and the snapshot copies join; one
data LUN is raised above the goal meanwhile so the breach panels and alert annotations have
something to show. Scrape and rule evaluation every 5 s (the rules' windows are 1 m and longer).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from lunlat import cli
from lunlat.config import load_config
from lunlat.lab import commands
from lunlat.lab.state import LabState
from lunlat.scrape import Scraper
from lunlat.server import ListenAddress, Server
from lunlat.sources import oracle as oracle_source
from lunlat.sources.registry import build_sources
from tests import prometheus
from tests.mssql.tds_server import LOG, ROWS, DmvState, Stream, TdsServer
from tests.oracle.emulation import OracleEmulation
from tests.oracle.simulator import IO, Commits, Load, LogNormal
from tests.procs import LOOPBACK

LAB_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "lab" / "lab.yaml"
LAB_EXPORTER_CONFIG = LAB_CONFIG.with_name("lunlat.yaml")  # generated from LAB_CONFIG
INTERVAL_SECONDS = 5
OLTP_SECONDS = 45.0
BREACH_LUN = "sqlserver1_data"
BREACH_MS = 2.0
PASSWORD_ENV = "LUNLAT_DASHBOARD_TEST_PASSWORD"  # noqa: S105 - the variable's name
MSSQL_DATABASE = "tpcc"


def oracle_load(dss: bool) -> Load:
    streams = [
        IO("data", "read", 120, LogNormal(450, 0.4)),
        IO("data", "write", 30, LogNormal(350, 0.4)),
        IO("log", "write", 80, LogNormal(600, 0.3)),
    ]
    if dss:  # multiblock scans: 'db file scattered read' / direct path reads of 1 MiB
        streams.append(IO("data", "read", 15, LogNormal(2500, 0.5), large_fraction=1.0))
    # A Data Guard SYNC standby, so the log panel's replica series has data.
    return Load(*streams, commits=Commits(80), standby=LogNormal(900, 0.3))


def mssql_load(dss: bool) -> dict[tuple[str, Any, Any], Stream]:
    reads = (
        Stream(140, [(450, 0.8), (3000, 0.2)], io_bytes=65536)
        if dss
        else Stream(120, [(450, 0.9), (1500, 0.1)])
    )
    return {
        (MSSQL_DATABASE, "data", "read"): reads,
        (MSSQL_DATABASE, "data", "write"): Stream(30, 250),
        (MSSQL_DATABASE, "log", "write"): Stream(80, 200, replica_us=800),  # a synchronous replica
    }


@dataclass
class DatabaseLoad:
    """Advances both databases' counters with the wall clock, one simulated second per second."""

    oracle: OracleEmulation
    mssql: DmvState
    dss: bool = False
    _stop: threading.Event | None = None

    def run(self) -> None:
        assert self._stop is not None
        last = time.monotonic()
        while not self._stop.wait(1.0):
            now = time.monotonic()
            self.oracle.advance(now - last, oracle_load(self.dss))
            self.mssql.advance(now - last, mssql_load(self.dss))
            last = now

    @contextmanager
    def running(self) -> Iterator[DatabaseLoad]:
        self._stop = threading.Event()
        thread = threading.Thread(target=self.run, name="db-load", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(5)


@dataclass(frozen=True, slots=True)
class DashboardData:
    """What the query tests get: Prometheus' API, the span that holds data, the lab's devices."""

    api: prometheus.PromApi
    start: float
    devices: dict[str, str]  # lab LUN name → kernel device (the exporter's `lun` label)

    def end(self) -> float:
        return time.time()


def exporter_config(lab_state: LabState, directory: Path, mssql_port: int) -> Path:
    """deploy/lab/lunlat.yaml (the lab's LUNs with their databases, roles and workloads) plus the
    Oracle and SQL Server targets whose files live on those LUNs."""
    data = yaml.safe_load(LAB_EXPORTER_CONFIG.read_text(encoding="utf-8"))
    login = {"user": "lunlat", "password_env": PASSWORD_ENV, "workload": "oltp", "timeout_seconds": 5}
    data["oracle"] = [{"name": "Oracle", "dsn": "emulated:1521/ORCL", **login}]
    data["mssql"] = [
        {
            "name": "SQL Server 1",
            "server": f"{LOOPBACK},{mssql_port}",
            "driver": "FreeTDS",
            "encrypt": False,
            **login,
        }
    ]
    path = directory / "lunlat.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@contextmanager
def exporter(config_path: Path, oracle: OracleEmulation) -> Iterator[int]:
    """The lunlat exporter in this process (the Oracle source's connection is the emulation's;
    everything else as `lunlat serve` builds it); yields its port."""
    args = cli._parser().parse_args(["serve", f"--config.file={config_path}"])
    with mock.patch.object(oracle_source, "connect_oracledb", lambda _target: oracle.connect):
        built = build_sources(load_config(config_path), cli.source_settings(args))
    assert not built.problems, built.problems
    scraper = Scraper(built.sources)
    server = Server(ListenAddress.parse(f"{LOOPBACK}:0"), scraper)
    thread = threading.Thread(target=server.serve_forever, name="exporter", daemon=True)
    thread.start()
    try:
        yield server.port
    finally:
        server.shutdown()
        server.server_close()
        scraper.close()


@contextmanager
def dashboard_data(workdir: Path, lab_state_dir: Path) -> Iterator[DashboardData]:
    """Lab under OLTP, then OLTP + DSS + snapshots with one data LUN breaching; yields once the
    phase switch happened (the caller waits for what its queries need)."""
    commands.up(LAB_CONFIG, lab_state_dir)
    with ExitStack() as stack:
        stack.callback(commands.down, lab_state_dir)
        commands.phase(lab_state_dir, "oltp")
        state = LabState.load(lab_state_dir)
        assert state is not None
        devices = {name: Path(path).name for name, path in state.loops.items()}
        loops = dict(state.loops)
        oracle = OracleEmulation(
            asm_disks={"DATA": [loops["oracle_data"]], "REDO": [loops["oracle_log"]]},
            redo=[[f"+REDO/ORCL/ONLINELOG/group_{g}.log"] for g in (1, 2)],
            controlfiles=["+DATA/ORCL/CONTROLFILE/current.261.1170000001"],
        )
        dmv = DmvState(
            {MSSQL_DATABASE: [(ROWS, loops["sqlserver1_data"]), (LOG, loops["sqlserver1_log"])]},
            server_name="SQL1",
        )
        tds = stack.enter_context(TdsServer(dmv))
        previous = os.environ.get(PASSWORD_ENV)
        os.environ[PASSWORD_ENV] = "dashboards"
        stack.callback(_restore_env, PASSWORD_ENV, previous)
        load = stack.enter_context(DatabaseLoad(oracle, dmv).running())
        port = stack.enter_context(exporter(exporter_config(state, workdir, tds.port), oracle))
        started = time.time()
        process = prometheus.start(
            workdir / "prometheus", prometheus.config([f"{LOOPBACK}:{port}"], f"{INTERVAL_SECONDS}s")
        )
        stack.callback(process.stop)
        time.sleep(OLTP_SECONDS)
        commands.phase(lab_state_dir, "oltp+dss+snapshot")
        load.dss = True
        commands.set_latency(lab_state_dir, BREACH_LUN, BREACH_MS, BREACH_MS, None)
        yield DashboardData(prometheus.api(process), started, devices)


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
