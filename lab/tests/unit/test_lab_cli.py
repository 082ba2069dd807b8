"""`lunlat-lab` works from any directory: its defaults are package data, never a checkout's paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lunlat_lab
from lunlat.reference_architecture import DEFAULT_REFERENCE_FILE
from lunlat_lab.cli import parser
from lunlat_lab.config import LabConfig
from lunlat_lab.defaults import DEFAULT_LAB_FILE
from lunlat_lab.exporter_config import render

ACTIONS = ("up", "exporter-config", "down", "phase", "set-latency", "status", "scenario")


def _lab(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lunlat_lab", *argv], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_the_defaults_are_files_of_the_installed_packages() -> None:
    assert DEFAULT_LAB_FILE.parent == Path(lunlat_lab.__file__).parent and DEFAULT_LAB_FILE.is_file()
    assert DEFAULT_REFERENCE_FILE.parent.name == "lunlat" and DEFAULT_REFERENCE_FILE.is_file()
    args = parser().parse_args(["up"])
    assert args.config == DEFAULT_LAB_FILE and args.config.is_absolute()
    assert args.state_dir.is_absolute()
    assert parser().parse_args(["scenario", "--reference"]).reference == DEFAULT_REFERENCE_FILE


def test_every_action_helps_from_an_empty_directory(tmp_path: Path) -> None:
    for action in ACTIONS:
        result = _lab(action, "--help", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: lunlat-lab {action}")
    assert list(tmp_path.iterdir()) == []


def test_exporter_config_reads_the_shipped_description_from_an_empty_directory(tmp_path: Path) -> None:
    result = _lab("exporter-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == render(LabConfig.load(DEFAULT_LAB_FILE))
    assert list(tmp_path.iterdir()) == []  # standard output by default: nothing written here


def test_exporter_config_check_needs_the_file_to_compare(tmp_path: Path) -> None:
    result = _lab("exporter-config", "--check", cwd=tmp_path)
    assert result.returncode == 2
    assert "exporter-config --check needs --output FILE" in result.stderr


def test_a_missing_description_is_named(tmp_path: Path) -> None:
    result = _lab("exporter-config", "--config=absent.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "absent.yaml" in result.stderr
    assert "Traceback" not in result.stderr
