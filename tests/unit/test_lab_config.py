"""The lab description (deploy/lab/lab.yaml) is valid, mirrors the reference, and labels the exporter's LUNs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lunlat.config import ConfigError, LunMatch, load_config, parse_config
from lunlat.lab.settings import Settings
from lunlat.luns import matched_devices
from lunlat.topology import BlockDevice, MountTable, resolve

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "deploy" / "lab" / "lab.yaml"
REFERENCE = ROOT.parent / "shared" / "reference" / "powermax_2000_latency_tables.csv"


def test_the_shipped_lab_is_a_valid_config_with_the_reference_databases() -> None:
    config = load_config(LAB)
    assert config.lab is not None
    databases = {(lun.database, lun.engine) for lun in config.lab.luns}
    assert databases == {("SQL Server 1", "mssql"), ("SQL Server 2", "mssql"), ("Oracle", "oracle")}
    for database, _ in databases:
        roles = {lun.role for lun in config.lab.luns if lun.database == database and lun.workload == "oltp"}
        assert roles == {"data", "log"}, database
    assert list(config.lab.phases) == ["oltp", "oltp+dss", "oltp+dss+snapshot"]


@pytest.mark.skipif(not REFERENCE.exists(), reason="shared/reference is not beside the repository")
def test_baselines_follow_the_reference_oltp_tables() -> None:
    config = load_config(LAB)
    assert config.lab is not None
    with REFERENCE.open() as f:
        rows = [
            r for r in csv.DictReader(line for line in f if not line.startswith("#")) if r["phase"] == "oltp"
        ]
    assert rows
    for row in rows:
        (lun,) = [
            lun for lun in config.lab.luns
            if lun.database == row["database"] and lun.role == row["lun_role"] and lun.workload == row["workload"]
        ]  # fmt: skip
        configured = lun.latency.read_ms if row["op"] == "read" else lun.latency.write_ms
        assert configured == float(row["avg_latency_ms"]), (lun.name, row["op"])


def test_every_lab_lun_becomes_a_luns_entry_matching_its_loop_file() -> None:
    config = load_config(LAB)
    assert config.lab is not None
    entries = config.lun_entries()
    assert len(entries) == len(config.luns) + len(config.lab.luns)
    by_file = {e.match.loop_file: e for e in entries if e.match.loop_file}
    snap = by_file["oracle_snap_log.img"]
    assert (snap.database, snap.role, snap.workload) == ("Oracle", "log", "snapshot_oltp")


def test_loop_file_matches_by_name_or_full_path() -> None:
    devices = {
        "loop3": BlockDevice(
            "loop3", "7:3", loop_attached=True, loop_file="/run/lunlat-lab/mnt/oracle_log.img"
        ),
        "loop4": BlockDevice(
            "loop4", "7:4", loop_attached=True, loop_file="/srv/other/oracle_log.img (deleted)"
        ),
        "loop5": BlockDevice("loop5", "7:5", loop_attached=False),
    }
    views = resolve(devices, MountTable())
    assert matched_devices(LunMatch(loop_file="oracle_log.img"), devices, views, MountTable()) == [
        "loop3",
        "loop4",
    ]
    full = LunMatch(loop_file="/run/lunlat-lab/mnt/oracle_log.img")
    assert matched_devices(full, devices, views, MountTable()) == ["loop3"]


@pytest.mark.parametrize(
    ("snippet", "needle"),
    [
        (
            "  arrays: {a: {}}\n  luns:\n    - {name: x, database: D, engine: mssql, role: data, workload: oltp, "
            "array: b, latency: {read_ms: 1, write_ms: 1}}\n",
            "array 'b' is not in arrays",
        ),
        (
            "  luns:\n    - {name: Bad-Name, database: D, engine: mssql, role: data, workload: oltp, "
            "latency: {read_ms: 1, write_ms: 1}}\n",
            "must be lower-case",
        ),
        (
            "  luns:\n    - {name: x, database: D, engine: db2, role: data, workload: oltp, "
            "latency: {read_ms: 1, write_ms: 1}}\n",
            "'mssql' or 'oracle'",
        ),
        (
            "  luns:\n    - {name: x, database: D, engine: mssql, role: data, workload: oltp, "
            "latency: {read_ms: 1, write_ms: 1}}\n  phases: {p: [nope]}\n",
            "unknown workloads nope",
        ),
    ],
)
def test_lab_mistakes_are_named(snippet: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("lab:\n" + snippet)
    assert any(needle in str(p) for p in err.value.problems), err.value


def test_settings_round_trip_from_the_lab() -> None:
    config = load_config(LAB)
    assert config.lab is not None
    settings = Settings.from_config(config.lab)
    again = Settings.from_json(settings.to_json())
    assert again == settings
    assert again.luns["oracle_log"].write_ms == 0.64
    assert again.arrays["powermax"].slots == config.lab.arrays["powermax"].slots
