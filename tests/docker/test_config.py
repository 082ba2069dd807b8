"""The config keys of databases in containers: `container:` on every database target and the
`docker:` section, validated as strictly as the rest (unknown keys and bad values named by key and line)."""

from __future__ import annotations

import pytest

from lunlat.config import ConfigError
from lunlat.configfile import parse_config
from lunlat.containers import ContainerRef, ref_for
from lunlat.engines.mssql import ENGINE as MSSQL_ENGINE
from lunlat.engines.oracle import ENGINE as ORACLE_ENGINE

MSSQL = """\
mssql:
  - name: SQL Server 1
    server: 127.0.0.1,14330
    user: lunlat
    password_env: X
"""
ORACLE = """\
oracle:
  - name: Oracle
    dsn: localhost:1522/FREEPDB1
    user: lunlat
    password_env: X
"""


def problems(text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ConfigError) as err:
        parse_config(text, "lunlat.yml")
    return [(p.line, p.key, p.message) for p in err.value.problems]


def test_container_names_the_target_container_with_or_without_a_docker_section() -> None:
    config = parse_config(MSSQL + "    container: sql1\n" + ORACLE + "    container: /ora-free_1.x\n")
    assert config.docker is None
    assert ref_for(config.targets(MSSQL_ENGINE)[0], config.docker) == ContainerRef(name="sql1")
    assert ref_for(config.targets(ORACLE_ENGINE)[0], config.docker) == ContainerRef(name="/ora-free_1.x")


def test_without_a_docker_section_there_is_no_auto_lookup() -> None:
    config = parse_config(MSSQL + ORACLE)
    assert ref_for(config.targets(MSSQL_ENGINE)[0], config.docker) is None
    assert ref_for(config.targets(ORACLE_ENGINE)[0], config.docker) is None


@pytest.mark.parametrize(
    ("server", "want"),
    [
        ("127.0.0.1,14330", ContainerRef(host="127.0.0.1", port=14330)),
        ("localhost", ContainerRef(host="localhost", port=1433)),  # SQL Server's default port
        ("'[::1],1444'", ContainerRef(host="[::1]", port=1444)),
        ("db.example.com,1433", None),  # not this host's loopback
        ("127.0.0.1\\\\SQLEXPRESS", None),  # a named instance: its port is the Browser's to say
    ],
)
def test_auto_lookup_by_the_sql_server_port(server: str, want: ContainerRef | None) -> None:
    config = parse_config("docker: {}\n" + MSSQL.replace("127.0.0.1,14330", server))
    assert ref_for(config.targets(MSSQL_ENGINE)[0], config.docker) == want


@pytest.mark.parametrize(
    ("dsn", "want"),
    [
        ("localhost:1522/FREEPDB1", ContainerRef(host="localhost", port=1522)),
        ("127.0.0.1/FREE", ContainerRef(host="127.0.0.1", port=1521)),  # Easy Connect's default port
        ("tcps://[::1]:2484/FREE?wallet_location=/w", ContainerRef(host="::1", port=2484)),
        ("FREEPDB1", None),  # a TNS alias: no auto lookup
        ("db1:1521/ORCL", None),
    ],
)
def test_auto_lookup_by_the_easy_connect_port(dsn: str, want: ContainerRef | None) -> None:
    config = parse_config(
        "docker:\n  url: unix:///run/docker.sock\n" + ORACLE.replace("localhost:1522/FREEPDB1", dsn)
    )
    assert ref_for(config.targets(ORACLE_ENGINE)[0], config.docker) == want


def test_a_container_key_wins_over_the_port() -> None:
    config = parse_config("docker: {}\n" + MSSQL + "    container: sql1\n")
    assert ref_for(config.targets(MSSQL_ENGINE)[0], config.docker) == ContainerRef(name="sql1")


def test_docker_section_defaults_and_values() -> None:
    config = parse_config("docker:\n  url: tcp://127.0.0.1:2375\n  timeout_seconds: 0.5\n")
    assert config.docker is not None
    assert (config.docker.url, config.docker.timeout_seconds) == ("tcp://127.0.0.1:2375", 0.5)
    default = parse_config("docker: {}\n").docker
    assert default is not None and default.url is None and default.timeout_seconds == 2


def test_bad_keys_and_values_are_named_with_their_line() -> None:
    found = problems("docker:\n  url: ftp://x\n  timeout_seconds: 0\n  socket: /x\n")
    keys = {(line, key) for line, key, _ in found}
    assert keys == {(2, "docker.url"), (3, "docker.timeout_seconds"), (4, "docker.socket")}
    assert any("unknown key" in m for _, k, m in found if k == "docker.socket")
    bad_name = problems(MSSQL + "    container: 'sql 1;rm'\n")
    assert [(line, key) for line, key, _ in bad_name] == [(6, "mssql[0].container")]
    assert problems(ORACLE + "    container: ''\n")[0][1] == "oracle[0].container"
