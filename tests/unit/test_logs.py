"""One line per event with keyword fields, in logfmt and JSON; one "only the first time" rule."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from lunlat import logs


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger("lunlat")
    saved = (root.handlers[:], root.level, root.propagate)
    out = io.StringIO()
    yield out
    root.handlers[:], root.level, root.propagate = saved


def _capture(out: io.StringIO, fmt: str, level: str = "debug") -> None:
    logs.setup(level, fmt)
    handler = logging.getLogger("lunlat").handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)


def test_keyword_fields_render_after_the_message_in_logfmt(stream: io.StringIO) -> None:
    _capture(stream, "logfmt")
    logs.get("lunlat.sources.x").warning(
        "source failed", source="oracle:Oracle", err='ORA-12541: no "listener"', tls=False, file=None
    )
    line = stream.getvalue()
    assert line.count("\n") == 1
    assert 'level=warn logger=sources.x msg="source failed" source=oracle:Oracle' in line
    assert 'err="ORA-12541: no \\"listener\\""' in line
    assert "tls=false" in line and 'file=""' in line


def test_the_same_fields_in_json(stream: io.StringIO) -> None:
    _capture(stream, "json")
    logs.get("lunlat.scrape").info("source recovered", source="diskstats", up=True, count=3)
    record = json.loads(stream.getvalue())
    assert record["msg"] == "source recovered" and record["logger"] == "scrape"
    assert record["source"] == "diskstats" and record["up"] is True and record["count"] == 3


def test_below_the_level_nothing_is_written_and_exc_info_is_one_field(stream: io.StringIO) -> None:
    _capture(stream, "logfmt", level="info")
    log = logs.get("lunlat.web.server")
    log.debug("hidden", client="1.2.3.4")
    assert stream.getvalue() == ""
    assert not log.is_enabled_for(logging.DEBUG)
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        log.error("request failed", exc_info=True)
    line = stream.getvalue()
    assert line.count("\n") == 1, "a traceback must not span lines"
    assert 'err="ValueError: bad\\nthing"' in line


def test_the_record_names_the_caller_not_the_logs_module(stream: io.StringIO) -> None:
    _capture(stream, "logfmt")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logging.getLogger("lunlat").addHandler(Keep())
    logs.get("lunlat.test").info("here")
    assert records[0].filename == "test_logs.py"


def test_once_is_true_the_first_time_per_key_up_to_its_cap_and_again_after_forget() -> None:
    once = logs.Once(cap=3)
    assert [once.first(k) for k in ("a", "a", "b", ("c", 1), ("c", 1))] == [True, False, True, True, False]
    assert once.first("d") is False, "past the cap nothing is logged: a flood of new keys stays bounded"
    once.forget("a")
    assert once.first("a") is True


def test_once_under_threads_says_first_exactly_once() -> None:
    once = logs.Once()
    results: list[bool] = []
    lock = threading.Lock()

    def check() -> None:
        first = once.first("same")
        with lock:
            results.append(first)

    threads = [threading.Thread(target=check) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
