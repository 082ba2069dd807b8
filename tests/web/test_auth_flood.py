"""Basic auth under a flood of wrong passwords, and bcrypt's 72-byte limit, on a real WebGate.

The hashes are real bcrypt hashes and every check runs the real bcrypt.checkpw: the tests only watch
which passwords reach it (and, to hold bcrypt busy for as long as a test needs, make a flood's check
wait before it runs).
"""

from __future__ import annotations

import base64
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import bcrypt
import pytest

from lunlat.web import config as webconfig
from lunlat.web.config import WebGate

PASSWORD = b"s3cret-scraper"
# Cost 12 (~0.3 s a check): one flood check holds bcrypt long enough for a scraper to queue behind.
SCRAPER_HASH = bcrypt.hashpw(PASSWORD, bcrypt.gensalt(12)).decode()
# Cost 4: wrong passwords against it are cheap, so a test can send hundreds in under a second. What
# evicts a cached success is the number of failures, not their cost.
CHEAP_HASH = bcrypt.hashpw(b"cheap", bcrypt.gensalt(4)).decode()
CHECK_DEADLINE = 5.0  # generous: a cached answer takes microseconds
FLOOD = 32  # concurrent wrong-password checks, far more than may wait for bcrypt


def header(user: bytes, password: bytes) -> str:
    return "Basic " + base64.b64encode(user + b":" + password).decode()


def wrong_passwords() -> Iterator[bytes]:
    return (f"wrong-{n}".encode() for n in itertools.count())


@pytest.fixture
def gate(tmp_path: Path) -> WebGate:
    path = tmp_path / "web.yml"
    path.write_text(
        f"basic_auth_users:\n  prometheus: '{SCRAPER_HASH}'\n  legacy: '{CHEAP_HASH}'\n", encoding="utf-8"
    )
    return WebGate.load(path)


class Bcrypt:
    """Records the passwords that reach bcrypt.checkpw; while `hold` is clear, checks of passwords
    other than the scraper's wait before running, so the flood keeps bcrypt busy."""

    def __init__(self, real: Callable[[bytes, bytes], bool]) -> None:
        self.real = real
        self.seen: list[bytes] = []
        self.entered = threading.Event()
        self.hold = threading.Event()
        self.hold.set()

    def checkpw(self, password: bytes, hashed: bytes) -> bool:
        self.seen.append(password)
        if password != PASSWORD:
            self.entered.set()
            self.hold.wait(30)
        return self.real(password, hashed)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Bcrypt]:
    watched = Bcrypt(bcrypt.checkpw)
    monkeypatch.setattr(bcrypt, "checkpw", watched.checkpw)  # webconfig calls bcrypt.checkpw
    yield watched
    watched.hold.set()  # never leave a flood thread waiting
    while Pending.started:
        Pending.started.pop().join(60)


class Pending:
    """A check running in its own thread."""

    started: ClassVar[list[threading.Thread]] = []  # joined after each test: no bcrypt left running at exit

    def __init__(self, check: Callable[[], bool]) -> None:
        self._answer: list[bool] = []
        self._thread = threading.Thread(target=lambda: self._answer.append(check()), daemon=True)
        self._thread.start()
        Pending.started.append(self._thread)

    def done(self) -> bool:
        return not self._thread.is_alive()

    def __call__(self) -> bool | None:
        """Its answer, waiting up to CHECK_DEADLINE; None when it is still waiting."""
        self._thread.join(CHECK_DEADLINE)
        return self._answer[0] if self._answer else None


def trying(gate: WebGate, user: bytes, password: bytes) -> Pending:
    return Pending(lambda: gate.authorized(gate.current(), header(user, password)))


def settled(checks: list[Pending], count: int) -> bool:
    """True once `count` of the threads have answered (within CHECK_DEADLINE)."""
    deadline = time.monotonic() + CHECK_DEADLINE
    while time.monotonic() < deadline:
        if sum(check.done() for check in checks) >= count:
            return True
        time.sleep(0.01)
    return False


def test_a_flood_of_wrong_passwords_does_not_make_the_scraper_wait_for_bcrypt(
    gate: WebGate, spy: Bcrypt
) -> None:
    config = gate.current()
    scraper = header(b"prometheus", PASSWORD)
    assert gate.authorized(config, scraper)
    # Many more distinct failures than the cache holds: none of them may evict the success.
    for password in itertools.islice(wrong_passwords(), 3 * webconfig.AUTH_CACHE_SIZE):
        assert not gate.authorized(config, header(b"legacy", password))
    # Then the flood holds bcrypt (a wrong password for the scraper's own user, at cost 12).
    spy.hold.clear()
    flood = trying(gate, b"prometheus", b"flood")
    assert spy.entered.wait(CHECK_DEADLINE)
    answers = []
    for _ in range(5):
        answers.append(trying(gate, b"prometheus", PASSWORD)())
        if answers[-1] is not True:
            break
    spy.hold.set()
    assert answers == [True] * 5, "the scraper's checks waited for the bcrypt lock held by the flood"
    assert spy.seen.count(PASSWORD) == 1  # its success was cached once and never checked again
    assert flood() is False


def test_past_the_bound_unauthenticated_checks_are_refused_without_bcrypt(
    gate: WebGate, spy: Bcrypt, caplog: pytest.LogCaptureFixture
) -> None:
    config = gate.current()
    scraper = header(b"prometheus", PASSWORD)
    assert gate.authorized(config, scraper)
    spy.hold.clear()
    passwords = wrong_passwords()
    flood = [trying(gate, b"prometheus", next(passwords)) for _ in range(FLOOD)]
    assert spy.entered.wait(CHECK_DEADLINE)
    # bcrypt is held: AUTH_PENDING_MAX checks wait for it, the others are answered (401) at once.
    assert settled(flood, FLOOD - webconfig.AUTH_PENDING_MAX), "checks past the bound waited for bcrypt"
    late = trying(gate, b"nobody", next(passwords))
    assert late() is False, "a check past the bound waited for bcrypt"
    assert trying(gate, b"prometheus", PASSWORD)() is True
    spy.hold.set()
    assert [answer() for answer in flood] == [False] * FLOOD
    assert len(spy.seen) - 1 == webconfig.AUTH_PENDING_MAX  # the scraper's first check, then the admitted
    warnings = [r for r in caplog.records if "refused without bcrypt" in r.getMessage()]
    assert len(warnings) == 1  # one line for the whole flood, not one per refusal
    # Once the flood is over, checks run again: a new wrong password reaches bcrypt.
    assert not gate.authorized(config, header(b"legacy", b"after"))
    assert spy.seen[-1] == b"after"


def test_unknown_users_never_fill_the_successes(
    tmp_path: Path, spy: Bcrypt, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unknown users are checked against a fake hash whose password is in the source: matching it
    must not count as a success, or it would evict real ones."""
    monkeypatch.setattr(webconfig, "AUTH_CACHE_SIZE", 3)  # the fake hash costs 10: keep the flood short
    hashed = bcrypt.hashpw(PASSWORD, bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n", encoding="utf-8")
    gate = WebGate.load(path)
    config = gate.current()
    assert gate.authorized(config, header(b"prom", PASSWORD))
    for n in range(3 * webconfig.AUTH_CACHE_SIZE):
        assert not gate.authorized(config, header(f"nobody-{n}".encode(), webconfig.FAKE_PASSWORD))
    assert gate.authorized(config, header(b"prom", PASSWORD))
    assert spy.seen.count(PASSWORD) == 1


def test_a_password_over_72_bytes_is_checked_on_its_first_72_as_go_does(tmp_path: Path) -> None:
    """x/crypto's CompareHashAndPassword (the toolkit's) hashes only the first 72 bytes of the
    password; Python's bcrypt 5 raises ValueError past 72 bytes instead."""
    long_password = b"0123456789abcdefghijklmnopqrstuvwxyz" * 2
    assert len(long_password) == 72
    hashed = bcrypt.hashpw(long_password, bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n", encoding="utf-8")
    gate = WebGate.load(path)
    config = gate.current()
    assert gate.authorized(config, header(b"prom", long_password))
    assert gate.authorized(config, header(b"prom", long_password + b"-anything after byte 72"))
    assert not gate.authorized(config, header(b"prom", long_password[:71]))
    assert not gate.authorized(config, header(b"prom", b"X" + long_password[1:] + b"-tail"))


def test_a_password_that_is_not_utf8_is_compared_byte_for_byte(tmp_path: Path) -> None:
    """Go's Request.BasicAuth hands the decoded bytes to bcrypt as they are."""
    latin1 = "café".encode("latin-1")
    hashed = bcrypt.hashpw(latin1, bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n", encoding="utf-8")
    gate = WebGate.load(path)
    config = gate.current()
    assert gate.authorized(config, header(b"prom", latin1))
    assert not gate.authorized(config, header(b"prom", "café".encode()))
