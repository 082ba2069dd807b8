"""deploy/oracle: the monitoring user gets exactly what oracle_sql reads, and the docker-compose
profile `oracle` is wired to files the repository has.

grants.sql is read the way SQL*Plus reads it (its commands, SQL statements ending in `;`, PL/SQL
blocks ending in `/`); the container detection is evaluated for a CDB root and a PDB. The setup
script is sourced the way the Oracle Database Free image sources it, with a stand-in `sqlplus`.
`docker-compose config` checks the compose file where docker-compose is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import sqlglot
import yaml
from sqlglot import exp

from lunlat.configfile import load_config
from lunlat.engines.oracle import ENGINE as ORACLE_ENGINE
from lunlat.engines.oracle import sql as oracle_sql
from tests.support.compose_config import compose_config, mounts

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "deploy" / "oracle"
SETUP = ORACLE / "setup"
# Oracle's CDB root, and a PDB (a non-CDB answers with its own name: the same case for the script).
ROOT_CONTAINER, PDB = "CDB$ROOT", "FREEPDB1"
SQLPLUS_COMMANDS = {"SET", "DEFINE", "UNDEFINE", "COLUMN", "WHENEVER", "ACCEPT", "PROMPT", "EXIT"}


# --- grants.sql, read as SQL*Plus reads it -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Statement:
    kind: str  # "sqlplus" (one line), "sql" (up to `;`) or "plsql" (up to a line `/`)
    text: str  # whitespace collapsed, without the `;` or `/`
    comment: tuple[str, ...]  # the `--` lines right above it


def sqlplus_script(path: Path) -> list[Statement]:
    statements: list[Statement] = []
    comment: list[str] = []
    body: list[str] = []
    kind = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not kind:
            if line.startswith("--") or line.upper().startswith("REM"):
                comment.append(line.lstrip("-").strip())
                continue
            if not line:
                comment = []
                continue
            first = line.split()[0].upper()
            if first in SQLPLUS_COMMANDS:
                statements.append(Statement("sqlplus", " ".join(line.split()), tuple(comment)))
                comment = []
                continue
            kind = "plsql" if first in ("BEGIN", "DECLARE") else "sql"
        if kind == "plsql" and line == "/":
            ended = True
        elif kind == "sql" and line.endswith(";"):
            body.append(line.removesuffix(";"))
            ended = True
        else:
            assert not (kind == "sql" and not line), f"{path.name}: blank line inside {body[:1]}"
            body.append(line)
            ended = False
        if ended:
            statements.append(Statement(kind, " ".join(" ".join(body).split()), tuple(comment)))
            body, comment, kind = [], [], ""
    assert not kind, f"{path.name} ends inside a statement: {body}"
    return statements


def sys_view(view: str) -> str:
    """The SYS object behind a public V$/GV$ synonym: gv$iostat_file -> SYS.GV_$IOSTAT_FILE."""
    match = re.fullmatch(r"(g?v)\$(\w+)", view.lower())
    assert match, f"{view} is not a V$ or GV$ view"
    return f"SYS.{match.group(1).upper()}_${match.group(2).upper()}"


GRANT = re.compile(r"GRANT (?P<privilege>[A-Z_ ]+?)(?: ON (?P<object>\S+))? TO (?P<grantee>\S+)(?P<rest>.*)")


def grants(statements: list[Statement]) -> list[tuple[str, str | None, Statement]]:
    found = []
    for statement in statements:
        if statement.kind == "sql" and statement.text.upper().startswith("GRANT"):
            match = GRANT.fullmatch(statement.text)
            assert match, f"unexpected GRANT form: {statement.text}"
            assert match["grantee"] == "&&lunlat_user", statement.text
            assert match["rest"] == " &&lunlat_container", f"{statement.text}: no container clause, or more"
            found.append((match["privilege"], match["object"], statement))
    return found


def views_read_by_each_query() -> dict[str, set[str]]:
    """view -> names of the oracle_sql queries reading it, from the SQL itself."""
    readers: dict[str, set[str]] = {}
    for query in oracle_sql.ALL_QUERIES:
        for table in sqlglot.parse_one(query.sql, read="oracle").find_all(exp.Table):
            readers.setdefault(table.name.lower(), set()).add(query.name)
    return readers


@pytest.fixture(scope="module")
def script() -> list[Statement]:
    return sqlplus_script(ORACLE / "grants.sql")


def test_grants_are_create_session_and_select_on_exactly_the_views_the_exporter_reads(
    script: list[Statement],
) -> None:
    granted = Counter((privilege, obj) for privilege, obj, _ in grants(script))
    expected = Counter([("CREATE SESSION", None), *(("SELECT", sys_view(v)) for v in oracle_sql.VIEWS)])
    assert granted == expected  # equal counts: nothing missing, nothing extra, nothing twice
    assert set(views_read_by_each_query()) == set(oracle_sql.VIEWS)  # VIEWS is what the SQL reads


def test_nothing_else_is_granted_or_changed(script: list[Statement]) -> None:
    executed = [s for s in script if s.kind != "sqlplus"]
    others = [s.text for s in executed if not s.text.upper().startswith(("GRANT ", "CREATE USER "))]
    # Besides the grants: the container detection query and the CDB root's CONTAINER_DATA block.
    assert len(others) == 2, others
    assert others[0].startswith("SELECT ") and others[0].endswith(" FROM dual")
    (block,) = [s for s in executed if s.kind == "plsql"]
    assert block.text == others[1]
    dynamic = re.findall(r"EXECUTE IMMEDIATE '([^']*)'", block.text)
    assert dynamic == ["ALTER USER &&lunlat_user SET CONTAINER_DATA = ALL CONTAINER = CURRENT"]
    (create,) = [s.text for s in executed if s.text.upper().startswith("CREATE USER ")]
    assert create == 'CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password" &&lunlat_container'
    code = " ".join(s.text for s in script).upper()
    for forbidden in (
        r"\bANY\b",
        r"_ROLE\b",
        r"\bDBA\b",
        r"\bRESOURCE\b",
        r"WITH (ADMIN|GRANT) OPTION",
        r"\bREVOKE\b",
    ):
        assert not re.search(forbidden, code), f"grants.sql runs {forbidden}"
    # The password is only ever a substitution variable, dropped at the end.
    assert script[-1].text == "UNDEFINE lunlat_password"


def evaluate(expression: str, con_name: str) -> Any:
    """An Oracle expression's value with SYS_CONTEXT('USERENV','CON_NAME') = con_name (on SQLite)."""

    def bind(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous) and node.name.upper() == "SYS_CONTEXT":
            assert [a.name.upper() for a in node.expressions] == ["USERENV", "CON_NAME"]
            return exp.Literal.string(con_name)
        return node

    query = f"SELECT {expression} FROM dual"  # noqa: S608 - an expression from grants.sql, in a test
    tree = sqlglot.parse_one(query, read="oracle").transform(bind)
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE TABLE dual (dummy TEXT)")
        db.execute("INSERT INTO dual VALUES ('X')")
        (row,) = db.execute(tree.sql(dialect="sqlite")).fetchall()
    finally:
        db.close()
    return row[0]


@pytest.mark.parametrize(
    ("con_name", "clause", "container_data"),
    [(ROOT_CONTAINER, "CONTAINER=ALL", True), (PDB, "", False), ("ORCL", "", False)],
    ids=["cdb-root-common-user", "pdb-local-user", "non-cdb"],
)
def test_the_container_clause_and_container_data_follow_where_the_script_runs(
    script: list[Statement], con_name: str, clause: str, container_data: bool
) -> None:
    # COLUMN … NEW_VALUE puts the detection query's one value into &&lunlat_container.
    (column,) = [s.text for s in script if s.text.upper().startswith("COLUMN ")]
    alias = re.fullmatch(r"COLUMN (\w+) NEW_VALUE lunlat_container NOPRINT", column)
    assert alias, column
    (detect,) = [s.text for s in script if s.kind == "sql" and s.text.startswith("SELECT ")]
    selected = re.fullmatch(rf"SELECT (?P<expr>.+) AS {alias[1]} FROM dual", detect)  # noqa: S608 - a regex
    assert selected, detect
    value = evaluate(selected["expr"], con_name)
    assert value.strip() == clause  # SQL*Plus substitutes it after the user name of every statement
    # The CONTAINER_DATA block's condition.
    (block,) = [s.text for s in script if s.kind == "plsql"]
    condition = re.fullmatch(r"BEGIN IF (?P<cond>.+) THEN EXECUTE IMMEDIATE '[^']*'; END IF; END;", block)
    assert condition, block
    assert bool(evaluate(f"CASE WHEN {condition['cond']} THEN 1 ELSE 0 END", con_name)) is container_data
    # The order SQL*Plus needs: the clause is defined before the first use, the user exists before
    # the grants and the CONTAINER_DATA change.
    texts = [s.text for s in script]
    first_use = next(i for i, t in enumerate(texts) if "&&lunlat_container" in t)
    assert texts.index(column) < texts.index(detect) < first_use
    assert texts[first_use].startswith("CREATE USER ")
    assert texts.index(block) > max(texts.index(g.text) for _, _, g in grants(script))


def test_each_grant_says_which_query_needs_it_and_what_is_lost_without_it(script: list[Statement]) -> None:
    readers = views_read_by_each_query()
    for privilege, obj, statement in grants(script):
        comment = " ".join(statement.comment)
        if privilege == "CREATE SESSION":
            assert "ORA-01045" in comment, comment
            continue
        (view,) = [v for v in oracle_sql.VIEWS if sys_view(v) == obj]
        # The comment right above starts with the name of the query reading the view.
        named = [line.split(":", 1)[0] for line in statement.comment if ":" in line]
        assert set(named) & readers[view], f"{obj}: the comment above names none of {readers[view]}"
        assert "Without it" in comment, f"{obj}: the comment does not say what is lost"
    header = (ORACLE / "grants.sql").read_text(encoding="utf-8")
    for words in (
        "ORA-00942",
        'reason="no_grant"',
        "next session or\n-- config reload",
        "SELECT ANY DICTIONARY",
        "SELECT_CATALOG_ROLE",
    ):
        assert words in header, f"grants.sql does not explain {words}"


def test_revoke_drops_the_user_and_does_nothing_else() -> None:
    executed = [s.text for s in sqlplus_script(ORACLE / "revoke.sql") if s.kind != "sqlplus"]
    assert executed == ["DROP USER &&lunlat_user CASCADE"]


# --- the setup script, run as the image runs it ------------------------------------------------


SETUP_RUNNER = """
for f in "$1"/*; do
  case "$f" in
    *.sh) . "$f"; echo "status $f $?" ;;
    *.sql) echo "exit" | sqlplus -s "/ as sysdba" @"$f" ;;
  esac
done
echo "options $-"
"""

FAKE_SQLPLUS = """#!/bin/bash
printf '%s\\n' "$@" > "$LUNLAT_TEST_CAPTURE.args"
cat > "$LUNLAT_TEST_CAPTURE.stdin"
exit "${LUNLAT_TEST_SQLPLUS_STATUS:-0}"
"""


@dataclass(frozen=True, slots=True)
class SetupRun:
    stdout: str
    stderr: str
    argv: list[str] | None  # sqlplus's arguments, None when it was not called
    stdin: str


def run_setup(tmp_path: Path, password: str, sqlplus_status: int = 0) -> SetupRun:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    sqlplus = bin_dir / "sqlplus"
    sqlplus.write_text(FAKE_SQLPLUS)
    sqlplus.chmod(0o755)
    secret = tmp_path / "oracle_lunlat_password"
    secret.write_text(password)
    capture = tmp_path / "capture"
    for old in tmp_path.glob("capture.*"):
        old.unlink()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "LUNLAT_SETUP_PASSWORD_FILE": str(secret),
        "LUNLAT_SETUP_GRANTS": str(ORACLE / "grants.sql"),
        "LUNLAT_TEST_CAPTURE": str(capture),
        "LUNLAT_TEST_SQLPLUS_STATUS": str(sqlplus_status),
    }
    done = subprocess.run(
        [bash, "-c", SETUP_RUNNER, "runUserScripts.sh", str(SETUP)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    args = capture.with_suffix(".args")
    return SetupRun(
        done.stdout,
        done.stderr,
        args.read_text().splitlines() if args.exists() else None,
        capture.with_suffix(".stdin").read_text() if args.exists() else "",
    )


def test_the_setup_directory_holds_only_scripts_the_image_runs() -> None:
    names = sorted(p.name for p in SETUP.iterdir())
    assert names == ["01-lunlat-user.sh"]  # the image ignores anything but *.sh and *.sql


def test_setup_creates_lunlat_in_freepdb1_with_the_secret_password(tmp_path: Path) -> None:
    run = run_setup(tmp_path, "S3cret_pw42\n")
    assert run.argv == ["-s", "-L", "/", "as", "sysdba"], run.stderr  # -L: no prompt on stdin
    assert "S3cret_pw42" not in " ".join(run.argv)
    lines = run.stdin.splitlines()
    assert lines == [
        "WHENEVER SQLERROR EXIT FAILURE",
        "ALTER SESSION SET CONTAINER = FREEPDB1;",
        "DEFINE lunlat_user = LUNLAT",
        'DEFINE lunlat_password = "S3cret_pw42"',  # one trailing newline is not the password
        f"@{ORACLE / 'grants.sql'}",
        "EXIT",
    ]
    assert re.search(r"status \S+/01-lunlat-user\.sh 0\n", run.stdout), run.stdout
    # Sourced by the image's script: its shell options must come back untouched.
    options = run.stdout.rsplit("options ", 1)[1].strip()
    assert "e" not in options and "u" not in options
    user = re.search(r"DEFINE lunlat_user = (\w+)", run.stdin)
    assert user
    (target,) = load_config(ORACLE / "lunlat.yaml").targets(ORACLE_ENGINE)
    assert target.user.upper() == user[1]  # unquoted Oracle names are case-insensitive
    pdb = re.search(r"ALTER SESSION SET CONTAINER = (\w+);", run.stdin)
    assert pdb and target.dsn.endswith(f"/{pdb[1]}")  # the exporter logs in where LUNLAT is


@pytest.mark.parametrize(
    ("password", "why"),
    [
        (None, "example password"),  # the template's value, as copied
        ("", "is empty"),
        ('pass"word', "quotes"),
        ("pass&word", "quotes or '&'"),
        ("pass word", "blanks"),
    ],
    ids=["example", "empty", "quote", "ampersand", "blank"],
)
def test_setup_refuses_a_password_grants_sql_cannot_take(
    tmp_path: Path, password: str | None, why: str
) -> None:
    if password is None:
        password = (ORACLE / "oracle_lunlat_password.example").read_text()
    run = run_setup(tmp_path, password)
    assert run.argv is None  # sqlplus never started
    assert why in run.stderr and "LUNLAT was NOT created" in run.stderr
    assert re.search(r"status \S+ 1\n", run.stdout)  # failed, yet the image's loop went on


def test_setup_reports_a_failing_sqlplus(tmp_path: Path) -> None:
    run = run_setup(tmp_path, "S3cret_pw42", sqlplus_status=1)
    assert run.argv is not None
    assert "sqlplus failed" in run.stderr and "created LUNLAT" not in run.stdout


def setup_defaults() -> dict[str, str]:
    text = (SETUP / "01-lunlat-user.sh").read_text()
    return dict(re.findall(r"\$\{(LUNLAT_SETUP_\w+):-([^}]+)\}", text))


def test_setup_reads_only_the_password_file_and_grants_sql() -> None:
    # What the tests above override; the compose tests below check that these are the mounts.
    assert set(setup_defaults()) == {"LUNLAT_SETUP_PASSWORD_FILE", "LUNLAT_SETUP_GRANTS"}


# --- docker-compose.yml ------------------------------------------------------------------------


def secret_targets(service: dict[str, Any]) -> dict[str, str]:
    """Path in the container -> secret name."""
    found = {}
    for secret in service.get("secrets", []):
        name = secret if isinstance(secret, str) else secret["source"]
        target = name if isinstance(secret, str) else secret.get("target", name)
        found[str(PurePosixPath("/run/secrets") / target)] = name
    return found


def in_repo(source: str) -> Path | None:
    path = Path(source)
    return path if path.is_absolute() and path.is_relative_to(ROOT) else None


def test_the_default_stack_runs_the_exporter_on_the_host_config() -> None:
    config = compose_config()
    services = config["services"]
    # docker-compose v1 prints every service, v2 only the active ones: either way, the database
    # and lab services start only with their profile.
    always = {n for n, s in services.items() if not s.get("profiles")}
    assert always == {"exporter", "prometheus", "alertmanager", "grafana"}
    exporter = services["exporter"]
    assert "--config.file=/etc/lunlat/lunlat.yaml" in exporter["command"]
    (config_mount,) = [m for m in mounts(exporter) if m.target == "/etc/lunlat/lunlat.yaml"]
    assert config_mount.read_only and config_mount.source == str(ROOT / "deploy" / "lunlat" / "host.yaml")
    assert load_config(ROOT / "deploy" / "lunlat" / "host.yaml").targets(ORACLE_ENGINE) == []
    # LUNLAT_CONFIG chooses another file, and only that changes.
    chosen = compose_config(env={"LUNLAT_CONFIG": "./deploy/oracle/lunlat.yaml"})["services"]["exporter"]
    (chosen_mount,) = [m for m in mounts(chosen) if m.target == "/etc/lunlat/lunlat.yaml"]
    assert chosen_mount.source == str(ORACLE / "lunlat.yaml") and chosen_mount.read_only
    assert {k: v for k, v in chosen.items() if k != "volumes"} == {
        k: v for k, v in exporter.items() if k != "volumes"
    }


def compose_file() -> dict[str, Any]:
    """docker-compose.yml as `config` would print it (variables at their defaults, paths made
    absolute), read without docker-compose: the file checks below run everywhere."""
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    loaded: dict[str, Any] = yaml.safe_load(re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text))

    def absolute(source: str) -> str:
        return str((ROOT / source).resolve()) if source.startswith(".") else source

    for service in loaded["services"].values():
        volumes = service.get("volumes", [])
        for i, volume in enumerate(volumes):
            source, rest = volume.split(":", 1)
            volumes[i] = f"{absolute(source)}:{rest}"
    for secret in loaded.get("secrets", {}).values():
        secret["file"] = absolute(secret["file"])
    return loaded


@pytest.fixture(scope="module")
def compose_oracle() -> dict[str, Any]:
    """The `oracle` profile as docker-compose prints it, or as the file says where it is missing."""
    if shutil.which("docker-compose") is None:
        return compose_file()
    return compose_config("oracle")


def test_reading_the_compose_file_gives_what_docker_compose_prints() -> None:
    printed = compose_config("oracle")  # skips without docker-compose
    read = compose_file()
    for name in ("exporter", "oracle"):
        assert sorted(mounts(read["services"][name]), key=str) == sorted(
            mounts(printed["services"][name]), key=str
        )
    assert {k: v["file"] for k, v in read["secrets"].items()} == {
        k: v["file"] for k, v in printed["secrets"].items()
    }


def test_the_oracle_profile_leaves_the_exporter_as_it_is(compose_oracle: dict[str, Any]) -> None:
    assert compose_oracle["services"]["exporter"] == compose_config()["services"]["exporter"]


def test_the_oracle_service_is_pinned_healthchecked_and_keeps_passwords_out_of_its_environment(
    compose_oracle: dict[str, Any],
) -> None:
    oracle = compose_oracle["services"]["oracle"]
    assert oracle["profiles"] == ["oracle"]
    assert re.fullmatch(
        r"container-registry\.oracle\.com/database/free:\d+\.\d+\.\d+\.\d+", oracle["image"]
    ), f"{oracle['image']}: the official Free image pinned to a release (not latest, not a -lite or arch tag)"
    assert oracle["healthcheck"]["test"] == ["CMD", "/opt/oracle/checkDBStatus.sh"]
    environment = oracle.get("environment") or {}
    names = environment if isinstance(environment, dict) else [e.split("=", 1)[0] for e in environment]
    assert not [n for n in names if "PWD" in n.upper() or "PASSWORD" in n.upper()]
    assert secret_targets(oracle).get("/run/secrets/oracle_pwd") == "oracle_sys_password"
    (data,) = [m for m in mounts(oracle) if m.target == "/opt/oracle/oradata"]
    assert data.source in compose_oracle["volumes"]  # a named volume, not a host directory


def test_the_oracle_profile_mounts_what_the_repository_has(compose_oracle: dict[str, Any]) -> None:
    services = compose_oracle["services"]
    oracle, exporter = services["oracle"], services["exporter"]
    by_target = {m.target: m for m in mounts(oracle)}
    setup, grants_mount = by_target["/opt/oracle/scripts/setup"], by_target["/opt/lunlat/grants.sql"]
    assert setup.source == str(SETUP) and setup.read_only
    assert grants_mount.source == str(ORACLE / "grants.sql") and grants_mount.read_only
    for service in (oracle, exporter):
        for mount in mounts(service):
            path = in_repo(mount.source)
            if path is not None:
                assert path.exists(), f"{mount.source} is mounted but not in the repository"
    # The setup script finds grants.sql and LUNLAT's password where they are mounted.
    defaults = setup_defaults()
    assert by_target[defaults["LUNLAT_SETUP_GRANTS"]] == grants_mount
    secrets = secret_targets(oracle)
    assert secrets[defaults["LUNLAT_SETUP_PASSWORD_FILE"]] == "oracle_lunlat_password"
    # Every credential the service uses: a git-ignored file in deploy/secrets with a template here.
    for name in secrets.values():
        file = Path(compose_oracle["secrets"][name]["file"])
        assert (ROOT / "deploy" / "secrets") in file.parents, file
        assert (ORACLE / f"{name}.example").is_file(), f"no template deploy/oracle/{name}.example"
        assert git_ignores(file), f"{file} is not git-ignored"
        assert git_ignores(ORACLE / name), f"a copy next to the template, {ORACLE / name}, is not git-ignored"
        assert not git_ignores(ORACLE / f"{name}.example")


def test_the_exporter_reads_the_password_the_setup_script_used(compose_oracle: dict[str, Any]) -> None:
    services = compose_oracle["services"]
    (target,) = load_config(ORACLE / "lunlat.yaml").targets(ORACLE_ENGINE)
    assert target.dsn == "oracle:1521/FREEPDB1" and "oracle" in services
    assert target.password_file is not None and target.password_env is None
    # The exporter's password_file, through its mounts, is the file the oracle service's secret is.
    host_file = None
    for mount in mounts(services["exporter"]):
        inside = PurePosixPath(str(target.password_file))
        if inside.is_relative_to(mount.target):
            host_file = Path(mount.source) / inside.relative_to(mount.target)
    assert host_file is not None, f"{target.password_file} is in none of the exporter's mounts"
    name = secret_targets(services["oracle"])[setup_defaults()["LUNLAT_SETUP_PASSWORD_FILE"]]
    assert host_file == Path(compose_oracle["secrets"][name]["file"])


def git_ignores(path: Path) -> bool:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(
        [git, "check-ignore", "-q", "--no-index", str(path)], cwd=ROOT, check=False, timeout=30
    )
    assert done.returncode in (0, 1), f"git check-ignore failed for {path}"
    return done.returncode == 0


# --- grants-rds.sql: Amazon RDS for Oracle, no SYSDBA ---------------------------------------------

RDS_GRANT = re.compile(
    r"BEGIN rdsadmin\.rdsadmin_util\.grant_sys_object\(p_obj_name => '(?P<object>[A-Z_$]+)', "
    r"p_grantee => UPPER\('&&lunlat_user'\), p_privilege => 'SELECT'\); END;"
)


def test_the_rds_script_grants_through_rdsadmin_exactly_what_grants_sql_grants() -> None:
    # RDS has no SYSDBA: a SYS view is granted with rdsadmin.rdsadmin_util.grant_sys_object, named
    # without the SYS. prefix and in upper case (Amazon RDS User Guide, cited in the script).
    rds = sqlplus_script(ORACLE / "grants-rds.sql")
    calls = [s for s in rds if s.kind == "plsql"]
    objects: Counter[str] = Counter()
    for call in calls:
        match = RDS_GRANT.fullmatch(call.text)
        assert match, f"unexpected block: {call.text}"
        objects[match["object"]] += 1
    assert objects == Counter(sys_view(v).removeprefix("SYS.") for v in oracle_sql.VIEWS)
    sql_statements = [s.text for s in rds if s.kind == "sql"]
    assert sql_statements == [
        'CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password"',
        "GRANT CREATE SESSION TO &&lunlat_user",
    ]
    # The view only 18c and later have may fail without stopping the script, like in grants.sql.
    commands = [s.text for s in rds if s.kind == "sqlplus"]
    assert commands[-2:] == ["WHENEVER SQLERROR CONTINUE", "UNDEFINE lunlat_password"]
    last = calls[-1].text
    assert "GV_$CON_EVENT_HISTOGRAM_MICRO" in last


def test_the_autonomous_script_grants_the_catalog_role_its_admin_may_grant_and_nothing_else() -> None:
    # Autonomous Database: ADMIN has no SYSDBA and cannot grant on SYS objects; it may grant
    # SELECT_CATALOG_ROLE (Oracle, "ADMIN User Roles and Privileges", cited in the script).
    script = sqlplus_script(ORACLE / "grants-autonomous.sql")
    assert [s.text for s in script if s.kind != "sqlplus"] == [
        'CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password"',
        "GRANT CREATE SESSION TO &&lunlat_user",
        "GRANT SELECT_CATALOG_ROLE TO &&lunlat_user",
    ]
