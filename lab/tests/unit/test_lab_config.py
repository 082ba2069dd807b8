"""The lab description (the lab's lab.yaml) is valid, has the reference's databases, and labels the exporter's LUNs
through the exporter config generated from it (deploy/lab/lunlat.yaml)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lunlat.config import ConfigError, LunMatch
from lunlat.configfile import load_config, parse_config
from lunlat.engines.registry import ENGINES
from lunlat.luns import matched_devices
from lunlat.topology import BlockDevice, MountTable, resolve
from lunlat.yamlmodel import parse_model
from lunlat_lab.config import LabConfig
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.exporter_config import exporter_config, render
from lunlat_lab.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
LAB = DEFAULT_LAB_FILE
LAB_EXPORTER_CONFIG = ROOT / "deploy" / "lab" / "lunlat.yaml"


def test_the_shipped_lab_is_a_valid_config_with_the_reference_databases() -> None:
    config = LabConfig.load(LAB)
    databases = {(lun.database, lun.engine) for lun in config.luns}
    assert databases == {("SQL Server 1", "mssql"), ("SQL Server 2", "mssql"), ("Oracle", "oracle")}
    for database, _ in databases:
        roles = {lun.role for lun in config.luns if lun.database == database and lun.workload == "oltp"}
        assert roles == {"data", "log"}, database
    assert list(config.phases) == ["oltp", "oltp+dss", "oltp+dss+snapshot"]


def test_every_lab_lun_becomes_a_luns_entry_matching_its_loop_file() -> None:
    config = LabConfig.load(LAB)
    entries = exporter_config(config).luns
    assert len(entries) == len(config.luns)
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
            "unknown engine 'db2': one of " + ", ".join(engine.key for engine in ENGINES),
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
        parse_model(textwrap.dedent(snippet), "lab.yaml", LabConfig)
    assert any(needle in str(p) for p in err.value.problems), err.value


def test_the_committed_exporter_config_is_generated_from_the_lab_and_loads() -> None:
    """deploy/lab/lunlat.yaml is what `lunlat-lab exporter-config` writes (CI runs its --check), and
    the exporter loads it as an ordinary config: the loop devices only, each lab LUN labelled."""
    lab = LabConfig.load(LAB)
    assert LAB_EXPORTER_CONFIG.read_text(encoding="utf-8") == render(lab)
    config = load_config(LAB_EXPORTER_CONFIG)
    assert config == exporter_config(lab)
    assert config.diskstats.include == "^loop"
    labels = {e.match.loop_file: (e.database, e.role, e.workload, e.array) for e in config.luns}
    assert labels == {
        f"{lun.name}.img": (lun.database, lun.role, lun.workload, lun.array) for lun in lab.luns
    }


def test_a_lab_ups_exporter_config_publishes_its_own_loop_devices_only() -> None:
    """`up` writes the config once its loop devices are attached: only they are published, so another
    lab of the same description (the same `loop_file` names) or any other loop device is not."""
    lab = LabConfig.load(LAB)
    loops = {lun.name: f"/dev/loop{n}" for n, lun in zip((3, 12, *range(20, 40)), lab.luns, strict=False)}
    config = exporter_config(lab, loops=loops)
    assert config.diskstats.include is not None
    include = re.compile(config.diskstats.include)
    assert {name for name in (f"loop{n}" for n in range(100)) if include.search(name)} == {
        Path(device).name for device in loops.values()
    }
    assert config.luns == exporter_config(lab).luns


def test_the_exporter_config_does_not_know_the_lab() -> None:
    """A `lab:` section is not the exporter's: its config refuses it as any unknown key."""
    with pytest.raises(ConfigError, match="lab: unknown key"):
        parse_config("lab:\n  size_mib: 64\n")


def test_exporter_config_check_fails_on_a_stale_file_and_passes_on_a_fresh_one(tmp_path: Path) -> None:
    output = tmp_path / "lunlat.yaml"
    argv = [sys.executable, "-m", "lunlat_lab", "exporter-config", f"--config={LAB}", f"--output={output}"]
    missing = subprocess.run([*argv, "--check"], capture_output=True, text=True, check=False)
    assert missing.returncode == 1 and "run `lunlat-lab exporter-config`" in missing.stderr
    assert subprocess.run(argv, capture_output=True, check=False).returncode == 0
    assert output.read_text(encoding="utf-8") == render(LabConfig.load(LAB))
    assert subprocess.run([*argv, "--check"], capture_output=True, check=False).returncode == 0
    output.write_text(output.read_text(encoding="utf-8").replace("role: log", "role: data"), encoding="utf-8")
    stale = subprocess.run([*argv, "--check"], capture_output=True, text=True, check=False)
    assert stale.returncode == 1 and "is stale" in stale.stderr


def test_the_exporters_command_has_no_lab() -> None:
    """The lab is its own command: `lunlat lab` is no subcommand of the exporter, and importing the
    exporter's command line loads nothing of the lab."""
    result = subprocess.run(
        [sys.executable, "-m", "lunlat", "lab", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2 and "`lunlat lab` is now `lunlat-lab`" in result.stderr
    code = "import sys, lunlat.cli; print(sorted(m for m in sys.modules if m.startswith('lunlat_lab')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_settings_round_trip_from_the_lab() -> None:
    config = LabConfig.load(LAB)
    settings = Settings.from_config(config)
    again = Settings.from_json(settings.to_json())
    assert again == settings
    assert again.luns["oracle_log"].write_ms == 0.64
    assert again.arrays["powermax"].slots == config.arrays["powermax"].slots
