"""Structured logging in the two formats Prometheus exporters use: logfmt and JSON.

`get(__name__)` gives a logger whose calls take fields as keywords, one line per event, as Go's slog:
`log.warning("source failed", source=name, err=problem)`; the formatter renders them after `msg`.
`Once` is the one "log this only the first time" rule every module uses.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Hashable
from typing import Any

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
FORMATS = ("logfmt", "json")
_LEVEL_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "error",
}


def _timestamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "ts": _timestamp(record),
        "level": _LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
        "logger": record.name.removeprefix("lunlat."),
        "msg": record.getMessage(),
    }
    kv = getattr(record, "kv", None)
    if isinstance(kv, dict):
        fields.update(kv)
    if record.exc_info and record.exc_info[1] is not None:
        fields["err"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
    return fields


def _logfmt_value(value: Any) -> str:
    if isinstance(value, bool):  # as JSON and Go's slog write them, not Python's True/False
        return "true" if value else "false"
    if value is None:
        return '""'
    text = str(value)
    if text and not any(c in text for c in ' ="\\\n\t'):
        return text
    return (
        '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    )


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_logfmt_value(v)}" for k, v in _fields(record).items())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), default=str, ensure_ascii=False)


def setup(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger("lunlat")
    root.handlers[:] = [handler]
    root.setLevel(LEVELS[level])
    root.propagate = False


class Logger:
    """A `logging.Logger` whose calls take key/value fields as keywords (rendered after `msg`)."""

    __slots__ = ("_logger",)

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def _log(self, level: int, msg: str, exc_info: bool, fields: dict[str, Any]) -> None:
        if self._logger.isEnabledFor(level):
            # stacklevel 3: the record names the caller of debug()/info()…, not this module.
            self._logger.log(level, msg, exc_info=exc_info, extra={"kv": fields}, stacklevel=3)

    def debug(self, msg: str, /, *, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.DEBUG, msg, exc_info, fields)

    def info(self, msg: str, /, *, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.INFO, msg, exc_info, fields)

    def warning(self, msg: str, /, *, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.WARNING, msg, exc_info, fields)

    def error(self, msg: str, /, *, exc_info: bool = False, **fields: Any) -> None:
        self._log(logging.ERROR, msg, exc_info, fields)

    def is_enabled_for(self, level: int) -> bool:
        return self._logger.isEnabledFor(level)


def get(name: str) -> Logger:
    return Logger(name)


# How many distinct keys a `Once` remembers: a source that meets a new oddity on every scrape
# (a changing line, a changing error text) stops logging after this many instead of flooding.
ONCE_CAP = 256


class Once:
    """True the first time a key is seen, False afterwards (and for every key past the cap).

    Counters count every occurrence; the log names each distinct one once, so a persistent fault
    cannot fill a disk. Thread-safe: concurrent scrapes may share a source's Once.
    """

    def __init__(self, cap: int = ONCE_CAP) -> None:
        self._seen: set[Hashable] = set()
        self._cap = cap
        self._lock = threading.Lock()

    def first(self, key: Hashable) -> bool:
        with self._lock:
            if key in self._seen or len(self._seen) >= self._cap:
                return False
            self._seen.add(key)
            return True

    def forget(self, key: Hashable) -> None:
        """Log `key` again next time (its condition ended, e.g. a source recovered)."""
        with self._lock:
            self._seen.discard(key)
