"""Writing files so that no reader ever sees half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and one rename.

    Prometheus, Grafana, the FUSE daemon or a concurrent `lunlat lab` command reading `path` sees the
    old content or the new, never a mix; a crash leaves the old file and at worst a stray `.tmp`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)
