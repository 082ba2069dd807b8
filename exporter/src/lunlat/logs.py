"""Structured logging in the two formats Prometheus exporters use: logfmt and JSON.

Call sites pass key/values as `extra={"kv": {...}}`; the formatter renders them after `msg`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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
