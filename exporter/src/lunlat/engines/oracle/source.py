"""Oracle: the database's own view of I/O latency per file, per wait event and per ASM disk (docs/contract.md §4).

One source per configured target, through python-oracledb in thin mode (no Instant Client). The
connection is kept between scrapes (a login costs the database far more than the queries) and
reopened with backoff when lost. Each scrape runs five static queries (oracle_sql); file names,
instance and container names are looked up on connect, every `names_refresh` seconds, and when a
file number appears that the last lookup did not know. The release the login reports picks the
wait histogram's level: per container from 18c, the whole instance's before (logged once).

A missing grant (ORA-00942/ORA-01031) switches that one query off, counted as `no_grant`, until the
next session or config reload, else for 60 s doubling up to ten minutes (dbsession.QueryGates); the
rest of the source keeps publishing, and a names lookup left unanswered keeps its last answer (the
file map, dbsource) until it is older than the target's file_map_max_age_seconds. A lost connection
or a query past the call timeout fails this scrape of this source only (`lunlat_source_up` 0), never
the others. A view that answers no rows to this login although the database uses it (ASM disks from a
PDB) is `lunlat_source_capability` 0 and one log line.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lunlat import logs
from lunlat.containers import ContainerMapper
from lunlat.dbfiles import DbLunLabels, FileLocator, Location
from lunlat.engines.build import locator
from lunlat.engines.dbsession import Classified, Connection, Kind
from lunlat.engines.dbsource import (
    BadRowError,
    DbSource,
    Query,
    count_value,
    id_value,
    retried,
    seconds_value,
    text_value,
)
from lunlat.engines.oracle import events as oracle_events
from lunlat.engines.oracle import metrics, sql
from lunlat.engines.oracle.config import OracleTarget
from lunlat.engines.oracle.metrics import BUCKET_BOUNDS_MICRO, format_le
from lunlat.model import Family, LabelSet
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.factory import BuildError, Context

log = logs.get(__name__)

ROLE_OF_FILETYPE = {"Data File": "data", "Temp File": "temp", "Log File": "log", "Control File": "control"}
# V$IOSTAT_FILE has one row for all redo logs and one for all control files (FILE_NO 0).
ALL_REDO = "(all redo logs)"
ALL_CONTROL = "(all control files)"

# Error codes whose meaning the collector acts on (python-oracledb raises ORA- codes from the
# server and DPY- codes of its own).
NO_GRANT_CODES = frozenset({"ORA-00942", "ORA-01031"})
TIMEOUT_CODES = frozenset({"DPY-4024", "ORA-01013"})
LOST_CODES = frozenset(
    {
        "ORA-00028",  # session killed
        "ORA-01012",  # not logged on
        "ORA-01033",  # initialization or shutdown in progress (instance restarting)
        "ORA-01034",  # not available
        "ORA-01089",  # immediate shutdown
        "ORA-01092",  # instance terminated
        "ORA-03113",  # end-of-file on communication channel
        "ORA-03114",  # not connected
        "ORA-03135",  # connection lost contact
        "ORA-12170",
        "ORA-12505",
        "ORA-12514",
        "ORA-12537",
        "ORA-12541",  # no listener
        "ORA-12543",
        "ORA-12547",
        "DPY-1001",  # not connected
        "DPY-4011",  # the database or network closed the connection
    }
)
# Oracle Database Reference, V$ASM_DISK_STAT: "In an Oracle Database instance, this view returns 0
# rows when queried from a PDB" (https://docs.oracle.com/en/database/oracle/oracle-database/23/refrn/V-ASM_DISK_STAT.html).
# A PDB login therefore sees files named +GROUP/... but no disk: ASM needs a common user in CDB$ROOT.
ASM_UNREADABLE = (
    "ASM disks cannot be read: the database's files are in ASM (+GROUP/...) but GV$ASM_DISK_STAT has no "
    "rows (it has none from a PDB login, or without its grant); no ASM disk series, and those files get "
    "an empty lun. For ASM, connect as a common user to CDB$ROOT (docs/oracle.md)"
)
_CODE = re.compile(r"\b((?:ORA|DPY|TNS)-\d{4,5})\b")
NAMES_REFRESH_SECONDS = 300.0
# The lookups whose answers are the file map (DbSource, ground.DB_FILE_MAP_AGE).
FILE_LOOKUPS = (sql.DATAFILES, sql.TEMPFILES, sql.LOGFILES, sql.CONTROLFILES)
# A file number the lookup does not know triggers a new lookup, at most this often.
UNKNOWN_FILE_RECHECK_SECONDS = 30.0


class OracleConnection(Connection, Protocol):
    """A connection whose calls the source bounds: oracledb.Connection (tests pass an emulation)."""

    call_timeout: int

    @property
    def version(self) -> str:
        """The server's release, "19.24.0.0.0" (python-oracledb connection.py, Connection.version:
        the version of the database the connection was established to, known from the login)."""


def error_code(exc: BaseException) -> str:
    """ORA-/DPY- code of a python-oracledb error ('' when it has none)."""
    inner = exc.args[0] if exc.args else None
    code = getattr(inner, "full_code", None)
    if isinstance(code, str) and code:
        return code
    match = _CODE.search(str(exc))
    return match.group(1) if match else ""


def classify(exc: BaseException) -> Classified:
    code = error_code(exc)
    message = " ".join(str(exc).split())[:300]
    if code in NO_GRANT_CODES:
        return Classified(Kind.NO_GRANT, code, message)
    if code in TIMEOUT_CODES:
        return Classified(Kind.TIMEOUT, code, message)
    # InterfaceError is the driver's "not connected" family (DPY-1xxx). OperationalError is not
    # enough by itself: python-oracledb also gives it to ORA-00604 (recursive SQL), a query error.
    if code in LOST_CODES or type(exc).__name__ == "InterfaceError":
        return Classified(Kind.LOST, code, message)
    if code.startswith("DPY-6") or code.startswith("TNS-") or isinstance(exc, OSError):
        return Classified(Kind.LOST, code, message)  # DPY-6xxx: cannot connect
    return Classified(Kind.QUERY_FAILED, code, message)


def connect_oracledb(target: OracleTarget) -> Callable[[], OracleConnection]:
    """A connect function for `target` through python-oracledb thin; BuildError without the driver."""
    try:
        import oracledb  # noqa: PLC0415 - optional dependency, only for configured Oracle targets
    except ImportError:
        raise BuildError("the oracle source needs python-oracledb: pip install 'lunlat[oracle]'") from None
    # python-oracledb settles thin or thick mode at the first connect of the process, and until that
    # connect ends every other connect waits for it (oracle/python-oracledb, src/oracledb/driver_mode.py,
    # get_manager: a thread that finds the mode being chosen waits on the condition; connection.py,
    # Connection.__init__, holds that choice open for its whole connect). A first login
    # that hangs (a listener that accepts and never answers) would hold up every other Oracle target.
    # lunlat only uses thin mode (no Instant Client, no init_oracle_client), so it fixes the mode here,
    # before any connect: then no connect waits for another (a no-op once thin mode is set).
    oracledb.enable_thin_mode()  # type: ignore[no-untyped-call]  # the driver does not annotate it

    def connect() -> OracleConnection:
        try:
            password = target.password.read()
            wallet = target.wallet_password
            wallet_password = wallet.read() if wallet is not None else None
        except ValueError as exc:
            raise SourceError("connect_failed", f"password: {exc}") from None
        return oracledb.connect(
            user=target.user,
            password=password,
            dsn=target.dsn,
            tcp_connect_timeout=target.timeout_seconds,
            retry_count=0,  # the session's backoff retries, not the driver inside one scrape
            # TCP keepalive after a minute idle (python-oracledb's `expire_time`, in minutes; thin sets
            # SO_KEEPALIVE on the socket before the login: `ss -o` shows a keepalive timer on a login
            # that hangs). A login or session on a path a firewall silently dropped then ends within
            # minutes, so the one hanging attempt dbsession waits for cannot hang forever, and an
            # idle session is not cut by a firewall's idle timeout.
            expire_time=1,
            config_dir=str(target.config_dir) if target.config_dir else None,
            wallet_location=str(target.wallet_location) if target.wallet_location else None,
            wallet_password=wallet_password,
            program="lunlat",
        )

    return connect


@dataclass(slots=True)
class Names:
    """What the lookups said: names of instances, containers and files, and where the files are."""

    instances: dict[int, str] = field(default_factory=dict)
    containers: dict[int, str] = field(default_factory=dict)
    cdb: bool | None = None  # V$DATABASE.CDB; None: not read (no grant)
    datafiles: dict[tuple[int, int], str] = field(default_factory=dict)  # (con_id, file#) -> path
    tempfiles: dict[tuple[int, int], str] = field(default_factory=dict)
    logfiles: list[str] = field(default_factory=list)
    controlfiles: list[str] = field(default_factory=list)
    diskgroups: dict[int, str] = field(default_factory=dict)
    looked_up_at: float = -float("inf")

    def files_of(self, role: str) -> Iterable[str]:
        if role == "data":
            return self.datafiles.values()
        if role == "temp":
            return self.tempfiles.values()
        if role == "log":
            return self.logfiles
        if role == "control":
            return self.controlfiles
        return ()


class OracleSource(DbSource[OracleConnection]):
    """The Oracle layer of one configured database."""

    grants_hint = "deploy/oracle/grants.sql"
    _target: OracleTarget

    def __init__(
        self,
        target: OracleTarget,
        connect: Callable[[], OracleConnection],
        locator: FileLocator | None = None,
        db_labels: DbLunLabels | None = None,
        clock: Callable[[], float] = time.monotonic,
        names_refresh: float = NAMES_REFRESH_SECONDS,
        container: ContainerMapper | None = None,
    ) -> None:
        super().__init__(
            f"oracle:{target.name}",
            connect,
            classify,
            target.timeout_seconds,
            clock,
            locator,
            db_labels,
            container,
        )
        self._target = target
        self._names_refresh = names_refresh
        self._names = Names()
        self._seen_connects = 0
        self._asm_disks: tuple[tuple[int, str], ...] = ()
        self._said = logs.Once()  # what the login cannot read, said once (again after it could)
        self._histogram = sql.EVENT_HISTOGRAM
        self._version = ""  # the release the session's login reported
        self._unanswered: tuple[Query, ...] = ()  # file lookups the last lookup went without
        # The file map's parts (DbSource): when the file lookups last all answered, and the ASM disks
        # (an ASM file's LUNs are its disk group's disks, read at each scrape).
        self._names_read_at: float | None = None
        self._asm_read_at: float | None = None
        self._asm_current = False  # the disk query named disks at this scrape (capability `asm`)

    @classmethod
    def built(cls, target: OracleTarget, context: Context, container: ContainerMapper | None) -> OracleSource:
        """The source of one configured target (engines/engine.py `Engine.build`)."""
        return cls(
            target,
            connect_oracledb(target),
            locator(context),
            context.db_labels,
            names_refresh=context.settings.refresh_interval,
            container=container,
        )

    def _prepare(self, cursor: Any) -> None:
        cursor.arraysize = 1000  # thousands of datafiles arrive in a few round trips

    # --- collection -----------------------------------------------------------------------------

    def collect(self) -> SourceResult:
        conn = self._session.connection()
        if self._session.connects != self._seen_connects:
            # A new session: bound its calls, and look names up again (the database may have
            # restarted with other files).
            self._seen_connects = self._session.connects
            conn.call_timeout = int(self._target.timeout_seconds * 1000)
            self._histogram = self._histogram_query(conn)
            self._names.looked_up_at = -float("inf")
        errors: Counter[str] = Counter()
        now = self._clock()
        # A file lookup that went unanswered is asked again as soon as its gate lets it (the next
        # session, a reload, the no_grant backoff), not only at the next refresh.
        if now - self._names.looked_up_at >= self._names_refresh or (
            self._unanswered and self._lookup_open(*self._unanswered)
        ):
            self._look_up_names(conn, errors)
        iostat = self._query(conn, sql.IOSTAT_FILE, errors)
        if (
            iostat
            and self._unknown_files(iostat)
            and now - self._names.looked_up_at >= UNKNOWN_FILE_RECHECK_SECONDS
        ):
            self._look_up_names(conn, errors)
        events = self._query(conn, sql.SYSTEM_EVENT, errors)
        classes = self._query(conn, sql.WAIT_CLASS, errors)
        histogram = self._query(conn, self._histogram, errors)
        asm = self._query(conn, sql.ASM_DISK, errors)
        # The disks first: an ASM file's `lun` is its disk group's LUNs.
        asm_families = self._asm_families(asm, errors)
        self._judge_map(asm is not None)
        capabilities = self._capability_family()
        families = [
            *self._file_families(iostat or [], errors),
            *self._event_families(events or [], errors),
            *self._wait_class_families(classes or [], errors),
            self._histogram_family(histogram or [], errors),
            *asm_families,
            capabilities,
            *self._map_families(),
        ]
        # Files change only with a lookup; ASM disks with the disk query.
        self._publish_lun_labels(
            (self._names.looked_up_at, self._asm_disks),
            self._lun_files,
            self._target.name,
            self._target.workload or "",
        )
        return SourceResult(families, errors)

    def _judge_map(self, asm_answered: bool) -> None:
        """The file map: fresh when the file lookups last answered, and the disk query this scrape for
        a database in ASM; the last one is kept while a part goes unanswered (issue 43), and dropped
        when too old: files moved meanwhile must not keep a wrong `lun`."""
        in_asm = any(
            p.startswith("+") for role in ROLE_OF_FILETYPE.values() for p in self._names.files_of(role)
        )
        parts = [self._names_read_at, *([self._asm_read_at] if in_asm else [])]
        if self._unanswered or (in_asm and not asm_answered) or None in parts:
            self._map_unconfirmed()
        else:
            self._map_confirmed(min(p for p in parts if p is not None))
        if self._map_expired():
            self._names = Names(
                instances=self._names.instances,
                containers=self._names.containers,
                cdb=self._names.cdb,
                diskgroups=self._names.diskgroups,
                looked_up_at=self._names.looked_up_at,
            )
            self._names_read_at = None
            self._asm_disks = ()

    def _histogram_query(self, conn: OracleConnection) -> Query:
        """Per container where the release has the view, else the whole instance's (`db` empty)."""
        try:
            major = int(str(conn.version).split(".", 1)[0])
        except ValueError:
            major = 0  # a version the source cannot read: the view every release has
        self._version = str(conn.version)
        return sql.CON_EVENT_HISTOGRAM if major >= sql.CON_HISTOGRAM_SINCE else sql.EVENT_HISTOGRAM

    def _non_cdb(self) -> bool:
        """A non-CDB: V$DATABASE.CDB is NO (sql.DATABASE). Only where that could not be read, the
        rows of V$CONTAINERS: one with CON_ID 0 ("0: ... also used for rows in non-CDBs", Oracle
        Database Reference, V$CONTAINERS,
        https://docs.oracle.com/en/database/oracle/oracle-database/23/refrn/V-CONTAINERS.html); a
        login that may read neither is taken for a CDB (the histogram capability then says 0)."""
        if self._names.cdb is not None:
            return not self._names.cdb
        return set(self._names.containers) == {0}

    def _container_histograms(self) -> bool:
        """`container_histograms`: 1 when the wait histograms are per container like the wait
        counters, 0 when the release has no per-container view (before 18c) and they are the whole
        instance's (`db` empty; said once). In a non-CDB nothing is lost: its one container is the
        instance, and the instance-wide rows carry CON_ID 0 like V$CON_SYSTEM_EVENT's, so they get
        the same `db` (the database's name) and the capability is 1."""
        per_container = self._histogram is sql.CON_EVENT_HISTOGRAM or self._non_cdb()
        if not per_container and self._said.first(("instance_histogram", self._version)):
            log.info(
                "wait histograms are instance-wide (db empty): this release has no per-container view",
                source=self.name,
                version=self._version,
                needs=f"{sql.CON_HISTOGRAM_SINCE}c for V$CON_EVENT_HISTOGRAM_MICRO",
            )
        return per_container

    def _no_grant_message(self, query: Query, code: str, pause: float) -> str:
        """ORA-00942 says "table or view does not exist" both for a view the login may not read and
        for one that is not there: the line names the view and both causes."""
        views = ", ".join(v.upper() for v in sql.views_of(query)) or query.name
        if code == "ORA-00942":
            return (
                f"query disabled: ORA-00942, {views} does not exist for this login: either its grant is "
                f"missing or was revoked (see {self.grants_hint}), or the view or its public synonym is "
                f"not there (dropped, or not in this release); the rest is published; {retried(pause)}"
            )
        return (
            f"query disabled: {code or 'no privilege'} on {views}, missing privilege (see "
            f"{self.grants_hint}); the rest is published; {retried(pause)}"
        )

    # --- names --------------------------------------------------------------------------------

    def _look_up_names(self, conn: OracleConnection, errors: Counter[str]) -> None:
        """Every lookup again. One that goes unanswered (a missing grant, a closed gate) keeps what the
        last answer said: the files keep their names and LUNs (issue 43) until the map is too old."""
        before = self._names
        names = Names(looked_up_at=self._clock())
        unanswered: list[Query] = []

        def lookup(query: Query, parse: Callable[[Any], Any]) -> list[Any] | None:
            # Bad rows are skipped and counted like a scrape's, never fatal to the lookup.
            rows = self._query(conn, query, errors)
            if rows is None:
                unanswered.append(query)
                return None
            return self._rows(rows, query, errors, parse)

        def numbered(r: Any) -> tuple[tuple[int, int], str]:
            return (id_value(r[1], "con_id"), id_value(r[0], "file#")), text_value(r[2], "name")

        found = lookup(
            sql.INSTANCES, lambda r: (id_value(r[0], "inst_id"), text_value(r[1], "instance_name"))
        )
        names.instances = before.instances if found is None else dict(found)
        found = lookup(sql.CONTAINERS, lambda r: (id_value(r[0], "con_id"), text_value(r[1], "name")))
        names.containers = before.containers if found is None else dict(found)
        cdb = lookup(sql.DATABASE, lambda r: text_value(r[0], "cdb").upper())
        names.cdb = before.cdb if cdb is None else (cdb[0] == "YES") if cdb else None
        found = lookup(sql.DATAFILES, numbered)
        names.datafiles = before.datafiles if found is None else dict(found)
        found = lookup(sql.TEMPFILES, numbered)
        names.tempfiles = before.tempfiles if found is None else dict(found)
        found = lookup(sql.LOGFILES, lambda r: text_value(r[2], "member"))
        names.logfiles = before.logfiles if found is None else sorted(set(found))
        found = lookup(sql.CONTROLFILES, lambda r: text_value(r[1], "name"))
        names.controlfiles = before.controlfiles if found is None else sorted(set(found))
        found = lookup(
            sql.ASM_DISKGROUPS, lambda r: (id_value(r[0], "group_number"), text_value(r[1], "name"))
        )
        names.diskgroups = before.diskgroups if found is None else dict(found)
        self._refresh_locations()
        self._names = names
        # The file map is the files' names (ASM disk groups are optional: a database without ASM may
        # well not be granted their view, sql.ASM_DISKGROUPS).
        self._unanswered = tuple(q for q in unanswered if q in FILE_LOOKUPS)
        if not self._unanswered:
            self._names_read_at = names.looked_up_at
        log.debug(
            "names looked up",
            source=self.name,
            datafiles=len(names.datafiles),
            tempfiles=len(names.tempfiles),
            instances=len(names.instances),
        )

    def _locate(self, path: str, expect_lun: bool = True) -> Location:
        # ASM files (+DATA/…) are on their disk group's disks, not on a path of their own.
        return super()._locate(path, expect_lun and not path.startswith("+"))

    def _unknown_files(self, rows: Sequence[Any]) -> bool:
        for row in rows:
            try:
                role = ROLE_OF_FILETYPE.get(row[3])
                key = (id_value(row[1], "con_id"), id_value(row[2], "file_no"))
            except BadRowError:
                continue
            if role == "data" and not self._file_path(self._names.datafiles, key):
                return True
            if role == "temp" and not self._file_path(self._names.tempfiles, key):
                return True
        return False

    @staticmethod
    def _file_path(files: dict[tuple[int, int], str], key: tuple[int, int]) -> str:
        path = files.get(key)
        if path is None:  # the root sees PDB files under their own CON_ID; numbers are CDB-wide
            path = next((p for (_, n), p in files.items() if n == key[1]), "")
        return path

    def _db(self, con_id: int) -> str:
        return self._names.containers.get(con_id) or (str(con_id) if con_id else "")

    def _instance(self, inst_id: int) -> str:
        return self._names.instances.get(inst_id) or str(inst_id)

    # --- families -----------------------------------------------------------------------------

    def _file_families(self, rows: Sequence[Any], errors: Counter[str]) -> list[Family]:
        reads = Family(metrics.ORACLE_FILE_READS)
        writes = Family(metrics.ORACLE_FILE_WRITES)
        read_time = Family(metrics.ORACLE_FILE_READ_TIME, exponent=-3)  # ms, exact
        write_time = Family(metrics.ORACLE_FILE_WRITE_TIME, exponent=-3)
        sync_reads = Family(metrics.ORACLE_FILE_SYNC_READS)
        sync_read_time = Family(metrics.ORACLE_FILE_SYNC_READ_TIME, exponent=-3)  # ms, exact

        def parse(row: Any) -> tuple[LabelSet, tuple[int, ...]]:
            inst, con, file_no = (
                id_value(row[0], "inst_id"),
                id_value(row[1], "con_id"),
                id_value(row[2], "file_no"),
            )
            role = ROLE_OF_FILETYPE.get(text_value(row[3], "filetype_name"), "other")
            values = (
                count_value(row[4], "reads"),
                count_value(row[5], "writes"),
                count_value(row[6], "read_ms"),
                count_value(row[7], "write_ms"),
                count_value(row[8], "sync_reads"),
                count_value(row[9], "sync_read_ms"),
            )
            file, lun = self._file_and_lun(role, con, file_no)
            labels = self._label_set(
                metrics.ORACLE_FILE_LABELS,
                (
                    self._target.name,
                    self._target.workload or "",
                    self._db(con),
                    self._instance(inst),
                    file,
                    role,
                    lun,
                ),
            )
            return labels, values

        parsed = self._rows(rows, sql.IOSTAT_FILE, errors, parse)
        for labels, (r, w, rms, wms, sr, srms) in self._summed(parsed, sql.IOSTAT_FILE, errors):
            reads.add(labels, r)
            writes.add(labels, w)
            read_time.add(labels, rms)
            write_time.add(labels, wms)
            sync_reads.add(labels, sr)
            sync_read_time.add(labels, srms)
        return [reads, writes, read_time, write_time, sync_reads, sync_read_time]

    def _file_and_lun(self, role: str, con: int, file_no: int) -> tuple[str, str]:
        if role in ("log", "control"):
            return (ALL_REDO if role == "log" else ALL_CONTROL), self._lun_label(self._names.files_of(role))
        files = self._names.datafiles if role == "data" else self._names.tempfiles
        path = self._file_path(files, (con, file_no))
        if not path:
            return f"file#{file_no}", ""
        return path, self._lun_label([path])

    def _locations_of(self, path: str) -> list[Location]:
        """Where a file is. ASM files (+DATA/…) are striped over every disk of their disk group."""
        if not path.startswith("+"):
            return [self._locate(path)]
        group = path[1:].split("/", 1)[0].upper()
        return [
            self._locate(disk_path)
            for number, disk_path in self._asm_disks
            if self._names.diskgroups.get(number, "").upper() == group
        ]

    def _lun_label(self, paths: Iterable[str]) -> str:
        """The LUN(s) of these files joined by ',' (several for multiplexed redo or a disk group)."""
        return ",".join(
            sorted({lun for path in paths for loc in self._locations_of(path) for lun in loc.luns})
        )

    def _event_families(self, rows: Sequence[Any], errors: Counter[str]) -> list[Family]:
        waits = Family(metrics.ORACLE_WAITS)
        time_waited = Family(metrics.ORACLE_WAIT_TIME, exponent=-6)  # µs, exact

        def parse(row: Any) -> tuple[LabelSet, tuple[int, int]]:
            labels = self._event_labels(row)
            return labels, (count_value(row[3], "total_waits"), count_value(row[4], "time_waited_micro"))

        parsed = self._rows(rows, sql.SYSTEM_EVENT, errors, parse)
        for labels, (count, micro) in self._summed(parsed, sql.SYSTEM_EVENT, errors):
            waits.add(labels, count)
            time_waited.add(labels, micro)
        return [waits, time_waited]

    def _wait_class_families(self, rows: Sequence[Any], errors: Counter[str]) -> list[Family]:
        waits = Family(metrics.ORACLE_WAIT_CLASS_WAITS)
        time_waited = Family(metrics.ORACLE_WAIT_CLASS_TIME, exponent=-6)  # µs, exact

        def parse(row: Any) -> tuple[LabelSet, tuple[int, int]]:
            labels = self._label_set(
                metrics.ORACLE_WAIT_CLASS_LABELS,
                (
                    self._target.name,
                    self._db(id_value(row[1], "con_id")),
                    self._instance(id_value(row[0], "inst_id")),
                    text_value(row[2], "wait_class"),
                ),
            )
            return labels, (count_value(row[3], "total_waits"), count_value(row[4], "time_waited_micro"))

        parsed = self._rows(rows, sql.WAIT_CLASS, errors, parse)
        for labels, (count, micro) in self._summed(parsed, sql.WAIT_CLASS, errors):
            waits.add(labels, count)
            time_waited.add(labels, micro)
        return [waits, time_waited]

    def _event_labels(self, row: Any) -> LabelSet:
        event = text_value(row[2], "event")
        role = sql.IO_EVENTS.get(event, ("other", ""))[0]
        return self._label_set(
            metrics.ORACLE_EVENT_LABELS,
            (
                self._target.name,
                self._db(id_value(row[1], "con_id")),
                self._instance(id_value(row[0], "inst_id")),
                event,
                role,
                oracle_events.measure_of(event),
            ),
        )

    def _histogram_family(self, rows: Sequence[Any], errors: Counter[str]) -> Family:
        family = Family(metrics.ORACLE_WAIT_DURATION)

        def parse(row: Any) -> tuple[LabelSet, int, int]:
            bound = count_value(row[3], "wait_time_micro")
            if bound < 1 or bound & (bound - 1):
                raise BadRowError(f"wait_time_micro is {bound}, not a power of two")
            return self._event_labels(row), bound, count_value(row[4], "wait_count")

        buckets: dict[LabelSet, dict[int, int]] = {}
        for labels, bound, count in self._rows(rows, self._histogram, errors, parse):
            per_bound = buckets.setdefault(labels, {})
            if bound in per_bound:  # summed like the other families' rows (DbSource._summed)
                self._duplicate(self._histogram, f"{labels.text} wait_time_micro={bound}", errors)
            per_bound[bound] = per_bound.get(bound, 0) + count
        for labels, per_bound in buckets.items():
            cumulative = 0
            total = sum(per_bound.values())
            # Oracle's bucket b holds waits in [b/2, b): 3/4 of b is its middle (1 µs: half of it).
            estimate = sum(c * (0.5 if b == 1 else 0.75 * b) for b, c in per_bound.items())
            for bound in BUCKET_BOUNDS_MICRO:
                cumulative += per_bound.get(bound, 0)
                family.add(
                    self._label_set((*labels.names, "le"), (*labels.values, format_le(bound))),
                    cumulative,
                    "_bucket",
                )
            family.add(self._label_set((*labels.names, "le"), (*labels.values, "+Inf")), total, "_bucket")
            family.add(labels, total, "_count")
            family.add(labels, estimate / 1_000_000, "_sum")
        return family

    def _asm_families(self, rows: Sequence[Any] | None, errors: Counter[str]) -> list[Family]:
        """The ASM disk series; unanswered (None), the last disks stay for the files' LUNs."""
        reads = Family(metrics.ORACLE_ASM_READS)
        writes = Family(metrics.ORACLE_ASM_WRITES)
        read_time = Family(metrics.ORACLE_ASM_READ_TIME)  # seconds (fractional)
        write_time = Family(metrics.ORACLE_ASM_WRITE_TIME)
        disks: set[tuple[int, str]] = set()

        def parse(row: Any) -> tuple[LabelSet, tuple[float, ...]]:
            group = id_value(row[1], "group_number")
            path = text_value(row[4], "path")
            disks.add((group, path))
            labels = self._label_set(
                metrics.ORACLE_ASM_LABELS,
                (
                    self._target.name,
                    self._instance(id_value(row[0], "inst_id")),
                    self._names.diskgroups.get(group, str(group)),
                    row[3] if isinstance(row[3], str) else "",
                    path,
                    self._locate(path).lun,
                ),
            )
            return labels, (
                count_value(row[5], "reads"),
                count_value(row[6], "writes"),
                seconds_value(row[7], "read_time"),
                seconds_value(row[8], "write_time"),
            )

        parsed = self._rows(rows or [], sql.ASM_DISK, errors, parse)
        for labels, (r, w, rt, wt) in self._summed(parsed, sql.ASM_DISK, errors):
            reads.add(labels, r)
            writes.add(labels, w)
            read_time.add(labels, rt)
            write_time.add(labels, wt)
        self._asm_current = bool(disks)
        if rows is not None:
            self._asm_disks = tuple(sorted(disks))
            self._asm_read_at = self._clock()
        return [reads, writes, read_time, write_time]

    def _capability_family(self) -> Family:
        """`asm` is 0 when files are in ASM but no ASM disk could be read (logged once per spell);
        `container_histograms` as `_container_histograms` says."""
        asm_files = [
            path
            for role in ("data", "temp", "log", "control")
            for path in self._names.files_of(role)
            if path.startswith("+")
        ]
        readable = self._asm_current or not asm_files
        if readable:
            self._said.forget("asm")
        elif self._said.first("asm"):
            log.warning(ASM_UNREADABLE, source=self.name, asm_files=len(asm_files), example=asm_files[0])
        return self._capabilities(asm=readable, container_histograms=self._container_histograms())

    # --- labels for the host layer -----------------------------------------------------------

    def _lun_files(self) -> list[tuple[Location, str]]:
        files: list[tuple[Location, str]] = []
        for role in ("data", "temp", "log", "control"):
            for path in self._names.files_of(role):
                files.extend((location, role) for location in self._locations_of(path))
        return files
