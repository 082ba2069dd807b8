"""Hostile or broken config files: each ends in one clear line and exit 2, cheaply.

Through the real CLI (`lunlat check-config` in a subprocess) and through `parse_model` for the
latency goals file, which shares the YAML layer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lunlat.config import CONFIG_MAX_BYTES, ConfigError
from lunlat.configfile import parse_config
from lunlat.dbtarget import SECRET_MAX_BYTES
from lunlat.goals import load_goals, parse_goals
from lunlat.yamlmodel import MAX_PROBLEMS
from tests.support.hostile_files import make_fifo, run_lunlat
from tests.support.skip_unless_installed import needs

# Billion laughs: nine levels of nine aliases, 9**10 strings once expanded, in 350 bytes. The 4th
# line passes the alias limit (the 3rd expands to 820 nodes, the 4th to 9 times that).
BOMB = (
    "".join(
        f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}" if i else "lol"] * 9) + "]\n"
        for i in range(9)
    )
    + "luns: ["
    + ",".join(["*i"] * 9)
    + "]\n"
)


def check_config(tmp_path: Path, content: bytes, env: dict[str, str] | None = None) -> tuple[int, str]:
    path = tmp_path / "lunlat.yml"
    path.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "lunlat", "check-config", str(path)],
        capture_output=True,
        timeout=60,  # a hang is a failure, not a wait: the bomb used to take 73 s and 8 GB
        check=False,
        env=env,
    )
    return result.returncode, result.stderr.decode("utf-8", "replace")


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[:2000]
    assert len(stderr) < 400 and "Traceback" not in stderr
    assert lines[0].startswith("lunlat: config error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        pytest.param(BOMB.encode(), 4, "aliases expand to more than", id="billion-laughs"),
        pytest.param(
            b"luns:\n  ? [a, b]\n  : 1\n", 2, "a key must be a plain value, not a list", id="complex-key"
        ),
        pytest.param(b"luns: " + b"[" * 50_000 + b"]" * 50_000 + b"\n", 1, "nested deeper than", id="deep"),
        pytest.param(
            b"base: &b {database: x}\nluns:\n  - <<: *b\n    match: {device: sda}\n",
            3,
            "merge keys (<<) are not supported",
            id="merge-key",
        ),
        pytest.param(b"a: &a [*a]\n", 1, "refers to a node that contains it", id="recursive-alias"),
        pytest.param(b"luns: []\n# caf\xe9\n", 2, "not UTF-8: byte 0xe9 at column 6", id="latin-1"),
        pytest.param(b"luns: []\noracle: [\x01]\n", 2, "character U+0001 at column 10", id="control-char"),
    ],
)
def test_hostile_yaml_is_one_line_and_exit_2(tmp_path: Path, content: bytes, line: int, words: str) -> None:
    code, stderr = check_config(tmp_path, content)
    assert code == 2
    message = one_line(stderr)
    assert f"lunlat.yml:{line}: " in message and words in message, message


def test_the_bomb_is_small() -> None:
    assert len(BOMB) < 400 and BOMB.count("&") == 9


def test_aliases_of_a_small_block_still_work() -> None:
    config = parse_config(
        "luns:\n"
        "  - match: {device: sda}\n    database: &db Oracle\n    role: data\n"
        "  - match: {device: sdb}\n    database: *db\n    role: log\n"
    )
    assert [e.database for e in config.luns] == ["Oracle", "Oracle"]


def test_an_error_quotes_a_short_part_of_what_it_found() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("diskstats:\n  show_paths: [" + ", ".join(["x" * 100] * 1000) + "]\n")
    (problem,) = err.value.problems
    assert problem.line == 2 and problem.key == "diskstats.show_paths"
    assert "(got ['xxx" in problem.message and len(str(problem)) < 200


def test_a_long_mount_is_quoted_short() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("luns:\n  - match: {mount: " + "x" * 10_000 + "}\n    role: data\n")
    assert len(str(err.value)) < 300 and "must be an absolute path" in str(err.value)


def test_the_problems_listed_are_capped() -> None:
    text = "luns:\n" + "".join(f"  - match: {{device: sd{i}}}\n    role: bogus\n" for i in range(200))
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    problems = err.value.problems
    assert len(problems) == MAX_PROBLEMS + 1
    assert str(problems[-1]).endswith(f"{200 - MAX_PROBLEMS} more problems not listed")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (BOMB, "aliases expand to more than"),
        ("overrides:\n  - ? [a, b]\n    : 1\n", "a key must be a plain value"),
        ("default: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", "nested deeper than"),
        ("d: &d {goal_ms: 2}\ndefault:\n  <<: *d\n", "merge keys (<<) are not supported"),
    ],
)
def test_the_goals_file_refuses_the_same(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_goals(text, "goals.yaml")
    (problem,) = err.value.problems
    assert words in problem.message and problem.line is not None


def test_a_goals_file_that_is_not_utf8_is_named_by_line(tmp_path: Path) -> None:
    path = tmp_path / "goals.yaml"
    path.write_bytes(b"selector: 'job=\"lunlat\"'\ndefault:\n  severity: p\xe4ge\n")
    with pytest.raises(ConfigError) as err:
        load_goals(path)
    assert str(err.value) == f"{path}:3: not UTF-8: byte 0xe4 at column 14 (invalid continuation byte)"


# --- checks across entries -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("{device: sda}", "{device: sda}"),
        ("{device: sda}", "{device: /dev/sda}"),
        ("{alias: ora_redo}", "{device: /dev/mapper/ora_redo}"),
        ("{wwid: naa.600a098038303053453f463045727a4e}", "{wwid: 3600a098038303053453f463045727a4e}"),
        ("{mount: /u02/oradata}", "{mount: /u02/oradata/}"),
        ("{loop_file: a.img}", "{loop_file: a.img}"),
    ],
)
def test_two_luns_entries_for_one_device_are_refused_at_the_second(first: str, second: str) -> None:
    text = (
        "luns:\n"
        f"  - match: {first}\n    role: data\n"
        "  - match: {device: sdz}\n    role: temp\n"
        f"  - match: {second}\n    role: log\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, "lunlat.yml")
    (problem,) = err.value.problems
    assert problem.line == 6 and problem.key == "luns[2].match"
    assert "same device as an earlier entry (first on line 2)" in problem.message


def test_luns_entries_for_different_devices_pass() -> None:
    config = parse_config(
        "luns:\n  - match: {device: sda}\n    role: data\n  - match: {device: sdb}\n    role: log\n"
    )
    assert len(config.luns) == 2


def test_a_repeated_database_name_is_reported_where_it_repeats() -> None:
    text = (
        "oracle:\n  - name: ORCL\n    user: u\n    dsn: h/s\n    password_env: P\n"
        "mssql:\n  - name: SQL1\n    user: u\n    server: h\n    password_env: P\n"
        "  - name: ORCL\n    user: u\n    server: h\n    password_env: P\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, "lunlat.yml")
    (problem,) = err.value.problems
    assert problem.line == 11 and problem.key == "mssql[1].name"
    assert "'ORCL' is used twice" in problem.message and "(first on line 2)" in problem.message


# --- password sources ----------------------------------------------------------------------------


def _secret_config(tmp_path: Path, source: str) -> bytes:
    return f"oracle:\n  - name: ORCL\n    user: u\n    dsn: h/s\n    {source}\n".encode()


@needs("oracledb")  # check-config also refuses an Oracle target without its driver
def test_check_config_refuses_an_unset_password_env(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LUNLAT_TEST_UNSET"}
    code, stderr = check_config(tmp_path, _secret_config(tmp_path, "password_env: LUNLAT_TEST_UNSET"), env)
    assert code == 2
    message = one_line(stderr)
    assert (
        "lunlat.yml:5: oracle[0].password_env: environment variable LUNLAT_TEST_UNSET is not set" in message
    )
    syntax_only = subprocess.run(
        [sys.executable, "-m", "lunlat", "check-config", "--syntax-only", str(tmp_path / "lunlat.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert (syntax_only.returncode, syntax_only.stderr) == (0, "")


@needs("oracledb")  # check-config also refuses an Oracle target without its driver
def test_check_config_refuses_a_missing_or_unreadable_password_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    code, stderr = check_config(tmp_path, _secret_config(tmp_path, f"password_file: {missing}"))
    assert code == 2
    assert f"lunlat.yml:5: oracle[0].password_file: cannot read {missing}: No such file" in one_line(stderr)
    binary = tmp_path / "binary"
    binary.write_bytes(b"hunter\xff2\n")
    code, stderr = check_config(tmp_path, _secret_config(tmp_path, f"password_file: {binary}"))
    assert code == 2
    message = one_line(stderr)
    assert "not UTF-8" in message and "hunter" not in message and "xff" not in message


@needs("oracledb")  # check-config also refuses an Oracle target without its driver
def test_check_config_passes_readable_password_sources_without_printing_them(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("file-secret-value\n")
    code, stderr = check_config(tmp_path, _secret_config(tmp_path, f"password_file: {secret}"))
    assert (code, stderr) == (0, "")
    env = {**os.environ, "LUNLAT_TEST_SET": "env-secret-value"}
    path = tmp_path / "lunlat.yml"
    path.write_bytes(_secret_config(tmp_path, "password_env: LUNLAT_TEST_SET"))
    result = subprocess.run(
        [sys.executable, "-m", "lunlat", "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 0 and "secret-value" not in result.stdout + result.stderr


# --- what stands where the file should be --------------------------------------------------------


def check_path(path: Path, *flags: str) -> tuple[int, str]:
    """`lunlat check-config PATH` with a heap ceiling: a regression that reads /dev/zero to the end
    fails here with MemoryError instead of taking the machine's memory."""
    result = run_lunlat("check-config", *flags, str(path))
    return result.returncode, result.stderr.decode("utf-8", "replace")


def _hostile(tmp_path: Path, kind: str) -> Path:
    """A path that is no regular file: a FIFO nobody writes, a symlink to /dev/zero, a directory."""
    path = tmp_path / f"hostile-{kind}"
    if kind == "fifo":
        return make_fifo(path)
    if kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    return path


HOSTILE = {"fifo": "is a FIFO (named pipe)", "zero": "is a character device", "dir": "is a directory"}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_config_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = _hostile(tmp_path, kind)
    code, stderr = check_path(path)
    assert code == 2
    message = one_line(stderr)
    assert message.startswith(f"lunlat: config error: {path}: {HOSTILE[kind]}, not a regular file"), message
    assert "must be a regular file" in message


def test_a_config_larger_than_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yml"
    with path.open("w") as out:  # valid YAML all the way: only its size is wrong
        out.write("luns: []\n")
        out.write(("#" * 99 + "\n") * (CONFIG_MAX_BYTES // 100 + 1))
    code, stderr = check_path(path)
    assert code == 2
    message = one_line(stderr)
    assert f"{path}: is {path.stat().st_size:,} bytes, more than the 1 MiB a config file may be" in message


@needs("oracledb")  # check-config also refuses an Oracle target without its driver
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_check_config_refuses_a_password_file_that_is_no_regular_file(tmp_path: Path, kind: str) -> None:
    secret = _hostile(tmp_path, kind)
    config = tmp_path / "lunlat.yml"
    config.write_bytes(_secret_config(tmp_path, f"password_file: {secret}"))
    code, stderr = check_path(config)
    assert code == 2
    message = one_line(stderr)
    assert f"lunlat.yml:5: oracle[0].password_file: cannot read {secret}: {HOSTILE[kind]}" in message
    assert check_path(config, "--syntax-only") == (0, "")


@needs("oracledb")  # check-config also refuses an Oracle target without its driver
def test_check_config_refuses_a_password_file_larger_than_a_secret(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_bytes(b"x" * (SECRET_MAX_BYTES + 1))
    config = tmp_path / "lunlat.yml"
    config.write_bytes(_secret_config(tmp_path, f"password_file: {secret}"))
    code, stderr = check_path(config)
    assert code == 2
    assert "oracle[0].password_file: cannot read" in one_line(stderr) and "64 KiB" in stderr
