"""Real data for the dashboards' queries: the lab's loop LUNs under the reference's phases, an
Oracle database (the emulated v$ views) on ASM disk groups on the lab's Oracle LUNs, a SQL Server
(the wire-level TDS server, through pyodbc and FreeTDS) with its files on the SQL Server 1 LUNs,
one lunlat exporter publishing all three layers, and the Debian Prometheus (2.42) scraping it with
the repo's recording and alert rules; beside it, where asked for, a Prometheus 3 (the build of
tests/support/prometheus_server.py) with the same config, scraping the same targets at the same
interval from the same moment, so one run of the lab gives both servers their data.

Beside it, a second host (tests.support.fake_host: the lab has no device-mapper, so no real multipath): one LUN
on a Pure FlashArray volume through two multipath paths, published by a second exporter like any
host, one path going offline at the phase switch; and the array's own view of that volume from a
stub serving Pure's exporter format, scraped with deploy/arrays/purefa.yml's relabeling, so the
path-health and host-minus-array panels have data.

The scenario follows the reference: OLTP alone, then DSS scans and the snapshot copies join; one
data LUN is raised above the goal meanwhile so the breach panels and alert annotations have
something to show. Scrape and rule evaluation every 5 s (the rules' windows are 1 m and longer).
"""

from __future__ import annotations

import dataclasses
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
from lunlat.configfile import load_config
from lunlat.engines.oracle import source as oracle_source
from lunlat.scrape import Scraper
from lunlat.sources.registry import build_sources
from lunlat.web.server import ListenAddress, Server
from lunlat_lab import commands
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.state import LabState
from tests.mssql.tds_server import LOG, ROWS, DmvState, Stream, TdsServer
from tests.oracle.emulation import OracleEmulation
from tests.oracle.simulator import IO, Commits, Load, LogNormal
from tests.support import prometheus_server, stub_exporter
from tests.support.background import in_background
from tests.support.exporter_process import LOOPBACK
from tests.support.fake_host import FakeHost, Stats

LAB_CONFIG = DEFAULT_LAB_FILE
INTERVAL_SECONDS = 5
OLTP_SECONDS = 45.0
BREACH_LUN = "sqlserver1_data"
BREACH_MS = 2.0
PASSWORD_ENV = "LUNLAT_DASHBOARD_TEST_PASSWORD"  # noqa: S105 - the variable's name
MSSQL_DATABASE = "tpcc"
PUREFA_JOB = Path(__file__).resolve().parents[2] / "deploy" / "arrays" / "purefa.yml"
# Test input: a volume serial as Purity writes it (24 hex digits, upper case); its NAA designator is
# Pure's OUI prefix 624a9370 and the serial (deploy/arrays/purefa.yml cites where that comes from).
PURE_SERIAL = "6C1B16CE1C034D1C00024C6F"
PURE_NAA = f"624a9370{PURE_SERIAL.lower()}"
MULTIPATH_LUN = "pure_vol1"
MULTIPATH_PATHS = ("sdb", "sdc")


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
        with in_background(self.run, self._stop, "db-load"):
            yield self


@dataclass
class MultipathHost:
    """A host whose one LUN (`MULTIPATH_LUN`) is a multipath map over two SCSI paths to a Pure
    volume; `run` moves its counters as a steady OLTP load would, in real time."""

    host: FakeHost
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)

    @classmethod
    def make(cls, root: Path) -> MultipathHost:
        host = FakeHost(root)
        host.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4", vendor="SEAGATE", model="ST600MM0009")
        for path in MULTIPATH_PATHS:
            host.add_scsi_disk(path, wwid=f"naa.{PURE_NAA}", vendor="PURE", model="FlashArray")
        host.add_multipath("dm-0", alias=MULTIPATH_LUN, wwid=f"3{PURE_NAA}", paths=list(MULTIPATH_PATHS))
        for name in ("sda", *MULTIPATH_PATHS, "dm-0"):
            host.stats[name] = Stats()
        host.write()
        return cls(host)

    def config(self, directory: Path) -> Path:
        """The host's exporter config: its Pure LUN holds an Oracle RAC node's data (test input)."""
        path = directory / "multipath-host.yaml"
        entry = {"match": {"alias": MULTIPATH_LUN}, "database": "Oracle", "role": "data", "workload": "oltp"}
        path.write_text(yaml.safe_dump({"luns": [entry]}, sort_keys=False), encoding="utf-8")
        return path

    def lose_a_path(self) -> None:
        self.host.set_state(MULTIPATH_PATHS[-1], "offline")

    def run(self) -> None:
        """300 reads/s at 0.7 ms and 100 writes/s at 0.9 ms on the map (whole ms per second)."""
        while not self._stop.wait(1.0):
            old = self.host.stats["dm-0"]
            self.host.stats["dm-0"] = dataclasses.replace(
                old,
                reads=old.reads + 300,
                read_sectors=old.read_sectors + 300 * 16,
                read_ms=old.read_ms + 210,
                writes=old.writes + 100,
                write_sectors=old.write_sectors + 100 * 16,
                write_ms=old.write_ms + 90,
                # The lab's loop LUNs are write-through (no flush reaches them): this LUN's cache is
                # write-back, 50 flushes/s at 0.4 ms, so the flush panel has data.
                flushes=old.flushes + 50,
                flush_ms=old.flush_ms + 20,
                weighted_ms=old.weighted_ms + 300,
                io_ms=old.io_ms + 280,
            )
            self.host.write()

    @contextmanager
    def running(self) -> Iterator[MultipathHost]:
        with in_background(self.run, self._stop, "multipath-host"):
            yield self


def purefa_exposition() -> str:
    """/metrics/volumes as Pure's exporter serves it: purefa_volume_performance_latency_usec{naa_id,
    name, dimension}, a gauge in µs (deploy/arrays/purefa.yml cites the exporter's source); the
    array sees the volume at 0.5 ms per read and 0.6 ms per write, below the host's 0.7 and 0.9."""
    naa_id = f"naa.624a9370{PURE_SERIAL}"
    lines = [
        "# HELP purefa_volume_performance_latency_usec FlashArray volume IO latency",
        "# TYPE purefa_volume_performance_latency_usec gauge",
    ]
    for dimension, usec in (("usec_per_read_op", 500), ("usec_per_write_op", 600)):
        lines.append(
            f'purefa_volume_performance_latency_usec{{dimension="{dimension}",name="ora-data",'
            f'naa_id="{naa_id}"}} {usec}'
        )
    return "\n".join(lines) + "\n"


@contextmanager
def purefa_stub() -> Iterator[int]:
    with stub_exporter.serving("/metrics/volumes", purefa_exposition) as port:
        yield port


def purefa_job(stub_port: int, token_file: Path) -> dict[str, Any]:
    """deploy/arrays/purefa.yml's job as shipped (its relabeling, which gives the series `naa`),
    pointed at the stub and scraped as often as the rest."""
    (job,) = yaml.safe_load(PUREFA_JOB.read_text(encoding="utf-8"))["scrape_configs"]
    job["scrape_interval"] = job["scrape_timeout"] = f"{INTERVAL_SECONDS}s"
    job["authorization"]["credentials_file"] = str(token_file)
    job["static_configs"] = [{"targets": ["flasharray-test"]}]
    address = [r for r in job["relabel_configs"] if r.get("target_label") == "__address__"]
    assert len(address) == 1, "the job names its exporter in one relabel step"
    address[0]["replacement"] = f"{LOOPBACK}:{stub_port}"
    return dict(job)


@dataclass(frozen=True, slots=True)
class DashboardData:
    """What the query tests get: one Prometheus' API, the span that holds data, the lab's devices."""

    api: prometheus_server.PromApi
    start: float
    devices: dict[str, str]  # lab LUN name → kernel device (the exporter's `lun` label)

    def end(self) -> float:
        return time.time()


def exporter_config(lab_state: LabState, directory: Path, mssql_port: int) -> Path:
    """The lab's exporter config (its LUNs with their databases, roles and workloads) plus the
    Oracle and SQL Server targets whose files live on those LUNs, and the per-I/O histograms."""
    data = yaml.safe_load(lab_state.exporter_config.read_text(encoding="utf-8"))
    data["biolatency"] = {"enabled": True}
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
def exporter(config_path: Path | None, oracle: OracleEmulation | None, *flags: str) -> Iterator[int]:
    """A lunlat exporter in this process (the Oracle source's connection is the emulation's;
    everything else as `lunlat serve` builds it with `flags`); yields its port."""
    args = cli._parser().parse_args(
        ["serve", *([f"--config.file={config_path}"] if config_path else []), *flags]
    )
    connect = (lambda _target: oracle.connect) if oracle is not None else oracle_source.connect_oracledb
    with mock.patch.object(oracle_source, "connect_oracledb", connect):
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
def dashboard_data(
    workdir: Path, lab_state_dir: Path, servers: dict[str, str]
) -> Iterator[dict[str, DashboardData]]:
    """Lab under OLTP, then OLTP + DSS + snapshots with one data LUN breaching; yields once the
    phase switch happened (the caller waits for what its queries need), one DashboardData per
    server of `servers` (release line → binary: prometheus_server.binary), keyed like it. Every
    server gets the same config: the same targets, rules and intervals."""
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
        multipath = stack.enter_context(MultipathHost.make(workdir / "multipath-host").running())
        multipath_port = stack.enter_context(
            exporter(
                multipath.config(workdir),
                None,
                f"--path.procfs={multipath.host.procfs}",
                f"--path.sysfs={multipath.host.sysfs}",
            )
        )
        token = workdir / "purefa-token"
        token.write_text("00000000-0000-0000-0000-000000000000\n", encoding="utf-8")
        cfg = prometheus_server.config(
            [f"{LOOPBACK}:{port}", f"{LOOPBACK}:{multipath_port}"], f"{INTERVAL_SECONDS}s"
        )
        cfg["scrape_configs"].append(purefa_job(stack.enter_context(purefa_stub()), token))
        started = time.time()
        apis = {}
        for major, binary in servers.items():
            process = prometheus_server.start(workdir / f"prometheus{major}", cfg, binary)
            stack.callback(process.stop)
            apis[major] = prometheus_server.api(process)
        time.sleep(OLTP_SECONDS)
        multipath.lose_a_path()
        commands.phase(lab_state_dir, "oltp+dss+snapshot")
        load.dss = True
        commands.set_latency(lab_state_dir, BREACH_LUN, BREACH_MS, BREACH_MS, None)
        yield {major: DashboardData(api, started, devices) for major, api in apis.items()}


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
