"""`lunlat check-config` refuses what `serve` would refuse or could not serve, naming the fix: a
database engine whose driver (the extra) is not installed, an empty password, an ODBC driver that
unixODBC does not know. Through the real CLI entry point (`lunlat.cli.main`), in-process where an
import must be made to fail, else in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lunlat.cli import main
from tests.support.skip_unless_installed import installed, needs

ORACLE = "oracle:\n  - name: ORCL\n    user: u\n    dsn: h/s\n    password_env: LUNLAT_TEST_PW\n"


def mssql(driver: str) -> str:
    return (
        "mssql:\n  - name: SQL1\n    user: u\n    server: h\n    password_env: LUNLAT_TEST_PW\n"
        f"    driver: {driver}\n"
    )


def run(tmp_path: Path, text: str, secret: str = "pw") -> tuple[int, str]:  # noqa: S107 - a test value
    path = tmp_path / "lunlat.yml"
    path.write_text(text)
    env = {**os.environ, "LUNLAT_TEST_PW": secret}
    result = subprocess.run(
        [sys.executable, "-m", "lunlat", "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    return result.returncode, result.stderr


def test_an_empty_password_variable_is_refused(tmp_path: Path) -> None:
    code, stderr = run(tmp_path, ORACLE, secret="")
    assert code == 2
    assert "lunlat.yml:5: oracle[0].password_env: environment variable LUNLAT_TEST_PW is empty" in stderr


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("\n")  # `echo > file`: the newline is not a password
    code, stderr = run(tmp_path, ORACLE.replace("password_env: LUNLAT_TEST_PW", f"password_file: {secret}"))
    assert code == 2
    assert f"oracle[0].password_file: {secret} is empty" in stderr


def test_an_engine_whose_driver_is_not_installed_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lunlat.yml"
    path.write_text(ORACLE)
    monkeypatch.setenv("LUNLAT_TEST_PW", "pw")
    monkeypatch.setitem(sys.modules, "oracledb", None)  # `import oracledb` now raises ImportError
    with pytest.raises(SystemExit) as exited:
        main(["check-config", str(path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "lunlat.yml:2: oracle[0]: python-oracledb is not installed" in err
    assert "pip install 'lunlat[oracle]'" in err


@needs("pyodbc")
def test_an_odbc_driver_unixodbc_does_not_know_is_refused_with_the_ones_it_knows(tmp_path: Path) -> None:
    import pyodbc  # noqa: PLC0415 - only with the mssql extra

    code, stderr = run(tmp_path, mssql("No Such ODBC Driver 99"))
    assert code == 2
    assert "mssql[0].driver: 'No Such ODBC Driver 99' is not registered with unixODBC" in stderr
    for known in pyodbc.drivers():
        assert known in stderr


@pytest.mark.skipif(not installed("pyodbc"), reason="pyodbc is not installed (pip install 'lunlat[mssql]')")
def test_a_registered_odbc_driver_passes(tmp_path: Path) -> None:
    import pyodbc  # noqa: PLC0415

    if not pyodbc.drivers():
        pytest.skip("no ODBC driver is registered with unixODBC (Debian: tdsodbc)")
    code, stderr = run(tmp_path, mssql(pyodbc.drivers()[0]))
    assert (code, stderr) == (0, "")
