"""lunlat's Prometheus rules, generated from a goals file (`lunlat-rules generate`).

The rules' mixin: the goals file (alerts/goals.yaml, shipped in this package), the generator
(`rules`) and the command (`cli`). The exporter does not need it; it installs beside Prometheus or
wherever the rules are generated.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lunlat.goals import Goals


def default_goals() -> Path:
    """The goals file shipped with this package (alerts/goals.yaml), or the checkout's own in an
    editable install, where it sits two levels above this package."""
    here = Path(__file__).resolve().parent
    shipped = here / "goals.yaml"
    return shipped if shipped.is_file() else here.parents[1] / "goals.yaml"


def goals_for(path: Path | None, prog: str) -> tuple[Path, Goals] | None:
    """The goals file a generator reads (`path`, else the shipped one) and its goals; None, each
    problem said on stderr with its key and line, when the file is wrong (the command exits 2)."""
    from lunlat.goals import load_goals  # noqa: PLC0415 - the package's import needs no model
    from lunlat.yamlmodel import ConfigError  # noqa: PLC0415

    chosen = path if path is not None else default_goals()
    try:
        return chosen, load_goals(chosen)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"{prog}: goals error: {problem}", file=sys.stderr)
        return None
