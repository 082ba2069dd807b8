"""The host's other work held back (lunlat_lab.holdback): what starts inside `held_back` is in an
idle cpu cgroup, what started before is not, and after it the group is gone and this process is home.
Run in a child process: the test moves the process it runs in."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lunlat_lab.holdback import idle_cgroup

GROUP = f"lunlat-test-holdback-{os.getpid()}"


def _can_make_an_idle_group() -> bool:
    group = idle_cgroup(GROUP)
    if group is None:
        return False
    group.rmdir()
    return True


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not _can_make_an_idle_group(),
    reason="needs root and a cpu cgroup with cpu.idle (Linux 5.15+)",
)

# A child that starts a sleeper before, one inside and reads each one's cpu cgroup line, the group's
# cpu.idle, its own line after, and whether the group is gone.
CHILD = f"""
import json, subprocess
from pathlib import Path
from lunlat_lab.holdback import held_back

def cpu_line(pid):
    lines = Path(f"/proc/{{pid}}/cgroup").read_text().splitlines()
    return next(line.split(":", 2)[2] for line in lines if line.split(":")[1] in ("cpu", "cpu,cpuacct", ""))

before = subprocess.Popen(["sleep", "30"])
own = cpu_line("self")
with held_back({GROUP!r}) as group:
    inside = subprocess.Popen(["sleep", "30"])
    seen = {{"group": str(group), "idle": (group / "cpu.idle").read_text().strip(),
             "before": cpu_line(before.pid), "inside": cpu_line(inside.pid), "self": cpu_line("self")}}
    inside.kill()
    inside.wait()
before.kill()
before.wait()
seen.update(own=own, after=cpu_line("self"), gone=not group.exists())
print(json.dumps(seen))
"""


def test_what_starts_inside_is_held_back_what_started_before_is_not_and_all_is_undone() -> None:
    seen = json.loads(
        subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True).stdout
    )
    assert seen["idle"] == "1", seen
    assert seen["inside"] == seen["self"] == f"/{GROUP}", seen
    assert seen["before"] == seen["own"] != f"/{GROUP}", seen
    assert seen["after"] == seen["own"] and seen["gone"], seen
