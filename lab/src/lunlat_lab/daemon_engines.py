"""The lab's FUSE daemon engines: the one home of their names.

`native` (the default) is a C daemon on libfuse 3's low-level API (lab/native/labd.c), compiled
when the lab is installed (lab/hatch_build.py); `python` is the mfusepy daemon (daemon/filesystem.py).
Both serve the same service model and are started the same way, `python -m lunlat_lab.daemon --engine NAME ...`.
"""

from __future__ import annotations

from typing import Final, Literal

Engine = Literal["native", "python"]
ENGINES: Final[tuple[Engine, ...]] = ("native", "python")
DEFAULT_ENGINE: Final[Engine] = "native"


def parse_engine(name: str) -> Engine:
    """The engine called `name`; ValueError naming the engines otherwise."""
    for engine in ENGINES:
        if name == engine:
            return engine
    raise ValueError(f"unknown engine {name!r}; the lab has: {', '.join(ENGINES)}")
