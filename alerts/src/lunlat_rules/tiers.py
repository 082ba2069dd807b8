"""The goal tiers as the rules apply them: each tier (goal, severity, idle guard, which I/Os it
judges, throughput floor) and the matchers of the series it takes, first match wins (goals.yaml
`overrides`, `unowned`, `default`). Read by the goal series (latency.py), the throughput floor, the
SLO's events per I/O (slo.py) and the database waits' goals."""

from __future__ import annotations

import json
from dataclasses import dataclass

from lunlat.goals import DefaultTier, Goals, Override
from lunlat.promql.recorded import JUDGED_KINDS

# A LUN no database uses has no `role` on lunlat_lun_info (goals `unowned`).
UNOWNED = 'role=""'
OWNED = 'role!=""'


@dataclass(frozen=True, slots=True)
class Tier:
    """A resolved goal tier: goal, severity label (page, warning or ticket), idle guard, which I/Os
    each op judges (goals Judged) and the throughput floor (MiB/s) where it has one."""

    goal_ms: float
    severity: str
    min_iops: float
    judge_read: str
    judge_write: str
    floor_mib_s: float | None = None

    def judged(self, op: str) -> str:
        return self.judge_read if op == "read" else self.judge_write


def tier_of(tier: DefaultTier) -> Tier:
    return Tier(
        tier.goal_ms,
        tier.severity,
        tier.min_iops,
        tier.judged_io("read"),
        tier.judged_io("write"),
        tier.throughput_floor_mib_s,
    )


# Labels of the goal series saying which I/Os the LUN's tier judges per op (goals `judge`): read by
# the judged-latency rules, so the tier that wins for a LUN decides (first match, as for the goal).
JUDGE_LABEL = "judge_{op}"
# The `judged` label's values (recorded.JUDGED_KINDS): the small I/Os, every I/O, the database's own.
SMALL, ALL, DATABASE = JUDGED_KINDS
MIB = 1024 * 1024


def override_matchers(override: Override) -> str:
    # json.dumps quotes and escapes like a PromQL double-quoted string (backslashes of regexes too).
    return ", ".join(f"{label}=~{json.dumps(pattern)}" for label, pattern in override.match.items())


def goal_tiers(goals: Goals) -> list[tuple[Tier, str]]:
    """Each tier and the matchers of the series it judges, in order (first match wins): the
    overrides, the LUNs no database uses (goals `unowned`), the default. Unowned LUNs not judged
    have no tier: the default's matchers leave them out."""
    tiers = [(tier_of(goals.resolve(o)), override_matchers(o)) for o in goals.overrides]
    unowned = goals.unowned_tier()
    if unowned is not None:
        # Which I/Os a LUN no database uses is judged on: the goals say (no `role` among the labels).
        judge = (goals.judged_io({}, "read"), goals.judged_io({}, "write"))
        tiers.append((Tier(*unowned, *judge), UNOWNED))
    tiers.append((tier_of(goals.default), "" if unowned is not None else OWNED))
    return tiers


def judged_kinds(goals: Goals, op: str) -> tuple[str, ...]:
    """Which I/Os some tier judges for `op` (SMALL, ALL; in that order): the values the goal
    series' judge label of `op` can take. A branch of the judged latency or of the SLO's events for
    a kind no tier judges could only ever match nothing, yet PromQL would read its operands every
    15 s (latency.idle_guard): the rules leave it out (issue 41)."""
    used = {tier.judged(op) for tier, _ in goal_tiers(goals)}
    return tuple(kind for kind in (SMALL, ALL) if kind in used)
