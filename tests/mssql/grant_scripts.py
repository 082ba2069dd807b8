"""A checker for the T-SQL scripts of deploy/mssql/: what each SQL Server version makes of them.

It is not a T-SQL parser; it models the cited facts a grant script meets and no more, and raises
`CheckerError` on anything outside the small grammar below, so a script cannot pass by going unread.

Facts (docs/emulated-facts.md, "SQL Server: the grant scripts"):
- sqlcmd sends a script as batches: `GO` at the start of a line "signals the end of a batch" (the
  sqlcmd commands page, https://learn.microsoft.com/en-us/sql/tools/sqlcmd/sqlcmd-commands).
- "A compile error, such as a syntax error, prevents the compilation of the execution plan.
  Therefore, no statements in the batch are executed" ("Batches",
  https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms175502(v=sql.105)).
- A permission name the version does not know is such a syntax error: `GRANT VIEW SERVER PERFORMANCE
  STATE` before SQL Server 2022 is "Msg 102" (DataDog/documentation issue 35901, on 2016, 2017 and
  2019: "this permission did not exist before SQL Server 2022").
- A string run by `EXEC (N'…')` or `sp_executesql` is "its own self-contained batch": it is "not
  parsed or checked for errors until" it is executed ("Using sp_executesql", SQL Server 2005,
  https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2005/ms175170(v=sql.90)).

Grammar: batches of `;`-terminated statements; `IF <condition> <statement>;` optionally followed by
`ELSE <statement>;`; conditions are a major-version test (`CAST(PARSENAME(CAST(SERVERPROPERTY(
'ProductVersion') …), 4) AS INT) >= N`) or `[NOT] EXISTS (…)` about the login (answered by
`principal_exists`); statements are GRANT/DENY/REVOKE, `EXEC (N'…')`, `EXEC sp_executesql N'…'`,
and CREATE/DROP/USE, which the checker records and otherwise passes over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The first major version whose parser knows each permission name (11 = 2012 … 16 = 2022).
# VIEW SERVER STATE (VWSS), VIEW ANY DEFINITION (VWAD): SQL Server 2005's server permissions (SMO's
# ServerPermissionSet for 2005: https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2005/ms217516(v=sql.90),
# …/ms217557(v=sql.90); sys.server_permissions in 2008 R2 lists both:
# https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms186260(v=sql.105)).
# VIEW DATABASE STATE: 2005's database-scoped DMVs "require VIEW DATABASE STATE permission on the
# database" (https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2005/ms188754(v=sql.90)).
# VIEW SERVER PERFORMANCE STATE: SQL Server 2022 (16.x) ("Permissions for SQL Server 2022 and later" of
# the DMV pages, e.g. sys.dm_os_wait_stats; DataDog/documentation issue 35901 for the parse error before).
PERMISSION_SINCE: dict[str, int] = {
    "VIEW SERVER STATE": 9,
    "VIEW ANY DEFINITION": 9,
    "VIEW DATABASE STATE": 9,
    "VIEW SERVER PERFORMANCE STATE": 16,
}
SERVER_PERMISSIONS = frozenset({"VIEW SERVER STATE", "VIEW ANY DEFINITION", "VIEW SERVER PERFORMANCE STATE"})
# Azure SQL Database: "the server is a logical concept and permissions can't be granted at the server
# level" (https://learn.microsoft.com/azure/azure-sql/database/security-server-roles); in a database
# VIEW DATABASE STATE is what its DMVs need
# (https://learn.microsoft.com/en-us/azure/azure-sql/database/monitoring-with-dmvs, "Permissions").
# Its ProductVersion major is 12 (tests/mssql/tds_server.py AZURE_MAJOR_VERSION).
AZURE_SQL_DATABASE_PERMISSIONS = frozenset({"VIEW DATABASE STATE"})
AZURE_MAJOR_VERSION = 12


class CheckerError(ValueError):
    """The script has something the checker does not model: extend the checker with its source."""


@dataclass(frozen=True, slots=True)
class Target:
    """A server the script runs on: its reported major version and the permission names it knows."""

    name: str
    major: int
    azure_sql_database: bool = False

    def knows(self, permission: str) -> bool:
        if permission not in PERMISSION_SINCE:
            raise CheckerError(
                f"permission {permission!r} is not in PERMISSION_SINCE: add it with its source"
            )
        if self.azure_sql_database:
            return permission in AZURE_SQL_DATABASE_PERMISSIONS
        return self.major >= PERMISSION_SINCE[permission]


SQL_SERVER = {f"SQL Server {year}": Target(f"SQL Server {year}", major) for year, major in (
    (2012, 11), (2014, 12), (2016, 13), (2017, 14), (2019, 15), (2022, 16))}  # fmt: skip
AZURE_SQL_DATABASE = Target("Azure SQL Database", AZURE_MAJOR_VERSION, azure_sql_database=True)


@dataclass
class Run:
    """What running a script did: the permissions granted, the statements run, the batches that failed."""

    granted: set[str] = field(default_factory=set)
    ran: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one line per failed batch: why


_GO = re.compile(r"^[ \t]*GO(?:[ \t]+\d+)?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_PERMISSION_CLAUSE = re.compile(
    r"\b(GRANT|DENY|REVOKE)\s+(.+?)\s+(?:ON\s+\S+\s+)?(?:TO|FROM)\s", re.IGNORECASE
)
_EXEC_STRING = re.compile(
    r"^EXEC(?:UTE)?\s*(?:\(\s*\x00(\d+)\x00\s*\)|sp_executesql\s+\x00(\d+)\x00)$", re.IGNORECASE
)
_BODY_START = re.compile(r"\b(GRANT|DENY|REVOKE|EXEC|EXECUTE|CREATE|DROP|ALTER)\b", re.IGNORECASE)
_VERSION_TEST = re.compile(
    r"^CAST\s*\(\s*PARSENAME\s*\(\s*CAST\s*\(\s*SERVERPROPERTY\s*\(\s*\x00\d+\x00\s*\)\s+AS\s+NVARCHAR\s*\(\s*\d+\s*\)\s*\)"
    r"\s*,\s*4\s*\)\s+AS\s+INT\s*\)\s*>=\s*(\d+)$",
    re.IGNORECASE,
)
_EXISTS = re.compile(r"^(NOT\s+)?EXISTS\s*\(.*\)$", re.IGNORECASE | re.DOTALL)


def batches(script: str) -> list[str]:
    """The batches sqlcmd sends, split at the `GO` lines."""
    return [b for b in _GO.split(script) if _code(b)[0].strip()]


def _code(text: str) -> tuple[str, list[str]]:
    """`text` without comments, each string literal replaced by \\x00<index>\\x00, and the literals'
    values (N'' and '' undone)."""
    out: list[str] = []
    literals: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise CheckerError("an unterminated /* comment")
            i = end + 2
        elif c == "'" or (c in "Nn" and text.startswith("'", i + 1) and not (out and out[-1][-1:].isalnum())):
            j = i + (2 if c != "'" else 1)
            value: list[str] = []
            while True:
                if j >= len(text):
                    raise CheckerError("an unterminated string literal")
                if text[j] == "'":
                    if text.startswith("''", j):
                        value.append("'")
                        j += 2
                        continue
                    break
                value.append(text[j])
                j += 1
            out.append(f"\x00{len(literals)}\x00")
            literals.append("".join(value))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), literals


def run(script: str, target: Target, principal_exists: bool = False) -> Run:
    """Run `script` (its text as sqlcmd reads it) on `target`, batch by batch, as its parser would."""
    result = Run()
    for number, batch in enumerate(batches(script), 1):
        _run_batch(batch, target, principal_exists, result, f"batch {number}")
    return result


def _unknown_permissions(code: str, target: Target) -> list[str]:
    unknown = []
    for match in _PERMISSION_CLAUSE.finditer(code):
        for name in match.group(2).split(","):
            permission = " ".join(name.split()).upper()
            if not target.knows(permission):
                unknown.append(permission)
    return unknown


def _run_batch(batch: str, target: Target, principal_exists: bool, result: Run, where: str) -> None:
    code, literals = _code(batch)
    unknown = _unknown_permissions(code, target)
    if unknown:
        # A compile error: no statement of the batch runs (the module docstring).
        result.failed.append(f"{where}: {target.name} does not know {', '.join(unknown)}: nothing in it ran")
        return
    condition: bool | None = None  # the last IF's outcome, for an ELSE
    for raw in code.split(";"):
        statement = " ".join(raw.split())
        if not statement:
            continue
        if statement.upper().startswith("ELSE "):
            if condition is None:
                raise CheckerError(f"{where}: ELSE without IF")
            if not condition:
                _statement(statement[5:], literals, target, principal_exists, result, where)
            condition = None
            continue
        if statement.upper().startswith("IF "):
            body = _BODY_START.search(statement, 3)
            if body is None:
                raise CheckerError(f"{where}: IF without a statement the checker knows: {statement!r}")
            condition = _condition(statement[3 : body.start()].strip(), literals, target, principal_exists)
            if condition:
                _statement(statement[body.start() :], literals, target, principal_exists, result, where)
            continue
        condition = None
        _statement(statement, literals, target, principal_exists, result, where)


def _condition(text: str, literals: list[str], target: Target, principal_exists: bool) -> bool:
    version = _VERSION_TEST.match(text)
    if version:
        literal = int(re.search(r"\x00(\d+)\x00", text).group(1))  # type: ignore[union-attr]
        if literals[literal].upper() != "PRODUCTVERSION":
            raise CheckerError(f"SERVERPROPERTY({literals[literal]!r}): only ProductVersion is modelled")
        return target.major >= int(version.group(1))
    exists = _EXISTS.match(text)
    if exists:
        return principal_exists != bool(exists.group(1))
    raise CheckerError(f"a condition the checker cannot evaluate: {text!r}")


def _statement(
    text: str, literals: list[str], target: Target, principal_exists: bool, result: Run, where: str
) -> None:
    dynamic = _EXEC_STRING.match(text)
    if dynamic:
        inner = literals[int(dynamic.group(1) or dynamic.group(2))]
        _run_batch(inner, target, principal_exists, result, f"{where} (dynamic SQL)")
        return
    keyword = text.split(None, 1)[0].upper()
    if keyword == "GRANT":
        clause = _PERMISSION_CLAUSE.match(text + " ")
        assert clause is not None  # the batch compiled: its permission clauses were read
        result.granted.update(" ".join(n.split()).upper() for n in clause.group(2).split(","))
    elif keyword in ("REVOKE", "DENY"):
        clause = _PERMISSION_CLAUSE.match(text + " ")
        assert clause is not None
        result.granted.difference_update(" ".join(n.split()).upper() for n in clause.group(2).split(","))
    elif keyword not in ("CREATE", "DROP", "USE", "ALTER"):
        raise CheckerError(f"{where}: a statement the checker does not model: {text!r}")
    result.ran.append(text.replace("\x00", "'"))
