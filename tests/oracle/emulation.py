"""An in-process Oracle database for tests: the dynamic performance views the Oracle source reads,
answered through the subset of python-oracledb's Connection the source uses, with faults on demand.

The collector's SQL runs unchanged: each statement is parsed by sqlglot in the Oracle dialect
(what Oracle would reject is rejected with Oracle's error), checked against the documented columns
of the views (tests.oracle.simulator.VIEWS), translated to SQLite and run on a per-connection
in-memory SQLite database loaded with the current rows of the views it reads. Errors are the
exception objects python-oracledb thin raises (same class, `.args[0].full_code`, message).

    emu = OracleEmulation(instances=2, cdb=True, pdbs=("SALES",), asm=True)
    emu.advance(60, Load(IO("data", "read", 500, Constant(425)), IO("log", "write", 50, Constant(300))))
    conn = emu.connect()
    conn.call_timeout = 5000
    cur = conn.cursor(); cur.execute(sql); rows = cur.fetchall()

OracleEmulation (the server)
    OracleEmulation(instances=1 | ["ORCL1", …], db_name="ORCL", cdb=False, pdbs=("PDB1",),
        asm=False, asm_disks={"DATA": [paths], …}, asm_candidates=[paths], datafiles=[path |
        (container, path)], tempfiles=[…], redo=[[member, …], …], controlfiles=[…], seed=0)
        A database with a default layout unless the files are given (redo group k belongs to
        thread k mod instances + 1). ASM files are named +GROUP/…; their I/O lands on that
        group's disks.
    connect(inst_id=None, container=None) -> EmulatedConnection
                                                   to the first open instance (or that one); with
                                                   `container` (a PDB of a CDB) a PDB login, whose
                                                   views answer as simulator.EMPTY_IN_PDB and
                                                   OWN_ROWS_IN_PDB say
    version: str                   the release ("19.24.0.0.0", constructor `version=`): the sessions'
                                   `version` (python-oracledb's Connection.version: the five numbers
                                   of the login's AUTH_VERSION_NO joined by ".", the first the major
                                   release, 23 for 23ai) and which views exist (simulator.SINCE_MAJOR;
                                   a missing one is ORA-00942). cdb=False from 21 on is refused
                                   (ValueError): the non-CDB architecture is desupported there
    query(sql, inst_id=None) -> list[tuple]        connect, run one statement, close
    advance(seconds, load=None, inst_id=None)      simulated time passes under `load` (simulator.Load)
    restart(inst_id=None, hold=False, code="DPY-4011")
        Instance restart: counters zeroed, STARTUP_TIME = now, its sessions dead (their next call
        raises `code`, then DPY-1001). hold=True: connect() raises ORA-01033 until open().
    open(inst_id=None)                             end a held restart
    add_datafile(path, container=None) -> FILE#, add_tempfile(path, container=None) -> FILE#,
    add_log_member(group, path, thread=1), add_controlfile(path), drop_file(path), paths(role)
        The file list changes at once for every view (FILE# is the lowest free number).
    executed: list[str]     every statement that reached the server, in order (all connections)
    connects, connect_attempts: int
    db: simulator.Database  the state behind the views (instances, counters, files)

Fault knobs
    connect_delay: float            connect() answers only after this many seconds (python-oracledb
                                    thin has no timeout for the login handshake)
    connect_error: str | Exception | None
                                    connect() raises it (after the delay). A code string becomes
                                    the error thin raises for it (see `oracle_error`: ORA-12541,
                                    ORA-12514, ORA-12505 and ORA-12170 fail thin's first phase and
                                    come as DPY-6005 OperationalError; ORA-01017 as DatabaseError)
    hang(pattern, seconds, breakable=True, times=None)
                                    statements matching the regex `pattern` (case-insensitive)
                                    answer after `seconds`. With conn.call_timeout > 0 below that,
                                    thin gives up after call_timeout ms: DPY-4024 (the session
                                    stays usable), or if not `breakable` (the server ignores the
                                    break) DPY-4011 after twice the timeout and the session is dead
    clear_hangs(), release()        drop the hangs / wake every hang and delayed connect now
    lose_connection_after(k, code="DPY-4011")
                                    the (k+1)-th statement from now finds the socket closed: it
                                    raises `code`, every later call on that session DPY-1001
    kill_sessions(inst_id=None, code="DPY-4011")
                                    every open session (of that instance) dies now (same errors)
    revoke(view), grant(view)       a statement reading a revoked view raises ORA-00942

Limits: SELECT only (no binds); Oracle-only syntax that SQLite lacks (ROWNUM, CONNECT BY, most
built-in functions) raises NotImplementedError rather than an Oracle error; DATE values are
returned as datetime only for plain columns and expressions sqlglot can type.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from types import TracebackType
from typing import Any, Final, Literal

from tests.support.skip_unless_installed import need

need("oracledb")  # without the `oracle` extra, a test module importing this one skips, naming it

import oracledb  # noqa: E402 - after the skip above
import sqlglot  # noqa: E402
from oracledb import errors as oerr  # noqa: E402
from sqlglot import exp  # noqa: E402
from sqlglot.errors import OptimizeError, ParseError, TokenError  # noqa: E402
from sqlglot.optimizer.annotate_types import annotate_types  # noqa: E402
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers  # noqa: E402
from sqlglot.optimizer.qualify import qualify  # noqa: E402

from tests.oracle.simulator import VIEWS, Database, Instance, Load, Role, exists, rows  # noqa: E402

# --- errors, as python-oracledb thin raises them ---------------------------------------------

MESSAGES: Final[dict[int, str]] = {
    28: "your session has been killed",
    900: "invalid SQL statement",
    911: "invalid character",
    918: "column ambiguously defined",
    923: "FROM keyword not found where expected",
    933: "SQL command not properly ended",
    936: "missing expression",
    942: "table or view does not exist",
    1013: "user requested cancel of current operation",
    1017: "invalid username/password; logon denied",
    1031: "insufficient privileges",
    1033: "ORACLE initialization or shutdown in progress",
    1034: "ORACLE not available",
    1089: "immediate shutdown or close in progress - no operations are permitted",
    1092: "ORACLE instance terminated. Disconnection forced",
    1756: "quoted string not properly terminated",
    3113: "end-of-file on communication channel",
    3114: "not connected to ORACLE",
    3135: "connection lost contact",
    12170: "TNS:Connect timeout occurred",
    12505: "TNS:listener does not currently know of SID given in connect descriptor",
    12514: "TNS:listener does not currently know of service requested in connect descriptor",
    12541: "TNS:no listener",
    28000: "The account is locked.",
}
# The last major release with the non-CDB architecture: "All upgrades to Oracle Database 21c must use
# the multitenant architecture. Use of the non-CDB Oracle Database architecture is desupported."
# (Oracle Database AutoUpgrade, Understanding Non-CDB to PDB Upgrades with AutoUpgrade,
# https://docs.oracle.com/en/database/oracle/oracle-database/19/spucs/understanding-non-cdb-pdb-upgrades-autoupgrade.html;
# the 12.1 Upgrade Guide, 8.1.1, already warned it may be unavailable after 12.2).
NON_CDB_UNTIL: Final = 19
CONNECTION_ID = "EmulatedConnId=="  # thin puts a random id in DPY-6005; tests need a stable one


def ora_error(code: int, text: str | None = None) -> oracledb.Error:
    """The exception thin raises for an error the server sent (messages/base.pyx
    _check_and_raise_exception: `_Error(message, code=…)`, raised as `error.exc_type`). Codes
    errors.py maps to driver errors come as those (ORA-03113 → DPY-4011)."""
    error = oerr._Error(f"ORA-{code:05d}: {text or MESSAGES.get(code, 'error')}", code=code)
    exc: oracledb.Error = error.exc_type(error)
    return exc


def dpy_error(
    num: int, context: str | None = None, cause: BaseException | None = None, **args: Any
) -> oracledb.Error:
    """The exception of driver error DPY-`num`, made by python-oracledb's own `_raise_err`."""
    try:
        oerr._raise_err(num, context, cause, **args)  # type: ignore[arg-type]
    except oracledb.Error as exc:
        return exc
    raise AssertionError(f"_raise_err({num}) did not raise")


def oracle_error(code: str, **args: Any) -> oracledb.Error:
    """The error thin raises for `code` ("ORA-01017", "DPY-4011", …). Listener-phase ORA codes
    become what thin raises instead (impl/thin/connection.pyx _connect_with_address wraps them in
    DPY-6005 with the cause); `args` fill a DPY message's fields."""
    prefix, _, number = code.upper().partition("-")
    num = int(number)
    if prefix == "DPY":
        if num == oerr.ERR_CONNECTION_FAILED:
            args.setdefault("connection_id", CONNECTION_ID)
        if num == oerr.ERR_CALL_TIMEOUT_EXCEEDED:
            args.setdefault("timeout", 0)
        return dpy_error(num, **args)
    if prefix != "ORA":
        raise ValueError(f"not an ORA- or DPY- code: {code!r}")
    cause: BaseException | None = None
    if num == 12541:
        cause = ConnectionRefusedError(111, "Connection refused")
    elif num == 12170:
        cause = TimeoutError("timed out")
    elif num in (12514, 12505):
        where: dict[str, Any] = {"host": "dbhost1", "port": 1521}
        cause = (
            dpy_error(oerr.ERR_INVALID_SERVICE_NAME, service_name="ORCL", **where)
            if num == 12514
            else dpy_error(oerr.ERR_INVALID_SID, sid="ORCL", **where)
        )
    if cause is not None:
        return dpy_error(oerr.ERR_CONNECTION_FAILED, cause=cause, connection_id=CONNECTION_ID)
    return ora_error(num, args.get("text"))


# --- the SQL front end -----------------------------------------------------------------------

TABLES: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    **VIEWS,
    **{"G" + name: (("INST_ID", "NUMBER"), *cols) for name, cols in VIEWS.items() if name != "DUAL"},
}


def _sqlglot_type(oracle_type: str) -> str:
    kind = oracle_type.split("(", 1)[0].split(maxsplit=1)[0]
    return {"NUMBER": "DECIMAL", "DATE": "DATE", "TIMESTAMP": "TIMESTAMPTZ", "RAW": "VARBINARY"}.get(
        kind, "VARCHAR"
    )


_SCHEMA: dict[str, object] = {
    table: {col: _sqlglot_type(kind) for col, kind in cols} for table, cols in TABLES.items()
}
_DB_TYPES = {
    "VARCHAR": oracledb.DB_TYPE_VARCHAR,
    "TEXT": oracledb.DB_TYPE_VARCHAR,
    "CHAR": oracledb.DB_TYPE_CHAR,
    "DATE": oracledb.DB_TYPE_DATE,
    "DATETIME": oracledb.DB_TYPE_DATE,
    "TIMESTAMPTZ": oracledb.DB_TYPE_TIMESTAMP_TZ,
    "TIMESTAMP": oracledb.DB_TYPE_TIMESTAMP,
    "VARBINARY": oracledb.DB_TYPE_RAW,
}
_VERBS = frozenset({"SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "ALTER", "DROP"})
_PSEUDO_COLUMNS = frozenset({"ROWNUM", "ROWID", "LEVEL", "ORA_ROWSCN"})


@dataclass(frozen=True, slots=True)
class Compiled:
    sqlite: str
    views: tuple[str, ...]  # canonical names (GV$IOSTAT_FILE) of the views read
    names: tuple[str, ...]  # column names as Oracle reports them
    types: tuple[Any, ...]  # oracledb DbType per column


def _canonical_view(table: exp.Table) -> str:
    """GV$IOSTAT_FILE for gv$iostat_file, sys.gv_$iostat_file …; ORA-00942 when not a view."""
    name, schema = table.name, table.db
    if (schema and schema != "SYS") or table.catalog:
        raise ora_error(942)
    if schema == "SYS":
        name = re.sub(r"^(G?V)_\$", r"\1$", name)
    if name not in TABLES:
        raise ora_error(942)
    return name


def _invalid_identifier(error: OptimizeError, tree: exp.Expr) -> oracledb.Error:
    text = str(error)
    if "ambiguous" in text.lower():
        return ora_error(918)
    qualified = re.search(r"Column '([^']*)' could not be resolved for table: '([^']*)'", text)
    if qualified:
        return ora_error(904, f'"{qualified[2]}"."{qualified[1]}": invalid identifier')
    plain = re.search(r"Column '([^']*)' could not be resolved", text)
    unknown = re.search(r"Unknown column: (\S+)", text)
    match = plain or unknown
    if match:
        name = match[1]
        owners = [t for t in tree.find_all(exp.Table) if any(c == name for c, _ in TABLES.get(t.name, ()))]
        if len(owners) > 1:
            return ora_error(918)
        column = next((c for c in tree.find_all(exp.Column) if c.name == name and c.table), None)
        shown = f'"{column.table}"."{name}"' if column is not None else f'"{name}"'
        return ora_error(904, f"{shown}: invalid identifier")
    raise NotImplementedError(f"the emulation cannot check this statement: {text}")


def _column_name(projection: exp.Expr, original: exp.Expr | None) -> str:
    name = projection.alias_or_name
    if name.startswith("_COL_") and original is not None:
        return original.sql(dialect="oracle").upper().replace(" ", "")
    return name


def _parse(text: str) -> exp.Query:
    if text.endswith(";"):
        raise ora_error(911)
    try:
        tree = sqlglot.parse_one(text, read="oracle")
    except TokenError:
        raise ora_error(1756) from None
    except ParseError:
        verb = text.split(None, 1)[0].upper() if text else ""
        raise ora_error(933 if verb in _VERBS else 900) from None
    if isinstance(tree, exp.Insert | exp.Update | exp.Delete | exp.Merge):
        raise ora_error(1031)
    if not isinstance(tree, exp.Query):
        raise ora_error(911 if ";" in text else 900)
    query = normalize_identifiers(tree, dialect="oracle")
    assert isinstance(query, exp.Query)
    for select in query.find_all(exp.Select):
        if not select.expressions:
            raise ora_error(936)
        if not select.args.get("from_"):
            raise ora_error(923)
    if query.find(exp.Limit) is not None:
        raise ora_error(933)  # Oracle has FETCH FIRST, not LIMIT
    if query.find(exp.Connect) is not None or any(
        c.name in _PSEUDO_COLUMNS for c in query.find_all(exp.Column)
    ):
        raise NotImplementedError(f"the emulation does not do Oracle pseudo-columns or CONNECT BY: {text}")
    return query


def _bind_views(query: exp.Query) -> tuple[str, ...]:
    """Point every table at its emulated view; the views read, in order."""
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    views: list[str] = []
    for table in query.find_all(exp.Table):
        if not table.db and table.name in ctes:
            continue
        view = _canonical_view(table)
        table.set("db", None)
        table.set("this", exp.to_identifier(view))
        if view not in views:
            views.append(view)
    return tuple(views)


@lru_cache(maxsize=512)
def compile_query(sql: str) -> Compiled:
    """Parse `sql` as Oracle does and translate it to SQLite; raises what Oracle raises."""
    query = _parse(sql.strip())
    views = _bind_views(query)
    try:
        checked = qualify(query.copy(), schema=_SCHEMA, dialect="oracle", validate_qualify_columns=True)
    except OptimizeError as error:
        raise _invalid_identifier(error, query) from None
    checked = annotate_types(checked, schema=_SCHEMA, dialect="oracle")
    assert isinstance(checked, exp.Query)
    originals: list[exp.Expr | None] = list(query.selects)
    if len(originals) != len(checked.selects):  # a * was expanded: every name comes from a column
        originals = [None] * len(checked.selects)
    names = tuple(_column_name(p, o) for p, o in zip(checked.selects, originals, strict=True))
    types = tuple(_DB_TYPES.get(str(p.type), oracledb.DB_TYPE_NUMBER) for p in checked.selects)
    return Compiled(query.sql(dialect="sqlite", identify=True), views, names, types)


def _to_sqlite(value: object) -> object:
    return value.isoformat(sep=" ") if isinstance(value, datetime) else value


def _from_sqlite(value: object, db_type: Any) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)  # NUMBER: an int when whole, as python-oracledb returns it
    if isinstance(value, str) and db_type in (oracledb.DB_TYPE_DATE, oracledb.DB_TYPE_TIMESTAMP_TZ):
        return datetime.fromisoformat(value)
    return value


class _Engine:
    """One session's SQLite database: tables created on first use, loaded before each query."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._created: set[str] = set()

    def run(self, compiled: Compiled, tables: Mapping[str, list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
        for name, content in tables.items():
            columns = TABLES[name]
            if name not in self._created:
                ddl = ", ".join(f'"{col}" {kind.split(" ")[0]}' for col, kind in columns)
                self._db.execute(f'CREATE TABLE "{name}" ({ddl})')
                self._created.add(name)
            self._db.execute(f'DELETE FROM "{name}"')  # noqa: S608 - a catalog name
            marks = ", ".join("?" * len(columns))
            self._db.executemany(f'INSERT INTO "{name}" VALUES ({marks})', content)  # noqa: S608
        try:
            fetched = self._db.execute(compiled.sqlite).fetchall()
        except sqlite3.Error as exc:
            raise NotImplementedError(
                f"SQLite cannot run the translation {compiled.sqlite!r}: {exc}"
            ) from None
        return [
            tuple(_from_sqlite(v, t) for v, t in zip(row, compiled.types, strict=True)) for row in fetched
        ]

    def close(self) -> None:
        self._db.close()


# --- sessions --------------------------------------------------------------------------------


class EmulatedCursor:
    """The part of oracledb.Cursor the source uses: execute, fetch*, description, arraysize."""

    def __init__(self, connection: EmulatedConnection) -> None:
        self.connection = connection
        self._open = True
        self._arraysize = 100
        self._rows: list[tuple[Any, ...]] | None = None
        self._description: list[tuple[Any, ...]] | None = None
        self.rowcount = 0

    def _verify_open(self) -> None:
        if not self._open:
            raise dpy_error(oerr.ERR_CURSOR_NOT_OPEN)
        self.connection._verify_connected()

    @property
    def arraysize(self) -> int:
        self._verify_open()
        return self._arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._verify_open()
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise dpy_error(oerr.ERR_INVALID_ARRAYSIZE)
        self._arraysize = value

    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        self._verify_open()
        return self._description

    def execute(self, statement: str, parameters: object = None) -> EmulatedCursor:
        self._verify_open()
        if parameters is not None:
            raise NotImplementedError("the emulation takes no bind parameters")
        text = statement.strip()
        if not text:
            raise dpy_error(oerr.ERR_EMPTY_STATEMENT)
        self._rows, self._description, self.rowcount = None, None, 0
        compiled, fetched = self.connection._execute(text)
        self._rows = fetched
        self._description = [
            (n, t, None, None, None, None, True) for n, t in zip(compiled.names, compiled.types, strict=True)
        ]
        return self

    def _fetch(self, size: int | None) -> list[tuple[Any, ...]]:
        self._verify_open()  # the rows came with execute: no round trip here
        if self._rows is None:
            raise dpy_error(oerr.ERR_NO_STATEMENT_EXECUTED)
        count = len(self._rows) if size is None else size
        out, self._rows = self._rows[:count], self._rows[count:]
        self.rowcount += len(out)
        return out

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._fetch(None)

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        return self._fetch(self._arraysize if size is None else size)

    def fetchone(self) -> tuple[Any, ...] | None:
        found = self._fetch(1)
        return found[0] if found else None

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row

    def close(self) -> None:
        if not self._open:
            raise dpy_error(oerr.ERR_CURSOR_NOT_OPEN)
        self._open = False
        self._rows = None

    def __enter__(self) -> EmulatedCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._open:
            self.close()


class EmulatedConnection:
    """The part of oracledb.Connection the source uses, in thin mode's states: open; lost (the
    server side is gone: the next call raises DPY-4011, later ones DPY-1001); closed (DPY-1001)."""

    thin = True

    def __init__(self, server: OracleEmulation, inst: Instance, epoch: int, pdb: int | None = None) -> None:
        self._server = server
        self.inst_id = inst.inst_id
        self.pdb = pdb  # CON_ID of the PDB the session is logged into (None: root or non-CDB)
        self._generation = inst.generation
        self._epoch = epoch
        self._state: Literal["open", "lost", "closed"] = "open"
        self._call_timeout = 0
        self._lock = threading.Lock()  # one call at a time, like thin's protocol lock
        self._engine = _Engine()

    def _verify_connected(self) -> None:
        if self._state == "closed":
            raise dpy_error(oerr.ERR_NOT_CONNECTED)

    def _round_trip_check(self) -> None:
        """Before anything goes over the wire: a dead socket is found here."""
        self._verify_connected()
        if self._state == "lost":
            raise dpy_error(oerr.ERR_NOT_CONNECTED)
        code = self._server._death(self)
        if code is not None:
            self._lost()
            raise oracle_error(code)

    def _lost(self) -> None:
        self._state = "lost"

    @property
    def call_timeout(self) -> int:
        self._verify_connected()
        return self._call_timeout

    @call_timeout.setter
    def call_timeout(self, value: int) -> None:
        self._verify_connected()
        if not isinstance(value, int) or value < 0:
            raise TypeError(f"call_timeout must be an int of milliseconds >= 0, not {value!r}")
        self._call_timeout = value

    @property
    def version(self) -> str:
        """The server's release, as python-oracledb thin reports it from the login (connection.py)."""
        self._verify_connected()
        return self._server.version

    def cursor(self) -> EmulatedCursor:
        self._verify_connected()
        return EmulatedCursor(self)

    def ping(self) -> None:
        with self._lock:
            self._round_trip_check()

    def _execute(self, sql: str) -> tuple[Compiled, list[tuple[Any, ...]]]:
        with self._lock:
            self._round_trip_check()
            return self._server._execute(self, sql)

    def close(self) -> None:
        self._verify_connected()
        self._state = "closed"  # closing a lost session succeeds quietly, as in thin
        self._engine.close()

    def __enter__(self) -> EmulatedConnection:
        self._verify_connected()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._state != "closed":
            self.close()


# --- the server ------------------------------------------------------------------------------


@dataclass(slots=True)
class Hang:
    pattern: re.Pattern[str]
    seconds: float
    breakable: bool
    times: int | None  # None: every matching statement


def _default_asm_disks() -> dict[str, list[str]]:
    return {"DATA": ["/dev/mapper/asm_data1", "/dev/mapper/asm_data2"], "FRA": ["/dev/mapper/asm_fra1"]}


class OracleEmulation:
    """An Oracle database (single instance or RAC, CDB or not, ASM or file system); see the
    module docstring for the API and the fault knobs."""

    def __init__(
        self,
        instances: int | Sequence[str] = 1,
        *,
        db_name: str = "ORCL",
        cdb: bool = False,
        pdbs: Sequence[str] = ("PDB1",),
        asm: bool = False,
        asm_disks: Mapping[str, Sequence[str]] | None = None,
        asm_candidates: Sequence[str] | None = None,
        datafiles: Sequence[str | tuple[str, str]] | None = None,
        tempfiles: Sequence[str | tuple[str, str]] | None = None,
        redo: Sequence[Sequence[str]] | None = None,
        controlfiles: Sequence[str] | None = None,
        seed: int = 0,
        start: datetime = datetime(2025, 1, 6, 8, 0, 0),
        version: str = "19.24.0.0.0",
    ) -> None:
        self.version = version
        self.major = int(version.split(".", 1)[0])
        if not cdb and self.major >= NON_CDB_UNTIL + 1:
            raise ValueError(
                f"release {version} has no non-CDB architecture (desupported from 21c): use cdb=True"
            )
        if isinstance(instances, int):
            base = db_name.lower()
            names = [base] if instances == 1 else [f"{base}{i}" for i in range(1, instances + 1)]
        else:
            names = list(instances)
        groups: dict[str, Sequence[str]] = {}
        candidates: list[str] = []
        if asm or asm_disks is not None:
            groups = dict(asm_disks if asm_disks is not None else _default_asm_disks())
            candidates = list(asm_candidates if asm_candidates is not None else ["/dev/mapper/asm_spare1"])
        self._lock = threading.RLock()
        self.db = Database(db_name, names, cdb, pdbs if cdb else (), groups, candidates, seed, start)
        self.executed: list[str] = []
        self.connects = 0
        self.connect_attempts = 0
        self.connect_delay = 0.0
        self.connect_error: str | BaseException | None = None
        self._hangs: list[Hang] = []
        self._lose_after: tuple[int, str] | None = None
        self._revoked: set[str] = set()
        self._wake = threading.Event()
        self._epochs = dict.fromkeys(self.db.instances, 0)
        self._death_codes = dict.fromkeys(self.db.instances, "DPY-4011")
        self._layout(datafiles, tempfiles, redo, controlfiles)

    # --- layout ---------------------------------------------------------------------------------

    def _layout(
        self,
        datafiles: Sequence[str | tuple[str, str]] | None,
        tempfiles: Sequence[str | tuple[str, str]] | None,
        redo: Sequence[Sequence[str]] | None,
        controlfiles: Sequence[str] | None,
    ) -> None:
        db, name = self.db, self.db.name.upper()
        asm = bool(db.groups)
        containers = [c.name for c in db.containers] if db.cdb else [None]

        serial = iter(range(256, 1024))

        def place(container: str | None, kind: str, base: str) -> str:
            where = f"{container}/" if container not in (None, "CDB$ROOT") else ""
            if asm:
                number = next(serial)
                return f"+DATA/{name}/{where}{kind}/{base}.{number}.{1_170_000_000 + number}"
            return f"/u02/oradata/{name}/{where.lower().replace('$', '')}{base}01.dbf"

        def bases(container: str | None) -> tuple[str, ...]:
            if container == "CDB$ROOT":
                return ("system", "sysaux", "undotbs")
            return ("system", "sysaux") if container == "PDB$SEED" else ("system", "sysaux", "users")

        if datafiles is None:
            datafiles = [(c or "", place(c, "DATAFILE", b)) for c in containers for b in bases(c)]
        if tempfiles is None:
            tempfiles = [(c or "", place(c, "TEMPFILE", "temp")) for c in containers]
        for role, entries in (("data", datafiles), ("temp", tempfiles)):
            for entry in entries:
                container, path = entry if isinstance(entry, tuple) else (None, entry)
                db.add(role, path, db.con_id(container or None))  # type: ignore[arg-type]
        threads = len(db.instances)
        if redo is None:
            redo = [
                [f"+DATA/{name}/ONLINELOG/group_{g}.log", f"+FRA/{name}/ONLINELOG/group_{g}.log"]
                if asm
                else [f"/u03/redo/{name}/redo{g:02d}a.log", f"/u04/redo/{name}/redo{g:02d}b.log"]
                for g in range(1, 2 * threads + 1)
            ]
        for k, members in enumerate(redo):
            for member in members:
                db.add("log", member, 0, file_no=k + 1, thread=k % threads + 1)
        if controlfiles is None:
            controlfiles = (
                [
                    f"+DATA/{name}/CONTROLFILE/current.261.1170000001",
                    f"+FRA/{name}/CONTROLFILE/current.256.1170000001",
                ]
                if asm
                else [f"/u02/oradata/{name}/control01.ctl", f"/u04/redo/{name}/control02.ctl"]
            )
        for path in controlfiles:
            db.add("control", path, 0, file_no=0)

    def add_datafile(self, path: str, container: str | None = None) -> int:
        with self._lock:
            return self.db.add("data", path, self.db.con_id(container))

    def add_tempfile(self, path: str, container: str | None = None) -> int:
        with self._lock:
            return self.db.add("temp", path, self.db.con_id(container))

    def add_log_member(self, group: int, path: str, thread: int = 1) -> None:
        with self._lock:
            self.db.add("log", path, 0, file_no=group, thread=thread)

    def add_controlfile(self, path: str) -> None:
        with self._lock:
            self.db.add("control", path, 0, file_no=0)

    def drop_file(self, path: str) -> None:
        with self._lock:
            self.db.drop(path)

    def paths(self, role: Role) -> list[str]:
        with self._lock:
            return [f.path for f in self.db.of_role(role)]

    # --- time, restarts -------------------------------------------------------------------------

    def advance(self, seconds: float, load: Load | None = None, inst_id: int | None = None) -> None:
        with self._lock:
            self.db.advance(seconds, load, None if inst_id is None else [inst_id])

    def _targets(self, inst_id: int | None) -> list[Instance]:
        if inst_id is None:
            return list(self.db.instances.values())
        if inst_id not in self.db.instances:
            raise KeyError(f"no instance {inst_id} (have {sorted(self.db.instances)})")
        return [self.db.instances[inst_id]]

    def restart(self, inst_id: int | None = None, hold: bool = False, code: str = "DPY-4011") -> None:
        with self._lock:
            for inst in self._targets(inst_id):
                inst.reset(self.db.now)
                inst.status = "RESTARTING" if hold else "OPEN"
                self._death_codes[inst.inst_id] = code

    def open(self, inst_id: int | None = None) -> None:
        with self._lock:
            for inst in self._targets(inst_id):
                inst.status = "OPEN"

    # --- faults ---------------------------------------------------------------------------------

    def hang(self, pattern: str, seconds: float, breakable: bool = True, times: int | None = None) -> None:
        with self._lock:
            self._hangs.append(Hang(re.compile(pattern, re.IGNORECASE), seconds, breakable, times))

    def clear_hangs(self) -> None:
        with self._lock:
            self._hangs.clear()

    def release(self) -> None:
        with self._lock:
            self._wake.set()
            self._wake = threading.Event()

    def lose_connection_after(self, queries: int, code: str = "DPY-4011") -> None:
        with self._lock:
            self._lose_after = (queries, code)

    def kill_sessions(self, inst_id: int | None = None, code: str = "DPY-4011") -> None:
        with self._lock:
            for inst in self._targets(inst_id):
                self._epochs[inst.inst_id] += 1
                self._death_codes[inst.inst_id] = code

    def revoke(self, view: str) -> None:
        with self._lock:
            self._revoked.add(self._view_name(view))

    def grant(self, view: str) -> None:
        with self._lock:
            self._revoked.discard(self._view_name(view))

    @staticmethod
    def _view_name(view: str) -> str:
        name = view.upper()
        if name not in TABLES:
            raise KeyError(f"no emulated view {view!r}")
        return name

    # --- sessions -------------------------------------------------------------------------------

    def connect(self, inst_id: int | None = None, container: str | None = None) -> EmulatedConnection:
        if container is not None and (not self.db.cdb or container.upper() in ("CDB$ROOT", "PDB$SEED")):
            raise ValueError(f"{container!r} is not an open PDB of this database")
        pdb = self.db.con_id(container) if container is not None else None  # KeyError: no such PDB
        with self._lock:
            self.connect_attempts += 1
            delay, error, wake = self.connect_delay, self.connect_error, self._wake
        if delay > 0:
            wake.wait(delay)
        if isinstance(error, BaseException):
            raise error
        if error is not None:
            raise oracle_error(error)
        with self._lock:
            candidates = self._targets(inst_id)
            inst = next((i for i in candidates if i.status == "OPEN"), None)
            if inst is None:
                raise ora_error(1033)
            self.connects += 1
            return EmulatedConnection(self, inst, self._epochs[inst.inst_id], pdb=pdb)

    def query(self, sql: str, inst_id: int | None = None) -> list[tuple[Any, ...]]:
        with self.connect(inst_id) as conn, conn.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    def _death(self, conn: EmulatedConnection) -> str | None:
        """The error a session's next call meets if its server side is gone, else None."""
        with self._lock:
            inst = self.db.instances[conn.inst_id]
            if inst.generation != conn._generation or self._epochs[inst.inst_id] != conn._epoch:
                return self._death_codes[inst.inst_id]
            return None

    def _execute(self, conn: EmulatedConnection, sql: str) -> tuple[Compiled, list[tuple[Any, ...]]]:
        with self._lock:
            self.executed.append(sql)
            lose = self._lose_after
            if lose is not None:
                left, code = lose
                self._lose_after = (left - 1, code) if left > 0 else None
            hang = next((h for h in self._hangs if h.pattern.search(sql)), None)
            if hang is not None and hang.times is not None:
                hang.times -= 1
                if hang.times <= 0:
                    self._hangs.remove(hang)
            wake = self._wake
        if lose is not None and lose[0] == 0:
            conn._lost()
            raise oracle_error(lose[1])
        if hang is not None:
            self._wait(conn, hang, wake)
            conn._round_trip_check()  # the instance may have gone away meanwhile
        compiled = compile_query(sql)
        with self._lock:
            revoked = [v for v in compiled.views if v in self._revoked]
            if revoked:
                raise ora_error(942)
            if any(not exists(v[1:] if v.startswith("GV$") else v, self.major) for v in compiled.views):
                raise ora_error(942)  # a view this release does not have
            tables = {view: self._table(view, conn.inst_id, conn.pdb) for view in compiled.views}
        return compiled, conn._engine.run(compiled, tables)

    @staticmethod
    def _wait(conn: EmulatedConnection, hang: Hang, wake: threading.Event) -> None:
        """thin's call timeout (impl/thin/protocol.pyx _process_message): at call_timeout it
        sends a break; if the server answers it, DPY-4024, else after another call_timeout
        DPY-4011 and the socket is closed."""
        timeout = conn._call_timeout / 1000
        if timeout <= 0 or hang.seconds <= timeout:
            wake.wait(hang.seconds)
            return
        if wake.wait(timeout):
            return
        if hang.breakable:
            raise dpy_error(oerr.ERR_CALL_TIMEOUT_EXCEEDED, timeout=conn._call_timeout)
        wake.wait(min(timeout, hang.seconds - timeout))
        conn._lost()
        raise dpy_error(
            oerr.ERR_CONNECTION_CLOSED, "socket timed out while recovering from previous socket timeout"
        )

    def _table(self, view: str, inst_id: int, pdb: int | None = None) -> list[tuple[Any, ...]]:
        """The rows of `view` for a session on instance `inst_id`: GV$ views show every open
        instance (INST_ID first), V$ views the session's own."""
        columns = [col for col, _ in TABLES[view]]
        glob = view.startswith("GV$")
        shown = self.db.open_instances() if glob else [self.db.instances[inst_id]]
        out: list[tuple[Any, ...]] = []
        for inst in shown:
            for row in rows(self.db, view[1:] if glob else view, inst, pdb):
                unknown = set(row) - set(columns)
                assert not unknown, f"{view}: {unknown} are not documented columns"
                values = {"INST_ID": inst.inst_id, **row} if glob else row
                out.append(tuple(_to_sqlite(values.get(col)) for col in columns))
        return out
