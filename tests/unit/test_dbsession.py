"""The database session: bounded connect, backoff after failures, abandoned connects closed, gates."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from lunlat.engines.dbsession import Classified, Kind, QueryGates, Session
from lunlat.sources.base import SourceError
from tests.support.fake_clock import FakeClock


class Conn:
    def __init__(self) -> None:
        self.closed = threading.Event()

    def cursor(self) -> None:
        raise AssertionError("the session never runs queries")

    def close(self) -> None:
        self.closed.set()


def classify(exc: BaseException) -> Classified:
    return Classified(Kind.LOST, "ORA-12541", str(exc))


def test_connect_failures_back_off_doubling_up_to_the_cap_and_waiting_is_not_counted() -> None:
    clock = FakeClock()
    attempts: list[float] = []

    def refuse() -> Conn:
        attempts.append(clock.now)
        raise ConnectionRefusedError("ORA-12541: TNS:no listener")

    session: Session[Conn] = Session("oracle:X", refuse, classify, 1.0, clock, backoff_max=4.0)
    waits = []
    for _ in range(40):
        try:
            session.connection()
        except SourceError as exc:
            waits.append((exc.reason, exc.count))
            assert "ORA-12541" in str(exc)
        clock.now += 0.5
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps[:4] == [1.0, 2.0, 4.0, 4.0]  # 1 s, doubling, capped at backoff_max
    assert sum(count for _, count in waits) == len(attempts)
    assert {reason for reason, _ in waits} == {"connect_failed"}


def test_success_resets_the_backoff() -> None:
    clock = FakeClock()
    fail = [True]

    def connect() -> Conn:
        if fail[0]:
            raise OSError("down")
        return Conn()

    session: Session[Conn] = Session("s", connect, classify, 1.0, clock)
    with pytest.raises(SourceError):
        session.connection()
    fail[0] = False
    clock.now += 1.0
    session.connection()
    session.lost("ORA-03113")
    with pytest.raises(SourceError) as waiting:  # lost: wait the first backoff step again, not a longer one
        session.connection()
    assert waiting.value.count == 0
    clock.now += 1.0
    assert session.connection() is not None
    assert session.connects == 2


def test_a_hung_connect_is_abandoned_at_the_timeout_and_its_late_connection_closed() -> None:
    release = threading.Event()
    late = Conn()

    def hang() -> Conn:
        release.wait(10)
        return late

    session: Session[Conn] = Session("s", hang, classify, 0.2)
    with pytest.raises(SourceError) as caught:
        session.connection()
    assert caught.value.reason == "connect_timeout" and "0.2 s" in str(caught.value)
    release.set()
    assert late.closed.wait(5), "a connection that arrives after the timeout must be closed, not leaked"
    assert not session.connected


def test_the_drivers_own_login_timeout_is_the_same_failure_as_the_sessions_bound() -> None:
    """FreeTDS gives up a silent server's login with HYT00 after the same timeout_seconds the
    session bounds the connect by: whichever fires first, one reason and one code, so the scraper
    logs a silent server once rather than each time the race falls the other way."""
    clock = FakeClock()

    def driver_gives_up() -> Conn:
        raise RuntimeError("[HYT00] [FreeTDS][SQL Server]Timeout expired (0) (SQLDriverConnect)")

    def hang() -> Conn:
        threading.Event().wait(2)
        raise AssertionError("abandoned")

    def as_timeout(exc: BaseException) -> Classified:
        return Classified(Kind.TIMEOUT, "HYT00", str(exc))

    seen = []
    for connect, timeout in ((driver_gives_up, 1.0), (hang, 0.2)):
        session: Session[Conn] = Session(f"s{timeout}", connect, as_timeout, timeout, clock)
        with pytest.raises(SourceError) as caught:
            session.connection()
        seen.append((caught.value.reason, caught.value.code))
        assert "connect took longer than" in str(caught.value)
    assert seen == [("connect_timeout", ""), ("connect_timeout", "")]


def test_a_source_error_from_connect_keeps_its_reason() -> None:
    def no_password() -> Conn:
        raise SourceError("connect_failed", "password: environment variable X is not set")

    session: Session[Conn] = Session("s", no_password, classify, 1.0)
    with pytest.raises(SourceError, match="X is not set"):
        session.connection()


def test_drop_closes_the_connection_and_the_next_call_reconnects_at_once() -> None:
    made: list[Conn] = []

    def connect() -> Conn:
        made.append(Conn())
        return made[-1]

    session: Session[Conn] = Session("s", connect, classify, 1.0)
    first = session.connection()
    session.drop("query timeout")
    assert made[0].closed.is_set()
    assert session.connection() is not first


def test_query_gates_close_for_a_while_and_report_reopening() -> None:
    clock = FakeClock()
    gates = QueryGates(retry_after=600, clock=clock)
    assert gates.open("asm") and not gates.reopen("asm")
    gates.close("asm")
    assert not gates.open("asm")
    clock.now += 599
    assert not gates.open("asm")
    clock.now += 1
    assert gates.open("asm")
    assert gates.reopen("asm") and not gates.reopen("asm")


def test_query_gates_back_off_doubling_and_a_new_session_opens_them_at_once() -> None:
    # A grant restored by a DBA is seen at the next session (issue 43), not after a fixed pause;
    # a grant that stays missing is asked for less and less often, up to the cap.
    clock = FakeClock()
    gates = QueryGates(retry_after=60, retry_max=600, clock=clock)
    pauses = []
    for _ in range(6):
        pauses.append(gates.close("data_directory"))
        clock.now += pauses[-1] - 1
        assert not gates.open("data_directory")
        clock.now += 1
        assert gates.open("data_directory")
    assert pauses == [60, 120, 240, 480, 600, 600]
    gates.close("data_directory")
    gates.open_all()  # a new session (or a config reload)
    assert gates.open("data_directory")
    assert gates.close("data_directory") == 600  # still missing: the backoff goes on
    assert gates.reopen("data_directory")  # it answered: the backoff starts again
    assert gates.close("data_directory") == 60


def test_no_new_attempt_starts_while_an_abandoned_one_still_hangs() -> None:
    clock = FakeClock()
    release = threading.Event()
    started: list[float] = []

    def hang() -> Conn:
        started.append(clock.now)
        release.wait(10)
        raise ConnectionResetError("peer went away")

    session: Session[Conn] = Session("s", hang, classify, 0.05, clock)
    reasons = []
    for _ in range(5):
        clock.now += 100  # past every backoff
        with pytest.raises(SourceError) as caught:
            session.connection()
        reasons.append((caught.value.reason, caught.value.count, caught.value.code))
    assert len(started) == 1, "each retry started another connect while the first still hung"
    assert reasons == [("connect_timeout", 1, "")] * 5  # one kind of failure: logged once
    release.set()
    for _ in range(100):  # the hung attempt ends; the next retry is a real attempt again
        clock.now += 100
        with pytest.raises(SourceError):
            session.connection()
        if len(started) == 2:
            break
        time.sleep(0.02)  # the hung thread needs a moment to see the release
    assert len(started) == 2
