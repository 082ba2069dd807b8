"""Config validation: good configs load, bad ones are refused with the key and line named."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat.config import DEFAULT_EXCLUDE, Config, ConfigError
from lunlat.configfile import CONFIG_MODEL, load_config, parse_config
from lunlat.engines.build import per_target
from lunlat.engines.mssql import ENGINE as MSSQL_ENGINE
from lunlat.engines.oracle import ENGINE as ORACLE_ENGINE
from lunlat.sources.factory import BuildError, Context, Settings
from tests.unit.test_scrape import FakeSource

GOOD = """\
diskstats:
  include: '^(dm-|sd|nvme|vd|xvd|loop)'
  exclude: '^(ram|zram)'
  show_paths: false
luns:
  - match: {alias: ora_redo_a}
    database: Oracle
    role: log
    workload: oltp
  - match: {wwid: naa.600a098038303053453f463045727a4e}
    role: data
  - match: {device: /dev/loop3}
    database: SQL Server 1
  - match: {mount: /u02/oradata}
    role: data
"""


def problems(text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "lunlat.yml")
    return [(p.line, p.key, p.message) for p in err.value.problems]


def test_the_design_shape_loads() -> None:
    config = parse_config(GOOD)
    assert config.diskstats.include == "^(dm-|sd|nvme|vd|xvd|loop)"
    assert [e.match.describe() for e in config.luns] == [
        "alias=ora_redo_a",
        "wwid=naa.600a098038303053453f463045727a4e",
        "device=/dev/loop3",
        "mount=/u02/oradata",
    ]
    assert config.luns[0].role == "log"


def test_no_file_and_empty_file_give_the_embedded_default() -> None:
    assert load_config(None) == CONFIG_MODEL()
    assert parse_config("") == CONFIG_MODEL()
    assert parse_config("# only a comment\n") == CONFIG_MODEL()
    assert Config().diskstats.exclude == DEFAULT_EXCLUDE
    assert Config().diskstats.include is None and Config().luns == []


def test_unknown_key_is_named_with_its_line() -> None:
    assert problems("diskstats:\n  show_path: true\n") == [(2, "diskstats.show_path", "unknown key")]


def test_bad_role_names_entry_and_line() -> None:
    got = problems("luns:\n  - match: {alias: a}\n    role: dta\n")
    assert len(got) == 1
    line, key, message = got[0]
    assert (line, key) == (3, "luns[0].role")
    assert "'data'" in message and "'dta'" in message


def test_match_needs_exactly_one_key() -> None:
    ((line, key, message),) = problems("luns:\n  - match: {alias: a, device: sdb}\n    role: data\n")
    assert (line, key) == (2, "luns[0].match")
    assert "exactly one" in message and "alias, device" in message
    ((_, _, message),) = problems("luns:\n  - match: {}\n    role: data\n")
    assert "got none" in message


def test_entry_must_label_something_and_mount_must_be_absolute() -> None:
    ((_, key, message),) = problems("luns:\n  - match: {alias: a}\n")
    assert key == "luns[0]" and "at least one" in message
    ((_, key, message),) = problems("luns:\n  - match: {mount: u02}\n    role: data\n")
    assert key == "luns[0].match" and "absolute" in message


def test_invalid_regex_is_refused() -> None:
    ((line, key, message),) = problems("diskstats:\n  include: '^(dm-'\n")
    assert (line, key) == (2, "diskstats.include")
    assert "regular expression" in message


def test_yaml_syntax_error_and_duplicate_keys_have_lines() -> None:
    ((line, _, message),) = problems("diskstats:\n  include: [unclosed\n")
    assert line is not None and "invalid YAML" in message
    ((line, _, message),) = problems("diskstats:\n  show_paths: true\n  show_paths: false\n")
    assert line == 3 and "duplicate key 'show_paths' (first on line 2)" in message


def test_wrong_types_and_top_level_shape() -> None:
    ((line, key, message),) = problems("diskstats:\n  show_paths: maybe\n")
    assert (line, key) == (2, "diskstats.show_paths") and "'maybe'" in message
    ((line, _, message),) = problems("- a\n- b\n")
    assert line == 1 and "mapping" in message
    ((_, key, _),) = problems("luns: {alias: a}\n")
    assert key == "luns"


MSSQL = """\
mssql:
  - name: SQL Server 1
    server: sql1.example.com,1433
    driver: FreeTDS
    user: lunlat
    password_file: /run/secrets/mssql
    encrypt: true
    trust_server_certificate: false
    workload: oltp
    timeout_seconds: 5
"""


def test_sql_server_target_loads_and_bad_ones_are_named() -> None:
    (target,) = parse_config(MSSQL).targets(MSSQL_ENGINE)
    assert (target.name, target.server, target.driver, target.encrypt) == (
        "SQL Server 1",
        "sql1.example.com,1433",
        "FreeTDS",
        True,
    )
    assert any(
        k == "mssql[0].server" and "';'" in m for _, k, m in problems(MSSQL.replace("1433", "1433;x=1"))
    )
    assert any(
        k == "mssql[0].password"
        for _, k, _ in problems(MSSQL.replace("password_file: /run/secrets/mssql", "password: x"))
    )
    both = MSSQL + ORACLE.replace("name: Oracle", "name: SQL Server 1")
    assert any("unique" in m and "SQL Server 1" in m for _, _, m in problems(both))


ORACLE = """\
oracle:
  - name: Oracle
    dsn: db1.example.com:1521/ORCLPDB1
    user: lunlat
    password_env: LUNLAT_ORACLE_PASSWORD
    workload: oltp
    timeout_seconds: 5
"""


def test_oracle_target_loads_with_its_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    (target,) = parse_config(ORACLE).targets(ORACLE_ENGINE)
    assert (target.name, target.dsn, target.user, target.workload) == (
        "Oracle",
        "db1.example.com:1521/ORCLPDB1",
        "lunlat",
        "oltp",
    )
    monkeypatch.delenv("LUNLAT_ORACLE_PASSWORD", raising=False)
    with pytest.raises(ValueError, match="LUNLAT_ORACLE_PASSWORD is not set"):
        target.password.read()
    monkeypatch.setenv("LUNLAT_ORACLE_PASSWORD", "s3cret")
    assert target.password.read() == "s3cret"


def test_oracle_password_file_loses_one_trailing_newline_only(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("  pass word \n", encoding="utf-8")
    text = ORACLE.replace("password_env: LUNLAT_ORACLE_PASSWORD", f"password_file: {secret}")
    (target,) = parse_config(text).targets(ORACLE_ENGINE)
    assert target.password.read() == "  pass word "
    secret.unlink()
    with pytest.raises(ValueError, match=r"cannot read .*pw") as caught:
        target.password.read()
    assert "pass word" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "key", "needle"),
    [
        (("password_env: LUNLAT_ORACLE_PASSWORD", "password: hunter2"), "oracle[0].password", "never inline"),
        (("    password_env: LUNLAT_ORACLE_PASSWORD\n", ""), "oracle[0]", "password_env"),
        (
            ("password_env: LUNLAT_ORACLE_PASSWORD", "password_env: 'no such var'"),
            "oracle[0]",
            "variable name",
        ),
        (("timeout_seconds: 5", "timeout_seconds: 0"), "oracle[0].timeout_seconds", "greater than 0"),
        (
            ("timeout_seconds: 5", "file_map_max_age_seconds: 30"),
            "oracle[0].file_map_max_age_seconds",
            "greater than or equal to 60",
        ),
        (
            ("timeout_seconds: 5", "file_map_max_age_seconds: 1h"),
            "oracle[0].file_map_max_age_seconds",
            "valid number",
        ),
        (("dsn: db1.example.com:1521/ORCLPDB1", "dsn: ' '"), "oracle[0].dsn", "empty"),
        (("workload: oltp", "workload: oltp\n    bogus: 1"), "oracle[0].bogus", "unknown key"),
    ],
)
def test_bad_oracle_targets_are_named(change: tuple[str, str], key: str, needle: str) -> None:
    got = problems(ORACLE.replace(*change))
    assert any(k == key and needle in m for _, k, m in got), got


def test_oracle_secret_in_both_places_and_duplicate_names_are_refused() -> None:
    both = ORACLE.replace("workload: oltp", "password_file: /run/secrets/x\n    workload: oltp")
    assert any("not both" in m for _, _, m in problems(both))
    twice = ORACLE + ORACLE.removeprefix("oracle:\n")
    assert any("unique" in m and "Oracle" in m for _, _, m in problems(twice))


def test_several_problems_are_reported_together() -> None:
    got = problems("diskstats:\n  bogus: 1\nluns:\n  - match: {alias: a}\n    role: nope\n")
    assert [key for _, key, _ in got] == ["diskstats.bogus", "luns[0].role"]


def test_unreadable_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yml")
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(binary)


def test_a_file_map_limit_the_refresh_would_outrun_is_refused_naming_both_and_the_fix() -> None:
    # A healthy map is read again every --collector.topology.refresh-interval: a limit below that would
    # drop it between two readings (issue 43).
    config = parse_config(ORACLE.replace("timeout_seconds: 5", "file_map_max_age_seconds: 600"))
    (target,) = config.targets(ORACLE_ENGINE)
    assert target.file_map_max_age_seconds == 600
    context = Context.of(config, Settings(refresh_interval=900))
    built = per_target(context, [target], lambda t, _: FakeSource(t.name))
    assert isinstance(built, BuildError)
    assert "file_map_max_age_seconds (600 s)" in str(built) and "refresh-interval (900 s)" in str(built)
    assert "raise" in str(built)
    kept = per_target(
        Context.of(config, Settings(refresh_interval=300)), [target], lambda t, _: FakeSource(t.name)
    )
    assert not isinstance(kept, BuildError) and [s.name for s in kept] == ["Oracle"]
    (default,) = parse_config(ORACLE).targets(ORACLE_ENGINE)
    assert default.file_map_max_age_seconds == 3600
