"""PostgreSQL: the cluster's own view of its data reads and WAL syncs, on the LUNs of its directories.

One source per configured cluster, through psycopg 3 (libpq). The connection is kept between scrapes
and reopened with backoff when lost (engines/dbsession.py). What psycopg raises is classified by the
error's SQLSTATE (`psycopg.Error.sqlstate`, https://www.psycopg.org/psycopg3/docs/api/errors.html), whose
classes PostgreSQL documents in "PostgreSQL Error Codes" (https://www.postgresql.org/docs/18/errcodes-appendix.html):
class 08 "Connection Exception", class 28 "Invalid Authorization Specification" (a refused login,
28P01 invalid_password), 42501 insufficient_privilege, 57014 query_canceled (what statement_timeout
raises), 57P01-57P03 admin_shutdown, crash_shutdown, cannot_connect_now (a server going down or still
starting). A connection the server dropped raises OperationalError with no SQLSTATE (the client saw
the socket close), and a closed one InterfaceError (psycopg's errors page, "Exceptions").

Files to LUNs: PostgreSQL names directories, not files, and counts I/O per cluster (metrics.py). The
data directory (`data_directory`), each tablespace (pg_tablespace_location) and the WAL directory
(`pg_wal` inside the data directory, a symbolic link when the WAL lives elsewhere: "pg_wal ... can be a
symbolic link", initdb --waldir, https://www.postgresql.org/docs/18/app-initdb.html) are mapped by the same
FileLocator as the other engines' files; roles data, log and temp (temp_tablespaces).
"""

from __future__ import annotations

import errno
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lunlat import logs
from lunlat.containers import ContainerMapper
from lunlat.dbfiles import DbLunLabels, FileLocator, Location
from lunlat.engines.build import locator
from lunlat.engines.dbsession import Classified, Connection, Kind
from lunlat.engines.dbsource import BadRowError, DbSource, count_value, text_value
from lunlat.engines.postgres import metrics, sql
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.model import Family
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.factory import BuildError, Context

log = logs.get(__name__)

GRANTS = "deploy/postgres/grants.sql"
LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
# wal_sync_method values with which each WAL write is itself synchronous (O_DSYNC / O_SYNC) and
# issue_xlog_fsync does nothing, so pg_stat_io's fsyncs (pg_stat_wal.wal_sync) stay 0
# (runtime-config-wal.html, wal_sync_method; monitoring-stats.html, pg_stat_wal.wal_sync in 14-17).
SYNC_ON_WRITE = frozenset({"open_datasync", "open_sync"})
MICROS = -6  # times are published as whole microseconds (Family.exponent)
# The directories are read again this often on a kept session (--collector.topology.refresh-interval):
# a tablespace created or dropped is seen, and the file map's age says the map is current.
DIRECTORIES_REFRESH_SECONDS = 300.0


def classify(exc: BaseException) -> Classified:
    state = getattr(exc, "sqlstate", None) or ""
    text = " ".join(str(exc).split())[:300]
    if state == "57014":
        return Classified(Kind.TIMEOUT, state, text)
    if state == "42501":
        return Classified(Kind.NO_GRANT, state, text)
    psycopg = sys.modules.get("psycopg")
    dropped = psycopg is not None and (
        isinstance(exc, psycopg.InterfaceError) or (isinstance(exc, psycopg.OperationalError) and not state)
    )
    if state.startswith("08") or state in LOST_STATES or dropped or isinstance(exc, OSError):
        return Classified(Kind.LOST, state, text)
    # A refused login (class 28) happens at connect, where libpq has no result to carry a SQLSTATE:
    # OperationalError with sqlstate None and the server's FATAL in its text (measured on 18.6,
    # tests/postgres/test_live.py); every kind but a timeout is connect_failed there
    # (dbsession.Session._open). Never repr() the error: its `pgconn` holds the password.
    return Classified(Kind.QUERY_FAILED, state, text)


def connect_psycopg(target: PostgresTarget) -> Callable[[], Connection]:
    """A connect function for `target` through psycopg 3; BuildError without the driver."""
    try:
        import psycopg  # noqa: PLC0415 - optional dependency, only for configured PostgreSQL targets
    except ImportError:
        raise BuildError("the postgres source needs psycopg 3: pip install 'lunlat[postgres]'") from None
    timeout_ms = round(target.timeout_seconds * 1000)

    def connect() -> Connection:
        try:
            password = target.password.read()
        except ValueError as exc:
            raise SourceError("connect_failed", f"password: {exc}") from None
        # Keywords are merged into the connection string (psycopg.connect, "conninfo ... **kwargs",
        # https://www.psycopg.org/psycopg3/docs/api/connections.html). libpq's connect_timeout is whole
        # seconds ("The minimum allowed timeout is 2 seconds, therefore a value of 1 is interpreted as 2",
        # https://www.postgresql.org/docs/16/libpq-connect.html), and `options` sends "-c name=value"
        # settings at connection start (same page): statement_timeout bounds every query on the server,
        # which cancels it with 57014. prepare_threshold None: no server-side prepared
        # statements (psycopg's "Prepared statements"), which connection poolers may not carry.
        params: dict[str, Any] = {
            "user": target.user,
            "password": password,
            "connect_timeout": max(2, math.ceil(target.timeout_seconds)),
            "application_name": "lunlat",
            "options": f"-c statement_timeout={timeout_ms}",
        }
        if target.host is not None:
            params.update(host=target.host, port=target.port, dbname=target.dbname)
        return psycopg.connect(target.dsn or "", autocommit=True, prepare_threshold=None, **params)

    return connect


@dataclass(frozen=True, slots=True)
class Settings:
    version: int  # server_version_num (180006)
    io_timing: bool
    wal_io_timing: bool | None  # None: the release has no track_wal_io_timing (13)
    temp_tablespaces: tuple[str, ...]
    sync_on_write: bool
    cluster: str
    started: float


def _on(value: object) -> bool:
    return value == "on"


def temp_tablespace_names(value: str) -> tuple[str, ...]:
    """temp_tablespaces' names: "a list of names of tablespaces" (runtime-config-client.html), comma
    separated, each possibly double-quoted."""
    return tuple(name.strip().strip('"') for name in value.split(",") if name.strip())


def ms_value(value: object, column: str) -> int:
    """A time column in milliseconds (double precision) as whole microseconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 <= value < math.inf):
        raise BadRowError(f"{column} is {value!r}, not a number of milliseconds >= 0")
    return round(value * 1000)


# What one row gives: (role, db, kind, {spec: value}).
Found = tuple[str, str, str, dict[Any, int]]


@dataclass(frozen=True, slots=True)
class Directory:
    path: str
    role: str
    location: Location


class PostgresSource(DbSource[Connection]):
    """The PostgreSQL layer of one configured cluster."""

    grants_hint = GRANTS
    _target: PostgresTarget

    def __init__(
        self,
        target: PostgresTarget,
        connect: Callable[[], Connection],
        locator: FileLocator | None = None,
        db_labels: DbLunLabels | None = None,
        clock: Callable[[], float] = time.monotonic,
        container: ContainerMapper | None = None,
        names_refresh: float = DIRECTORIES_REFRESH_SECONDS,
    ) -> None:
        super().__init__(
            f"postgres:{target.name}",
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
        self._started: float | None = None
        self._data_dir = ""
        self._tablespaces: dict[str, str] = {}  # name -> directory ('' for pg_default, pg_global)
        self._dirs: dict[str, Directory] = {}  # role -> where its series are published
        self._dirs_key: object = None
        self._names_refresh = names_refresh
        self._looked_up_at = -float("inf")
        self._lookup_due = False  # the last lookup went unanswered: asked again when its gate opens

    @classmethod
    def built(
        cls, target: PostgresTarget, context: Context, container: ContainerMapper | None
    ) -> PostgresSource:
        """The source of one configured target (engines/engine.py `Engine.build`)."""
        return cls(
            target,
            connect_psycopg(target),
            locator(context),
            context.db_labels,
            container=container,
            names_refresh=context.settings.refresh_interval,
        )

    def collect(self) -> SourceResult:
        conn = self._session.connection()
        errors: Counter[str] = Counter()
        new_session = self._session.connects != self._seen_connects
        rows = self._query(conn, sql.SETTINGS, errors) or []
        settings = self._settings(rows[0], errors) if rows else None
        if settings is None:
            return SourceResult([], errors)
        now = self._clock()
        if new_session:
            self._seen_connects = self._session.connects
            self._refresh_locations()
            self._dirs_key = None
            self._look_up_directories(conn, errors)
        elif now - self._looked_up_at >= self._names_refresh or (
            self._lookup_due and self._lookup_open(sql.DATA_DIRECTORY, sql.TABLESPACES)
        ):
            self._look_up_directories(conn, errors)
        if self._map_expired():
            self._data_dir, self._tablespaces = "", {}
        self._place(settings)
        if self._started is not None and settings.started != self._started:
            log.info("PostgreSQL restarted: counters start again", source=self.name)
        self._started = settings.started
        families = self._families(conn, settings, errors)
        capabilities: dict[str, bool] = {
            "io_timing": settings.io_timing,
            "wal_io": settings.version >= sql.PG_STAT_WAL_SINCE,
        }
        if settings.wal_io_timing is not None:
            capabilities["wal_io_timing"] = settings.wal_io_timing
        return SourceResult([*families, self._capabilities(**capabilities), *self._map_families()], errors)

    def _settings(self, row: Any, errors: Counter[str]) -> Settings | None:
        try:
            version = count_value(row[0], "server_version_num")
            return Settings(
                version=version,
                io_timing=_on(row[1]),
                wal_io_timing=None if row[2] is None else _on(row[2]),
                temp_tablespaces=temp_tablespace_names(text_value(row[3], "temp_tablespaces")),
                sync_on_write=row[4] in SYNC_ON_WRITE,
                cluster=text_value(row[5], "cluster_name"),
                started=float(row[6]),
            )
        except (BadRowError, TypeError, ValueError, IndexError) as exc:
            errors["bad_row"] += 1
            self._warn_once(sql.SETTINGS.name, str(exc), "skipping row", f"{exc} in {row!r}"[:300])
            return None

    def _look_up_directories(self, conn: Connection, errors: Counter[str]) -> None:
        """The data directory and the tablespaces' (at each new session, as a restart may move them, and
        every refresh interval). What goes unanswered (a missing grant, a closed gate) keeps the last
        answer: the series keep their `file` and `lun` (issue 43) until the map is too old."""
        self._looked_up_at = self._clock()
        rows = self._query(conn, sql.DATA_DIRECTORY, errors)
        if rows is not None:
            self._data_dir = rows[0][0] if rows and isinstance(rows[0][0], str) else ""
        spaces = self._query(conn, sql.TABLESPACES, errors)
        if spaces is not None:
            self._tablespaces = {
                row[0]: row[1] for row in spaces if isinstance(row[0], str) and isinstance(row[1], str)
            }
        self._lookup_due = rows is None or spaces is None
        if self._lookup_due:
            self._map_unconfirmed()
        else:
            self._map_confirmed()

    def _wal_directory(self) -> str:
        """pg_wal, followed when it is a symbolic link (initdb --waldir). The link is read on this host
        (through the container's mounts); its target is a path as the server sees it."""
        wal = f"{self._data_dir.rstrip('/')}/pg_wal"
        host = self._host_path(wal) if self._locator is not None else None  # no LUNs asked: no need
        if host is None:
            return wal
        try:
            target = str(Path(host).readlink())
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: a directory, not a link (readlink(2))
                self._warn_once(
                    "pg_wal",
                    type(exc).__name__,
                    "cannot read pg_wal: the WAL is placed on the data directory's LUN (the exporter's "
                    "user needs search permission on the data directory to follow a pg_wal link)",
                    f"{wal}: {exc}",
                )
            return wal
        return target if target.startswith("/") else os.path.normpath(f"{self._data_dir}/{target}")

    def _place(self, settings: Settings) -> None:
        """Where each role's series are published and which devices the host layer labels."""
        key = (self._data_dir, tuple(sorted(self._tablespaces.items())), settings.temp_tablespaces)
        if key == self._dirs_key:
            return
        self._dirs_key = key
        if not self._data_dir:
            self._dirs = {}
            # No map (never read, or dropped as too old): the host layer's LUNs lose this database's roles.
            self._publish_lun_labels(key, list, self._target.name, self._target.workload or "")
            return
        data = Directory(self._data_dir, "data", self._locate(self._data_dir))
        wal_path = self._wal_directory()
        wal = Directory(wal_path, "log", self._locate(wal_path))
        temp = data
        for name in settings.temp_tablespaces:
            path = self._tablespaces.get(name)
            if path:  # the first listed that exists; pg_default ('') is the data directory
                temp = Directory(path, "temp", self._locate(path))
                break
        else:
            temp = Directory(self._data_dir, "temp", data.location)
        self._dirs = {"data": data, "log": wal, "temp": temp}
        located = [(data.location, "data"), (wal.location, "log"), (temp.location, "temp")]
        # Other tablespaces hold data too (pg_stat_io cannot tell their I/O apart: only their LUNs are labelled).
        located += [
            (self._locate(path), "data")
            for name, path in self._tablespaces.items()
            if path and name not in settings.temp_tablespaces
        ]
        self._publish_lun_labels(key, lambda: located, self._target.name, self._target.workload or "")

    def _families(self, conn: Connection, settings: Settings, errors: Counter[str]) -> list[Family]:
        specs = (
            metrics.POSTGRES_FILE_READS,
            metrics.POSTGRES_FILE_READ_TIME,
            metrics.POSTGRES_FILE_READ_BYTES,
            metrics.POSTGRES_FILE_WRITES,
            metrics.POSTGRES_FILE_WRITE_TIME,
            metrics.POSTGRES_FILE_WRITE_BYTES,
            metrics.POSTGRES_FILE_SYNCS,
            metrics.POSTGRES_FILE_SYNC_TIME,
        )
        families = {s: Family(s, exponent=MICROS if s.name.endswith("_seconds_total") else 0) for s in specs}
        # (role, db, kind) -> {spec: value}; a spec left out is not published (a time whose timing is off).
        found: list[Found] = []
        if settings.version >= sql.PG_STAT_IO_SINCE:
            query = sql.IO if settings.version >= sql.BYTES_AND_WAL_IO_SINCE else sql.IO_OP_BYTES
            found += self._io(self._query(conn, query, errors) or [], query, settings, errors)
        else:
            found += self._databases(self._query(conn, sql.DATABASES, errors) or [], settings, errors)
        if sql.PG_STAT_WAL_SINCE <= settings.version < sql.BYTES_AND_WAL_IO_SINCE:
            found += self._wal(self._query(conn, sql.WAL, errors) or [], settings, errors)
        parsed = []
        for role, db, kind, values in found:
            where = self._dirs.get(role)
            path, lun = (where.path, where.location.lun) if where is not None else ("", "")
            labels = self._label_set(
                metrics.POSTGRES_FILE_LABELS,
                (self._target.name, self._target.workload or "", db, settings.cluster, path, role, lun, kind),
            )
            parsed.append((labels, values))
        for labels, values in parsed:
            for spec, value in values.items():
                families[spec].add(labels, value)
        return list(families.values())

    def _io(self, rows: Sequence[Any], query: Any, settings: Settings, errors: Counter[str]) -> list[Found]:
        def parse(row: Any) -> Found:
            role = sql.ROLE_OF_OBJECT.get(text_value(row[0], "object"))
            if role is None:
                raise BadRowError(f"object {row[0]!r} is not one the source asked for")
            kind = text_value(row[1], "kind")
            # Only permanent relations are split (sql.KINDS): another object's kind is '' or the query is
            # not the one the source asked.
            if kind not in sql.KINDS or (kind != "") != (role == "data"):
                raise BadRowError(f"kind {kind!r} of object {row[0]!r} is not one the source asked for")
            timed = settings.wal_io_timing if role == "log" else settings.io_timing
            values: dict[Any, int] = {
                metrics.POSTGRES_FILE_READS: count_value(row[2], "reads"),
                metrics.POSTGRES_FILE_READ_BYTES: count_value(row[4], "read_bytes"),
                metrics.POSTGRES_FILE_WRITES: count_value(row[5], "writes"),
                metrics.POSTGRES_FILE_WRITE_BYTES: count_value(row[7], "write_bytes"),
            }
            # The WAL's times are track_wal_io_timing's, the rest track_io_timing's (runtime-config-statistics.html,
            # PostgreSQL 18: track_io_timing's times are shown in pg_stat_io "if object is not wal").
            if timed:
                values[metrics.POSTGRES_FILE_READ_TIME] = ms_value(row[3], "read_time")
                values[metrics.POSTGRES_FILE_WRITE_TIME] = ms_value(row[6], "write_time")
            if role == "log":
                self._wal_syncs(values, (row[5], row[6], row[8], row[9]), settings, bool(timed))
            return role, "", kind, values

        return self._rows(rows, query, errors, parse)

    def _wal(self, rows: Sequence[Any], settings: Settings, errors: Counter[str]) -> list[Found]:
        """pg_stat_wal (14-17): the WAL's writes and syncs, no reads, no bytes."""

        def parse(row: Any) -> Found:
            timed = bool(settings.wal_io_timing)
            values: dict[Any, int] = {metrics.POSTGRES_FILE_WRITES: count_value(row[0], "wal_write")}
            if timed:
                values[metrics.POSTGRES_FILE_WRITE_TIME] = ms_value(row[1], "wal_write_time")
            self._wal_syncs(values, (row[0], row[1], row[2], row[3]), settings, timed)
            return "log", "", "", values

        return self._rows(rows, sql.WAL, errors, parse)

    @staticmethod
    def _wal_syncs(values: dict[Any, int], row: tuple[object, ...], settings: Settings, timed: bool) -> None:
        """The WAL's syncs: its fsyncs, or its writes where each write is synchronous (SYNC_ON_WRITE)."""
        count, spent = (row[0], row[1]) if settings.sync_on_write else (row[2], row[3])
        values[metrics.POSTGRES_FILE_SYNCS] = count_value(count, "fsyncs")
        if timed:
            values[metrics.POSTGRES_FILE_SYNC_TIME] = ms_value(spent, "fsync_time")

    def _databases(self, rows: Sequence[Any], settings: Settings, errors: Counter[str]) -> list[Found]:
        """pg_stat_database (before 16): data reads per database, of every kind (no pg_stat_io to tell
        them apart): kind '', as the WAL's and the temporary relations'."""

        def parse(row: Any) -> Found:
            values: dict[Any, int] = {metrics.POSTGRES_FILE_READS: count_value(row[1], "blks_read")}
            if settings.io_timing:
                values[metrics.POSTGRES_FILE_READ_TIME] = ms_value(row[2], "blk_read_time")
            return "data", text_value(row[0], "datname"), "", values

        return self._rows(rows, sql.DATABASES, errors, parse)
