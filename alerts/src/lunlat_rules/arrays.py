"""The array side (alerts/tests/array.test.yml, test_arrays.py): each array exporter's latency by
NAA (alerts/goals.yaml `arrays`: which metrics, unit and labels; the file cites each exporter's
format), in its op's group lunlat-latency-{read,write} beside the breach alerts whose cause reads
it, and the host's latency minus it, per LUN, once a minute in CONTEXT_GROUP (only the dashboards
read it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lunlat import contract
from lunlat.goals import PER_SECOND, Array, ArrayNaa, Goals
from lunlat.promql.recorded import ARRAY_LATENCY, BREACH_WINDOW, HOST_MINUS_ARRAY, LATENCY, OPS
from lunlat_rules.rulefmt import record


def array_rules(goals: Goals, ops: Sequence[str] = OPS) -> list[dict[str, Any]]:
    """Each array exporter's latency by NAA (alerts/goals.yaml `arrays`: which metrics, unit and
    labels; the file cites each exporter's format)."""
    window = BREACH_WINDOW
    return [
        record(
            ARRAY_LATENCY.format(window=window), _array_latency(array, op, window), op=op, array=array.name
        )
        for array in goals.arrays
        for op in ops
    ]


def host_minus_array(goals: Goals) -> list[dict[str, Any]]:
    """The host's latency minus the array's, per LUN and op. A LUN whose NAA two arrays report (Pure
    ActiveCluster, a mirrored LUN) is compared with the slower.

    Once a minute, not beside the averages every 15 s: each difference joins every LUN's
    lunlat_lun_info for its NAA, and only the dashboards read it (issue 41: the two were a tenth of
    lunlat-latency's time at 50 hosts, docs/benchmarks.md)."""
    if not goals.arrays:
        return []
    window = BREACH_WINDOW
    array_series = ARRAY_LATENCY.format(window=window)
    info = (
        "max by (job, instance, lun, naa) "
        f'({contract.LUN_INFO.name}{{{goals.selector}, kind="lun", naa!=""}})'
    )
    rules = []
    for op in OPS:
        host = LATENCY.format(op=op, window=window)
        rules.append(
            record(
                HOST_MINUS_ARRAY.format(window=window),
                "  (\n"
                f'    {host}{{layer="host"}}\n'
                "  * on (job, instance, lun) group_left (naa)\n"
                f"    {info}\n"
                "  )\n"
                "- on (naa) group_left ()\n"
                f'  max by (naa) ({array_series}{{op="{op}"}})',
                op=op,
            )
        )
    return rules


def _naa_matcher(naa: ArrayNaa) -> str:
    """Keeps the series whose identity label can make a NAA: set, or matching the regex."""
    return f'{naa.label}!=""' if naa.regex is None else f"{naa.label}=~{json.dumps(naa.regex)}"


def _with_naa(vector: str, naa: ArrayNaa) -> str:
    """`vector` with its `naa` label made from the identity label, where the series lack it as is."""
    if not naa.rewritten:
        return vector
    args = ", ".join(json.dumps(a) for a in ("naa", naa.replacement, naa.label, naa.regex or "(.+)"))
    return f"label_replace({vector}, {args})"


def _vector(metric: str, matchers: Sequence[str | None]) -> str:
    """`metric{m1, m2}`, or the bare name when no matcher is left."""
    kept = [m for m in matchers if m]
    return f"{metric}{{{', '.join(kept)}}}" if kept else metric


def _array_latency(array: Array, op: str, window: str) -> str:
    """One array's `op` latency in seconds by NAA, averaged over `window` like the host's."""
    series, naa = array.series(op), array.naa
    if naa.from_ is None:
        latency = _vector(series.metric, (array.selector, series.match, _naa_matcher(naa)))
        body = f"  {_with_naa(f'avg_over_time({latency}[{window}])', naa)}\n"
    else:
        # The identity is on an info series (its value ignored: `group` makes it 1), joined per LUN.
        latency = _vector(series.metric, (array.selector, series.match))
        info = _vector(naa.from_.metric, (array.selector, _naa_matcher(naa)))
        on = ", ".join(naa.from_.join_on)
        body = (
            f"    avg_over_time({latency}[{window}])\n"
            f"  * on ({on}) group_left (naa)\n"
            f"    group by ({on}, naa) (\n"
            f"      {_with_naa(info, naa)}\n"
            "    )\n"
        )
    divisor = PER_SECOND[array.unit]
    return f"max by (naa) (\n{body})" + ("" if divisor == "1" else f" / {divisor}")
