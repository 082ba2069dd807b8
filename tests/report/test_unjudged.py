"""A LUN no database uses, which the goals' `unowned` section leaves unjudged (the default), is in
the report's tables and plots but never above a goal: as the rules, which never page for it."""

from __future__ import annotations

from lunlat.goals import parse_goals
from lunlat.report import page, svg
from lunlat.report.collect import Phase, Row

PHASE = Phase("full", 0.0, 100.0)


def _row(goals_text: str, role: str) -> Row:
    judged = parse_goals(goals_text).judged({"role": role, "database": "ORCL" if role else ""})
    goal, min_iops = (None, 0.0) if judged is None else (judged[0] / 1000, judged[1])
    # 4 ms over 1,000 writes in 100 s: 10 IOPS, far above a 1 ms goal.
    return Row(
        PHASE,
        "host",
        {"lun": "root", "instance": "h:1", "role": role},
        "write",
        4.0,
        1000.0,
        None,
        goal,
        min_iops,
    )


def test_the_root_disk_is_shown_not_judged_by_default() -> None:
    row = _row("", "")
    assert row.avg == 0.004 and row.breach is None
    assert row.csv()["goal_seconds"] == "" and row.csv()["breach"] == ""
    assert "not judged (no database uses this LUN)" in page._cell(row)
    assert page.worst_first([row, _row("", "data")]) == [("h:1", "root")]  # one LUN key either way
    plot = svg.timeline("root", {"write": [(10.0, 0.004)]}, None, [("full", 0.0, 100.0)], 0.0, 100.0)
    assert 'class="goal"' not in plot


def test_the_same_disk_is_judged_when_the_goals_say_so_and_a_data_lun_always_is() -> None:
    ticketed = _row("unowned:\n  severity: ticket\n  goal_ms: 20\n", "")
    assert ticketed.goal_seconds == 0.02 and ticketed.breach is False
    data = _row("", "data")
    assert data.goal_seconds == 0.001 and data.breach is True
    assert 'class="goal"' in svg.timeline("d", {"write": [(10.0, 0.004)]}, 0.001, [], 0.0, 100.0)
