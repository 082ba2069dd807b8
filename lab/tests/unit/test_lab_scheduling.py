"""The daemon's priority reaches past its own session: the nice value of its autogroup is set too
(sched(7), "The autogroup feature"; lunlat_lab.daemon.scheduling says why)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lunlat_lab.daemon.scheduling import AUTOGROUP, DAEMON_NICE

pytestmark = pytest.mark.skipif(
    not AUTOGROUP.exists() or os.geteuid() != 0,
    reason="needs root and a kernel with autogroups (/proc/self/autogroup)",
)

# A child that raises its session's priority and prints its autogroup line ("/autogroup-N nice K").
CHILD = (
    "import sys; from pathlib import Path;"
    "from lunlat_lab.daemon.scheduling import raise_session_priority as r;"
    "ok = r(); print(ok, Path('/proc/self/autogroup').read_text().strip())"
)


def _nice(line: str) -> int:
    found = re.search(r"nice (-?\d+)$", line)
    assert found is not None, line
    return int(found[1])


def test_a_daemon_in_its_own_session_gets_the_daemons_nice_for_its_autogroup() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, start_new_session=True
    ).stdout
    ok, line = out.split(" ", 1)
    assert ok == "True", out
    assert _nice(line) == DAEMON_NICE, out


def test_a_process_sharing_its_callers_session_leaves_that_sessions_nice_alone() -> None:
    before = Path("/proc/self/autogroup").read_text(encoding="ascii").strip()
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout
    ok, line = out.split(" ", 1)
    assert ok == "False", out
    assert line.strip() == before, "the child shares this session's autogroup, unchanged"
    assert Path("/proc/self/autogroup").read_text(encoding="ascii").strip() == before
