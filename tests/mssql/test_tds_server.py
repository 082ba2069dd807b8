"""The TDS test server through the real pyodbc + FreeTDS ODBC driver: the source's statements
answered from the emulated DMVs, and each fault showing as what pyodbc really raises.

Driver tests are skipped (with the reason) when pyodbc cannot be imported or odbcinst has no
FreeTDS driver; the state and SQL tests run everywhere.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from lunlat.engines.dbsession import Kind
from lunlat.engines.dbsource import Query
from lunlat.engines.mssql import sql as mssql_sql
from lunlat.engines.mssql.source import classify
from tests.mssql import tds_protocol as tds
from tests.mssql.tds_server import LOG, ROWS, STATEMENTS, DmvState, Load, Stream, TdsServer

try:
    import pyodbc

    NO_DRIVER = "" if "FreeTDS" in pyodbc.drivers() else "no FreeTDS driver in odbcinst (apt install tdsodbc)"
except ImportError as exc:
    NO_DRIVER = f"pyodbc cannot be imported ({exc}): pip install 'lunlat[mssql]'"

needs_driver = pytest.mark.skipif(bool(NO_DRIVER), reason=NO_DRIVER)

SECRET = "s3cret;pw-never-logged"  # noqa: S105 - a test value that must stay out of every record
DENIED = "VIEW SERVER STATE permission was denied on object 'server', database 'master'."
NOT_READABLE = (
    "The target database, 'sales', is participating in an availability group and is currently not "
    "accessible for queries. Either data movement is suspended or the availability replica is not "
    "enabled for read access."
)
SALES, SNAP = 5, 6  # database_ids: after master, tempdb, model, msdb


@pytest.fixture
def server() -> Iterator[TdsServer]:
    with TdsServer(DmvState()) as srv:
        yield srv


@contextlib.contextmanager
def connected(server: TdsServer, timeout: int = 0, autocommit: bool = True) -> Iterator[Any]:
    pyodbc.pooling = False
    conn = pyodbc.connect(server.connection_string(password=SECRET), autocommit=autocommit, timeout=5)
    conn.timeout = timeout  # for cursors created from now on
    try:
        yield conn
    finally:
        conn.close()


def run(conn: Any, query: Query | str) -> tuple[list[str], list[tuple[object, ...]]]:
    cursor = conn.cursor()
    try:
        cursor.execute(query.sql if isinstance(query, Query) else query)
        names = [d[0] for d in cursor.description]
        return names, [tuple(r) for r in cursor.fetchall()]
    finally:
        cursor.close()


def select_names(sql: str) -> list[str]:
    select = sqlglot.parse_one(sql, read="tsql")
    assert isinstance(select, exp.Select)
    return [e.alias_or_name for e in select.expressions]


def by_file(rows: list[tuple[object, ...]]) -> dict[tuple[object, object], tuple[object, ...]]:
    return {(r[0], r[1]): r for r in rows}


def wait_for(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# --- SQL and state (no driver) ---------------------------------------------------------------


@pytest.mark.parametrize("query", mssql_sql.ALL_QUERIES, ids=lambda q: q.name)
def test_statement_parses_as_tsql_with_the_columns_the_server_answers(query: Query) -> None:
    assert select_names(query.sql) == [c.name for c in STATEMENTS[query.name][1]]


def test_mixed_latency_is_split_exactly_and_deterministically() -> None:
    load: Load = {("sales", "data", "read"): Stream(100, [(200, 3), (1000, 1)])}
    state = DmvState()
    for _ in range(4):
        state.advance(1, load)
    data = state.file("sales", 1)
    assert (data.reads, data.read_stall_us) == (400, 300 * 200 + 100 * 1000)
    # A three-way mix of 10 I/Os: floor of the cumulative shares (3, 3, 4), the same on every run.
    odd = DmvState()
    odd.advance(1, {("sales", "data", "read"): Stream(10, [(100, 1), (200, 1), (300, 1)])})
    assert odd.file("sales", 1).read_stall_us == 3 * 100 + 3 * 200 + 4 * 300
    again = DmvState()
    again.advance(1, {("sales", "data", "read"): Stream(10, [(100, 1), (200, 1), (300, 1)])})
    assert again.file_stats_rows() == odd.file_stats_rows()
    assert again.wait_stats_rows() == odd.wait_stats_rows()


def test_io_is_spread_over_the_online_files_of_the_role() -> None:
    state = DmvState()
    assert state.attach("sales", [(ROWS, "/mssql/data2/sales_2.ndf")]) == [3]
    load: Load = {("sales", "data", "read"): Stream(101, 500), ("sales", "log", "write"): Stream(0.5, 300)}
    state.advance(1, load)
    assert (state.file("sales", 1).reads, state.file("sales", 3).reads) == (51, 50)
    state.advance(1, load)
    assert (state.file("sales", 1).reads, state.file("sales", 3).reads) == (101, 101)
    assert state.file("sales", 2).writes == 1  # half an I/O per second: one after two seconds
    state.set_offline("sales", 3)
    state.advance(1, load)
    assert (state.file("sales", 1).reads, state.file("sales", 3).reads) == (202, 101)
    state.set_offline("sales")
    state.advance(1, load)  # an offline database does no I/O
    assert state.file("sales", 1).reads == 202


def test_waits_follow_the_io() -> None:
    state = DmvState()
    state.advance(
        10,
        {
            ("sales", "data", "read"): Stream(100, 425),
            ("sales", "data", "write"): Stream(20, 900),  # checkpoint: no user wait
            ("sales", "log", "write"): Stream(50, 300, io_bytes=61440),
            ("tempdb", "data", "read"): Stream(10, 1000, io_bytes=65536, wait="IO_COMPLETION"),
        },
    )
    waits = {r[0]: r[1:] for r in state.wait_stats_rows()}
    assert waits["PAGEIOLATCH_SH"] == (1000, 1000 * 430 // 1000, 1000 * 5 // 1000)
    assert waits["WRITELOG"] == (500, 500 * 350 // 1000, 500 * 5 // 1000)  # the flush + 50 µs
    assert waits["IO_COMPLETION"] == (100, 100 * 1005 // 1000, 0)
    assert waits["PAGEIOLATCH_EX"] == waits["ASYNC_IO_COMPLETION"] == (0, 0, 0)
    assert "SOS_SCHEDULER_YIELD" not in waits and state.waits["SOS_SCHEDULER_YIELD"].tasks == 100
    log = state.file("sales", 2)
    assert (log.writes, log.bytes_written, log.write_stall_us) == (500, 500 * 61440, 500 * 300)


def test_restart_zeroes_counters_and_moves_the_start_time() -> None:
    state = DmvState(start_time=datetime(2025, 1, 6, 8, 0))
    state.advance(60, {("sales", "data", "read"): Stream(100, 425)})
    state.restart()
    assert state.start_time == datetime(2025, 1, 7, 8, 1)  # a day up, then a minute of load
    assert all(r[5:] == (0,) * 8 for r in state.file_stats_rows())
    assert all(r[1:] == (0, 0, 0) for r in state.wait_stats_rows())
    state.restart()  # at once again: still a new start time
    assert state.start_time == datetime(2025, 1, 7, 8, 1, 1)


def test_login7_password_is_decoded_and_never_shown() -> None:
    obfuscated = bytes(
        (((b << 4) & 0xF0) | (b >> 4)) ^ 0xA5 for b in "pa}ss;wörd".encode("utf-16-le")
    )  # what the client sends: nibbles swapped, then XOR 0xA5
    assert tds.decode_password(obfuscated) == "pa}ss;wörd"
    login = tds.Login(0x74000004, 4096, "h", "lunlat", SECRET, "app", "srv", "lib", "", "master")
    assert SECRET not in repr(login)


# --- through pyodbc + FreeTDS ----------------------------------------------------------------


@needs_driver
def test_every_statement_answers_its_columns_and_values(server: TdsServer) -> None:
    server.state.advance(
        10,
        {
            ("sales", "data", "read"): Stream(100, 425),
            ("sales", "log", "write"): Stream(50, 300, io_bytes=61440),
            ("sales_snap", "data", "read"): Stream(10, [(250, 1), (4000, 1)], io_bytes=65536),
        },
    )
    with connected(server) as conn:
        names, files = run(conn, mssql_sql.FILE_STATS)
        assert names == select_names(mssql_sql.FILE_STATS.sql)
        assert len(files) == 9 + 4  # master, model, msdb: 2 each; tempdb 3; sales, sales_snap 2 each
        rows = by_file(files)
        assert rows[(SALES, 1)] == (
            *(SALES, 1, "sales", 0, "/var/opt/mssql/data/sales.mdf"),
            *(1000, 1000 * 8192, 425, 0, 0, 0, 0, 0),  # no Resource Governor queueing
        )
        assert rows[(SALES, 2)] == (
            *(SALES, 2, "sales", 1, "/var/opt/mssql/log/sales_log.ldf"),
            *(0, 0, 0, 500, 500 * 61440, 150, 0, 0),
        )
        assert rows[(SNAP, 1)][5:9] == (100, 100 * 65536, (50 * 250 + 50 * 4000) // 1000, 0)  # no writes
        assert rows[(2, 3)][2:5] == ("tempdb", 0, "/var/opt/mssql/data/tempdb2.ndf")
        assert all(type(v) is int for r in files for i, v in enumerate(r) if i not in (2, 4))
        names, older = run(conn, mssql_sql.FILE_STATS_NO_QUEUED)  # the 2012 form: the same less two
        assert (
            names
            == select_names(mssql_sql.FILE_STATS_NO_QUEUED.sql)
            == select_names(mssql_sql.FILE_STATS.sql)[:-2]
        )
        assert sorted(older) == sorted(r[:-2] for r in files)

        names, waits = run(conn, mssql_sql.WAIT_STATS)
        assert names == select_names(mssql_sql.WAIT_STATS.sql)
        assert sorted(str(w[0]) for w in waits) == sorted(mssql_sql.IO_WAITS)  # SOS_SCHEDULER_YIELD filtered
        wait = {w[0]: w[1:] for w in waits}
        assert wait["PAGEIOLATCH_SH"] == (1100, (1000 * 430 + 50 * 255 + 50 * 4005) // 1000, 5)
        assert wait["WRITELOG"] == (500, 500 * 350 // 1000, 2)

        names, server_rows = run(conn, mssql_sql.SERVER)
        assert names == select_names(mssql_sql.SERVER.sql)
        # 2025-01-06 08:00:00 as seconds since 1970; not Amazon RDS
        assert server_rows == [("SQL1", 16, 1736150400, 0)]
        names, edition = run(conn, mssql_sql.EDITION)
        assert names == select_names(mssql_sql.EDITION.sql) and edition == [(3,)]  # Enterprise
        names, identity = run(conn, mssql_sql.SERVER_SQL_DATABASE)  # no view: any edition answers it
        assert names == select_names(mssql_sql.SERVER_SQL_DATABASE.sql)
        assert identity == [("SQL1", 16, None, "READ_WRITE")]  # Edition: Azure only; Updateability: any

        names, host = run(conn, mssql_sql.HOST_INFO)
        assert names == select_names(mssql_sql.HOST_INFO.sql) and host == [("Linux",)]

        names, volumes = run(conn, mssql_sql.VOLUMES)
        assert names == select_names(mssql_sql.VOLUMES.sql)
        assert len(volumes) == len(files) and all(v[2:] == (None, None) for v in volumes)  # Linux: NULL

        names, own = run(conn, mssql_sql.DB_FILE_STATS)  # the Azure SQL Database form: DB_ID()'s and tempdb's
        assert names == select_names(mssql_sql.DB_FILE_STATS.sql) == select_names(mssql_sql.FILE_STATS.sql)
        # the login's database and tempdb, each named DB_NAME(): the connection's database
        assert sorted(own) == sorted(
            (*r[:2], "master", *r[3:]) for r in files if r[2] in ("master", "tempdb")
        )
        with pytest.raises(pyodbc.ProgrammingError, match=r"sys\.dm_db_wait_stats.*\(208\)"):
            run(conn, mssql_sql.DB_WAIT_STATS)  # Azure only: not on an Enterprise edition
    assert server.logins == [("lunlat", "master")]
    assert server.last_password == SECRET
    assert not any(SECRET in b for b in server.batches)
    n = len(mssql_sql.ALL_QUERIES)
    assert server.batches[-n:] == [q.sql for q in mssql_sql.ALL_QUERIES]
    assert all(b.startswith("sp_datatype_info_100 ") for b in server.batches[:-n])  # pyodbc's connect


@needs_driver
def test_offline_detached_and_attached_files(server: TdsServer) -> None:
    state = server.state
    with connected(server) as conn:
        state.set_offline("sales_snap")
        state.set_offline("sales", 2)
        rows = by_file(run(conn, mssql_sql.FILE_STATS)[1])
        assert {k for k in rows if k[0] in (SALES, SNAP)} == {(SALES, 1)}
        state.set_online("sales_snap")
        state.set_online("sales")
        state.detach("sales_snap")
        assert state.attach("sales", [(LOG, "/mssql/log/sales_log2.ldf")]) == [3]
        assert state.attach("orders", state.default_files("orders")) == [1, 2]
        assert state.database_id("orders") == SNAP  # SQL Server reuses the lowest free database_id
        rows = by_file(run(conn, mssql_sql.FILE_STATS)[1])
        user_files = {k for k in rows if k[0] in (SALES, SNAP)}
        assert user_files == {(SALES, 1), (SALES, 2), (SALES, 3), (SNAP, 1), (SNAP, 2)}
        assert rows[(SALES, 3)][2:5] == ("sales", 1, "/mssql/log/sales_log2.ldf")
        assert rows[(SNAP, 1)][2:5] == ("orders", 0, "/var/opt/mssql/data/orders.mdf")


@needs_driver
def test_counters_advance_exactly_between_scrapes(server: TdsServer) -> None:
    with connected(server) as conn:
        stalls = []
        for _ in range(4):  # 3 reads of 333 µs a scrape: 999 µs kept exactly, floored when answered
            server.state.advance(1, {("sales", "data", "read"): Stream(3, 333)})
            stalls.append(by_file(run(conn, mssql_sql.FILE_STATS)[1])[(SALES, 1)][5:8])
        assert stalls == [(3, 3 * 8192, 0), (6, 6 * 8192, 1), (9, 9 * 8192, 2), (12, 12 * 8192, 3)]
        server.state.advance(10, {("sales", "data", "read"): Stream(100, 425)})
        row = by_file(run(conn, mssql_sql.FILE_STATS)[1])[(SALES, 1)]
        assert row[5:8] == (1012, 1012 * 8192, (12 * 333 + 1000 * 425) // 1000)


@needs_driver
def test_results_are_split_at_the_negotiated_packet_size() -> None:
    state = DmvState(databases=[f"warehouse_{i:02d}" for i in range(40)])
    state.advance(1, {(f"warehouse_{i:02d}", "data", "read"): Stream(i, 100 * i) for i in range(40)})
    with TdsServer(state, packet_size=512) as srv, connected(srv) as conn:
        _, files = run(conn, mssql_sql.FILE_STATS)
        assert files == state.file_stats_rows()
        assert len(files) == 9 + 80


@needs_driver
def test_transaction_manager_requests_when_not_autocommit(server: TdsServer) -> None:
    with connected(server, autocommit=False) as conn:
        assert run(conn, mssql_sql.SERVER)[1][0][0] == "SQL1"
        conn.commit()


@needs_driver
def test_query_timeout_sends_attention_and_the_connection_survives(server: TdsServer) -> None:
    server.slow[mssql_sql.FILE_STATS.name] = 10
    with connected(server, timeout=1) as conn:
        started = time.monotonic()
        with pytest.raises(pyodbc.OperationalError) as caught:
            run(conn, mssql_sql.FILE_STATS)
        assert 0.9 < time.monotonic() - started < 3
        assert caught.value.args[0] == "HYT00"
        assert classify(caught.value).kind is Kind.TIMEOUT
        assert server.attentions == 1
        del server.slow[mssql_sql.FILE_STATS.name]
        assert run(conn, mssql_sql.SERVER)[1][0][0] == "SQL1"
        assert len(run(conn, mssql_sql.FILE_STATS)[1]) == 13


@needs_driver
def test_ignored_attention_times_out_twice_as_late_and_kills_the_connection(server: TdsServer) -> None:
    server.slow[mssql_sql.SERVER.name] = 10
    server.ignore_attention = True
    with connected(server, timeout=1) as conn:
        started = time.monotonic()
        with pytest.raises(pyodbc.OperationalError) as caught:
            run(conn, mssql_sql.SERVER)
        assert 1.8 < time.monotonic() - started < 4
        assert caught.value.args[0] == "HYT00"
        with pytest.raises(pyodbc.Error):
            run(conn, mssql_sql.WAIT_STATS)


@needs_driver
def test_dropped_connection_mid_scrape(server: TdsServer) -> None:
    with connected(server) as conn:
        run(conn, mssql_sql.SERVER)
        server.drop_next_query = True
        with pytest.raises(pyodbc.Error) as caught:
            run(conn, mssql_sql.FILE_STATS)
        assert type(caught.value) is pyodbc.Error  # the base class, not OperationalError
        assert caught.value.args[0] == "01000" and "20017" in caught.value.args[1]
        assert classify(caught.value).kind is Kind.LOST
        with pytest.raises(pyodbc.OperationalError) as later:
            run(conn, mssql_sql.FILE_STATS)
        assert later.value.args[0] == "08S01"
    assert not server.drop_next_query
    with connected(server) as conn:  # one connection dropped, the next one served
        assert len(run(conn, mssql_sql.FILE_STATS)[1]) == 13
    assert wait_for(lambda: server.open_connections == 0)


@needs_driver
def test_refused_login(server: TdsServer) -> None:
    server.refuse_logins = True
    with pytest.raises(pyodbc.Error, match=r"Login failed for user 'lunlat'\. \(18456\)"):
        pyodbc.connect(server.connection_string(password=SECRET), autocommit=True, timeout=5)
    server.refuse_logins = False
    with pytest.raises(pyodbc.Error, match=r"18456"):
        pyodbc.connect(server.connection_string(password=SECRET, database="nope"), autocommit=True, timeout=5)
    assert server.logins == [("lunlat", "master"), ("lunlat", "nope")]
    assert not server.batches
    assert wait_for(lambda: server.open_connections == 0)


@needs_driver
@pytest.mark.parametrize(("number", "text"), [(300, DENIED), (976, NOT_READABLE)])
def test_denied_statement(server: TdsServer, number: int, text: str) -> None:
    server.deny[mssql_sql.WAIT_STATS.name] = (number, text)
    with connected(server) as conn:
        with pytest.raises(pyodbc.ProgrammingError) as caught:
            run(conn, mssql_sql.WAIT_STATS)
        assert caught.value.args[0] == "42000"
        assert f"{text} ({number})" in caught.value.args[1]
        if number == 300:
            assert classify(caught.value).kind is Kind.NO_GRANT
        assert len(run(conn, mssql_sql.FILE_STATS)[1]) == 13  # the rest still answers


@needs_driver
def test_drifted_sql_fails_loudly(server: TdsServer) -> None:
    with connected(server) as conn:
        reflowed = " ".join(mssql_sql.SERVER.sql.split()).replace(", ", ",\n\t")
        assert run(conn, reflowed)[1][0][0] == "SQL1"  # whitespace is not drift
        drifted = mssql_sql.FILE_STATS.sql.replace("mf.state = 0", "mf.state <> 6")
        with pytest.raises(
            pyodbc.ProgrammingError, match=r"Invalid object name 'sys\.dm_io_virtual_file_stats'"
        ):
            run(conn, drifted)
        with pytest.raises(pyodbc.ProgrammingError, match=r"\(102\)"):
            run(conn, "SELEC 1")


@needs_driver
def test_restart_zeroes_counters_and_closes_connections(server: TdsServer) -> None:
    server.state.advance(10, {("sales", "data", "read"): Stream(100, 425)})
    with connected(server) as conn:
        before = run(conn, mssql_sql.SERVER)[1][0][2]
        assert by_file(run(conn, mssql_sql.FILE_STATS)[1])[(SALES, 1)][5] == 1000
        server.restart()
        assert server.open_connections == 0
        with pytest.raises(pyodbc.Error) as caught:
            run(conn, mssql_sql.FILE_STATS)
        assert classify(caught.value).kind is Kind.LOST
    with connected(server) as conn:
        after = run(conn, mssql_sql.SERVER)[1][0][2]
        assert isinstance(before, int) and isinstance(after, int) and after > before
        assert all(r[5:] == (0,) * 8 for r in run(conn, mssql_sql.FILE_STATS)[1])


@needs_driver
def test_login_delay_past_the_login_timeout(server: TdsServer) -> None:
    server.login_delay = 10
    started = time.monotonic()
    with pytest.raises(pyodbc.OperationalError) as caught:
        pyodbc.connect(server.connection_string(password=SECRET), autocommit=True, timeout=1)
    assert caught.value.args[0] == "HYT00"
    assert time.monotonic() - started < 3


@needs_driver
def test_freetds_takes_braced_values_verbatim(server: TdsServer) -> None:
    """FreeTDS 1.3.17 keeps '}}' inside a braced value as is (the ODBC rule would make it '}'):
    a password holding '}' must not be doubled for this driver."""
    base = f"DRIVER={{FreeTDS}};SERVER=127.0.0.1;PORT={server.port};TDS_Version=7.4;Encryption=off;UID=lunlat"
    for pwd, arrives in (("{p}}w;x}", "p}}w;x"), ("{p}w;x}", "p}w;x")):
        pyodbc.connect(f"{base};PWD={pwd};APP=x", autocommit=True, timeout=5).close()
        assert server.last_password == arrives


@needs_driver
def test_stop_ends_every_thread_and_socket() -> None:
    before = {t.ident for t in threading.enumerate()}
    srv = TdsServer().start()
    srv.slow[mssql_sql.SERVER.name] = 30
    pyodbc.pooling = False
    idle = pyodbc.connect(srv.connection_string(password=SECRET), autocommit=True, timeout=5)
    busy = pyodbc.connect(srv.connection_string(password=SECRET), autocommit=True, timeout=5)
    failure: list[BaseException] = []

    def stuck() -> None:
        try:
            run(busy, mssql_sql.SERVER)
        except pyodbc.Error as exc:
            failure.append(exc)

    client = threading.Thread(target=stuck)
    client.start()
    assert wait_for(lambda: len(srv.batches) > 0 and srv.batches[-1] == mssql_sql.SERVER.sql)
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 2
    client.join(5)
    assert failure and isinstance(failure[0], pyodbc.Error)
    idle.close()
    busy.close()
    gc.collect()
    assert {t.ident for t in threading.enumerate()} == before
    assert srv.open_connections == 0
