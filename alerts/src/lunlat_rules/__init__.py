"""lunlat's Prometheus rules, generated from a goals file (`lunlat-rules generate`).

The rules' mixin: the goals file (alerts/goals.yaml, shipped in this package), the generator
(`rules`) and the command (`cli`). The exporter does not need it; it installs beside Prometheus or
wherever the rules are generated.
"""

from __future__ import annotations

from pathlib import Path


def default_goals() -> Path:
    """The goals file shipped with this package (alerts/goals.yaml), or the checkout's own in an
    editable install, where it sits two levels above this package."""
    here = Path(__file__).resolve().parent
    shipped = here / "goals.yaml"
    return shipped if shipped.is_file() else here.parents[1] / "goals.yaml"
