"""SQL Server: the database's own view of I/O latency per file (ROWS/LOG) and per I/O wait type.

One source per configured instance, through pyodbc and the ODBC driver named in the config
(Microsoft's ODBC Driver 18, or FreeTDS). The connection is kept between scrapes and reopened
with backoff when lost; each scrape runs two static batches (mssql_sql). What pyodbc raises is
classified by SQLSTATE and the server's error number (docs/contract.md §4): a lost connection first shows as
the base class pyodbc.Error (01000 "Unexpected EOF" mid-query, HY000 after an idle drop), only
later as 08S01; HYT00 is a query past `Connection.timeout`.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from lunlat import logs
from lunlat.containers import ContainerMapper
from lunlat.dbfiles import NOWHERE, DbLunLabels, FileLocator, Location
from lunlat.engines.build import locator
from lunlat.engines.dbsession import Classified, Connection, Kind
from lunlat.engines.dbsource import DbSource, Query, count_value, id_value, text_value
from lunlat.engines.mssql import metrics, sql
from lunlat.engines.mssql.config import MssqlTarget
from lunlat.model import Family, LabelSet
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.factory import BuildError, Context

log = logs.get(__name__)

TEMPDB_ID = sql.TEMPDB_ID
ROLE_OF_TYPE = {0: "data", 1: "log"}
# Hyperscale's local RBPEX cache (sql.DB_FILE_STATS): its row has no catalog entry, so no path; it is
# named as Telegraf names it (azuresqldbqueries.go: `WHEN (vfs.[database_id] = 0) THEN 'RBPEX'`). Role
# other: a local SSD cache of data pages on the compute replica, neither the page servers' data files
# (whose reads it would hide in an average) nor a log (ground.Role has no cache role).
RBPEX_FILE = "RBPEX"
RBPEX_ROLE = "other"
LOST_STATES = frozenset({"08S01", "08001", "08003", "08004", "08007", "01000"})
TIMEOUT_STATES = frozenset({"HYT00", "HYT01"})
# Server error numbers of a permission denied: 300 "%ls permission was denied on object '%.*ls',
# database '%.*ls'." (VIEW SERVER STATE, VIEW SERVER PERFORMANCE STATE on 2022+), 262 "%ls permission
# denied in database '%.*ls'." (VIEW DATABASE STATE: Azure SQL Database's DMVs), 297 "The user does not
# have permission to perform this action." (sent after either), 229 "The %ls permission was denied on
# the object …" (an object's permission). Texts: the Database Engine errors page
# (https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-0-to-999);
# 300 then 297 as Azure SQL Database answers: MicrosoftDocs/sql-docs issue 1452; 262 then 297 for VIEW
# DATABASE STATE: lausser/check_mssql_health issue 35.
NO_GRANT_NUMBERS = frozenset({297, 300, 262, 229})
# 976, severity 14: "The target database, '%.*ls', is participating in an availability group and is
# currently not accessible for queries. Either data movement is suspended or the availability replica
# is not enabled for read access." It is what a secondary replica "that do[es] not allow read access, or
# require[s] read intent to be specified" answers (sp_validate_replica_hosts_as_publishers,
# https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-validate-replica-hosts-as-publishers-transact-sql):
# no grant is missing, so it is not no_grant. The source's statements read server-level views from
# the login's database, so it meets 976 when that database (the target's `database`, or the login's
# default) is an availability database on such a secondary. The fix is in the message, first, since
# log lines keep 300 characters; the replica option is ALTER AVAILABILITY GROUP's SECONDARY_ROLE
# (ALLOW_CONNECTIONS = …) (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-availability-group-transact-sql).
NOT_READABLE_NUMBERS = frozenset({976})
NOT_READABLE_FIX = (
    "Always On secondary not readable: unset the target's `database` (the login's default, master, is in "
    "no availability group), target the primary, or allow reads on it (ALTER AVAILABILITY GROUP … "
    "SECONDARY_ROLE (ALLOW_CONNECTIONS = ALL)); server: "
)
# A volume lookup that failed is tried again after this long (and at every reconnect); a missing
# grant is held off by the query gate besides (dbsession.QueryGates: 60 s, doubling up to 10 min).
VOLUME_RETRY_SECONDS = 60.0
GRANTS = "deploy/mssql/grants.sql"
GRANTS_AZURE_SQL_DATABASE = "deploy/mssql/grants-azure-sql-database.sql"
GRANTS_AMAZON_RDS = "deploy/mssql/grants-amazon-rds.sql"
_NUMBER = re.compile(r"\((\d{3,5})\)")  # drivers put the native error number in parentheses


def sqlstate(exc: BaseException) -> str:
    first = exc.args[0] if exc.args else ""
    return first if isinstance(first, str) and len(first) == 5 else ""


def classify(exc: BaseException) -> Classified:
    state = sqlstate(exc)
    text = " ".join(str(exc.args[1] if len(exc.args) > 1 else exc).split())[:300]
    numbers = {int(n) for n in _NUMBER.findall(text)}
    if state in TIMEOUT_STATES:
        return Classified(Kind.TIMEOUT, state, text)
    if numbers & NO_GRANT_NUMBERS:
        return Classified(Kind.NO_GRANT, f"{state} ({min(numbers & NO_GRANT_NUMBERS)})", text)
    if numbers & NOT_READABLE_NUMBERS:
        return Classified(
            Kind.NOT_READABLE, f"{state} ({min(numbers & NOT_READABLE_NUMBERS)})", NOT_READABLE_FIX + text
        )
    # The base class itself (not ProgrammingError etc.) is what a dropped socket raises first.
    if state in LOST_STATES or type(exc).__name__ in ("Error", "InterfaceError") or isinstance(exc, OSError):
        return Classified(Kind.LOST, state, text)
    return Classified(Kind.QUERY_FAILED, state, text)


def connection_string(target: MssqlTarget, password: str) -> str:
    """The ODBC connection string: values braced, TLS keywords per driver.

    ODBC escapes a '}' inside braces by doubling it; FreeTDS (1.3, measured) passes the doubled
    brace on verbatim, so with FreeTDS a password holding '}' cannot be sent and is refused here.
    """
    freetds = "freetds" in target.driver.lower()

    def braced(value: str) -> str:
        if freetds and "}" in value:
            raise SourceError("connect_failed", "FreeTDS cannot send a password or user containing '}'")
        return "{" + value.replace("}", "}}") + "}"

    host, _, port = target.server.partition(",")
    parts = [f"DRIVER={braced(target.driver)}"]
    if freetds:
        # FreeTDS reads SERVER and PORT apart, and `Encryption=`, not ODBC Driver 18's `Encrypt=`.
        parts += [f"SERVER={host.strip()}", *([f"PORT={port.strip()}"] if port else []), "TDS_Version=7.4"]
        parts.append(f"Encryption={'require' if target.encrypt else 'off'}")
    else:
        parts.append(f"SERVER={target.server}")
        parts.append(f"Encrypt={'yes' if target.encrypt else 'no'}")
        parts.append(f"TrustServerCertificate={'yes' if target.trust_server_certificate else 'no'}")
    if target.database is not None:
        # DATABASE: the database the login opens; both drivers take the keyword
        # (https://learn.microsoft.com/en-us/sql/connect/odbc/dsn-connection-string-attribute, "Database";
        # FreeTDS: https://www.freetds.org/userguide/odbcconnattr.htm). Azure SQL Database serves one
        # database per connection, so there it names the database read.
        parts.append(f"DATABASE={braced(target.database)}")
    # APP last: FreeTDS keeps the closing brace of a braced value that ends the string.
    parts += [f"UID={braced(target.user)}", f"PWD={braced(password)}", "APP=lunlat"]
    return ";".join(parts)


def escaped_utf16(raw: bytes) -> str:
    """UTF-16LE bytes that do not decode strictly, with each unpaired surrogate written as Python's
    escape (\\udc80): a label value must be UTF-8, and the admin can still find the file."""
    units = raw.decode("utf-16-le", "surrogatepass" if len(raw) % 2 == 0 else "backslashreplace")
    return units.encode("utf-8", "backslashreplace").decode("utf-8")


def _wide_text_of(source: str) -> Callable[[bytes | None], str | None]:
    """pyodbc's output converter for wide text on `source`'s connections.

    NVARCHAR holds any 16-bit code units ("nchar and nvarchar store each character as a 16-bit
    value", SQL Server 2008 R2 docs, Supplementary Characters, ms180942; SUBSTRING and the like "may
    split any surrogate pairs"), and a Windows file name may hold an unpaired surrogate. pyodbc
    decodes wide text with "strict" (mkleehammer/pyodbc, src/textenc.cpp, TextBufferToObject), so
    one such value failed the whole query and every file of the instance went unpublished. Here it
    is escaped (escaped_utf16) and said once per value.
    """
    said = logs.Once()

    def convert(raw: bytes | None) -> str | None:
        if raw is None:
            return None
        try:
            return raw.decode("utf-16-le")
        except UnicodeDecodeError:
            text = escaped_utf16(raw)
        if said.first(text):
            log.warning(
                "text from the server holds an unpaired UTF-16 surrogate: published with it escaped",
                source=source,
                text=text[:300],
            )
        return text

    return convert


def lock_timeout_ms(target: MssqlTarget) -> int:
    """Half the target's query timeout: a statement blocked by a lock gives up (error 1222) before the
    driver cancels it and the session is dropped."""
    return max(100, round(target.timeout_seconds * 500))


def connect_pyodbc(target: MssqlTarget) -> Callable[[], Connection]:
    """A connect function for `target` through pyodbc; BuildError without the driver."""
    try:
        import pyodbc  # noqa: PLC0415 - optional dependency, only for configured SQL Server targets
    except ImportError:
        raise BuildError(
            "the mssql source needs pyodbc and an ODBC driver: pip install 'lunlat[mssql]'"
        ) from None
    # Pooled connections outlive close(): a dead one would come back from the pool.
    pyodbc.pooling = False
    convert = _wide_text_of(f"mssql:{target.name}")

    def connect() -> Connection:
        try:
            password = target.password.read()
        except ValueError as exc:
            raise SourceError("connect_failed", f"password: {exc}") from None
        try:
            conn = pyodbc.connect(
                connection_string(target, password),
                timeout=max(1, round(target.timeout_seconds)),
                autocommit=True,
            )
        except pyodbc.Error as exc:
            found = classify(exc)
            if found.kind is Kind.NOT_READABLE:  # its own reason at login too, with its fix
                raise SourceError(found.kind.value, found.message, code=found.code) from None
            raise
        # Applies to cursors created from now on (pyodbc sets SQL_ATTR_QUERY_TIMEOUT per statement).
        conn.timeout = max(1, round(target.timeout_seconds))
        # Lowest deadlock priority and a lock timeout for the whole session (sql.session_settings).
        conn.execute(sql.session_settings(lock_timeout_ms(target))).close()
        # Wide text through _wide_text_of: with a converter pyodbc reads the value as SQL_C_BINARY and
        # hands over its bytes (mkleehammer/pyodbc src/getdata.cpp, GetDataUser), for character data the
        # data unconverted ("SQL to C: Character", SQL_C_BINARY, ODBC Programmer's Reference): UTF-16LE.
        for sqltype in (pyodbc.SQL_WCHAR, pyodbc.SQL_WVARCHAR, pyodbc.SQL_WLONGVARCHAR):
            conn.add_output_converter(sqltype, convert)
        return conn  # type: ignore[no-any-return]

    return connect


class MssqlSource(DbSource[Connection]):
    """The SQL Server layer of one configured instance."""

    grants_hint = GRANTS  # per variant, once the server is identified
    error_reasons = (*DbSource.error_reasons, Kind.NOT_READABLE.value)
    _target: MssqlTarget

    def __init__(
        self,
        target: MssqlTarget,
        connect: Callable[[], Connection],
        locator: FileLocator | None = None,
        db_labels: DbLunLabels | None = None,
        clock: Callable[[], float] = time.monotonic,
        container: ContainerMapper | None = None,
    ) -> None:
        super().__init__(
            f"mssql:{target.name}",
            connect,
            classify,
            target.timeout_seconds,
            clock,
            locator,
            db_labels,
            container,
        )
        self._target = target
        self._seen_connects = 0
        self._server = ""
        self._started: int | None = None
        self._major: int | None = None  # None: unknown (the server query failed): newest SQL
        self._edition: int | None = None  # SERVERPROPERTY('EngineEdition'); None: unknown
        self._rds = False  # Amazon RDS for SQL Server (mssql_sql.SERVER's amazon_rds)
        self._hyperscale = False  # Azure SQL Database on the Hyperscale tier (sql.HYPERSCALE)
        self._read_only = False  # its database takes no writes: a read-only replica (sql.READ_ONLY)
        self._platform: str | None = None  # 'Windows', 'Linux'; None: unknown (or not asked: Azure, RDS)
        self._said = logs.Once()
        # (database_id, file_id) -> volume mount point, where SQL Server knows one (Windows).
        self._volumes: dict[tuple[int, int], str] = {}
        self._volumes_failed = False  # the lookup was needed and failed: capability `volumes` 0
        self._volumes_retry_at = 0.0

    @classmethod
    def built(cls, target: MssqlTarget, context: Context, container: ContainerMapper | None) -> MssqlSource:
        """The source of one configured target (engines/engine.py `Engine.build`)."""
        return cls(
            target,
            connect_pyodbc(target),
            locator(context),
            context.db_labels,
            container=container,
        )

    def collect(self) -> SourceResult:
        conn = self._session.connection()
        errors: Counter[str] = Counter()
        if self._session.connects != self._seen_connects or self._edition is None:
            # A new session, or the edition still unread (its statement failed): identify the server.
            self._seen_connects = self._session.connects
            self._identify(conn, errors)
            self._volumes_failed = False
            if self._readable() and self._uses_volumes():
                self._look_up_volumes(conn, errors)
            else:
                self._volumes = {}
            self._refresh_locations()
        elif (
            self._volumes_failed
            and self._clock() >= self._volumes_retry_at
            and self._lookup_open(sql.VOLUMES)
        ):
            self._look_up_volumes(conn, errors)
        if not self._readable():
            # No statement of an edition the source was not built for (or of one not yet known) is sent.
            return SourceResult([self._capabilities(engine_edition=False)], errors)
        file_query = self._file_query()
        wait_query = sql.DB_WAIT_STATS if self._edition == sql.SQL_DATABASE else sql.WAIT_STATS
        files = self._query(conn, file_query, errors)
        waits = self._query(conn, wait_query, errors)
        # The file map is the file statement's paths (and, on Windows, the volumes): unanswered, the
        # LUNs keep the roles it last gave them (issue 43) until it is too old.
        if files is None or self._volumes_failed:
            self._map_unconfirmed()
        else:
            self._map_confirmed()
        if self._map_expired():
            self._volumes = {}
            self._publish_lun_labels("dropped", list, self._target.name, self._target.workload or "")
        families = [
            *self._file_families(files, errors, file_query),
            *self._wait_families(waits or [], errors, wait_query),
            self._capabilities(volumes=not self._volumes_failed, engine_edition=True),
            *self._map_families(),
        ]
        return SourceResult(families, errors)

    def _readable(self) -> bool:
        """Whether the server's edition is one this source reads (docs/mssql.md, support matrix)."""
        return self._edition in sql.KNOWN_EDITIONS

    def _identify(self, conn: Connection, errors: Counter[str]) -> None:
        """The edition first, alone (sql.EDITION: no grant needed), then the identity statement of that
        edition; the grants script the log names follows the edition before any DMV is asked."""
        rows = self._query(conn, sql.EDITION, errors) or []
        self._edition = rows[0][0] if rows and rows[0] and isinstance(rows[0][0], int) else None
        if self._edition is None:
            return
        if self._edition not in sql.KNOWN_EDITIONS:
            self._say_variant()
            return
        self.grants_hint = GRANTS_AZURE_SQL_DATABASE if self._edition == sql.SQL_DATABASE else GRANTS
        if self._edition == sql.SQL_DATABASE:
            rows = self._query(conn, sql.SERVER_SQL_DATABASE, errors) or []
            row = rows[0] if rows else (None, None, None, None)
            started, self._rds = None, False
            self._hyperscale = row[2] == sql.HYPERSCALE
            self._read_only = row[3] == sql.READ_ONLY
        else:
            rows = self._query(conn, sql.SERVER, errors) or []
            row = rows[0] if rows else (None, None, None, None)
            self._hyperscale = self._read_only = False
            started = row[2] if isinstance(row[2], int) else None
            self._rds = self._edition != sql.MANAGED_INSTANCE and row[3] == 1
        self._server = row[0] if isinstance(row[0], str) else ""
        self._major = row[1] if isinstance(row[1], int) else None
        azure = self._edition in sql.AZURE_EDITIONS
        self._platform = None if azure or self._rds else self._host_platform(conn, errors)
        if self._rds:
            self.grants_hint = GRANTS_AMAZON_RDS
        self._say_variant()
        if self._started is not None and started is not None and started != self._started:
            log.info("SQL Server restarted: counters start again", source=self.name)
        self._started = started

    def _host_platform(self, conn: Connection, errors: Counter[str]) -> str | None:
        """'Windows' or 'Linux' (sys.dm_os_host_info, 2017 and later; Windows only before), None
        when unknown (the major version unknown, or the view did not answer)."""
        if self._major is None:
            return None
        if self._major < sql.HOST_INFO_SINCE:
            return "Windows"
        rows = self._query(conn, sql.HOST_INFO, errors) or []
        platform = rows[0][0] if rows and rows[0] else None
        return platform if platform in ("Windows", "Linux") else None

    def _uses_volumes(self) -> bool:
        """Whether a file's volume can name its `lun`: SQL Server on Windows (or an unknown platform).
        Not on Linux (NULL there: the mount table names the LUN), not for the files of a service
        (Azure, Amazon RDS: not on this host; Azure SQL Database has no sys.master_files either)."""
        return self._edition not in sql.AZURE_EDITIONS and not self._rds and self._platform != "Linux"

    def _say_variant(self) -> None:
        """One log line per service variant: what this source reads there and what it cannot."""
        if self._edition == sql.SQL_DATABASE:
            self._say_sql_database()
        elif self._edition == sql.MANAGED_INSTANCE and self._said.first(("variant", self._edition)):
            log.info(
                "Azure SQL Managed Instance: the SQL Server statements, every database; no LUN "
                "(the files are not on this host)",
                source=self.name,
            )
        elif self._rds and self._said.first("amazon_rds"):
            log.info(
                "Amazon RDS for SQL Server: every database's files and waits, as on SQL Server; no LUN "
                "and no volume (the files are on the RDS host, not this one)",
                source=self.name,
            )
        elif (
            self._edition is not None
            and self._edition not in sql.KNOWN_EDITIONS
            and self._said.first(("variant", self._edition))
        ):
            what = sql.OTHER_EDITIONS.get(self._edition, "a value this lunlat does not know")
            log.warning(
                f"engine edition {self._edition} ({what}) is not one this source reads (2 Standard, "
                "3 Enterprise, 4 Express, 5 Azure SQL Database, 8 Azure SQL Managed Instance): nothing is "
                'read from it, lunlat_source_capability{capability="engine_edition"} is 0; '
                "docs/mssql.md lists what each edition needs",
                source=self.name,
                engine_edition=self._edition,
            )

    def _say_sql_database(self) -> None:
        """Azure SQL Database's line, and the Hyperscale tier's, once each."""
        if self._said.first(("variant", self._edition)):
            log.info(
                "Azure SQL Database: one database per connection (the target's `database`), its files and "
                "tempdb's from sys.database_files, waits from sys.dm_db_wait_stats; no volumes (no "
                "sys.master_files), no LUN (the files are not on this host)",
                source=self.name,
                database=self._target.database or "(the login's default)",
            )
        if self._hyperscale and self._said.first("hyperscale"):
            log.info(
                "Hyperscale tier: the local RBPEX cache is file RBPEX (role other); the data files are page "
                "servers whose write stall the service simulates: published as "
                "lunlat_mssql_file_simulated_write_stall_seconds_total, never judged against the goal "
                "(docs/mssql.md, Hyperscale)",
                source=self.name,
            )
        if self._hyperscale and self._read_only and self._said.first("hyperscale read-only"):
            log.info(
                "Hyperscale read-only replica: its log file's write stall is for tracking purposes only (no "
                "log write occurs here): published as lunlat_mssql_file_simulated_write_stall_seconds_total, "
                "never judged against the goal; watch the primary's log (docs/mssql.md, Hyperscale)",
                source=self.name,
            )

    def _file_query(self) -> Query:
        """The file statement this server answers: Azure SQL Database's per-database view; without
        the Resource Governor queued stall before 2014 (the columns do not exist there), published
        as is and said once."""
        if self._edition == sql.SQL_DATABASE:
            return sql.DB_FILE_STATS
        if self._major is None or self._major >= sql.QUEUED_STALL_SINCE:
            return sql.FILE_STATS
        if self._said.first(("no_queued", self._major)):
            log.info(
                "SQL Server before 2014 has no io_stall_queued_* columns: no queued stall series, "
                "the file stalls are published as they are",
                source=self.name,
                major_version=self._major,
            )
        return sql.FILE_STATS_NO_QUEUED

    def _look_up_volumes(self, conn: Connection, errors: Counter[str]) -> None:
        """The volume of each file; a failed lookup (the query's own log line says why) keeps the last
        volumes (none before the first answer: the files have no `lun`), sets capability `volumes` to 0
        and is tried again later."""
        rows = self._query(conn, sql.VOLUMES, errors)
        self._volumes_failed = rows is None
        if rows is None:
            # The last volumes stay (issue 43): they name the files' `lun` until the map is too old.
            self._volumes_retry_at = self._clock() + VOLUME_RETRY_SECONDS
            return
        volumes: dict[tuple[int, int], str] = {}
        for row in rows:
            if isinstance(row[2], str) and row[2]:
                volumes[(id_value(row[0], "database_id"), id_value(row[1], "file_id"))] = row[2]
        self._volumes = volumes

    def _file_families(self, rows: Sequence[Any] | None, errors: Counter[str], query: Query) -> list[Family]:
        queued = query is not sql.FILE_STATS_NO_QUEUED
        # The files of a service (Azure, Amazon RDS) are on its hosts, never on this one.
        remote = self._edition in sql.AZURE_EDITIONS or self._rds
        expect_lun = not self._volumes
        specs = (
            metrics.MSSQL_FILE_READS,
            metrics.MSSQL_FILE_READ_BYTES,
            metrics.MSSQL_FILE_READ_STALL,
            metrics.MSSQL_FILE_WRITES,
            metrics.MSSQL_FILE_WRITE_BYTES,
            metrics.MSSQL_FILE_WRITE_STALL,
        ) + ((metrics.MSSQL_FILE_READ_QUEUED_STALL, metrics.MSSQL_FILE_WRITE_QUEUED_STALL) if queued else ())
        # Stalls are integer milliseconds: published exactly (see Family.exponent).
        families = [Family(s, exponent=-3 if "stall" in s.name else 0) for s in specs]
        write_stall = specs.index(metrics.MSSQL_FILE_WRITE_STALL)
        simulated_family = Family(metrics.MSSQL_FILE_SIMULATED_WRITE_STALL, exponent=-3)
        simulated: set[LabelSet] = set()  # the files whose write stall the service simulates
        located: list[tuple[Location, str]] = []

        def parse(row: Any) -> tuple[LabelSet, tuple[int, ...]]:
            database_id = id_value(row[0], "database_id")
            file_id = id_value(row[1], "file_id")
            rbpex = self._edition == sql.SQL_DATABASE and database_id == sql.RBPEX_ID
            if rbpex:  # no catalog row: no type, no path
                role, path = RBPEX_ROLE, RBPEX_FILE
            else:
                kind = id_value(row[3], "type")
                role = "temp" if database_id == TEMPDB_ID else ROLE_OF_TYPE.get(kind, "other")
                path = text_value(row[4], "physical_name")
            # tempdb as SQL Server names it (DB_NAME(2)); on Azure SQL Database the statement's DB_NAME()
            # is the connection's database on every row, tempdb's too.
            db = row[2] if isinstance(row[2], str) else str(database_id)
            if database_id == TEMPDB_ID:
                db = "tempdb"
            counts = (
                count_value(row[5], "num_of_reads"),
                count_value(row[6], "num_of_bytes_read"),
                count_value(row[7], "io_stall_read_ms"),
                count_value(row[8], "num_of_writes"),
                count_value(row[9], "num_of_bytes_written"),
                count_value(row[10], "io_stall_write_ms"),
            ) + (
                (
                    count_value(row[11], "io_stall_queued_read_ms"),
                    count_value(row[12], "io_stall_queued_write_ms"),
                )
                if queued
                else ()
            )
            # Where SQL Server reports volumes (Windows), a path off the mount table is expected. The
            # files of an Azure database or an RDS instance are in the service, never on this host: a
            # local path that happens to match (Managed Instance shows SQL Server's own paths) must
            # not name a local LUN.
            location = NOWHERE if remote else self._locate(path, expect_lun=expect_lun)
            located.append((location, role))
            # Where the mount table cannot name the LUN (Windows), the volume SQL Server reports is
            # the name its admins know: 'D:\\' or a mount point folder.
            lun = location.lun or self._volumes.get((database_id, file_id), "")
            labels = self._label_set(
                metrics.MSSQL_FILE_LABELS,
                (self._target.name, self._target.workload or "", db, self._server, path, role, lun),
            )
            # Hyperscale: the data files other than file_id 0 are page servers, their write stall simulated,
            # and a read-only replica's log stall is "for tracking purposes only" (sql.READ_ONLY):
            # metrics.MSSQL_FILE_SIMULATED_WRITE_STALL. tempdb's files are local (role temp), not these.
            if self._hyperscale and (
                (role == "data" and file_id != sql.RBPEX_ID) or (role == "log" and self._read_only)
            ):
                simulated.add(labels)
            return labels, counts

        for labels, counts in self._summed(self._rows(rows or [], query, errors, parse), query, errors):
            for i, (family, value) in enumerate(zip(families, counts, strict=True)):
                (simulated_family if i == write_stall and labels in simulated else family).add(labels, value)
        if rows is not None:  # unanswered: what the host layer was told last stays
            self._publish_lun_labels(
                frozenset(located), lambda: located, self._target.name, self._target.workload or ""
            )
        return [*families, simulated_family] if self._hyperscale else families

    def _wait_families(self, rows: Sequence[Any], errors: Counter[str], query: Query) -> list[Family]:
        waits = Family(metrics.MSSQL_WAITS)
        waited = Family(metrics.MSSQL_WAIT_TIME, exponent=-3)
        signal = Family(metrics.MSSQL_WAIT_SIGNAL_TIME, exponent=-3)

        def parse(row: Any) -> tuple[LabelSet, tuple[int, int, int]]:
            wait_type = text_value(row[0], "wait_type")
            labels = self._label_set(
                metrics.MSSQL_WAIT_LABELS,
                (self._target.name, self._server, wait_type, *sql.IO_WAITS.get(wait_type, ("other", ""))),
            )
            total = count_value(row[2], "wait_time_ms")
            signalled = count_value(row[3], "signal_wait_time_ms")
            # wait_time_ms "is inclusive of signal_wait_time_ms" (sys.dm_os_wait_stats,
            # https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-wait-stats-transact-sql):
            # the resource wait is the rest, the I/O without the wait for a CPU after it.
            if signalled > total:
                raise ValueError(f"signal_wait_time_ms {signalled} > wait_time_ms {total}")
            return labels, (count_value(row[1], "waiting_tasks_count"), total - signalled, signalled)

        parsed = self._rows(rows, query, errors, parse)
        for labels, (count, resource_ms, signal_ms) in self._summed(parsed, query, errors):
            waits.add(labels, count)
            waited.add(labels, resource_ms)
            signal.add(labels, signal_ms)
        return [waits, waited, signal]
