"""deploy/systemd/lunlat.service: `systemd-analyze verify` finds nothing to say, and the unit keeps
the dedicated user, the hardening and the credentials the README promises."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "lunlat.service"
INSTALLED_BINARY = "/opt/lunlat/bin/lunlat"


def verify(text: str, directory: Path) -> str:
    """systemd-analyze's complaints about the unit `text` (empty when there are none). The binary is
    pointed at a file that exists here: verify refuses a missing ExecStart."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    binary = directory / "lunlat"
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    binary.chmod(0o755)
    unit = directory / "lunlat.service"
    unit.write_text(text.replace(INSTALLED_BINARY, str(binary)), encoding="utf-8")
    done = subprocess.run(
        [tool, "verify", str(unit)], capture_output=True, text=True, check=False, timeout=60
    )
    return (done.stdout + done.stderr).strip() + ("" if done.returncode == 0 else f"\nexit {done.returncode}")


def test_the_unit_verifies_clean(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8")
    assert INSTALLED_BINARY in text
    assert verify(text, tmp_path) == ""


def test_verify_would_catch_a_misspelt_directive(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8").replace("NoNewPrivileges=yes", "NoNewPrivilege=yes")
    assert "Unknown key 'NoNewPrivilege'" in verify(text, tmp_path)


def test_dedicated_user_hardening_and_credentials() -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text(encoding="utf-8"))
    service = parser["Service"]
    assert service["User"] == "lunlat" and service["Group"] == "lunlat"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    }.items():
        assert service[key] == value, key
    assert service["LoadCredential"] == "lunlat:/etc/lunlat/credentials"
    assert service["EnvironmentFile"] == "-/etc/default/lunlat"
    assert "--config.file=/etc/lunlat/lunlat.yaml" in service["ExecStart"]
    assert parser["Install"]["WantedBy"] == "multi-user.target"
    readme = (UNIT.parent / "README.md").read_text(encoding="utf-8")
    assert "/run/credentials/lunlat.service/lunlat_" in readme and "systemctl enable --now lunlat" in readme
