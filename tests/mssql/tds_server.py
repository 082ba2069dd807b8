"""A TDS server for tests: the real pyodbc + FreeTDS ODBC driver connects to it and runs the SQL
Server source's statements (lunlat.engines.mssql.sql), answered from an emulated DMV state.

It is not a SQL engine: a batch whose text (whitespace runs collapsed) is one of
`mssql_sql.ALL_QUERIES` gets that statement's result set, built from `DmvState`; the driver's own
housekeeping (SET …, EXEC sp_…, SELECT @@…, USE, transaction statements) gets a bare DONE; any other
statement gets an ERROR token (208 "Invalid object name '…'" naming its first FROM object, or 102
"Incorrect syntax"), so a drifted SQL text fails loudly rather than answering wrong data.

    state = DmvState(databases=("sales", "sales_snap"))
    with TdsServer(state) as server:
        conn = pyodbc.connect(server.connection_string(password="s3cret"), autocommit=True)
        state.advance(10, {("sales", "data", "read"): Stream(100, 425)})

Wire protocol (tds_protocol): PRELOGIN answered with ENCRYPT_NOT_SUP; LOGIN7 with ENVCHANGE
database/collation/language, INFO 5701/5703, LOGINACK (TDS 7.4) and ENVCHANGE packet size (the
client's, or `packet_size` when given) then DONE; TRANSACTION MANAGER requests with DONE; RPC
(parameterised statements, which the source never sends) with ERROR 2812; ATTENTION with DONE+ATTN.
One thread per client connection, 127.0.0.1 only.

DmvState (what the DMVs show)
    DmvState(databases=("sales", "sales_snap") | {name: [(type, physical_name), …]},
             server_name="SQL1", major_version=16, start_time=datetime(2025, 1, 6, 8, 0))
        master=1, tempdb=2, model=3, msdb=4, then the given databases from 5. A database given by
        name has a data file (file_id 1, /var/opt/mssql/data/<db>.mdf) and a log file (file_id 2,
        /var/opt/mssql/log/<db>_log.ldf). type 0 ROWS, 1 LOG; state 0 online, 6 offline.
    advance(seconds, load)   simulated time passes; load maps (database, "data"|"log", "read"|"write")
        to Stream(iops, latency_us, io_bytes=8192, queued_us=0, wait=None, signal_us=5). latency_us is whole µs
        or [(µs, weight), …]: a mix split exactly (each latency gets floor(I/Os so far * its
        cumulative share): no randomness, the same whatever the slicing of time). Fractional I/Os
        carry over to the next call. I/Os are spread round-robin over the online files of the role.
        Role "cache" (Hyperscale only): the RBPEX row, whatever the database.
        Waits: data and cache reads → PAGEIOLATCH_SH (latency + 5 µs signal wait), log writes → WRITELOG
        (latency + 50 µs, 5 of them signal), data writes and log reads → none (checkpoint, lazy
        writer and log readers do not make a user task wait); Stream.wait overrides (e.g.
        "PAGEIOLATCH_EX", "IO_COMPLETION", "" for none). Also 10 SOS_SCHEDULER_YIELD per second
        (not an I/O wait: the WAIT_STATS filter must leave it out). Stalls and waits are kept in µs
        and floored to ms when answered. queued_us counts in io_stall_* and io_stall_queued_* (test input:
        no page says whether the stall includes the queued part, docs/emulated-facts.md);
        signal_us is each wait's signal wait (in wait_time_ms and signal_wait_time_ms).
        major_version models what that version lacks (VERSION_FACTS, docs/emulated-facts.md): before
        13 (2016) a batch using DATEDIFF_BIG gets error 195, before 12 (2014) one naming an
        io_stall_queued_* column gets error 207, as SQL Server answers. engine_edition (SERVERPROPERTY
        'EngineEdition', default 3 Enterprise; 5 Azure SQL Database, 8 Managed Instance, both with
        major_version AZURE_MAJOR_VERSION) models what that edition lacks (EDITION_FACTS): on 5 a batch
        naming sys.master_files gets error 208, on any but 5 and 8 one naming sys.dm_db_wait_stats;
        DB_FILE_STATS reads from the session's database (LOGIN7's, DB_ID()).
        host_platform ("Linux" default, or "Windows"): what sys.dm_os_host_info answers (a batch naming
        it gets error 208 before 14, 2017); on Linux VOLUMES answers NULL strings for every file, on
        Windows the entry of `volumes` (path prefix -> (mount point, volume name)) the path starts with.
        system_databases: the four system databases' files (default SYSTEM_DATABASES, Linux paths).
        service_objective (Azure SQL Database's, default "S2"): on "Basic", "S0", "S1" and "ElasticPool"
        a batch naming sys.dm_os_sys_info gets error 300 (ADMIN_ONLY_OBJECTIVES: the login is a database
        user, not the server admin). service_tier: what DATABASEPROPERTYEX(DB_NAME(), 'Edition') answers
        there (default "Standard"); "Hyperscale" adds the local RBPEX cache's row to
        sys.dm_io_virtual_file_stats (database_id 0, file_id 0: `rbpex`), which a load's role "cache"
        counts on, and makes the data files' write stalls whatever the test says (the service simulates
        them). DB_FILE_STATS is answered as its text reads the DMV (azure_file_rows; the facts: the comment above HYPERSCALE):
        the DMV's rows (every database's, the RBPEX row), its first argument, the `database_id IN (…)`
        filter, the join to sys.database_files (inner: a row without a catalog row is dropped; LEFT:
        kept with NULL type and physical_name) and to tempdb.sys.database_files, on file_id alone or on
        database_id too.
        sa_login: the name of the login with SID 0x01 ("sa"; Amazon RDS renames it "rdsa"): the SERVER
        row's amazon_rds is 1 when a database "rdsadmin" exists or sa_login is "rdsa"
        (DB_ID(N'rdsadmin') IS NOT NULL OR SUSER_SNAME(0x01) = N'rdsa').
    restart(at=None)         counters and waits to zero, start time = at (default: now, at least one
                             second after the old one). TdsServer.restart also closes connections.
    attach(database, [(type, physical_name), …]) -> [file_id, …]   files added (a new database
                             gets the lowest free database_id, as SQL Server does: a detached
                             database's id comes back with another name; a file gets its
                             database's lowest free file_id); detach(database); set_offline(database,
                             file_id=None) / set_online(…): a file or all of a database's files.
    file(database, file_id) -> DbFile (its counters, µs), waits[wait_type] -> WaitCounters, now,
    database_id(name), has_database(name), default_files(name); file_stats_rows(), azure_file_rows(),
    wait_stats_rows(), volume_rows(), edition_rows(), server_rows(), sql_database_server_rows(): what
    the statements answer.
STATEMENTS[key] = (sql, columns) (the types SQL Server documents: smallint ids, tinyint type,
    bigint counters, int for the SERVER row); statement_key(sql) -> key | None.

TdsServer(state=None, packet_size=None, port=0): start() / stop() / with; port; connection_string(
    user="lunlat", password=…, database=None); open_connections; restart() (state.restart() and every
    open connection closed, returns once their threads ended).

Faults (set any time; read when the request arrives), statement keys are Query.name
("virtual_file_stats", "virtual_file_stats_no_queued", "os_wait_stats", "engine_edition", "server",
"server_sql_database", "host_info", "os_volume_stats", "database_file_stats", "db_wait_stats"):
    slow[key] = seconds       answer that statement after the delay. An ATTENTION arriving
                              meanwhile (the driver's query timeout) is answered DONE+ATTN and the
                              result abandoned, as SQL Server does;
    blocked[key] = seconds    that statement waits for a lock another session holds that long: a
                              session whose SET LOCK_TIMEOUT is shorter gets error 1222 after its
                              timeout (the connection stays usable), one without waits it out;
    ignore_attention = True   … unless set: the server sends no ATTN acknowledgement at all
                              (FreeTDS then gives up after twice the timeout, connection dead);
    drop_next_query = True    the next batch that is not driver housekeeping finds its socket
                              closed, no answer (one connection, then the flag clears);
    refuse_logins = True      LOGIN7 answered ERROR 18456 "Login failed for user '…'." + DONE with
                              the error bit, then the socket closed (SQL Server does the same);
    deny[key] = (number, message)
                              that statement answered with an ERROR token (severity 14), e.g.
                              (300, "VIEW SERVER STATE permission was denied on object 'server',
                              database 'master'.") or 976 (Always On secondary not readable);
    login_delay = seconds     the LOGIN7 answer only after that long.
    An unknown database in LOGIN7 gets ERROR 4060 and 18456, like SQL Server.

Records: batches (every SQL batch text, all connections, in order), logins ((user, database)
per LOGIN7; database "master" when none asked), attentions (ATTENTION packets received);
last_password (test-only: the only place a password is kept).
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from types import TracebackType
from typing import Literal

from lunlat.engines.mssql import sql as mssql_sql
from tests.mssql import tds_protocol as tds
from tests.mssql.tds_protocol import Column

Role = Literal["data", "log", "cache"]  # cache: Hyperscale's local RBPEX (its own DMV row)
Direction = Literal["read", "write"]
ROWS, LOG = 0, 1
ONLINE, OFFLINE = 0, 6
SYSTEM_DATABASES: dict[str, tuple[tuple[int, str], ...]] = {
    "master": ((ROWS, "/var/opt/mssql/data/master.mdf"), (LOG, "/var/opt/mssql/data/mastlog.ldf")),
    "tempdb": (
        (ROWS, "/var/opt/mssql/data/tempdb.mdf"),
        (LOG, "/var/opt/mssql/data/templog.ldf"),
        (ROWS, "/var/opt/mssql/data/tempdb2.ndf"),
    ),
    "model": ((ROWS, "/var/opt/mssql/data/model.mdf"), (LOG, "/var/opt/mssql/data/modellog.ldf")),
    "msdb": ((ROWS, "/var/opt/mssql/data/msdbdata.mdf"), (LOG, "/var/opt/mssql/data/msdblog.ldf")),
}
EPOCH = datetime(1970, 1, 1)
SIGNAL_US = 5  # signal wait of every emulated wait: from being signalled to running again
WRITELOG_EXTRA_US = 50  # a commit waits its log flush plus the log writer's hand-off
BACKGROUND_WAITS = {"SOS_SCHEDULER_YIELD": (10, 100)}  # per second: tasks, µs each
# The I/O wait types the emulated server counts (the server's own list, not the source's: the WAIT_STATS
# statement's IN list picks from it). Each is a row of sys.dm_os_wait_stats's "Types of waits"
# (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-wait-stats-transact-sql).
IO_WAIT_TYPES = (
    "WRITELOG",
    "LOGBUFFER",
    "PAGEIOLATCH_SH",
    "PAGEIOLATCH_EX",
    "PAGEIOLATCH_UP",
    "PAGEIOLATCH_DT",
    "PAGEIOLATCH_KP",
    "IO_COMPLETION",
    "WRITE_COMPLETION",
    "IO_RETRY",
    "IO_QUEUE_LIMIT",
    "ASYNC_IO_COMPLETION",
    "BACKUPIO",
    "HADR_SYNC_COMMIT",
    # Azure SQL's transaction log rate governance waits ("Resource limits", transaction log rate
    # governance): a Stream(wait="LOG_RATE_GOVERNOR") models a database held back by its service tier
    "LOG_RATE_GOVERNOR",
    "POOL_LOG_RATE_GOVERNOR",
    "INSTANCE_LOG_RATE_GOVERNOR",
    "HADR_THROTTLE_LOG_RATE_SEND_RECV_QUEUE_SIZE",
    "HADR_THROTTLE_LOG_RATE_LOG_SIZE",
    "HADR_THROTTLE_LOG_RATE_MISMATCHED_SLO",
    # Hyperscale's log rate throttling waits (Azure SQL Database "Hyperscale performance diagnostics"):
    # a Stream(wait="RBIO_RG_STORAGE") models a primary held back by a page server behind on the log
    "RBIO_RG_STORAGE",
    "RBIO_RG_DESTAGE",
    "RBIO_RG_REPLICA",
    "RBIO_RG_GEOREPLICA",
    "RBIO_RG_LOCALDESTAGE",
)
DEFAULT_WAITS = {
    ("data", "read"): "PAGEIOLATCH_SH",
    ("cache", "read"): "PAGEIOLATCH_SH",
    ("log", "write"): "WRITELOG",
}
# SERVERPROPERTY('EngineEdition') (https://learn.microsoft.com/en-us/sql/t-sql/functions/serverproperty-transact-sql):
# 3 Enterprise (also Developer and Evaluation), 5 Azure SQL Database, 8 Azure SQL Managed Instance.
ENTERPRISE, SQL_DATABASE, MANAGED_INSTANCE = 3, 5, 8
# Both Azure variants report ProductVersion 12.0.2000.8 (major 12) whatever the engine underneath:
# "Microsoft SQL Azure (RTM) - 12.0.2000.8" (github.com/MicrosoftDocs/sql-docs issue 3934, Azure SQL
# Database), "Version: 12.0.2000.8 Edition: SQL Azure" from a Managed Instance
# (github.com/olahallengren/sql-server-maintenance-solution issue 851).
AZURE_MAJOR_VERSION = 12
# Amazon RDS for SQL Server: the login with SID 0x01 is "rdsa" ("the Amazon RDS System Administrator
# (rdsa) login", https://repost.aws/knowledge-center/rds-sql-server-restore-master-user) and a database
# "rdsadmin" exists (both tested by olahallengren/sql-server-maintenance-solution DatabaseBackup.sql).
RDS_SA_LOGIN, RDS_ADMIN_DATABASE = "rdsa", "rdsadmin"
Platform = Literal["Windows", "Linux"]
TEMPDB_ID = 2

# Azure SQL Database Hyperscale (docs/emulated-facts.md, "SQL Server"): "sys.dm_io_virtual_file_stats()
# in a Hyperscale database has a special row reporting the IO against the local RBPEX cache on the
# compute replica. This row has the value of 0 for both database_id and file_id"; the data files other
# than file_id 0 are page servers, whose writes "are simulated … latency for data files other than
# file_id 0 does not reflect the actual latency of page server writes" (Azure SQL Database, "Hyperscale
# performance diagnostics", "Virtual file stats and IO accounting", MicrosoftDocs/sql-docs
# azure-sql/database/hyperscale-performance-diagnostics.md). The tier is DATABASEPROPERTYEX(DB_NAME(),
# 'Edition') = 'Hyperscale' (SMO's IsHyperscaleEdition: microsoft/sqlmanagementobjects
# src/Microsoft/SqlServer/Management/SqlEnum/PostProcessDatabaseInsideAttribs.cs).
# tempdb's files are rows of database_id 2, their catalog tempdb.sys.database_files, read from a user
# database: influxdata/telegraf plugins/inputs/sqlserver/azuresqldbqueries.go (sqlAzureDBDatabaseIO:
# `vfs.[database_id] IN (DB_ID(),0,2)`, a LEFT OUTER JOIN to sys.database_files UNION ALL
# tempdb.sys.database_files "on database_id and file_id"; "Without this had a bug where join was only on
# file_id").
HYPERSCALE = "Hyperscale"
RBPEX_ID = 0
_VFS_CALL = re.compile(
    r"sys\.dm_io_virtual_file_stats\(\s*(NULL|DB_ID\(\)|\d+)\s*,\s*NULL\s*\)", re.IGNORECASE
)
_DATABASE_IN = re.compile(r"\bvfs\.database_id\s+IN\s*\(((?:[^()]|\(\))*)\)", re.IGNORECASE)
_JOIN_ON_DATABASE = re.compile(r"\bdf\.database_id\s*=\s*vfs\.database_id\b", re.IGNORECASE)
_TEMPDB_FILES = re.compile(r"\btempdb\.sys\.database_files\b", re.IGNORECASE)
_LEFT_JOIN = re.compile(r"\bLEFT\s+(?:OUTER\s+)?JOIN\b", re.IGNORECASE)


# --- the emulated state ----------------------------------------------------------------------


@dataclass(slots=True)
class DbFile:
    database_id: int
    file_id: int
    type: int  # 0 ROWS, 1 LOG
    physical_name: str
    state: int = ONLINE
    reads: int = 0
    bytes_read: int = 0
    read_stall_us: int = 0
    read_queued_us: int = 0
    writes: int = 0
    bytes_written: int = 0
    write_stall_us: int = 0
    write_queued_us: int = 0

    def zero(self) -> None:
        self.reads = self.bytes_read = self.read_stall_us = self.read_queued_us = 0
        self.writes = self.bytes_written = self.write_stall_us = self.write_queued_us = 0

    def count(self, direction: Direction, n: int, micros: int, size: int, queued_us: int) -> None:
        if direction == "read":
            self.reads += n
            self.bytes_read += n * size
            self.read_stall_us += n * (micros + queued_us)
            self.read_queued_us += n * queued_us
        else:
            self.writes += n
            self.bytes_written += n * size
            self.write_stall_us += n * (micros + queued_us)
            self.write_queued_us += n * queued_us


@dataclass(slots=True)
class WaitCounters:
    tasks: int = 0
    wait_us: int = 0  # includes the signal wait, as wait_time_ms does
    signal_us: int = 0


Latency = int | Sequence[tuple[int, float]]


@dataclass(frozen=True, slots=True)
class Stream:
    """`iops` I/Os per second of `io_bytes` each, each taking `latency_us` (whole µs, or a mix of
    (µs, weight)); `queued_us` of resource-governor queueing on top; `signal_us` of each wait spent
    waiting for a CPU after the I/O (CPU pressure); `wait`: see the docstring."""

    iops: float
    latency_us: Latency
    io_bytes: int = 8192
    queued_us: int = 0
    wait: str | None = None
    signal_us: int = SIGNAL_US
    # A synchronous Always On replica: each log write also waits HADR_SYNC_COMMIT this long
    # ("waiting for transaction commit processing for the synchronized secondary databases to harden
    # the log", sys.dm_os_wait_stats). Its own wait: no stall on this server's log file.
    replica_us: int = 0

    def __post_init__(self) -> None:
        if not self.iops >= 0 or self.io_bytes < 0 or self.queued_us < 0 or self.signal_us < 0:
            raise ValueError(f"{self!r}: iops, io_bytes, queued_us and signal_us must be >= 0")
        self.mix()

    def mix(self) -> tuple[tuple[int, Fraction], ...]:
        pairs = [(self.latency_us, 1.0)] if isinstance(self.latency_us, int) else list(self.latency_us)
        if not pairs or any(not isinstance(m, int) or m < 0 or w < 0 for m, w in pairs):
            raise ValueError(f"latency {self.latency_us!r}: whole µs >= 0 with weights >= 0")
        total = sum(Fraction(str(w)) for _, w in pairs)
        if total <= 0:
            raise ValueError(f"latency {self.latency_us!r}: no positive weight")
        return tuple((m, Fraction(str(w)) / total) for m, w in pairs)


Load = Mapping[tuple[str, Role, Direction], Stream]


class DmvState:
    """Databases, their files with I/O counters, wait stats and the server's identity; see the
    module docstring. Thread-safe: the server's connection threads read it under `lock`."""

    def __init__(
        self,
        databases: Sequence[str] | Mapping[str, Sequence[tuple[int, str]]] = ("sales", "sales_snap"),
        server_name: str = "SQL1",
        major_version: int = 16,
        start_time: datetime = datetime(2025, 1, 6, 8, 0),
        engine_edition: int = ENTERPRISE,
        host_platform: Platform = "Linux",
        system_databases: Mapping[str, Sequence[tuple[int, str]]] = SYSTEM_DATABASES,
        sa_login: str = "sa",
        service_objective: str = "S2",
        service_tier: str = "Standard",
        updateability: str = "READ_WRITE",
    ) -> None:
        self.lock = threading.RLock()
        self.service_objective = service_objective
        self.service_tier = service_tier
        # DATABASEPROPERTYEX(DB_NAME(), 'Updateability'): READ_ONLY on a read-only replica (Azure SQL,
        # "Read queries on replicas": the comment above sql.READ_ONLY)
        self.updateability = updateability
        # Hyperscale's local RBPEX cache: "a special row" of sys.dm_io_virtual_file_stats with
        # database_id 0 and file_id 0 (the comment above HYPERSCALE); no catalog view lists it.
        hyperscale = engine_edition == SQL_DATABASE and service_tier == HYPERSCALE
        self.rbpex: DbFile | None = DbFile(RBPEX_ID, RBPEX_ID, ROWS, "") if hyperscale else None
        self.server_name = server_name
        self.major_version = major_version
        self.engine_edition = engine_edition
        self.host_platform = host_platform
        self.sa_login = sa_login
        self.start_time = start_time
        self.now = start_time + timedelta(days=1)
        self.databases: dict[int, str] = {}
        self.files: list[DbFile] = []
        self.volumes: dict[str, tuple[str, str]] = {}
        self.waits: dict[str, WaitCounters] = {w: WaitCounters() for w in [*IO_WAIT_TYPES, *BACKGROUND_WAITS]}
        self._issued: dict[object, Fraction] = {}  # per stream: I/Os due so far (fractional)
        self._turn: dict[object, int] = {}  # per stream: round-robin position over its files
        for name, files in system_databases.items():
            self.attach(name, files)
        for name in databases:
            user_files = databases[name] if isinstance(databases, Mapping) else self.default_files(name)
            self.attach(name, user_files)

    @staticmethod
    def default_files(database: str) -> tuple[tuple[int, str], ...]:
        return (
            (ROWS, f"/var/opt/mssql/data/{database}.mdf"),
            (LOG, f"/var/opt/mssql/log/{database}_log.ldf"),
        )

    # --- layout ---------------------------------------------------------------------------------

    def database_id(self, database: str) -> int:
        with self.lock:
            for database_id, name in self.databases.items():
                if name == database:
                    return database_id
            raise KeyError(f"no database {database!r} (have {sorted(self.databases.values())})")

    def has_database(self, database: str) -> bool:
        with self.lock:
            return database in self.databases.values()

    def file(self, database: str, file_id: int) -> DbFile:
        with self.lock:
            database_id = self.database_id(database)
            for f in self.files:
                if (f.database_id, f.file_id) == (database_id, file_id):
                    return f
            raise KeyError(f"no file {file_id} in {database!r}")

    def attach(self, database: str, files: Sequence[tuple[int, str]]) -> list[int]:
        with self.lock:
            try:
                database_id = self.database_id(database)
            except KeyError:
                database_id = next(i for i in range(1, len(self.databases) + 2) if i not in self.databases)
                self.databases[database_id] = database
            ids: list[int] = []
            for kind, path in files:
                if kind not in (ROWS, LOG):
                    raise ValueError(f"file type {kind}: 0 ROWS or 1 LOG")
                taken = {f.file_id for f in self.files if f.database_id == database_id}
                file_id = next(i for i in range(1, len(taken) + 2) if i not in taken)
                self.files.append(DbFile(database_id, file_id, kind, path))
                ids.append(file_id)
            return ids

    def detach(self, database: str) -> None:
        with self.lock:
            database_id = self.database_id(database)
            del self.databases[database_id]
            self.files = [f for f in self.files if f.database_id != database_id]

    def _set_state(self, database: str, file_id: int | None, state: int) -> None:
        with self.lock:
            database_id = self.database_id(database)
            targets = [f for f in self.files if f.database_id == database_id and file_id in (None, f.file_id)]
            if not targets:
                raise KeyError(f"no file {file_id} in {database!r}")
            for f in targets:
                f.state = state

    def set_offline(self, database: str, file_id: int | None = None) -> None:
        self._set_state(database, file_id, OFFLINE)

    def set_online(self, database: str, file_id: int | None = None) -> None:
        self._set_state(database, file_id, ONLINE)

    # --- time -----------------------------------------------------------------------------------

    def restart(self, at: datetime | None = None) -> None:
        with self.lock:
            for f in [*self.files, *([self.rbpex] if self.rbpex else [])]:
                f.zero()
            for name in self.waits:
                self.waits[name] = WaitCounters()
            self._issued.clear()
            self._turn.clear()
            start = at if at is not None else max(self.now, self.start_time + timedelta(seconds=1))
            self.start_time = self.now = start

    def advance(self, seconds: float, load: Load | None = None) -> None:
        if not seconds >= 0:
            raise ValueError(f"seconds {seconds!r} is not >= 0")
        with self.lock:
            self.now += timedelta(seconds=seconds)
            for (database, role, direction), stream in (load or {}).items():
                self._run(database, role, direction, stream, Fraction(str(seconds)))
            for name, (tasks, micros) in BACKGROUND_WAITS.items():
                self._wait(
                    name, self._due(("background", name), Fraction(tasks), Fraction(str(seconds))), micros
                )

    def _due(self, key: object, rate: Fraction, seconds: Fraction) -> int:
        """Whole events due now of a rate: the fractional rest carries over to the next call."""
        before = self._issued.get(key, Fraction(0))
        self._issued[key] = before + rate * seconds
        return int(self._issued[key]) - int(before)

    def _run(
        self, database: str, role: Role, direction: Direction, stream: Stream, seconds: Fraction
    ) -> None:
        if role not in ("data", "log", "cache") or direction not in ("read", "write"):
            raise ValueError(f"unknown stream {role}/{direction}")
        database_id = self.database_id(database)
        kind = LOG if role == "log" else ROWS
        files = [f for f in self.files if (f.database_id, f.type, f.state) == (database_id, kind, ONLINE)]
        if role == "cache":
            if self.rbpex is None:
                raise ValueError("role cache: only a Hyperscale database has the RBPEX row")
            files = [self.rbpex]
        wait = stream.wait if stream.wait is not None else DEFAULT_WAITS.get((role, direction), "")
        if wait and wait not in self.waits:
            raise ValueError(f"unknown wait type {wait!r}")
        # Each latency of the mix gets floor(total * cumulative share) I/Os so far: exact
        # proportions whatever the slicing of time, and the same numbers on every run.
        key = (database, role, direction)
        before = self._issued.get(key, Fraction(0))
        self._due(key, Fraction(str(stream.iops)), seconds)
        after = self._issued[key]
        share = Fraction(0)
        for micros, weight in stream.mix():
            n = int(after * (share + weight)) - int(after * share)
            n -= int(before * (share + weight)) - int(before * share)
            share += weight
            if n <= 0 or not files:
                continue  # an offline database does no I/O
            turn = self._turn.get(key, 0)
            for i, f in enumerate(files):
                count = n // len(files) + (1 if (i - turn) % len(files) < n % len(files) else 0)
                f.count(direction, count, micros, stream.io_bytes, stream.queued_us)
            self._turn[key] = (turn + n) % len(files)
            if wait:
                # WRITELOG: the log writer's hand-off on top (WRITELOG_EXTRA_US, the signal wait in it)
                extra = max(WRITELOG_EXTRA_US, stream.signal_us) if wait == "WRITELOG" else stream.signal_us
                self._wait(wait, n, micros + stream.queued_us + extra, stream.signal_us)
            if stream.replica_us and (role, direction) == ("log", "write"):
                self._wait("HADR_SYNC_COMMIT", n, stream.replica_us + stream.signal_us, stream.signal_us)

    def _wait(self, wait_type: str, n: int, micros: int, signal_us: int = SIGNAL_US) -> None:
        counters = self.waits[wait_type]
        counters.tasks += n
        counters.wait_us += n * micros  # inclusive of the signal wait, as wait_time_ms is
        counters.signal_us += n * signal_us

    # --- what the statements answer ------------------------------------------------------------

    def file_stats_rows(self, queued: bool = True) -> list[tuple[object, ...]]:
        """FILE_STATS (with the io_stall_queued_* columns) or FILE_STATS_NO_QUEUED: online ROWS and
        LOG files (type IN (0, 1) AND state = 0). DB_FILE_STATS (Azure SQL Database): azure_file_rows."""
        with self.lock:
            return [
                (
                    f.database_id,
                    f.file_id,
                    self.databases.get(f.database_id),
                    f.type,
                    f.physical_name,
                    f.reads,
                    f.bytes_read,
                    f.read_stall_us // 1000,
                    f.writes,
                    f.bytes_written,
                    f.write_stall_us // 1000,
                    *((f.read_queued_us // 1000, f.write_queued_us // 1000) if queued else ()),
                )
                for f in sorted(self.files, key=lambda f: (f.database_id, f.file_id))
                if f.type in (ROWS, LOG) and f.state == ONLINE
            ]

    def wait_stats_rows(self, wanted: Collection[str] | None = None) -> list[tuple[object, ...]]:
        """WAIT_STATS: the rows of the wait types `wanted` (the statement's IN list; default the
        source's list)."""
        names = set(mssql_sql.IO_WAITS if wanted is None else wanted)
        with self.lock:
            return [
                (name, w.tasks, w.wait_us // 1000, w.signal_us // 1000)
                for name, w in self.waits.items()
                if name in names
            ]

    def volume_rows(self) -> list[tuple[object, ...]]:
        """VOLUMES: on Linux volume_mount_point and logical_volume_name "return null"
        (sys.dm_os_volume_stats, the column descriptions); on Windows the entry of `volumes` (path
        prefix -> (mount point, volume name)) the file's path starts with."""
        with self.lock:
            rows: list[tuple[object, ...]] = []
            for f in sorted(self.files, key=lambda f: (f.database_id, f.file_id)):
                if f.type not in (ROWS, LOG) or f.state != ONLINE:
                    continue
                hit = next(
                    (v for prefix, v in self.volumes.items() if f.physical_name.startswith(prefix)), None
                )
                if self.host_platform == "Linux":
                    hit = None
                rows.append((f.database_id, f.file_id, *(hit or (None, None))))
            return rows

    def server_rows(self) -> list[tuple[object, ...]]:
        with self.lock:
            started = (self.start_time - EPOCH) // timedelta(seconds=1)
            rds = self.has_database(RDS_ADMIN_DATABASE) or self.sa_login == RDS_SA_LOGIN
            return [(self.server_name, self.major_version, started, int(rds))]

    def edition_rows(self) -> list[tuple[object, ...]]:
        """EDITION: SERVERPROPERTY('EngineEdition')."""
        return [(self.engine_edition,)]

    def sql_database_server_rows(self) -> list[tuple[object, ...]]:
        """SERVER_SQL_DATABASE: the server's name, ProductVersion's major, the database's service tier
        (DATABASEPROPERTYEX(DB_NAME(), 'Edition')) and whether it takes writes ('Updateability')."""
        # the property "Applies to: Azure SQL Database, Azure Synapse Analytics" (its page): NULL elsewhere
        tier = self.service_tier if self.engine_edition == SQL_DATABASE else None
        return [(self.server_name, self.major_version, tier, self.updateability)]

    def azure_file_rows(self, statement: str, database: str) -> list[tuple[object, ...]]:
        """DB_FILE_STATS on Azure SQL Database, as `statement` reads the DMV from `database` (the
        session's, DB_ID()); the facts: the comment above HYPERSCALE. Not a SQL engine: the few clauses the statement
        may vary in are read from its text, and a text that names none of them reads like the old one."""
        with self.lock:
            current = self.database_id(database)
            found = _VFS_CALL.search(statement)
            if found is None:
                raise ValueError("no sys.dm_io_virtual_file_stats(…, NULL) call in the statement")
            argument = found.group(1).upper()
            # The DMV's rows: every database's files (which others an Azure SQL Database's DMV shows is
            # not documented: the database ids "are unique within a single database or an elastic pool",
            # so the statement must filter), and the RBPEX row on Hyperscale.
            rows = sorted(self.files, key=lambda f: (f.database_id, f.file_id))
            rows = [*([self.rbpex] if self.rbpex else []), *rows]
            if argument != "NULL":
                wanted = current if argument == "DB_ID()" else int(argument)
                rows = [f for f in rows if f.database_id == wanted]
            listed = _DATABASE_IN.search(statement)
            if listed is not None:
                ids = {
                    current if i.strip().upper() == "DB_ID()" else int(i) for i in listed.group(1).split(",")
                }
                rows = [f for f in rows if f.database_id in ids]
            # The catalog joined: sys.database_files is the session database's, tempdb.sys.database_files
            # tempdb's; joined on file_id alone a tempdb row meets the session database's file of that id.
            on_database = _JOIN_ON_DATABASE.search(statement) is not None
            catalogs = [current, *([TEMPDB_ID] if _TEMPDB_FILES.search(statement) else [])]
            catalog = {
                (f.database_id if on_database else 0, f.file_id): f
                for f in self.files
                if f.database_id in catalogs and (on_database or f.database_id == current)
            }
            left = _LEFT_JOIN.search(statement) is not None
            out: list[tuple[object, ...]] = []
            for f in rows:
                listed_file = catalog.get((f.database_id if on_database else 0, f.file_id))
                if listed_file is None and not left:
                    continue  # an inner join drops a DMV row no catalog lists
                if listed_file is not None and (
                    listed_file.type not in (ROWS, LOG) or listed_file.state != ONLINE
                ):
                    continue  # WHERE df.type IN (0, 1) AND df.state = 0
                out.append(
                    (
                        f.database_id,
                        f.file_id,
                        database,  # DB_NAME(): the session's database, whatever the row
                        None if listed_file is None else listed_file.type,
                        None if listed_file is None else listed_file.physical_name,
                        f.reads,
                        f.bytes_read,
                        f.read_stall_us // 1000,
                        f.writes,
                        f.bytes_written,
                        f.write_stall_us // 1000,
                        f.read_queued_us // 1000,
                        f.write_queued_us // 1000,
                    )
                )
            return out

    def host_info_rows(self) -> list[tuple[object, ...]]:
        """HOST_INFO: sys.dm_os_host_info's host_platform, "Windows or Linux"."""
        return [(self.host_platform,)]


def _bigints(*names: str) -> tuple[Column, ...]:
    return tuple(Column(n, "int", 8) for n in names)


_FILE_COLUMNS = (
    Column("database_id", "int", 2),
    Column("file_id", "int", 2),
    Column("database_name", "nvarchar", 128),
    Column("type", "int", 1),
    Column("physical_name", "nvarchar", 260),
    *_bigints("num_of_reads", "num_of_bytes_read", "io_stall_read_ms"),
    *_bigints("num_of_writes", "num_of_bytes_written", "io_stall_write_ms"),
)

_WAIT_COLUMNS = (
    Column("wait_type", "nvarchar", 60),
    *_bigints("waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms"),
)

# Column types as SQL Server documents them (smallint ids, tinyint type, bigint counters).
STATEMENTS: dict[str, tuple[str, tuple[Column, ...]]] = {
    mssql_sql.FILE_STATS.name: (
        mssql_sql.FILE_STATS.sql,
        (*_FILE_COLUMNS, *_bigints("io_stall_queued_read_ms", "io_stall_queued_write_ms")),
    ),
    mssql_sql.FILE_STATS_NO_QUEUED.name: (mssql_sql.FILE_STATS_NO_QUEUED.sql, _FILE_COLUMNS),
    mssql_sql.WAIT_STATS.name: (mssql_sql.WAIT_STATS.sql, _WAIT_COLUMNS),
    mssql_sql.DB_FILE_STATS.name: (
        mssql_sql.DB_FILE_STATS.sql,
        (*_FILE_COLUMNS, *_bigints("io_stall_queued_read_ms", "io_stall_queued_write_ms")),
    ),
    mssql_sql.DB_WAIT_STATS.name: (mssql_sql.DB_WAIT_STATS.sql, _WAIT_COLUMNS),
    mssql_sql.VOLUMES.name: (
        mssql_sql.VOLUMES.sql,
        (
            Column("database_id", "int", 2),
            Column("file_id", "int", 2),
            Column("volume_mount_point", "nvarchar", 512),
            Column("logical_volume_name", "nvarchar", 512),
        ),
    ),
    mssql_sql.SERVER.name: (
        mssql_sql.SERVER.sql,
        (
            Column("server_name", "nvarchar", 256),
            Column("major_version", "int", 4),
            Column("start_time", "int", 8),  # CAST(... AS BIGINT) * 86400 + …: bigint
            Column("amazon_rds", "int", 4),  # CASE … THEN 1 ELSE 0 END: int
        ),
    ),
    mssql_sql.EDITION.name: (
        mssql_sql.EDITION.sql,
        (Column("engine_edition", "int", 4),),  # CAST(SERVERPROPERTY('EngineEdition') AS INT)
    ),
    mssql_sql.SERVER_SQL_DATABASE.name: (
        mssql_sql.SERVER_SQL_DATABASE.sql,
        (
            Column("server_name", "nvarchar", 256),
            Column("major_version", "int", 4),
            # CAST(DATABASEPROPERTYEX(…, 'Edition') AS NVARCHAR(64)): the property's base type, nvarchar(64)
            Column("service_tier", "nvarchar", 64),
            # CAST(DATABASEPROPERTYEX(…, 'Updateability') AS NVARCHAR(128)): its base type, nvarchar(128)
            Column("updateability", "nvarchar", 128),
        ),
    ),
    mssql_sql.HOST_INFO.name: (mssql_sql.HOST_INFO.sql, (Column("host_platform", "nvarchar", 256),)),
}


def normalize(sql: str) -> str:
    return " ".join(sql.split())


_BY_TEXT = {normalize(text): key for key, (text, _) in STATEMENTS.items()}
_HOUSEKEEPING = re.compile(
    r"^(SET\s|EXEC(UTE)?\s+sp_|sp_\w+|SELECT\s+@@|USE\s|IF\s+@@TRANCOUNT|BEGIN\s+TRAN|COMMIT|ROLLBACK)",
    re.IGNORECASE,
)
_FROM = re.compile(r"\bFROM\s+([\w.\[\]]+)", re.IGNORECASE)


# What a server of a given major version lacks, and the error it answers when a batch uses it
# (docs/emulated-facts.md, "SQL Server"): (since major version, pattern, error number, message, severity).
# DATEDIFF_BIG: SQL Server 2016 (13.x) and later
# (https://learn.microsoft.com/en-us/sql/t-sql/functions/datediff-big-transact-sql); an unknown function
# is error 195 "'%.*ls' is not a recognized %S_MSG.", severity 15, here "built-in function name"
# (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-0-to-999).
# io_stall_queued_read_ms / io_stall_queued_write_ms: SQL Server 2014 (12.x) and later
# (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-io-virtual-file-stats-transact-sql);
# an unknown column is error 207 "Invalid column name '%.*ls'.", severity 16
# (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/mssqlserver-207-database-engine-error).
VERSION_FACTS: tuple[tuple[int, re.Pattern[str], int, str, int], ...] = (
    (
        13,
        re.compile(r"\b(DATEDIFF_BIG)\s*\(", re.IGNORECASE),
        195,
        "'{0}' is not a recognized built-in function name.",
        15,
    ),
    (
        12,
        re.compile(r"\b(io_stall_queued_(?:read|write)_ms)\b", re.IGNORECASE),
        207,
        "Invalid column name '{0}'.",
        16,
    ),
    # sys.dm_os_host_info: SQL Server 2017 (14.x) and later ("Applies to",
    # https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-host-info-transact-sql);
    # an unknown object is error 208 "Invalid object name '%.*ls'.", severity 16 (the errors page above).
    (14, re.compile(r"\b(sys\.dm_os_host_info)\b", re.IGNORECASE), 208, "Invalid object name '{0}'.", 16),
)


def version_error(sql: str, major_version: int) -> tuple[int, str, int] | None:
    """The error a server of `major_version` answers `sql` with, when it uses what that version lacks."""
    for since, pattern, number, message, severity in VERSION_FACTS:
        found = pattern.search(sql)
        if major_version < since and found:
            return number, message.format(found.group(1)), severity
    return None


# What each engine edition lacks (docs/emulated-facts.md, "SQL Server"): (the editions that lack it,
# pattern); a batch naming it gets error 208 "Invalid object name '%.*ls'.", severity 16
# (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-0-to-999).
# Azure SQL Database has no sys.master_files (github.com/olahallengren/sql-server-maintenance-solution
# issue 67: "Invalid object name 'sys.master_files'." with EngineEdition 5); sys.dm_db_wait_stats exists on
# Azure SQL Database and Managed Instance only ("Applies to",
# https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-db-wait-stats-azure-sql-database).
EDITION_FACTS: tuple[tuple[Callable[[int], bool], re.Pattern[str]], ...] = (
    (lambda edition: edition == SQL_DATABASE, re.compile(r"\b(sys\.master_files)\b", re.IGNORECASE)),
    (
        lambda edition: edition not in (SQL_DATABASE, MANAGED_INSTANCE),
        re.compile(r"\b(sys\.dm_db_wait_stats)\b", re.IGNORECASE),
    ),
)


def edition_error(sql: str, engine_edition: int) -> tuple[int, str, int] | None:
    """The error a server of `engine_edition` answers `sql` with, when it names an object that
    edition lacks."""
    for lacks, pattern in EDITION_FACTS:
        found = pattern.search(sql)
        if found and lacks(engine_edition):
            return 208, f"Invalid object name '{found.group(1)}'.", 16
    return None


# What a login may not read (docs/emulated-facts.md, "SQL Server"): on Azure SQL Database's Basic, S0
# and S1 service objectives and in elastic pools (sys.database_service_objectives names them "Basic",
# "S0", "S1", "ElasticPool": https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-database-service-objectives-azure-sql-database)
# sys.dm_os_sys_info needs the server admin, the Azure Active Directory admin or ##MS_ServerStateReader##
# (its page, "Permissions": MicrosoftDocs/sql-docs
# docs/relational-databases/system-dynamic-management-views/sys-dm-os-sys-info-transact-sql.md); the
# emulated login is a database user with VIEW DATABASE STATE, none of those. The error is 300, severity
# 14, as Azure SQL Database answers a database user reading a server-state view (MicrosoftDocs/sql-docs
# issue 1452: "Msg 300, Level 14 … VIEW SERVER STATE permission was denied on object 'server',
# database 'master'.", on Azure SQL Database).
ADMIN_ONLY_OBJECTIVES = frozenset({"Basic", "S0", "S1", "ElasticPool"})
_SYS_INFO = re.compile(r"\bsys\.dm_os_sys_info\b", re.IGNORECASE)


def permission_error(sql: str, state: DmvState) -> tuple[int, str, int] | None:
    """The error the emulated login gets for `sql` for want of a permission it cannot hold there."""
    if (
        state.engine_edition == SQL_DATABASE
        and state.service_objective in ADMIN_ONLY_OBJECTIVES
        and _SYS_INFO.search(sql)
    ):
        return 300, "VIEW SERVER STATE permission was denied on object 'server', database 'master'.", 14
    return None


def statement_key(sql: str) -> str | None:
    """The Query.name of a batch that is one of the source's statements, else None."""
    return _BY_TEXT.get(normalize(sql))


def answer_rows(state: DmvState, key: str, database: str = "master") -> list[tuple[object, ...]]:
    """`database`: the session's current database (DB_ID() in DB_FILE_STATS)."""
    if key == mssql_sql.DB_FILE_STATS.name:
        return state.azure_file_rows(STATEMENTS[key][0], database)
    if key in (mssql_sql.FILE_STATS.name, mssql_sql.FILE_STATS_NO_QUEUED.name):
        return state.file_stats_rows(queued=key != mssql_sql.FILE_STATS_NO_QUEUED.name)
    if key in (mssql_sql.WAIT_STATS.name, mssql_sql.DB_WAIT_STATS.name):
        # DB_WAIT_STATS: the emulation counts waits server-wide; a test of sys.dm_db_wait_stats gives
        # the server one user database, whose waits are then all of them (test input, not a fact).
        return state.wait_stats_rows(re.findall(r"N'(\w+)'", STATEMENTS[key][0]))
    others: dict[str, Callable[[], list[tuple[object, ...]]]] = {
        mssql_sql.VOLUMES.name: state.volume_rows,
        mssql_sql.HOST_INFO.name: state.host_info_rows,
        mssql_sql.EDITION.name: state.edition_rows,
        mssql_sql.SERVER_SQL_DATABASE.name: state.sql_database_server_rows,
    }
    return others.get(key, state.server_rows)()


# --- the server ------------------------------------------------------------------------------


class _ClosedError(Exception):
    """The connection ends (peer gone, fault, or server shutting down)."""


class _Session:
    """One client connection, served by its own thread."""

    def __init__(self, server: TdsServer, sock: socket.socket, spid: int) -> None:
        self.server = server
        self.sock = sock
        self.spid = spid
        self.packet_size = 4096
        self.database = "master"  # the current database, from LOGIN7
        # SET LOCK_TIMEOUT: -1 (wait forever) "at the beginning of a connection", then the last value
        # set, "for the remainder of the connection" (SET LOCK_TIMEOUT,
        # https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008/ms189470(v=sql.100)).
        self.lock_timeout_ms = -1
        self.deadlock_priority = 0  # SET DEADLOCK_PRIORITY: NORMAL (0) by default (same reference family)
        self._lock = threading.Lock()
        self._closed = False
        self.thread = threading.Thread(target=self._run, name=f"tds-session-{spid}", daemon=True)

    def close(self) -> None:
        """Shut the socket down (any thread): the session thread wakes and ends."""
        with self._lock:
            if not self._closed:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        try:
            self._serve()
        except (_ClosedError, OSError, tds.ProtocolError):
            pass
        finally:
            with self._lock:
                self._closed = True
                self.sock.close()
            self.server._forget(self)

    def _send(self, payload: bytes) -> None:
        self.sock.sendall(tds.packets(tds.REPLY, payload, self.packet_size, self.spid))

    def _read_message(self) -> tuple[int, bytes]:
        payload = bytearray()
        while True:
            packet = tds.read_packet(self.sock)
            if packet is None:
                raise _ClosedError
            if packet.kind == tds.ATTENTION:
                return packet.kind, b""
            payload += packet.payload
            if packet.last:
                return packet.kind, bytes(payload)

    def _serve(self) -> None:
        server = self.server
        while True:
            kind, payload = self._read_message()
            if kind == tds.PRELOGIN:
                tds.parse_prelogin(payload)
                major = server.state.major_version
                self._send(tds.prelogin_reply(major, 0, 1000))
            elif kind == tds.LOGIN7:
                self._login(tds.parse_login7(payload))
            elif kind == tds.SQL_BATCH:
                self._batch(tds.batch_text(payload))
            elif kind == tds.TRANSACTION_MANAGER:
                self._send(tds.done())
            elif kind == tds.ATTENTION:
                server._count_attention()
                if not server.ignore_attention:  # nothing running: acknowledge anyway
                    self._send(tds.done(tds.DONE_ATTN))
            elif kind == tds.RPC:
                self._error(2812, "Could not find stored procedure (the test server takes no RPC).", 16)
            else:
                raise tds.ProtocolError(f"packet type {kind}")

    def _pause(self, seconds: float, watch_attention: bool) -> bool:
        """Wait `seconds`, reading what the client sends meanwhile; False when an ATTENTION was
        acknowledged (the request is abandoned)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.sock], [], [], remaining)
            if not readable:
                continue
            packet = tds.read_packet(self.sock)
            if packet is None:
                raise _ClosedError
            if packet.kind != tds.ATTENTION or not watch_attention:
                raise tds.ProtocolError(f"packet type {packet.kind} while a request runs")
            self.server._count_attention()
            if not self.server.ignore_attention:
                self._send(tds.done(tds.DONE_ATTN))
                return False
        return True

    def _error(self, number: int, text: str, severity: int) -> None:
        server_name = self.server.state.server_name
        self._send(
            tds.message(number, text, severity=severity, server=server_name) + tds.done(tds.DONE_ERROR)
        )

    def _login(self, login: tds.Login) -> None:
        server = self.server
        database = login.database or "master"
        server._record_login(login.user, database, login.password)
        if server.login_delay > 0:
            self._pause(server.login_delay, watch_attention=False)
        name = server.state.server_name
        failed = f"Login failed for user '{login.user}'."
        if server.refuse_logins:
            self._error(18456, failed, 14)
            raise _ClosedError
        if not server.state.has_database(database):
            opening = f'Cannot open database "{database}" requested by the login. The login failed.'
            self._send(
                tds.message(4060, opening, severity=11, server=name)
                + tds.message(18456, failed, severity=14, server=name)
                + tds.done(tds.DONE_ERROR)
            )
            raise _ClosedError
        requested = login.packet_size or 4096
        size = server.packet_size or min(max(requested, tds.MIN_PACKET_SIZE), tds.MAX_PACKET_SIZE)
        version = (server.state.major_version, 0, 1000)
        self._send(
            tds.env_change(tds.ENV_DATABASE, database, "master")
            + tds.message(
                5701, f"Changed database context to '{database}'.", severity=0, server=name, info=True
            )
            + tds.env_change_collation(tds.COLLATION)
            + tds.env_change(tds.ENV_LANGUAGE, "us_english", "")
            + tds.message(5703, "Changed language setting to us_english.", severity=0, server=name, info=True)
            + tds.login_ack("Microsoft SQL Server", version)
            + tds.env_change(tds.ENV_PACKET_SIZE, str(size), str(requested))
            + tds.done()
        )
        self.packet_size = size
        self.database = database

    def _batch(self, text: str) -> None:
        server = self.server
        server._record_batch(text)
        key = statement_key(text)
        if key is None and _HOUSEKEEPING.match(text.strip()):
            self._session_settings(text)
            self._send(tds.done())
            return
        if server._take_drop():
            raise _ClosedError
        missing = (
            version_error(text, server.state.major_version)
            or edition_error(text, server.state.engine_edition)
            or permission_error(text, server.state)
        )
        if missing is not None:
            self._error(*missing)
            return
        if key is None:
            found = _FROM.search(text)
            if found:
                self._error(208, f"Invalid object name '{found.group(1)}'.", 16)
            else:
                self._error(102, f"Incorrect syntax near '{text.strip()[:30]}'.", 15)
            return
        if not self._waited(key):
            return
        denied = server.deny.get(key)
        if denied is not None:
            self._error(denied[0], denied[1], 14)
            return
        columns = STATEMENTS[key][1]
        self._send(tds.result(columns, answer_rows(server.state, key, self.database)))

    def _waited(self, key: str) -> bool:
        """The `slow` and `blocked` faults of statement `key`; False when the request ended meanwhile
        (an ATTENTION acknowledged, or the lock timeout's error sent)."""
        server = self.server
        delay = server.slow.get(key, 0.0)
        if delay > 0 and not self._pause(delay, watch_attention=True):
            return False
        held = server.blocked.get(key, 0.0)
        if held <= 0:
            return True
        # Waiting for a lock another session holds: past the session's lock timeout the statement is
        # cancelled with error 1222 and the connection stays usable (LOCK_TIMEOUT_ERROR); without one
        # (-1) it waits as long as the lock is held.
        gives_up = 0 <= self.lock_timeout_ms < held * 1000
        if not self._pause(self.lock_timeout_ms / 1000 if gives_up else held, watch_attention=True):
            return False
        if gives_up:
            self._error(*LOCK_TIMEOUT_ERROR)
            return False
        return True

    def _session_settings(self, text: str) -> None:
        """Remember the SET options the source relies on (the last of each in the batch wins)."""
        for found in _SET_LOCK_TIMEOUT.finditer(text):
            self.lock_timeout_ms = int(found.group(1))
        for found in _SET_DEADLOCK_PRIORITY.finditer(text):
            self.deadlock_priority = int(found.group(1))


# "When a statement has waited longer than the LOCK_TIMEOUT setting, the blocked statement is canceled
# automatically, and error message 1222 (Lock request time-out period exceeded) is returned to the
# application. Any transaction containing the statement, however, is not rolled back" ("Customizing the
# Lock Time-Out", https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2005/ms177413(v=sql.90));
# severity 16 ("Msg 1222, Level 16 … Lock request time out period exceeded.", Microsoft SQL Server 2012
# Unleashed, "Setting the Lock Timeout Interval").
LOCK_TIMEOUT_ERROR = (1222, "Lock request time out period exceeded.", 16)
_SET_LOCK_TIMEOUT = re.compile(r"\bSET\s+LOCK_TIMEOUT\s+(-?\d+)", re.IGNORECASE)
_SET_DEADLOCK_PRIORITY = re.compile(r"\bSET\s+DEADLOCK_PRIORITY\s+(-?\d+)", re.IGNORECASE)


class TdsServer:
    """See the module docstring."""

    def __init__(self, state: DmvState | None = None, packet_size: int | None = None, port: int = 0) -> None:
        if packet_size is not None and not tds.MIN_PACKET_SIZE <= packet_size <= tds.MAX_PACKET_SIZE:
            raise ValueError(f"packet size {packet_size} outside 512..32767")
        self.state = state if state is not None else DmvState()
        self.packet_size = packet_size
        self._requested_port = port
        # faults
        self.slow: dict[str, float] = {}
        self.blocked: dict[str, float] = {}
        self.ignore_attention = False
        self.drop_next_query = False
        self.refuse_logins = False
        self.deny: dict[str, tuple[int, str]] = {}
        self.login_delay = 0.0
        # records
        self.batches: list[str] = []
        self.logins: list[tuple[str, str]] = []
        self.attentions = 0
        self.last_password: str | None = None

        self._lock = threading.Lock()
        self._sessions: set[_Session] = set()
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._next_spid = 51

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("server not started")
        port: int = self._listener.getsockname()[1]
        return port

    def start(self) -> TdsServer:
        if self._listener is not None:
            raise RuntimeError("server already started")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self._requested_port))
        listener.listen(16)
        self._listener = listener
        self._wake_r, self._wake_w = socket.socketpair()
        self._acceptor = threading.Thread(target=self._accept, name="tds-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        if self._listener is None:
            return
        assert self._wake_w is not None and self._wake_r is not None and self._acceptor is not None
        self._wake_w.send(b"x")
        self._acceptor.join(5)
        self._close_sessions()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        self._listener = self._wake_r = self._wake_w = self._acceptor = None

    def __enter__(self) -> TdsServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def restart(self, at: datetime | None = None) -> None:
        """A service restart: counters zeroed, a new start time, every open connection closed."""
        self.state.restart(at)
        self._close_sessions()

    def connection_string(self, user: str = "lunlat", password: str = "", database: str | None = None) -> str:
        """FreeTDS's form. Values are braced but a '}' is not doubled: FreeTDS 1.3.17 takes a braced
        value verbatim up to the '}' before ';' (it does not undo '}}'), and keeps the closing
        brace of a braced value that ends the string, hence APP last."""
        parts = ["DRIVER={FreeTDS}", "SERVER=127.0.0.1", f"PORT={self.port}", "TDS_Version=7.4"]
        parts += ["Encryption=off", f"UID={{{user}}}", f"PWD={{{password}}}"]
        if database is not None:
            parts.append(f"DATABASE={{{database}}}")
        return ";".join([*parts, "APP=lunlat-tests"])

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._sessions)

    # --- internals ------------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None and self._wake_r is not None
        while True:
            readable, _, _ = select.select([self._listener, self._wake_r], [], [])
            if self._wake_r in readable:
                return
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                session = _Session(self, sock, self._next_spid)
                self._next_spid += 1
                self._sessions.add(session)
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(session.thread)
            session.thread.start()

    def _close_sessions(self) -> None:
        with self._lock:
            sessions = list(self._sessions)
            threads = list(self._threads)
        for session in sessions:
            session.close()
        for thread in threads:
            if thread.ident is not None:
                thread.join(5)

    def _forget(self, session: _Session) -> None:
        with self._lock:
            self._sessions.discard(session)

    def _record_batch(self, text: str) -> None:
        with self._lock:
            self.batches.append(text)

    def _record_login(self, user: str, database: str, password: str) -> None:
        with self._lock:
            self.logins.append((user, database))
            self.last_password = password

    def _count_attention(self) -> None:
        with self._lock:
            self.attentions += 1

    def _take_drop(self) -> bool:
        with self._lock:
            drop, self.drop_next_query = self.drop_next_query, False
            return drop
