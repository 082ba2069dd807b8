"""The biolatency engine's counters as the kernel tests compare them with diskstats: per op."""

from __future__ import annotations

from collections.abc import Mapping

from lunlat.sources.biolatency import Counters, Key


def by_op(counters: Mapping[Key, Counters]) -> dict[tuple[int, int], Counters]:
    """The counters of every size class added up, keyed (dev_t, op)."""
    out: dict[tuple[int, int], Counters] = {}
    for (dev, op, _size), c in counters.items():
        out[(dev, op)] = out.get((dev, op), Counters()) + c
    return out
