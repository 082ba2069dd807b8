"""The Oracle emulation itself: the collector's SQL runs on it, it speaks Oracle's units and errors,
and its faults raise what python-oracledb thin raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.support.skip_unless_installed import need

need("oracledb")  # without the `oracle` extra this module skips, naming it

import oracledb  # noqa: E402 - after the skip above
import sqlglot  # noqa: E402
from oracledb import errors as oerr  # noqa: E402

from lunlat.engines.dbsource import Query  # noqa: E402
from lunlat.engines.oracle.sql import ALL_QUERIES, IO_EVENTS  # noqa: E402
from tests.oracle.emulation import EmulatedConnection, OracleEmulation, oracle_error  # noqa: E402
from tests.oracle.simulator import IO, Choice, Commits, Constant, Load, bucket_micro  # noqa: E402

ORACLE_SQL = {q.name: q for q in ALL_QUERIES}


def run(conn: EmulatedConnection, sql: str) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    try:
        cursor.execute(sql)
        return cursor.fetchall()
    finally:
        cursor.close()


def failure(conn: EmulatedConnection, sql: str) -> oracledb.Error:
    with pytest.raises(oracledb.Error) as caught:
        run(conn, sql)
    return caught.value


def code(exc: BaseException) -> str:
    inner = exc.args[0]
    assert isinstance(inner, oerr._Error)
    return inner.full_code


def by_event(conn: EmulatedConnection) -> dict[str, tuple[int, int, int, float]]:
    found = run(
        conn, "SELECT event, total_waits, time_waited_micro, time_waited, average_wait FROM v$system_event"
    )
    return {str(e): (int(w), int(m), int(cs), float(a)) for e, w, m, cs, a in found}


def buckets(conn: EmulatedConnection, event: str) -> dict[int, int]:
    found = run(
        conn,
        f"SELECT wait_time_micro, wait_count FROM v$event_histogram_micro WHERE event = '{event}'",  # noqa: S608
    )
    return {int(b): int(c) for b, c in found}


@pytest.fixture
def emu() -> Iterator[OracleEmulation]:
    emulation = OracleEmulation()
    yield emulation
    emulation.release()  # wake anything still hanging


@pytest.fixture
def big() -> Iterator[OracleEmulation]:
    """Two RAC instances, a CDB with two PDBs, on ASM."""
    emulation = OracleEmulation(instances=2, cdb=True, pdbs=("SALES", "HR"), asm=True)
    yield emulation
    emulation.release()


BUSY = Load(
    IO("data", "read", 400, Choice([(425, 8), (3000, 1), (40_000, 1)]), large_fraction=0.1),
    IO("data", "write", 50, Constant(800)),
    IO("temp", "read", 20, Constant(2000), large_fraction=1.0),
    IO("temp", "write", 20, Constant(2500), large_fraction=1.0),
    IO("log", "write", 100, Choice([(300, 3), (900, 1)]), large_fraction=0.2),
    IO("log", "read", 5, Constant(1500), large_fraction=1.0),
    IO("control", "read", 10, Constant(150)),
    IO("control", "write", 2, Constant(1200)),
    commits=Commits(80, Constant(120)),
)


# --- the collector's statements ------------------------------------------------------------------


def _select_names(query: Query) -> list[str]:
    parsed = sqlglot.parse_one(query.sql, read="oracle")
    assert isinstance(parsed, sqlglot.exp.Select)
    return [e.alias_or_name.upper() for e in parsed.selects]


@pytest.mark.parametrize("layout", ["single", "rac-cdb-asm"])
@pytest.mark.parametrize("query", ALL_QUERIES, ids=lambda q: q.name)
def test_every_collector_statement_runs_unchanged_and_answers_rows_of_its_shape(
    layout: str, query: Query
) -> None:
    emulation = (
        OracleEmulation()
        if layout == "single"
        else OracleEmulation(instances=2, cdb=True, pdbs=("SALES", "HR"), asm=True)
    )
    emulation.advance(30, BUSY)
    conn = emulation.connect()
    cursor = conn.cursor()
    cursor.arraysize = 1000
    cursor.execute(query.sql)
    found = cursor.fetchall()
    description = cursor.description
    assert description is not None
    assert [d[0] for d in description] == _select_names(query)
    asm_query = query.name.startswith("asm_")
    if asm_query and layout == "single":
        assert found == []  # the views exist without ASM, with no rows
        return
    assert found, f"{query.name} answered no rows"
    for row in found:
        assert isinstance(row, tuple) and len(row) == len(description)
        for value, column in zip(row, description, strict=True):
            if column[1] is oracledb.DB_TYPE_NUMBER:
                assert isinstance(value, int | float) and not isinstance(value, bool), (column[0], value)
            else:
                assert value is None or isinstance(value, str), (column[0], value)
    assert emulation.executed == [query.sql]


def test_the_per_scrape_statements_show_what_the_load_did(big: OracleEmulation) -> None:
    big.advance(60, BUSY)
    conn = big.connect()
    iostat = run(conn, ORACLE_SQL["iostat_file"].sql)
    for inst in (1, 2):
        mine = [r for r in iostat if r[0] == inst]
        kinds = [r[3] for r in mine]
        assert kinds.count("Log File") == 1 and kinds.count("Control File") == 1
        assert kinds.count("Data File") == len(big.paths("data"))
        assert kinds.count("Temp File") == len(big.paths("temp"))
        assert all(r[2] == 0 and r[1] == 0 for r in mine if r[3] in ("Log File", "Control File"))
    events = run(conn, ORACLE_SQL["system_event"].sql)
    assert {r[2] for r in events} >= {"db file sequential read", "direct path read", "log file sync"}
    assert {r[2] for r in events} <= set(IO_EVENTS)  # the idle events the instance also has are filtered
    assert {r[0] for r in events} == {1, 2}
    histogram = run(conn, ORACLE_SQL["event_histogram_micro"].sql)
    assert all(int(r[3]) & (int(r[3]) - 1) == 0 and int(r[4]) > 0 for r in histogram)
    disks = run(conn, ORACLE_SQL["asm_disk_stat"].sql)
    assert {r[4] for r in disks} == {"/dev/mapper/asm_data1", "/dev/mapper/asm_data2", "/dev/mapper/asm_fra1"}
    assert all(r[1] != 0 for r in disks)  # the candidate disk (group 0) is filtered by the statement


# --- SQL front end -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected", "cls"),
    [
        ("SELEC inst_id FROM gv$instance", "ORA-00900", oracledb.DatabaseError),
        ("SELECT inst_id FROM gv$instance LIMIT 1", "ORA-00933", oracledb.DatabaseError),
        ("SELECT inst_id FROM gv$instance;", "ORA-00911", oracledb.DatabaseError),
        ("SELECT FROM gv$instance", "ORA-00936", oracledb.DatabaseError),
        ("SELECT 1", "ORA-00923", oracledb.DatabaseError),
        ("SELECT inst_id FROM gv$instance WHERE", "ORA-00933", oracledb.DatabaseError),
        ("SELECT 'x FROM dual", "DPY-2041", oracledb.ProgrammingError),
        ("DELETE FROM v$datafile", "ORA-01031", oracledb.DatabaseError),
    ],
)
def test_what_oracle_would_not_parse_is_rejected_with_its_error(
    emu: OracleEmulation, sql: str, expected: str, cls: type[oracledb.Error]
) -> None:
    exc = failure(emu.connect(), sql)
    assert code(exc) == expected
    assert type(exc) is cls


@pytest.mark.parametrize(
    ("sql", "expected", "shown"),
    [
        ("SELECT bogus FROM gv$iostat_file", "ORA-00904", '"BOGUS": invalid identifier'),
        ("SELECT wait_time_micro FROM gv$system_event", "ORA-00904", '"WAIT_TIME_MICRO": invalid identifier'),
        ('SELECT "file#" FROM v$datafile', "ORA-00904", '"file#": invalid identifier'),  # quoted: exact case
        ("SELECT d.nam FROM v$datafile d", "ORA-00904", '"D"."NAM": invalid identifier'),
        ("SELECT file# f FROM v$datafile WHERE f > 1", "ORA-00904", '"F": invalid identifier'),
        ("SELECT file# FROM v$datafile, v$tempfile", "ORA-00918", "column ambiguously defined"),
        ("SELECT * FROM gv$iostat_files", "ORA-00942", "table or view does not exist"),
        ("SELECT * FROM scott.v$datafile", "ORA-00942", "table or view does not exist"),
    ],
)
def test_names_not_in_the_documented_views_are_oracle_errors(
    emu: OracleEmulation, sql: str, expected: str, shown: str
) -> None:
    exc = failure(emu.connect(), sql)
    assert (code(exc), type(exc)) == (expected, oracledb.DatabaseError)
    assert str(exc).splitlines()[0] == f"{expected}: {shown}"


DOCUMENTED = {
    "gv$iostat_file": "inst_id, con_id, file_no, filetype_id, filetype_name, small_read_megabytes, "
    "small_write_megabytes, large_read_megabytes, large_write_megabytes, small_read_reqs, small_write_reqs, "
    "small_sync_read_reqs, large_read_reqs, large_write_reqs, small_read_servicetime, small_write_servicetime, "
    "small_sync_read_latency, large_read_servicetime, large_write_servicetime, asynch_io, retries_on_error",
    "gv$system_event": "inst_id, event, total_waits, total_timeouts, time_waited, average_wait, "
    "time_waited_micro, total_waits_fg, event_id, wait_class, con_id",
    "gv$event_histogram_micro": "inst_id, event#, event, wait_time_format, wait_time_micro, wait_count, "
    "last_update_time, con_id",
    "gv$asm_disk_stat": "inst_id, group_number, disk_number, name, path, reads, writes, read_time, write_time, "
    "bytes_read, bytes_written, con_id",
    "gv$instance": "inst_id, instance_number, instance_name, host_name, startup_time, status",
    "v$containers": "con_id, name, open_mode",
    "v$datafile": "file#, name, con_id",
    "v$tempfile": "file#, name, con_id",
    "v$logfile": "group#, status, type, member, con_id",
    "v$controlfile": "status, name, con_id",
    "v$iostat_file": "con_id, file_no, filetype_name",
    "v$system_event": "event, time_waited_micro, con_id",
    "v$event_histogram_micro": "event#, wait_time_micro, con_id",
    "v$asm_disk_stat": "group_number, path, read_time",
    "v$instance": "instance_number, startup_time",
    "gv$containers": "inst_id, con_id",
    "gv$datafile": "inst_id, file#",
}


@pytest.mark.parametrize("view", sorted(DOCUMENTED))
def test_the_documented_columns_are_there(emu: OracleEmulation, view: str) -> None:
    conn = emu.connect()
    sql = f"SELECT {DOCUMENTED[view]} FROM {view}"  # noqa: S608 - constants
    cursor = conn.cursor()
    cursor.execute(sql)
    assert cursor.description is not None
    assert len(cursor.description) == len(DOCUMENTED[view].split(","))
    if not view.startswith("g"):
        assert "INST_ID" not in {d[0] for d in cursor.description}
        assert code(failure(conn, f"SELECT inst_id FROM {view}")) == "ORA-00904"  # noqa: S608


def test_values_arrive_as_python_oracledb_returns_them(big: OracleEmulation) -> None:
    big.advance(10, Load(IO("data", "read", 3, Constant(333.3))))
    conn = big.connect()
    (startup, number), *_ = run(conn, "SELECT startup_time, instance_number FROM gv$instance ORDER BY 2")
    assert isinstance(startup, datetime) and number == 1
    times = [r[0] for r in run(conn, "SELECT read_time FROM gv$asm_disk_stat WHERE reads > 0")]
    assert times and all(isinstance(t, float) and not t.is_integer() for t in times)  # NUMBER, fractional
    assert run(conn, "SELECT 6/3, 5/2, NVL(NULL, 7) FROM dual") == [(2, 2.5, 7)]


# --- units and consistency -----------------------------------------------------------------------


def test_425_microseconds_stay_425_microseconds_everywhere(emu: OracleEmulation) -> None:
    emu.advance(100, Load(IO("data", "read", 100, Constant(425)), background=False))
    conn = emu.connect()
    waits, micros, centis, average = by_event(conn)["db file sequential read"]
    assert (waits, micros) == (10_000, 4_250_000)
    assert micros / waits == 425
    assert (centis, average) == (425, 0.04)  # the coarse columns: 0.0425 cs shows as 0.04
    assert buckets(conn, "db file sequential read") == {512: 10_000}
    reads, read_ms, sync = run(
        conn,
        "SELECT SUM(small_read_reqs), SUM(small_read_servicetime), SUM(small_sync_read_reqs) "
        "FROM v$iostat_file WHERE filetype_name = 'Data File'",
    )[0]
    assert reads == sync == 10_000
    assert read_ms == pytest.approx(4250, abs=3)  # floored per file: each file's ms is whole


def test_fractional_waits_are_summed_exactly_and_floored_once(emu: OracleEmulation) -> None:
    load = Load(IO("log", "write", 1, Constant(333.3)), background=False)
    for _ in range(30):
        emu.advance(100, load)
    conn = emu.connect()
    waits, micros, _, _ = by_event(conn)["log file parallel write"]
    assert waits == 3000
    assert micros == 999_900  # not 3000 * 333 = 999_000, as flooring every wait would give
    (write_ms,) = run(
        conn, "SELECT small_write_servicetime FROM v$iostat_file WHERE filetype_name = 'Log File'"
    )[0]
    assert write_ms == 999


@pytest.mark.parametrize(
    ("micros", "bound"),
    [
        (0.4, 1),
        (1, 2),
        (1.5, 2),
        (2, 4),
        (255.9, 256),
        (256, 512),
        (511.999, 512),
        (512, 1024),
        (1_500_000, 2_097_152),
    ],
)
def test_a_wait_lands_in_the_bucket_whose_half_it_reaches(
    emu: OracleEmulation, micros: float, bound: int
) -> None:
    assert bucket_micro(round(micros * 1000)) == bound
    emu.advance(10, Load(IO("control", "read", 1, Constant(micros)), background=False))
    assert buckets(emu.connect(), "control file sequential read") == {bound: 10}


def test_histograms_count_the_same_waits_as_the_events(big: OracleEmulation) -> None:
    for _ in range(5):
        big.advance(20, BUSY)
    conn = big.connect(inst_id=2)
    events = by_event(conn)
    assert {"db file sequential read", "direct path read", "log file sync", "rdbms ipc message"} <= set(
        events
    )
    for event, (waits, micros, _, _) in events.items():
        counts = buckets(conn, event)
        assert sum(counts.values()) == waits, event
        # every wait in bucket b took at least b/2 and less than b
        assert sum(c * b // 2 for b, c in counts.items()) <= micros < sum(c * b for b, c in counts.items())


def test_file_counters_agree_with_the_events_and_asm_disks(big: OracleEmulation) -> None:
    big.advance(30, BUSY)
    conn = big.connect()
    events = by_event(conn)
    small, large, small_ms, large_ms = run(
        conn,
        "SELECT SUM(small_read_reqs), SUM(large_read_reqs), SUM(small_read_servicetime), "
        "SUM(large_read_servicetime) FROM v$iostat_file WHERE filetype_name = 'Data File'",
    )[0]
    assert small == events["db file sequential read"][0] == 30 * 400 * 0.9
    assert large == events["direct path read"][0] == 30 * 400 * 0.1
    data_disk_reads, data_disk_seconds = run(
        conn, "SELECT SUM(reads), SUM(read_time) FROM v$asm_disk_stat WHERE group_number = 1"
    )[0]
    temp_and_redo = run(
        conn,
        "SELECT SUM(small_read_reqs + large_read_reqs) FROM v$iostat_file "
        "WHERE filetype_name IN ('Temp File', 'Log File', 'Control File')",
    )[0][0]
    assert data_disk_reads > small + large  # the DATA group also holds temp, one redo and one control member
    assert isinstance(temp_and_redo, int) and data_disk_reads <= small + large + temp_and_redo
    total_ms = int(small_ms) + int(large_ms)
    assert float(data_disk_seconds) * 1000 >= total_ms  # the disks add temp I/O


def test_redo_writes_land_on_every_member_of_a_group(big: OracleEmulation) -> None:
    big.advance(10, Load(IO("log", "write", 100, Constant(500)), background=False), inst_id=1)
    conn = big.connect()
    writes = dict(run(conn, "SELECT path, writes FROM v$asm_disk_stat"))
    assert writes["/dev/mapper/asm_fra1"] == 1000  # one member of each group on FRA
    assert writes["/dev/mapper/asm_data1"] + writes["/dev/mapper/asm_data2"] == 1000
    other = dict(run(conn, "SELECT path, writes FROM gv$asm_disk_stat WHERE inst_id = 2"))
    assert set(other.values()) == {0}  # instance 2 did nothing


def test_commits_wait_a_bit_longer_than_the_log_write(emu: OracleEmulation) -> None:
    emu.advance(60, Load(IO("log", "write", 50, Constant(400)), commits=Commits(200, Constant(150))))
    events = by_event(emu.connect())
    sync_waits, sync_micros, _, _ = events["log file sync"]
    write_waits, write_micros, _, _ = events["log file parallel write"]
    assert (sync_waits, write_waits) == (12_000, 3_000)
    assert sync_micros / sync_waits == 550 and write_micros / write_waits == 400


def test_the_same_seed_gives_the_same_rows() -> None:
    first, second, other = OracleEmulation(seed=7), OracleEmulation(seed=7), OracleEmulation(seed=8)
    for emulation in (first, second, other):
        emulation.advance(20, BUSY)
    sql = ORACLE_SQL["event_histogram_micro"].sql
    assert first.query(sql) == second.query(sql)
    assert first.query(sql) != other.query(sql)


def test_a_stream_can_aim_at_one_file(emu: OracleEmulation) -> None:
    slow = emu.paths("data")[1]
    emu.advance(10, Load(IO("data", "read", 10, Constant(20_000), files=(slow,)), background=False))
    found = run(
        emu.connect(),
        "SELECT d.name, i.small_read_reqs, i.small_read_servicetime FROM v$iostat_file i "
        "JOIN v$datafile d ON d.file# = i.file_no WHERE i.filetype_name = 'Data File' ORDER BY d.file#",
    )
    assert [(name, reads) for name, reads, _ in found if reads] == [(slow, 100)]
    assert [ms for name, _, ms in found if name == slow] == [2000]


# --- files, RAC, CDB ------------------------------------------------------------------------------


def test_the_file_list_can_change_between_scrapes(emu: OracleEmulation) -> None:
    conn = emu.connect()
    dropped = emu.paths("data")[1]
    emu.drop_file(dropped)
    number = emu.add_datafile("/u09/oradata/ORCL/big01.dbf")
    assert number == 2  # Oracle hands the free FILE# out again
    assert run(conn, "SELECT file#, name FROM v$datafile WHERE file# = 2") == [
        (2, "/u09/oradata/ORCL/big01.dbf")
    ]
    assert dropped not in {r[0] for r in run(conn, "SELECT name FROM v$datafile")}
    emu.add_tempfile("/u09/oradata/ORCL/temp02.dbf")
    temp_rows = run(conn, "SELECT file_no FROM v$iostat_file WHERE filetype_name = 'Temp File' ORDER BY 1")
    assert temp_rows == [(1,), (2,)]


def test_rac_instances_count_their_own_io_for_the_same_files(big: OracleEmulation) -> None:
    big.advance(10, Load(IO("data", "read", 100, Constant(425))), inst_id=2)
    conn = big.connect()
    per_instance = run(
        conn,
        "SELECT inst_id, SUM(small_read_reqs), COUNT(*) FROM gv$iostat_file "
        "WHERE filetype_name = 'Data File' GROUP BY inst_id ORDER BY inst_id",
    )
    files = len(big.paths("data"))
    assert per_instance == [(1, 0, files), (2, 1000, files)]
    assert run(big.connect(inst_id=2), "SELECT instance_name, thread# FROM v$instance") == [("orcl2", 2)]
    assert run(conn, "SELECT inst_id, instance_name FROM gv$instance ORDER BY 1") == [
        (1, "orcl1"),
        (2, "orcl2"),
    ]


def test_a_cdb_shows_its_containers_and_where_each_file_lives(big: OracleEmulation) -> None:
    conn = big.connect()
    containers = run(conn, "SELECT con_id, name, open_mode FROM v$containers ORDER BY con_id")
    assert containers == [
        (1, "CDB$ROOT", "READ WRITE"),
        (2, "PDB$SEED", "READ ONLY"),
        (3, "SALES", "READ WRITE"),
        (4, "HR", "READ WRITE"),
    ]
    datafiles = run(conn, "SELECT con_id, name FROM v$datafile")
    assert {c for c, _ in datafiles} == {1, 2, 3, 4}
    assert all("/SALES/" in str(n) for c, n in datafiles if c == 3)
    assert {r[0] for r in run(conn, "SELECT con_id FROM v$logfile")} == {0}
    assert {r[0] for r in run(conn, "SELECT con_id FROM v$controlfile")} == {0}
    iostat = run(conn, "SELECT i.con_id, d.con_id FROM v$iostat_file i JOIN v$datafile d ON d.file# = i.file_no "
                       "WHERE i.filetype_name = 'Data File'")  # fmt: skip
    assert iostat and all(a == b for a, b in iostat)
    assert big.add_datafile("+DATA/ORCL/HR/DATAFILE/hr_data.300.1170000300", "HR") == 12
    assert run(conn, "SELECT con_id FROM v$datafile WHERE file# = 12") == [(4,)]


def test_a_non_cdb_is_one_container_zero(emu: OracleEmulation) -> None:
    conn = emu.connect()
    assert run(conn, "SELECT con_id, name FROM v$containers") == [(0, "ORCL")]
    assert {r[0] for r in run(conn, "SELECT con_id FROM v$iostat_file")} == {0}
    assert run(conn, "SELECT COUNT(*) FROM gv$asm_disk_stat") == [(0,)]


# --- restarts -----------------------------------------------------------------------------------


def test_a_restart_zeroes_the_counters_and_ends_the_sessions(emu: OracleEmulation) -> None:
    emu.advance(30, BUSY)
    conn = emu.connect()
    before = run(conn, "SELECT startup_time FROM v$instance")[0][0]
    assert by_event(conn)
    emu.advance(5)
    emu.restart()
    exc = failure(conn, "SELECT event FROM v$system_event")
    assert (code(exc), type(exc)) == ("DPY-4011", oracledb.DatabaseError)
    assert exc.args[0].is_session_dead
    again = failure(conn, "SELECT event FROM v$system_event")
    assert (code(again), type(again)) == ("DPY-1001", oracledb.InterfaceError)
    conn.close()  # closing a dead session is quiet, as in thin
    fresh = emu.connect()
    assert by_event(fresh) == {}
    assert {r[0] for r in run(fresh, "SELECT small_read_reqs + large_write_reqs FROM v$iostat_file")} == {0}
    after = run(fresh, "SELECT startup_time FROM v$instance")[0][0]
    assert isinstance(before, datetime) and isinstance(after, datetime) and after > before


def test_a_held_restart_refuses_logins_until_the_database_opens(emu: OracleEmulation) -> None:
    emu.restart(hold=True, code="ORA-03113")
    with pytest.raises(oracledb.OperationalError) as caught:
        emu.connect()
    assert code(caught.value) == "ORA-01033"
    emu.open()
    assert run(emu.connect(), "SELECT status FROM v$instance") == [("OPEN",)]


def test_one_rac_instance_restarting_leaves_the_other_serving(big: OracleEmulation) -> None:
    big.advance(10, BUSY)
    on_two = big.connect(inst_id=2)
    big.restart(inst_id=1, hold=True, code="ORA-03113")
    conn = big.connect()
    assert conn.inst_id == 2  # the service sends new sessions to the open instance
    assert run(conn, "SELECT inst_id FROM gv$instance") == [(2,)]
    assert run(on_two, "SELECT COUNT(*) FROM v$system_event")[0][0] != 0
    big.open(1)
    assert run(
        conn, "SELECT inst_id FROM gv$system_event WHERE event = 'db file sequential read' ORDER BY 1"
    ) == [(2,)]


def test_a_restart_seen_as_ora_03113_is_dpy_4011_in_thin_mode(emu: OracleEmulation) -> None:
    conn = emu.connect()
    emu.restart(code="ORA-03113")
    with pytest.raises(oracledb.DatabaseError) as caught:
        conn.ping()
    assert code(caught.value) == "DPY-4011"
    assert "ORA-03113: end-of-file on communication channel" in str(caught.value)


# --- faults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected", "cls", "cause"),
    [
        ("ORA-12541", "DPY-6005", oracledb.OperationalError, ConnectionRefusedError),
        ("ORA-12514", "DPY-6005", oracledb.OperationalError, oracledb.OperationalError),
        ("ORA-01017", "ORA-01017", oracledb.DatabaseError, None),
        ("ORA-01034", "ORA-01034", oracledb.OperationalError, None),
        ("ORA-28000", "ORA-28000", oracledb.DatabaseError, None),
        ("DPY-6005", "DPY-6005", oracledb.OperationalError, None),
    ],
)
def test_a_failing_connect_raises_what_thin_raises(
    emu: OracleEmulation,
    given: str,
    expected: str,
    cls: type[oracledb.Error],
    cause: type[BaseException] | None,
) -> None:
    emu.connect_error = given
    with pytest.raises(oracledb.Error) as caught:
        emu.connect()
    assert (type(caught.value), code(caught.value)) == (cls, expected)
    assert type(caught.value.__cause__) is cause if cause else caught.value.__cause__ is None
    emu.connect_error = None
    assert emu.connect().inst_id == 1
    assert (emu.connect_attempts, emu.connects) == (2, 1)


def test_a_given_exception_is_raised_as_it_is(emu: OracleEmulation) -> None:
    emu.connect_error = OSError("no route to host")
    with pytest.raises(OSError, match="no route"):
        emu.connect()


def test_a_slow_login_holds_only_its_caller(emu: OracleEmulation) -> None:
    emu.connect_delay = 5.0
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.setdefault("conn", emu.connect()), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(0.2)
    assert thread.is_alive()  # still logging in
    emu.release()
    thread.join(2)
    assert isinstance(box.get("conn"), EmulatedConnection)
    assert time.monotonic() - started < 3


def test_a_hung_query_past_the_call_timeout_is_dpy_4024_and_the_session_survives(
    emu: OracleEmulation,
) -> None:
    conn = emu.connect()
    conn.call_timeout = 150
    emu.hang("gv\\$iostat_file", 10)
    started = time.monotonic()
    exc = failure(conn, ORACLE_SQL["iostat_file"].sql)
    elapsed = time.monotonic() - started
    assert (code(exc), type(exc)) == ("DPY-4024", oracledb.DatabaseError)
    assert "call timeout of 150 ms exceeded" in str(exc)
    assert 0.14 <= elapsed < 2
    assert run(conn, ORACLE_SQL["containers"].sql) == [(0, "ORCL")]  # other views answer at once


def test_a_hang_the_server_does_not_break_loses_the_session(emu: OracleEmulation) -> None:
    conn = emu.connect()
    conn.call_timeout = 100
    emu.hang("system_event", 10, breakable=False)
    started = time.monotonic()
    exc = failure(conn, ORACLE_SQL["system_event"].sql)
    assert (code(exc), type(exc)) == ("DPY-4011", oracledb.DatabaseError)
    assert time.monotonic() - started >= 0.19  # the break waited one more call timeout
    assert code(failure(conn, ORACLE_SQL["containers"].sql)) == "DPY-1001"


def test_without_a_call_timeout_a_hang_only_delays_the_answer(emu: OracleEmulation) -> None:
    conn = emu.connect()
    emu.hang("v\\$instance", 0.2, times=1)
    started = time.monotonic()
    assert run(conn, ORACLE_SQL["instance"].sql) == [(1, "orcl")]
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    run(conn, ORACLE_SQL["instance"].sql)  # times=1: only the first one hung
    assert time.monotonic() - started < 0.2


def test_a_hung_query_does_not_block_another_session(emu: OracleEmulation) -> None:
    stuck, free = emu.connect(), emu.connect()
    emu.hang("iostat", 10)
    thread = threading.Thread(target=lambda: run(stuck, ORACLE_SQL["iostat_file"].sql), daemon=True)
    thread.start()
    time.sleep(0.05)
    started = time.monotonic()
    assert len(run(free, ORACLE_SQL["datafile"].sql)) == 3
    emu.advance(1, BUSY)  # nor the simulator
    assert time.monotonic() - started < 1
    assert thread.is_alive()
    emu.release()
    thread.join(2)
    assert not thread.is_alive()


def test_a_connection_lost_mid_scrape(emu: OracleEmulation) -> None:
    conn = emu.connect()
    emu.lose_connection_after(2)
    scrape = [
        ORACLE_SQL[n].sql for n in ("iostat_file", "system_event", "event_histogram_micro", "asm_disk_stat")
    ]
    run(conn, scrape[0])
    run(conn, scrape[1])
    lost = failure(conn, scrape[2])
    assert (code(lost), type(lost)) == ("DPY-4011", oracledb.DatabaseError)
    after = failure(conn, scrape[3])
    assert (code(after), type(after)) == ("DPY-1001", oracledb.InterfaceError)
    assert emu.executed == scrape[:3]  # the fourth never left the client
    with pytest.raises(oracledb.InterfaceError):
        conn.ping()
    assert len(run(emu.connect(), scrape[3])) == 0  # the server itself is fine


def test_killed_sessions_die_on_their_next_call(big: OracleEmulation) -> None:
    one, two = big.connect(inst_id=1), big.connect(inst_id=2)
    big.kill_sessions(inst_id=1, code="ORA-00028")
    assert code(failure(one, "SELECT 1 FROM dual")) == "DPY-4011"  # thin maps ORA-00028 to DPY-4011
    assert run(two, "SELECT 1 FROM dual") == [(1,)]


def test_a_revoked_view_is_ora_00942_until_granted_again(emu: OracleEmulation) -> None:
    conn = emu.connect()
    emu.revoke("gv$event_histogram_micro")
    exc = failure(conn, ORACLE_SQL["event_histogram_micro"].sql)
    assert (code(exc), type(exc)) == ("ORA-00942", oracledb.DatabaseError)
    assert len(run(conn, ORACLE_SQL["datafile"].sql)) == 3  # the others still answer
    emu.grant("GV$EVENT_HISTOGRAM_MICRO")
    run(conn, ORACLE_SQL["event_histogram_micro"].sql)
    with pytest.raises(KeyError):
        emu.revoke("gv$no_such_view")


def test_the_driver_side_misuse_errors(emu: OracleEmulation) -> None:
    conn = emu.connect()
    cursor = conn.cursor()
    with pytest.raises(oracledb.InterfaceError) as not_executed:
        cursor.fetchall()
    assert code(not_executed.value) == "DPY-1004"
    with pytest.raises(oracledb.ProgrammingError) as bad_size:
        cursor.arraysize = 0
    assert code(bad_size.value) == "DPY-2045"
    with pytest.raises(oracledb.ProgrammingError) as empty:
        cursor.execute("   ")
    assert code(empty.value) == "DPY-2066"
    cursor.close()
    with pytest.raises(oracledb.InterfaceError) as closed_cursor:
        cursor.execute("SELECT 1 FROM dual")
    assert code(closed_cursor.value) == "DPY-1006"
    conn.close()
    for action in (conn.cursor, conn.close, conn.ping):
        with pytest.raises(oracledb.InterfaceError) as closed:
            action()
        assert code(closed.value) == "DPY-1001"
    assert emu.executed == []


def test_codes_become_the_exceptions_the_driver_makes() -> None:
    assert type(oracle_error("DPY-4024", timeout=5000)) is oracledb.DatabaseError
    assert "call timeout of 5000 ms exceeded" in str(oracle_error("DPY-4024", timeout=5000))
    assert type(oracle_error("DPY-1001")) is oracledb.InterfaceError
    assert type(oracle_error("ORA-01013")) is oracledb.OperationalError
    lost = oracle_error("ORA-01089")
    assert (type(lost), code(lost)) == (oracledb.DatabaseError, "DPY-4011")
    with pytest.raises(ValueError, match="not an ORA"):
        oracle_error("TNS-12541")


def test_a_pdb_login_sees_no_asm_disks_and_the_root_sees_them() -> None:
    # Oracle Database Reference, V$ASM_DISK_STAT: 0 rows when queried from a PDB (emulated-facts.md).
    emu = OracleEmulation(cdb=True, pdbs=("FREEPDB1",), asm=True)
    asm = ORACLE_SQL["asm_disk_stat"].sql
    with emu.connect() as root, emu.connect(container="FREEPDB1") as pdb:
        assert {row[4] for row in run(root, asm)} == {
            "/dev/mapper/asm_data1",
            "/dev/mapper/asm_data2",
            "/dev/mapper/asm_fra1",
        }
        assert run(pdb, asm) == []
        datafiles = run(pdb, ORACLE_SQL["datafile"].sql)
        assert datafiles and all(name.startswith("+DATA/") for _, _, name in datafiles)
    with pytest.raises(ValueError, match="not an open PDB"):
        emu.connect(container="CDB$ROOT")
    with pytest.raises(ValueError, match="not an open PDB"):
        OracleEmulation(asm=True).connect(container="FREEPDB1")  # a non-CDB has no PDB


def test_the_per_container_histogram_exists_from_18c_and_a_pdb_sees_its_own_rows() -> None:
    sql = ORACLE_SQL["con_event_histogram_micro"].sql
    load = Load(
        IO("data", "read", 10, Constant(425), container="SALES"),
        IO("data", "read", 10, Constant(425), container="HR"),
        background=False,
    )
    old = OracleEmulation(cdb=True, pdbs=("SALES", "HR"), version="12.2.0.1.0")
    with old.connect() as conn:
        assert conn.version == "12.2.0.1.0"
        assert code(failure(conn, sql)) == "ORA-00942"
        assert run(conn, ORACLE_SQL["event_histogram_micro"].sql) == []
    new = OracleEmulation(cdb=True, pdbs=("SALES", "HR"), version="19.24.0.0.0")
    new.advance(1, load)
    sales, hr = new.db.con_id("SALES"), new.db.con_id("HR")
    with new.connect() as root, new.connect(container="SALES") as pdb:
        assert root.version == "19.24.0.0.0"
        assert {int(r[1]) for r in run(root, sql)} == {sales, hr}
        assert {int(r[1]) for r in run(pdb, sql)} == {sales}
        assert {int(r[1]) for r in run(pdb, ORACLE_SQL["system_event"].sql)} == {sales}
