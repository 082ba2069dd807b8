"""Sources register themselves: the registry builds them from the config and the flags, and a source
that cannot be built is an error value naming why, never an exit from library code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lunlat.configfile import parse_config
from lunlat.engines.mssql.source import MssqlSource
from lunlat.engines.oracle.source import OracleSource
from lunlat.sources import registry
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.factory import Settings
from lunlat.sources.psutil_disks import PsutilDisksSource
from lunlat.sources.registry import build_sources
from tests.support.skip_unless_installed import needs

CONFIG = """
oracle:
  - {name: Oracle, dsn: "127.0.0.1:1/ORCL", user: lunlat, password_env: LUNLAT_TEST_REGISTRY_PW}
mssql:
  - {name: SQL, server: "127.0.0.1,1", user: lunlat, password_env: LUNLAT_TEST_REGISTRY_PW, driver: FreeTDS}
"""


@pytest.fixture
def procfs(tmp_path: Path) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "diskstats").write_text("")
    return tmp_path / "proc"


@needs("oracledb")
@needs("pyodbc")
def test_the_host_layer_and_the_databases_share_one_set_of_lun_labels(procfs: Path, tmp_path: Path) -> None:
    built = build_sources(parse_config(CONFIG), Settings(procfs, tmp_path / "sys"))
    assert built.problems == []
    host, oracle, mssql = built.sources
    assert isinstance(host, DiskstatsSource) and isinstance(oracle, OracleSource)
    assert isinstance(mssql, MssqlSource)
    assert [s.name for s in built.sources] == ["diskstats", "oracle:Oracle", "mssql:SQL"]
    assert host._db_labels is not None
    assert oracle._db_labels is host._db_labels and mssql._db_labels is host._db_labels
    assert oracle._locator is not None and oracle._locator is not mssql._locator
    built.close()


@needs("oracledb")
@needs("pyodbc")
def test_psutil_hosts_get_no_sysfs_lookups(tmp_path: Path) -> None:
    built = build_sources(parse_config(CONFIG), Settings(tmp_path, tmp_path, host_source="psutil"))
    host, oracle, _ = built.sources
    assert isinstance(host, PsutilDisksSource) and isinstance(oracle, OracleSource)
    assert oracle._locator is None and oracle._db_labels is None


def test_a_missing_diskstats_is_a_problem_not_an_exit(tmp_path: Path) -> None:
    built = build_sources(parse_config(""), Settings(tmp_path / "nowhere", tmp_path))
    assert built.sources == []
    assert built.problems == [f"--path.procfs: {tmp_path / 'nowhere' / 'diskstats'} does not exist"]


def test_a_missing_driver_is_a_problem_not_an_exit(
    procfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "oracledb", None)  # import oracledb raises ImportError
    monkeypatch.setitem(sys.modules, "pyodbc", None)
    built = build_sources(parse_config(CONFIG), Settings(procfs, tmp_path))
    assert [s.name for s in built.sources] == ["diskstats"]
    assert built.problems == [
        "the oracle source needs python-oracledb: pip install 'lunlat[oracle]'",
        "the mssql source needs pyodbc and an ODBC driver: pip install 'lunlat[mssql]'",
    ]


def test_every_source_module_is_registered_once() -> None:
    names = [name for name, _ in registry.FACTORIES]
    assert names == ["diskstats", "psutil", "biolatency", "oracle", "mssql", "postgres"]
    assert len({factory for _, factory in registry.FACTORIES}) == len(names)


@needs("oracledb")
@needs("pyodbc")
def test_a_rebuild_hands_the_database_labels_on(procfs: Path, tmp_path: Path) -> None:
    first = build_sources(parse_config(CONFIG), Settings(procfs, tmp_path))
    again = build_sources(parse_config(CONFIG), Settings(procfs, tmp_path), first.db_labels)
    host, oracle, _ = again.sources
    assert isinstance(host, DiskstatsSource) and isinstance(oracle, OracleSource)
    assert first.db_labels is not None and again.db_labels is first.db_labels
    assert host._db_labels is first.db_labels and oracle._db_labels is first.db_labels
