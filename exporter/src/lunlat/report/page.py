"""The report's page: one self-contained HTML file (inline CSS and SVG, no script, no network)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import datetime
from html import escape

from lunlat import ground
from lunlat.reference_architecture import TOLERANCE_MS, TOLERANCE_SHARE, Comparison
from lunlat.reference_architecture import rows as reference_rows
from lunlat.report import svg
from lunlat.report.collect import Collected, JudgedKind, Phase, Row

ROLES: tuple[str, ...] = ("data", "log")
OPS: tuple[str, ...] = ("read", "write")
# LUNs whose plots are drawn open, then collapsed; past both only the tables list them, so the page
# opens fast with a thousand LUNs.
PLOTTED_OPEN = 24
PLOTTED_COLLAPSED = 76
LUN_ROWS_OPEN = 50
HISTOGRAMS = 24


# Printed, the collapsed sections open: a closed <details> keeps its content in the
# ::details-content pseudo-element (CSS Pseudo-Elements Level 4, https://www.w3.org/TR/css-pseudo-4/;
# Chromium since 131), which print styles can show without a script.
def raised(old: float, new: float) -> str:
    """How much a cell rose, in ms and %: '+0.10 (+20%)'; a change that rounds to nothing is
    '0.00 (0%)', never '-0.00 (-0%)'."""
    ms, share = round((new - old) * 1000, 2), round((new - old) / old * 100) if old > 0 else None
    text = f"{ms:+.2f}" if ms else "0.00"
    if share is None:
        return text
    return f"{text} ({share:+d}%)" if share else f"{text} (0%)"


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
.meta{color:#555}.verdict{padding:.6em 1em;border-radius:6px;font-size:1.1em;margin:1em 0}
.ok{background:#e3f4e1;border:1px solid #2ca02c}.bad{background:#fbe3e3;border:1px solid #d62728}
table{border-collapse:collapse;margin:.5em 1em 1em 0;display:inline-table;vertical-align:top}
th,td{border:1px solid #bbb;padding:3px 8px;text-align:right}th{background:#f4f4f4}
td.name,th.name{text-align:left}caption{font-weight:600;text-align:left;padding:2px 0}
td.within{background:#d9f0d3}td.above{background:#f7c6c6;font-weight:600}td.idle{color:#888}
td.flagged{background:#fde9c4}.flag{font-size:.8em;color:#8a5a00;margin-left:.3em}th.judged,td.judged{border-left:none}
.legend{color:#555;font-size:.92em;margin:.2em 0 1em}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:12px}
.card{border:1px solid #ddd;border-radius:6px;padding:6px}.card h3{font-size:1em;margin:.2em 0}
svg.plot{width:100%;height:auto;font:10px sans-serif}svg .axis{stroke:#444}svg .grid{stroke:#e4e4e4}
svg .goal{stroke:#d62728;stroke-dasharray:4 3}svg .goal-label{fill:#d62728}
svg .curve{fill:none;stroke-width:1.3}svg .phase-name{fill:#777}
details{margin:.6em 0}.wide{overflow-x:auto}table.luns{font-size:12px}table.luns td.name{white-space:nowrap}summary{cursor:pointer;font-weight:600}
@media print{body{max-width:none}.wide{overflow:visible}.card{break-inside:avoid}h2{break-after:avoid}details::details-content{content-visibility:visible;display:block}details>summary{display:none}}
"""


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1000:.2f}"


def _time(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


SMALL_KIB = ground.BIO_SMALL_MAX // 1024


def judged_words(kind: JudgedKind | None, op: str) -> str:
    """Which I/Os a row of kind `kind` judges, in words."""
    return {
        "small": f"its small {op}s (up to {SMALL_KIB} KiB, from the per-I/O histogram)",
        "all": f"every {op} (the LUN's average)",
        "database": f"the {op}s the database counts as its own",
        "mixed": f"the small {op}s of its LUNs with the per-I/O histogram, every {op} of the others",
        None: "nothing (not judged)",
    }[kind]


def _cell(row: Row | None) -> str:
    """The average of every I/O: above the goal while the judged I/Os are not, it is flagged (shown
    and warned about, never paged, as LunLatencyAverageHigh), coloured and marked apart from a breach."""
    if row is None or row.avg is None:
        return '<td class="idle">&ndash;</td>'
    above = row.average_above_goal
    flagged = row.flagged
    css = "idle" if above is None else "flagged" if flagged else "above" if above else "within"
    if row.goal_seconds is None:
        note = f"not judged (no database uses this LUN), {row.iops:.0f} IOPS"
    else:
        note = f"average of every {row.op}: goal {_ms(row.goal_seconds)} ms, {row.iops:.0f} IOPS" + (
            " (idle: not judged)" if above is None else ""
        )
        if flagged:
            note += (
                f"; flagged: above the goal while {judged_words(row.judged_kind, row.op)} "
                + ("are within it" if row.breach is False else "are too few to judge")
                + ": warned about, not paged"
            )
    mark = '<span class="flag">flagged</span>' if flagged else ""
    return f'<td class="{css}" title="{escape(note)}">{_ms(row.avg)}{mark}</td>'


def _judged_cell(row: Row | None) -> str:
    """The judged figure beside the average: what the breach alerts judge, coloured by their verdict."""
    if row is None or row.avg is None:
        return '<td class="judged idle">&ndash;</td>'
    if row.goal_seconds is None:
        return '<td class="judged idle" title="not judged (no database uses this LUN)">&ndash;</td>'
    verdict, judged, iops = row.breach, row.judged_avg, row.judged_iops or 0.0
    css = "idle" if verdict is None else "above" if verdict else "within"
    note = (
        f"judged: {judged_words(row.judged_kind, row.op)}, goal {_ms(row.goal_seconds)} ms, {iops:.0f} IOPS"
        + (" (below the idle guard: not judged)" if verdict is None else "")
    )
    text = "&ndash;" if judged is None else _ms(judged)
    return f'<td class="judged {css}" title="{escape(note)}">{text}</td>'


def cells(rows: Iterable[Row]) -> dict[tuple[str, str, str, str, str], Row]:
    """The reference's cells from the host layer's LUN rows: (phase, workload, database, role, op) ->
    one Row whose Δ time and Δ operations are its LUNs' sums (Δ time / Δ operations again, weighted),
    and so are those of its judged I/Os (each LUN's own: its small I/Os, or every I/O without the
    histogram; `mixed` when its LUNs differ)."""
    out: dict[tuple[str, str, str, str, str], Row] = {}
    for row in rows:
        labels = row.labels
        if row.layer != "host" or not labels.get("database") or labels.get("role") not in ROLES:
            continue
        key = (row.phase.name, labels.get("workload", ""), labels["database"], labels["role"], row.op)
        judged = row.judged_totals() or (0.0, 0.0)
        found = out.get(key)
        if found is None:
            cell_labels = {k: labels.get(k, "") for k in ("workload", "database", "role")}
            out[key] = Row(
                row.phase,
                "host",
                cell_labels,
                row.op,
                row.time_total,
                row.operations,
                row.bytes_total,
                row.goal_seconds,
                row.min_iops,
                row.judged_kind,
                judged[0],
                judged[1],
            )
        else:
            found.time_total += row.time_total
            found.operations += row.operations
            found.judged_time = (found.judged_time or 0.0) + judged[0]
            found.judged_operations = (found.judged_operations or 0.0) + judged[1]
            if found.judged_kind != row.judged_kind:
                found.judged_kind = "mixed"
    return out


def _reference_tables(phase: Phase, table: dict[tuple[str, str, str, str, str], Row]) -> str:
    keys = sorted({(w, d) for (p, w, d, _, _) in table if p == phase.name})
    if not keys:
        return "<p>No data or log LUN of a database had I/O in this phase.</p>"
    out = []
    for op in OPS:
        head = "".join(f'<th>{role} LUNs</th><th class="judged">{role} judged</th>' for role in ROLES)
        body = "".join(
            f'<tr><td class="name">{escape(w)} · {escape(d)}</td>'
            + "".join(
                _cell(table.get((phase.name, w, d, role, op)))
                + _judged_cell(table.get((phase.name, w, d, role, op)))
                for role in ROLES
            )
            + "</tr>"
            for w, d in keys
        )
        out.append(
            f'<table class="reference"><caption>Average {op} latency (ms), and of the judged {op}s</caption>'
            f'<tr><th class="name">Workload · database</th>{head}</tr>{body}</table>'
        )
    return "".join(out)


def legend(phase: Phase, rows: list[Row]) -> str:
    """What the judged columns of `phase` judge, per op: how many of its host-layer LUNs are judged
    on which I/Os (the goals' `judge`, and whether the host has the per-I/O histogram)."""
    parts = []
    for op in OPS:
        kinds: dict[JudgedKind | None, int] = {}
        for row in rows:
            # LUNs with I/O of this op in the phase only: one without has nothing judged to describe.
            if (
                row.phase.name == phase.name
                and row.layer == "host"
                and row.op == op
                and row.goal_seconds is not None
                and row.operations > 0
            ):
                kinds[row.judged_kind] = kinds.get(row.judged_kind, 0) + 1
        if kinds:
            counted = ", ".join(
                f"{judged_words(kind, op).removeprefix('its ')} of {n} LUN{'s' if n != 1 else ''}"
                for kind, n in sorted(kinds.items(), key=lambda k: str(k[0]))
            )
            parts.append(f"{op}s: {counted}")
    if not parts:
        return ""
    return (
        f'<p class="legend">Judged, as the alerts judge it (goals <code>judge</code>): {"; ".join(parts)}. '
        "Database layers: their own average. An average above its goal while the judged I/Os are within "
        'it is <span class="flag">flagged</span>: warned about, never paged.</p>'
    )


def _raised(phases: list[Phase], table: dict[tuple[str, str, str, str, str], Row]) -> str:
    out = []
    for before, after in itertools.pairwise(phases):
        keys = sorted({(w, d) for (p, w, d, _, _) in table if p in (before.name, after.name)})
        for op in OPS:
            body = []
            for w, d in keys:
                tds = []
                for role in ROLES:
                    old, new = (
                        table.get((before.name, w, d, role, op)),
                        table.get((after.name, w, d, role, op)),
                    )
                    if old is None or new is None or old.avg is None or new.avg is None:
                        tds.append('<td class="idle">&ndash;</td>')
                        continue
                    tds.append(f"<td>{raised(old.avg, new.avg)}</td>")
                body.append(f'<tr><td class="name">{escape(w)} · {escape(d)}</td>{"".join(tds)}</tr>')
            out.append(
                f'<table class="raised"><caption>{escape(after.name)} vs {escape(before.name)}: {op}, Δ ms</caption>'
                f'<tr><th class="name">Workload · database</th>'
                + "".join(f"<th>{r} LUNs</th>" for r in ROLES)
                + f"</tr>{''.join(body)}</table>"
            )
    return "".join(out)


def _goal(row: Row) -> float:
    """The goal of a row above it (a row with no goal is never above one)."""
    assert row.goal_seconds is not None, "only judged rows breach"
    return row.goal_seconds


def _where(row: Row) -> str:
    return (
        f"{escape(row.phase.name)} · {row.layer} · LUN {escape(row.labels.get('lun', ''))} "
        f"({escape(row.labels.get('database', '') or 'no database')}, "
        f"{escape(row.labels.get('role', '') or 'no role')}) · {row.op}"
    )


def _judged_text(row: Row) -> str:
    """'judged 0.40 ms', or why nothing was judged (the idle guard counts the judged I/Os only)."""
    if row.judged_avg is None:
        return "no judged I/O"
    idle = " (below the idle guard: not judged)" if row.breach is None else ""
    return f"judged {_ms(row.judged_avg)} ms{idle}"


def _flagged(rows: list[Row], table: dict[tuple[str, str, str, str, str], Row]) -> str:
    """The averages above their goal whose judged I/Os are not: listed apart from the breaches, since
    the alerts warn about them and page for none."""
    cells_ = [c for c in table.values() if c.flagged]
    luns = [r for r in rows if r.flagged]
    if not cells_ and not luns:
        return ""
    items = [
        f"<li>{escape(c.phase.name)} · {escape(c.labels['workload'])} · {escape(c.labels['database'])} · "
        f"{c.labels['role']} LUNs · {c.op}: average {_ms(c.avg)} ms, {_judged_text(c)} (goal {_ms(_goal(c))} ms)</li>"
        for c in cells_
    ]
    items += [
        f"<li>{_where(r)}: average {_ms(r.avg)} ms, {_judged_text(r)} "
        f"({escape(judged_words(r.judged_kind, r.op))}; goal {_ms(_goal(r))} ms)</li>"
        for r in sorted(luns, key=lambda r: -(r.avg or 0) / _goal(r))[:30]
    ]
    more = len(luns) - 30
    return (
        f'<p id="flagged"><span class="flag">flagged</span> {len(cells_)} table cells and {len(luns)} LUN '
        "averages are above their goal while the I/Os the goal judges are within it (or too few to judge): "
        "bigger I/Os take longer each; warned about, not paged:</p>"
        f"<ul>{''.join(items)}</ul>{f'<p>… and {more} more (tables.csv).</p>' if more > 0 else ''}"
    )


def _verdict(rows: list[Row], table: dict[tuple[str, str, str, str, str], Row]) -> str:
    # The verdict is the alerts' breach: on the judged I/Os (the LUN's small reads where the goal says
    # so and the host has the per-I/O histogram), the flagged averages listed beside it.
    bad_cells = [c for c in table.values() if c.breach]
    bad_rows = [r for r in rows if r.breach]
    flagged = _flagged(rows, table)
    if not bad_cells and not bad_rows:
        judged = sum(1 for r in rows if r.breach is not None)
        return (
            '<div class="verdict ok" id="verdict"><strong>Every judged latency is within its goal: yes.</strong> '
            f"({judged} LUN rows and {len(table)} table cells; idle ones are not judged.){flagged}</div>"
        )
    items = [
        f"<li>{escape(c.phase.name)} · {escape(c.labels['workload'])} · {escape(c.labels['database'])} · "
        f"{c.labels['role']} LUNs · {c.op}: {_ms(c.judged_avg)} ms (goal {_ms(_goal(c))} ms; "
        f"{escape(judged_words(c.judged_kind, c.op))})</li>"
        for c in bad_cells
    ]
    items += [
        f"<li>{_where(r)}: {_ms(r.judged_avg)} ms (goal {_ms(_goal(r))} ms; "
        f"{escape(judged_words(r.judged_kind, r.op))})</li>"
        for r in sorted(bad_rows, key=lambda r: -(r.judged_avg or 0) / _goal(r))[:30]
    ]
    more = len(bad_rows) - 30
    return (
        '<div class="verdict bad" id="verdict"><strong>Every judged latency is within its goal: no.</strong> '
        f"{len(bad_cells)} table cells and {len(bad_rows)} LUN rows are above their goal on the I/Os it judges:"
        f"<ul>{''.join(items)}</ul>{f'<p>… and {more} more LUN rows (tables.csv).</p>' if more > 0 else ''}"
        f"{flagged}</div>"
    )


def _lun_key(row: Row) -> tuple[str, str]:
    return row.labels.get("instance", ""), row.labels.get("lun", "")


def worst_first(rows: list[Row]) -> list[tuple[str, str]]:
    """The host layer's LUNs, worst first: highest judged latency / goal in any phase (what pages
    first), then highest average / goal (what is flagged)."""
    score: dict[tuple[str, str], tuple[float, float]] = {}
    for row in rows:
        if row.layer == "host":
            # A LUN no goal judges sorts after every judged one.
            goal = row.goal_seconds
            ratio = (0.0, 0.0) if goal is None else ((row.judged_avg or 0.0) / goal, (row.avg or 0.0) / goal)
            score[_lun_key(row)] = max(ratio, score.get(_lun_key(row), (0.0, 0.0)))
    return sorted(score, key=lambda k: (-score[k][0], -score[k][1], k))


def _lun_table(order: list[tuple[str, str]], rows: list[Row], phases: list[Phase]) -> str:
    by_lun: dict[tuple[str, str], dict[tuple[str, str], Row]] = {}
    for row in rows:
        if row.layer == "host":
            by_lun.setdefault(_lun_key(row), {})[(row.phase.name, row.op)] = row
    head = (
        '<tr><th class="name">LUN</th><th class="name">device</th><th class="name">instance</th>'
        '<th class="name">database</th><th class="name">role</th><th class="name">workload</th>'
        + "".join(
            f'<th>{escape(p.name)} {op}</th><th class="judged">judged</th>' for p in phases for op in OPS
        )
        + "</tr>"
    )

    def line(key: tuple[str, str]) -> str:
        found = by_lun[key]
        labels = next(iter(found.values())).labels
        names = "".join(
            f'<td class="name">{escape(labels.get(k, ""))}</td>'
            for k in ("lun", "device", "instance", "database", "role", "workload")
        )
        tds = "".join(
            _cell(found.get((p.name, op))) + _judged_cell(found.get((p.name, op)))
            for p in phases
            for op in OPS
        )
        return f"<tr>{names}{tds}</tr>"

    shown, rest = order[:LUN_ROWS_OPEN], order[LUN_ROWS_OPEN:]
    out = f'<table class="luns"><caption>Host layer, average and judged latency (ms), worst first</caption>{head}{"".join(line(k) for k in shown)}</table>'
    if rest:
        out += (
            f"<details><summary>{len(rest)} more LUNs</summary>"
            f'<table class="luns">{head}{"".join(line(k) for k in rest)}</table></details>'
        )
    return out


def _card(key: tuple[str, str], data: Collected, goal: float | None) -> str:
    instance, lun = key
    phases = [(p.name, p.start, p.end) for p in data.phases]
    latency = data.latency.get(key, {})
    timeline = svg.timeline(f"{lun} latency over time", latency, goal, phases, data.start, data.end)
    pairs: dict[str, list[tuple[float, float]]] = {}
    for op, points in latency.items():
        rates = dict(data.iops.get(key, {}).get(op, []))
        pairs[op] = [(rates[t], v) for t, v in points if t in rates]
    scatter = svg.scatter(f"{lun} latency vs IOPS", pairs, goal)
    return (
        f'<div class="card"><h3>{escape(lun)} <small>({escape(instance)})</small></h3>'
        f"{timeline}<div>Latency vs IOPS</div>{scatter}</div>"
    )


def _versus_reference(phase: Phase, comparisons: list[Comparison]) -> str:
    """The phase's reference cells beside the measured ones (reference.csv's rows, as a table)."""
    mine = [c for c in comparisons if c.cell.phase == phase.name]
    if not mine:
        return ""
    body = "".join(
        f'<tr><td class="name">{escape(r["workload"])} · {escape(r["database"])}</td><td class="name">{r["role"]}</td>'
        f'<td class="name">{r["op"]}</td><td>{escape(r["table"])}</td><td>{r["reference_ms"]}</td>'
        f'<td class="{"within" if c.within else "above"}">{r["measured_ms"] or "&ndash;"}</td>'
        f"<td>{r['difference_ms'] or '&ndash;'}</td><td>{r['within_tolerance']}</td></tr>"
        for c, r in zip(mine, reference_rows(mine), strict=True)
    )
    ok = sum(1 for c in mine if c.within)
    return (
        f'<table class="versus"><caption>Against the reference: {ok} of {len(mine)} cells within '
        f"{TOLERANCE_MS} ms or {TOLERANCE_SHARE:.0%} (ms)</caption>"
        '<tr><th class="name">Workload · database</th><th class="name">role</th><th class="name">op</th>'
        "<th>table</th><th>reference</th><th>measured</th><th>difference</th><th>within</th></tr>"
        f"{body}</table>"
    )


def render(data: Collected, title: str, source: str, comparisons: list[Comparison] | None = None) -> str:
    table = cells(data.rows)
    order = worst_first(data.rows)
    goals = {_lun_key(r): r.goal_seconds for r in data.rows if r.layer == "host"}
    parts = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{_time(data.start)} &ndash; {_time(data.end)} · Prometheus {escape(source)} · '
        f"{len(order)} LUNs · plots at a {data.step} s step · averages are Δ time / Δ operations "
        "over each phase (weighted by operations, like the reference's)</p>",
        _verdict(data.rows, table),
    ]
    for phase in data.phases:
        parts.append(
            f'<h2 class="phase">{escape(phase.name)}: {_time(phase.start)} &ndash; {_time(phase.end)}</h2>'
        )
        parts.append(_reference_tables(phase, table))
        parts.append(legend(phase, data.rows))
        if comparisons is not None:
            parts.append(_versus_reference(phase, comparisons))
    if len(data.phases) > 1:
        parts.append("<h2>How much each added phase raised each cell</h2>")
        parts.append(_raised(data.phases, table))
    parts.append("<h2>LUNs</h2>")
    parts.append(f'<div class="wide">{_lun_table(order, data.rows, data.phases)}</div>')
    parts.append("<h2>Latency over time and against IOPS, per LUN (worst first)</h2>")
    parts.append(
        f'<div class="cards">{"".join(_card(k, data, goals[k]) for k in order[:PLOTTED_OPEN])}</div>'
    )
    collapsed = order[PLOTTED_OPEN : PLOTTED_OPEN + PLOTTED_COLLAPSED]
    if collapsed:
        parts.append(
            f"<details><summary>Plots of {len(collapsed)} more LUNs</summary>"
            f'<div class="cards">{"".join(_card(k, data, goals[k]) for k in collapsed)}</div></details>'
        )
    left = len(order) - PLOTTED_OPEN - len(collapsed)
    if left > 0:
        parts.append(f"<p>{left} more LUNs are in the tables above and in tables.csv, not plotted.</p>")
    if data.histograms:
        default_goal = min((g for g in goals.values() if g is not None), default=0.001)
        parts.append("<h2>Latency distribution</h2>")
        hist = [
            f'<div class="card"><h3>{escape(name)}</h3>{svg.bars(name, buckets, default_goal)}</div>'
            for name, buckets in list(data.histograms.items())[:HISTOGRAMS]
        ]
        parts.append(f'<div class="cards">{"".join(hist)}</div>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n"
    )
