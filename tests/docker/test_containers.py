"""Databases in Docker containers: their files' paths are the container's; the source maps them through
the container's mounts (asked of the engine by the real Docker SDK, here of tests/docker/engine.py) to
host paths, and those to the host's LUNs.

The host (FakeHost) has no mount at the containers' paths (/var/opt/mssql, /opt/oracle): without the
mapping every file would land on the root disk, so each test below shows the mapping at work.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig, DockerConfig
from lunlat.configfile import parse_config
from lunlat.containers import ContainerMapper, ContainerRef
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.mssql import ENGINE as MSSQL_ENGINE
from lunlat.engines.mssql import metrics as mssql_metrics
from lunlat.engines.mssql.source import MssqlSource, connect_pyodbc
from lunlat.engines.oracle import ENGINE as ORACLE_ENGINE
from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.engines.oracle.source import OracleSource
from lunlat.model import Family
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceResult
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.factory import Settings
from lunlat.sources.registry import build_sources
from tests.docker.engine import DATA_ROOT, FakeContainer, FakeEngine, bind, published, tmpfs, volume
from tests.mssql.targets import PASSWORD_ENV, freetds_target
from tests.mssql.tds_server import DmvState, Load, Stream, TdsServer
from tests.mssql.test_mssql_source import NO_DRIVER
from tests.oracle.simulator import IO, Constant
from tests.oracle.simulator import Load as OracleLoad
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost
from tests.support.skip_unless_installed import needs

FILES = mssql_metrics.MSSQL_FILE_LABELS
NAME = "mssql:SQL Server 1"
LOAD: Load = {
    ("sales", "data", "read"): Stream(200, 425),
    ("sales", "log", "write"): Stream(100, 300),
}
needs_driver = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)


def mpath(h: FakeHost, name: str, alias: str, path: str, tail: str) -> None:
    wwid = "3600a09803830363472" + tail.rjust(13, "0")
    h.add_scsi_disk(path, wwid="naa." + wwid[1:])
    h.add_multipath(name, alias=alias, wwid=wwid, paths=[path])


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    """The host's LUNs: the root disk (sda1 at /), sql_data at /srv/mssql/data, ora_data at
    /srv/oradata, and docker_root at the engine's data root (named volumes, writable layers)."""
    h = FakeHost(tmp_path / "host")
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.add_partition("sda", 1)
    mpath(h, "dm-3", "sql_data", "sdb", "1")
    mpath(h, "dm-4", "docker_root", "sdc", "2")
    mpath(h, "dm-5", "ora_data", "sdd", "3")
    mpath(h, "dm-6", "asm_disk1", "sde", "4")
    h.mount("/", "sda1")
    h.mount("/srv/mssql/data", "dm-3")
    h.mount(DATA_ROOT, "dm-4")
    h.mount("/srv/oradata", "dm-5")
    h.write()
    return h


def sql_container(**changes: Any) -> FakeContainer:
    """SQL Server's data bind-mounted from the host, its log on a named volume."""
    settings: dict[str, Any] = {
        "mounts": [bind("/srv/mssql/data", "/var/opt/mssql/data"), volume("mssql_log", "/var/opt/mssql/log")],
    }
    settings.update(changes)
    return FakeContainer("sql1", **settings)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[FakeEngine]:
    with FakeEngine(tmp_path / "docker.sock") as fake:
        yield fake


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[TdsServer]:
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    with TdsServer(DmvState(databases=("sales",))) as srv:
        yield srv


# The engine lookup's wait, for the tests whose engine answers (or refuses) at once: long enough
# that a starved CPU does not turn their answer into a timeout (a CI run's lane, in its idle cpu
# cgroup, logged "no answer within 1 s" for a socket of mode 0, whose connect() fails at once).
# The tests of a hung engine set a short one.
ANSWERS_WITHIN_S = 30.0
HUNG_AFTER_S = 1.0


def mssql_source(
    server: TdsServer,
    host: FakeHost,
    url: str,
    container: str = "sql1",
    labels: DbLunLabels | None = None,
    clock: Any = None,
    docker_timeout: float = ANSWERS_WITHIN_S,
) -> MssqlSource:
    target = freetds_target(server.port, container=container, timeout_seconds=2)
    mapper = ContainerMapper(
        ContainerRef(name=container), DockerConfig(url=url, timeout_seconds=docker_timeout)
    )
    return MssqlSource(
        target,
        connect_pyodbc(target),
        FileLocator(host.procfs, host.sysfs),
        labels,
        clock=clock or FakeClock(),
        container=mapper,
    )


def values(result: SourceResult, spec: contract.MetricSpec) -> dict[tuple[str, ...], float]:
    return next(f for f in result.families if f.spec is spec).by_labels()


def luns_by_file(result: SourceResult) -> dict[str, str]:
    return {
        k[FILES.index("file")]: k[FILES.index("lun")] for k in values(result, mssql_metrics.MSSQL_FILE_READS)
    }


def capabilities(result: SourceResult) -> dict[str, float]:
    """The source's capabilities but those the database variant decides alone (a Linux SQL Server
    uses no volume, `volumes` 1; a known edition, `engine_edition` 1; a 19c CDB has per-container
    histograms): what the container changes."""
    variant = {"volumes", "container_histograms", "engine_edition"}
    return {k[1]: v for k, v in values(result, contract.SOURCE_CAPABILITY).items() if k[1] not in variant}


def scrape(host: FakeHost, source: Any) -> dict[str, bool]:
    """lunlat_source_up of the host layer and `source`, through the scraper."""
    scraper = Scraper([DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig()), source])
    try:
        outcomes = scraper.collect(10)
        assert any(f.spec is contract.DEVICE_READS for f in outcomes[0][1].families), "host layer served"
        return {s.name: o.up for s, o in outcomes}
    finally:
        scraper.close()


@needs("docker")
@needs_driver
def test_sql_server_files_at_container_paths_get_the_host_luns_of_their_mounts(
    server: TdsServer, host: FakeHost, engine: FakeEngine
) -> None:
    engine.run(sql_container())
    registry = DbLunLabels()
    source = mssql_source(server, host, engine.url, labels=registry)
    server.state.advance(60, LOAD)
    result = source.collect()
    assert not result.errors
    luns = luns_by_file(result)
    # A bind mount: the host directory's LUN. A named volume: its directory under the data root.
    assert luns["/var/opt/mssql/data/sales.mdf"] == "sql_data"
    assert luns["/var/opt/mssql/data/tempdb.mdf"] == "sql_data"
    assert luns["/var/opt/mssql/log/sales_log.ldf"] == "docker_root"
    assert capabilities(result) == {"container": 1}
    _, labels = registry.merged()
    assert (labels["dm-3"].database, labels["dm-3"].role) == ("SQL Server 1", "data")
    assert (labels["dm-4"].database, labels["dm-4"].role) == ("SQL Server 1", "log")
    assert "sda1" not in labels and "sda" not in labels  # nothing lands on the root disk
    assert any(path.endswith("/containers/sql1/json") for _, path in engine.requests)


@needs("docker")
@needs_driver
def test_a_path_on_no_mount_is_in_the_writable_layer_and_a_tmpfs_on_no_lun(
    server: TdsServer, host: FakeHost, engine: FakeEngine
) -> None:
    engine.run(sql_container(mounts=[tmpfs("/var/opt/mssql/log")]))
    result = mssql_source(server, host, engine.url).collect()
    luns = luns_by_file(result)
    assert luns["/var/opt/mssql/data/sales.mdf"] == "docker_root"  # <data root>/overlay2/<id>/diff/…
    assert luns["/var/opt/mssql/log/sales_log.ldf"] == ""
    assert capabilities(result) == {"container": 1}


@needs("docker")
@needs_driver
def test_without_a_writable_layer_reported_a_path_on_no_mount_is_unmapped(
    server: TdsServer, host: FakeHost, engine: FakeEngine
) -> None:
    engine.run(sql_container(mounts=[volume("mssql_log", "/var/opt/mssql/log")], overlay2=False))
    luns = luns_by_file(mssql_source(server, host, engine.url).collect())
    assert luns["/var/opt/mssql/data/sales.mdf"] == ""  # never the root disk's LUN
    assert luns["/var/opt/mssql/log/sales_log.ldf"] == "docker_root"


@needs("docker")
@needs_driver
def test_the_container_is_found_by_the_port_it_publishes_when_docker_is_configured(
    server: TdsServer, host: FakeHost, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another database container on another port, with other mounts: it must not be taken.
    engine.run(
        FakeContainer(
            "other", mounts=[bind("/srv/oradata", "/var/opt/mssql/data")], ports=[published(1433, 14999)]
        )
    )
    engine.run(sql_container(ports=[published(1433, server.port)]))
    engine.run(FakeContainer("stopped", ports=[published(1433, server.port)], running=False))
    config = parse_config(
        f"docker:\n  url: {engine.url}\n  timeout_seconds: {ANSWERS_WITHIN_S:g}\n"
        f"mssql:\n  - name: SQL Server 1\n    server: 127.0.0.1,{server.port}\n    driver: FreeTDS\n"
        f"    encrypt: false\n    user: lunlat\n    password_env: {PASSWORD_ENV}\n"
    )
    built = build_sources(config, Settings(procfs=host.procfs, sysfs=host.sysfs))
    try:
        assert not built.problems
        (source,) = [s for s in built.sources if s.name == NAME]
        assert isinstance(source, MssqlSource)
        result = source.collect()
        assert luns_by_file(result)["/var/opt/mssql/data/sales.mdf"] == "sql_data"
        assert capabilities(result) == {"container": 1}
    finally:
        built.close()
    listed = [path for _, path in engine.requests if "/containers/json" in path]
    assert listed and all("all=1" not in p and "all=true" not in p for p in listed)  # running ones only


@needs("docker")
@needs_driver
def test_a_target_elsewhere_is_not_looked_up_and_publishes_no_container_capability(
    server: TdsServer, host: FakeHost, engine: FakeEngine
) -> None:
    config = parse_config(
        f"docker:\n  url: {engine.url}\n"
        f"mssql:\n  - name: SQL Server 1\n    server: db.example.com,1433\n    driver: FreeTDS\n"
        f"    user: lunlat\n    password_env: {PASSWORD_ENV}\n"
    )
    built = build_sources(config, Settings(procfs=host.procfs, sysfs=host.sysfs))
    try:
        (source,) = [s for s in built.sources if s.name == NAME]
        assert isinstance(source, MssqlSource) and source.built_from == config.targets(MSSQL_ENGINE)[0]
    finally:
        built.close()
    assert not engine.requests


@needs("docker")
@needs_driver
def test_a_mount_removed_on_a_recreated_container_is_followed_after_reconnect(
    server: TdsServer, host: FakeHost, engine: FakeEngine
) -> None:
    engine.run(sql_container())
    clock = FakeClock()
    registry = DbLunLabels()
    source = mssql_source(server, host, engine.url, labels=registry, clock=clock)
    assert luns_by_file(source.collect())["/var/opt/mssql/data/sales.mdf"] == "sql_data"
    # docker compose up recreates it without the bind: the data is now in its writable layer.
    engine.recreate(sql_container(mounts=[volume("mssql_log", "/var/opt/mssql/log")]))
    assert luns_by_file(source.collect())["/var/opt/mssql/data/sales.mdf"] == "sql_data"  # same session
    server.restart()
    assert scrape(host, source)[NAME] is False  # the session was lost with the old container
    clock.now += 1
    result = source.collect()
    assert luns_by_file(result)["/var/opt/mssql/data/sales.mdf"] == "docker_root"
    _, labels = registry.merged()
    assert labels["dm-4"].role == "data"  # the host layer follows too


def one_line(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() + " " + str(getattr(r, "kv", {}))
        for r in caplog.records
        if "container" in r.getMessage()
    ]


FAULTS = {
    "no engine": ("missing", "engine unreachable"),
    "engine answers 500": ("status", "http 500"),
    "unknown container": ("unknown", "no such container"),
    "garbage answer": ("garbage", "unexpected answer"),
    "engine hangs": ("hang", "no answer within"),
}


# docker-py's UnixHTTPConnection.connect leaves its socket unclosed when connect() fails
# (docker/transport/unixconn.py): garbage collected, but reported as a ResourceWarning, which
# tests/pytest.ini turns into an error. Not this module's socket to close.
SDK_SOCKET_LEAK = (
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
)


@needs("docker")
@needs_driver
@SDK_SOCKET_LEAK[0]
@SDK_SOCKET_LEAK[1]
@pytest.mark.parametrize("fault", list(FAULTS))
def test_an_engine_that_cannot_answer_costs_the_lun_only_said_once(
    fault: str,
    server: TdsServer,
    host: FakeHost,
    engine: FakeEngine,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="lunlat")
    engine.run(sql_container())
    kind, cause = FAULTS[fault]
    url, container = engine.url, "sql1"
    if kind == "missing":
        url = f"unix://{tmp_path / 'nothing.sock'}"
    elif kind == "status":
        engine.status = 500
    elif kind == "unknown":
        container = "sql2"
    elif kind == "garbage":
        engine.garbage = True
    else:
        engine.delay = 3 * HUNG_AFTER_S  # past the timeout
    clock = FakeClock()
    timeout = HUNG_AFTER_S if kind == "hang" else ANSWERS_WITHIN_S
    source = mssql_source(server, host, url, container=container, clock=clock, docker_timeout=timeout)
    server.state.advance(60, LOAD)
    first = source.collect()
    assert not first.errors
    assert capabilities(first) == {"container": 0}
    assert set(luns_by_file(first).values()) == {""}  # never the root disk's LUN of the raw path
    assert values(first, mssql_metrics.MSSQL_WAITS)  # the rest is published
    assert scrape(host, source)[NAME] is True
    server.restart()  # a new session looks the container up again: still failing, not said again
    scrape(host, source)
    clock.now += 1
    again = source.collect()
    assert capabilities(again) == {"container": 0}
    said = [r for r in caplog.records if "container not mapped" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert cause in str(getattr(said[0], "kv", {}).get("err")).lower(), said[0].__dict__
    assert not [r for r in caplog.records if "no known LUN" in r.getMessage()]  # not one line per file
    gc.collect()  # the SDK's leaked sockets are reported here, under this test's warning filter


@needs("docker")
@SDK_SOCKET_LEAK[0]
@SDK_SOCKET_LEAK[1]
def test_a_hung_engine_is_said_the_same_whichever_timeout_ends_the_wait(engine: FakeEngine) -> None:
    # Two clocks bound a lookup: the mapper's own wait and the SDK's read timeout on each call. On a
    # loaded machine either can end first; the user is told one thing for one cause. Here the SDK's
    # ends first (0.2 s against 2 s), the order the mapper's wait cannot show.
    from lunlat.containers import _engine_client  # noqa: PLC0415 - the SDK's real client, a shorter timeout

    engine.run(sql_container())
    engine.delay = 3
    config = DockerConfig(url=engine.url, timeout_seconds=2)
    mapper = ContainerMapper(ContainerRef(name="sql1"), config, client=lambda _: _engine_client(config, 0.2))
    mapper.refresh()
    assert not mapper.mapped
    assert mapper.problem == "engine unreachable: no answer within 2 s", mapper.problem
    gc.collect()


@needs("docker")
@needs_driver
def test_a_failed_lookup_is_retried_and_its_recovery_said(
    server: TdsServer, host: FakeHost, engine: FakeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lunlat")
    engine.run(sql_container())
    engine.status = 500
    clock = FakeClock()
    registry = DbLunLabels()
    source = mssql_source(server, host, engine.url, labels=registry, clock=clock)
    assert capabilities(source.collect()) == {"container": 0}
    engine.status = None
    clock.now += 61  # the same session: a failed lookup is tried again after a minute
    result = source.collect()
    assert capabilities(result) == {"container": 1}
    assert luns_by_file(result)["/var/opt/mssql/data/sales.mdf"] == "sql_data"
    assert registry.merged()[1]["dm-3"].database == "SQL Server 1"
    assert sum("mapped again" in r.getMessage() for r in caplog.records) == 1


# Root passes any socket's mode (CAP_DAC_OVERRIDE): as root the test runs itself again in a pytest
# whose root has lost the capabilities that bypass file permissions, as an unprivileged user has.
WITHOUT_DAC = "LUNLAT_TEST_DOCKER_WITHOUT_DAC"
PR_CAPBSET_DROP = 24  # prctl(2)
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # linux/capability.h


@needs("docker")
@needs_driver
@SDK_SOCKET_LEAK[0]
@SDK_SOCKET_LEAK[1]
def test_a_socket_without_permission_is_said_as_such(
    server: TdsServer, host: FakeHost, engine: FakeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    if os.geteuid() == 0 and not os.environ.get(WITHOUT_DAC):
        rerun_without_dac_override(test_a_socket_without_permission_is_said_as_such.__name__)
        return
    caplog.set_level(logging.INFO, logger="lunlat")
    engine.run(sql_container())
    engine.socket_path.chmod(0)
    source = mssql_source(server, host, engine.url)
    server.state.advance(60, LOAD)
    result = source.collect()
    assert capabilities(result) == {"container": 0}
    assert set(luns_by_file(result).values()) == {""}
    assert scrape(host, source)[NAME] is True
    said = [r for r in caplog.records if "container not mapped" in r.getMessage()]
    assert len(said) == 1
    assert "permission denied" in str(getattr(said[0], "kv", {}).get("err"))
    assert not engine.requests
    gc.collect()  # the SDK's leaked sockets are reported here, under this test's warning filter


def _drop_dac_override() -> None:
    """In the child before exec: take the DAC capabilities out of the bounding set, so the
    exec'd root process never has them (capabilities(7), "Capability bounding set")."""
    import ctypes  # noqa: PLC0415 - only here, in the child

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            os._exit(97)


def rerun_without_dac_override(test: str) -> None:
    """Run `test` of this file in a pytest whose root has no CAP_DAC_OVERRIDE."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            "tests/pytest.ini",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::{test}",
        ],
        cwd=Path(__file__).parents[2],
        preexec_fn=_drop_dac_override,
        env={**os.environ, WITHOUT_DAC: "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if run.returncode == 97:
        pytest.skip("cannot drop CAP_DAC_OVERRIDE here (no CAP_SETPCAP), and as root no socket mode denies")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout, run.stdout[-1000:]


# --- Oracle --------------------------------------------------------------------------------------

ORADATA = "/opt/oracle/oradata/FREE"


@needs("docker")
@needs("oracledb")
def test_oracle_files_and_asm_disks_in_a_container_get_the_host_luns(
    host: FakeHost, engine: FakeEngine
) -> None:
    """Oracle Free's datafiles on a bind mount, an ASM disk passed in with --device."""
    from tests.oracle.emulation import OracleEmulation  # noqa: PLC0415 - needs the oracle extra

    engine.run(
        FakeContainer(
            "ora1",
            image="container-registry.oracle.com/database/free:latest",
            mounts=[bind("/srv/oradata", "/opt/oracle/oradata")],
            devices=[("/dev/mapper/asm_disk1", "/dev/oracleasm/disk1")],
        )
    )
    emu = OracleEmulation(
        datafiles=[f"{ORADATA}/system01.dbf", f"{ORADATA}/users01.dbf", "+DATA/FREE/sales01.dbf"],
        tempfiles=[f"{ORADATA}/temp01.dbf"],
        redo=[[f"{ORADATA}/redo01.log"], [f"{ORADATA}/redo02.log"]],
        controlfiles=[f"{ORADATA}/control01.ctl"],
        asm=True,
        asm_disks={"DATA": ["/dev/oracleasm/disk1"]},
    )
    registry = DbLunLabels()
    target = parse_config(
        "oracle:\n  - name: Oracle\n    dsn: localhost:1521/FREEPDB1\n    user: lunlat\n"
        "    password_env: LUNLAT_TEST_UNUSED\n    container: ora1\n    timeout_seconds: 2\n"
    ).targets(ORACLE_ENGINE)[0]
    mapper = ContainerMapper(
        ContainerRef(name="ora1"), DockerConfig(url=engine.url, timeout_seconds=ANSWERS_WITHIN_S)
    )
    source = OracleSource(
        target, emu.connect, FileLocator(host.procfs, host.sysfs), registry, container=mapper
    )
    emu.advance(60, OracleLoad(IO("data", "read", 100, Constant(425))))
    result = source.collect()
    assert not result.errors
    files = oracle_metrics.ORACLE_FILE_LABELS
    luns = {
        (k[files.index("file")], k[files.index("lun")])
        for k in values(result, oracle_metrics.ORACLE_FILE_READS)
    }
    assert (f"{ORADATA}/users01.dbf", "ora_data") in luns
    assert (f"{ORADATA}/temp01.dbf", "ora_data") in luns
    assert ("+DATA/FREE/sales01.dbf", "asm_disk1") in luns  # through the device's host path
    asm = oracle_metrics.ORACLE_ASM_LABELS
    assert {k[asm.index("lun")] for k in values(result, oracle_metrics.ORACLE_ASM_READS)} == {"asm_disk1"}
    assert capabilities(result) == {"asm": 1, "container": 1}
    _, labels = registry.merged()
    assert (labels["dm-5"].database, labels["dm-5"].role) == ("Oracle", "data")
    assert labels["dm-6"].role == "data"


@needs("docker")
@needs("oracledb")
def test_oracle_auto_lookup_by_the_easy_connect_port(host: FakeHost, engine: FakeEngine) -> None:
    from tests.oracle.emulation import OracleEmulation  # noqa: PLC0415 - needs the oracle extra

    engine.run(
        FakeContainer(
            "ora1", mounts=[bind("/srv/oradata", "/opt/oracle/oradata")], ports=[published(1521, 1522)]
        )
    )
    config = parse_config(
        f"docker:\n  url: {engine.url}\n"
        "oracle:\n  - name: Oracle\n    dsn: 127.0.0.1:1522/FREEPDB1\n    user: lunlat\n"
        "    password_env: LUNLAT_TEST_UNUSED\n"
    )
    built = build_sources(config, Settings(procfs=host.procfs, sysfs=host.sysfs))
    try:
        (built_source,) = [s for s in built.sources if s.name == "oracle:Oracle"]
        assert isinstance(built_source, OracleSource)
    finally:
        built.close()
    emu = OracleEmulation(datafiles=[f"{ORADATA}/users01.dbf"])
    (target,) = config.targets(ORACLE_ENGINE)
    source = OracleSource(
        target,
        emu.connect,
        FileLocator(host.procfs, host.sysfs),
        container=built_source._container,  # the mapper the factory built for it
    )
    result = source.collect()
    files = oracle_metrics.ORACLE_FILE_LABELS
    data = [k for k in values(result, oracle_metrics.ORACLE_FILE_READS) if k[files.index("role")] == "data"]
    assert {k[files.index("lun")] for k in data} == {"ora_data"}
    assert capabilities(result) == {"asm": 1, "container": 1}


@needs("oracledb")
def test_without_the_docker_sdk_a_container_target_is_one_build_problem_and_the_rest_builds(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker raises ImportError
    config = parse_config(
        "oracle:\n  - name: Oracle\n    dsn: db1:1521/ORCL\n    user: lunlat\n"
        "    password_env: LUNLAT_TEST_UNUSED\n    container: ora1\n"
    )
    built = build_sources(config, Settings(procfs=host.procfs, sysfs=host.sysfs))
    try:
        assert len(built.problems) == 1 and "\n" not in built.problems[0]
        assert "'Oracle'" in built.problems[0] and "lunlat[docker]" in built.problems[0]
        assert [s.name for s in built.sources] == ["diskstats"]
    finally:
        built.close()
    plain = parse_config(
        "oracle:\n  - name: Oracle\n    dsn: 127.0.0.1:1521/ORCL\n    user: lunlat\n"
        "    password_env: LUNLAT_TEST_UNUSED\n"
    )
    built = build_sources(plain, Settings(procfs=host.procfs, sysfs=host.sysfs))
    try:
        assert not built.problems  # no container asked for: the SDK is not needed
    finally:
        built.close()


@needs("docker")
@needs("oracledb")
def test_capability_families_are_one_per_source(host: FakeHost, engine: FakeEngine) -> None:
    """The shared helper publishes each capability once, under the contract's labels."""
    from tests.oracle.emulation import OracleEmulation  # noqa: PLC0415 - needs the oracle extra

    engine.run(FakeContainer("ora1", mounts=[bind("/srv/oradata", "/opt/oracle/oradata")]))
    emu = OracleEmulation(datafiles=[f"{ORADATA}/users01.dbf"])
    target = parse_config(
        "oracle:\n  - name: Oracle\n    dsn: db1:1521/ORCL\n    user: lunlat\n"
        "    password_env: LUNLAT_TEST_UNUSED\n    container: ora1\n"
    ).targets(ORACLE_ENGINE)[0]
    mapper = ContainerMapper(ContainerRef(name="ora1"), DockerConfig(url=engine.url))
    source = OracleSource(target, emu.connect, FileLocator(host.procfs, host.sysfs), container=mapper)
    result = source.collect()
    (family,) = [f for f in result.families if f.spec is contract.SOURCE_CAPABILITY]
    assert Family.by_labels(family) == {
        ("oracle:Oracle", "asm"): 1,
        ("oracle:Oracle", "container_histograms"): 1,
        ("oracle:Oracle", "container"): 1,
    }
