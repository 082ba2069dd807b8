"""Time to page and time to resolve, end to end on the lab, median over several breaches.

The real parts as in tests/alerting/test_e2e_paging.py: the lab's loop LUNs under the reference
OLTP phase, the lunlat exporter, the Debian Prometheus (15 s scrape and evaluation) with
alerts/lunlat.rules.yml, the Debian Alertmanager with alerts/alertmanager.yml's routing and timers,
and a webhook receiver. Each run raises the SQL Server 1 data LUN to 2 ms, waits for its page,
restores it (0 to 30 s later, at random) and waits for the resolved notification; each run on a fresh
Prometheus and Alertmanager.

Needs root (loop devices, FUSE), fio, prometheus and prometheus-alertmanager. Prints each run and
the medians against the goals (page ≤ 45 s after onset, median, docs/alerting.md "Time to page";
resolve ≤ 120 s after restore); asserts nothing.

    .venv/bin/python bench/time_to_page.py --runs 5

`--wal`: PostgreSQL 18's WAL LUN instead, pgbench committing on it (tests/alerting/test_e2e_postgres_wal.py,
its first test, run once per run in a pytest of its own: a fresh lab, cluster, Prometheus and
Alertmanager, a whole minute of baseline, the LUN slowed to 3 ms, its page); the time to page is
the one that test prints. It measures no resolve.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's tests/ helpers

from lunlat_lab import commands
from tests.alerting import e2e
from tests.alerting.stack import AlertingStack, WebhookReceiver, missing_binaries
from tests.support.lab_host import lab_skip_reason, memory_backed_dir

PAGE_GOAL_S = 45.0  # the median's (issue 38; docs/alerting.md, "Time to page")
RESOLVE_GOAL_S = 120.0
SETTLE_S = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="breach/restore cycles (default 5)")
    parser.add_argument("--wal", action="store_true", help="PostgreSQL's WAL LUN under pgbench, page only")
    args = parser.parse_args()
    if args.wal:
        return wal(args.runs)
    problem = lab_skip_reason() or (
        f"missing {', '.join(missing_binaries())}" if missing_binaries() else None
    )
    if problem:
        print(f"cannot run: {problem}", file=sys.stderr)
        return 2
    state_dir = Path(tempfile.mkdtemp(prefix="lunlat-bench-", dir=memory_backed_dir()))
    pages: list[float] = []
    resolves: list[float] = []
    try:
        commands.up(e2e.LAB_CONFIG, state_dir)
        commands.phase(state_dir, "oltp")
        for run in range(1, args.runs + 1):
            # A fresh Prometheus and Alertmanager per run: after a breach the LUN's budget burn alert
            # fires for up to an hour, and its open notification group would change the next timing.
            with (
                tempfile.TemporaryDirectory(prefix="lunlat-stack-") as workdir,
                WebhookReceiver() as hook,
                AlertingStack(Path(workdir), e2e.exporter_config(state_dir), hook.url) as stack,
            ):
                stack.wait_for_series("lunlat:latency_above_goal:bool", e2e.OLTP_JUDGED, timeout=180)
                time.sleep(SETTLE_S)  # every 1m window full of OLTP before the onset
                # The breach lasts a random while past the page, as real ones do: restoring right at
                # the page would put every restore on Alertmanager's group tick.
                cycle = e2e.breach_and_restore(state_dir, hook, hold=random.uniform(0, 30))
            pages.append(cycle.seconds_to_page)
            resolves.append(cycle.seconds_to_resolve)
            print(
                f"run {run}: onset → page {cycle.seconds_to_page:5.1f} s, "
                f"restore → resolved {cycle.seconds_to_resolve:5.1f} s",
                flush=True,
            )
    finally:
        commands.down(state_dir)
    page, resolve = statistics.median(pages), statistics.median(resolves)
    print(
        f"median of {len(pages)}: onset → page {page:.1f} s (goal ≤ {PAGE_GOAL_S:.0f} s, "
        f"{page / PAGE_GOAL_S:.2f} of it; range {min(pages):.1f} to {max(pages):.1f}); "
        f"restore → resolved {resolve:.1f} s (goal ≤ {RESOLVE_GOAL_S:.0f} s, {resolve / RESOLVE_GOAL_S:.2f} of it; "
        f"range {min(resolves):.1f} to {max(resolves):.1f})"
    )
    return 0


WAL_TEST = "tests/alerting/test_e2e_postgres_wal.py::test_slowed_wal_lun_pages_with_engine_postgres_role_log"
WAL_PRINTED = re.compile(r"onset → page ([0-9.]+) s;")


def wal(runs: int) -> int:
    """The WAL LUN's time to page, `runs` times, each its own pytest run of WAL_TEST."""
    repo = Path(__file__).resolve().parents[1]
    pages: list[float] = []
    for run in range(1, runs + 1):
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            "tests/pytest.ini",
            "-p",
            "no:cacheprovider",
            "-q",
            "-s",
            WAL_TEST,
        ]
        done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, check=False)
        found = WAL_PRINTED.search(done.stdout)
        if done.returncode != 0 or not found:
            print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
            print(f"run {run}: the test failed (exit {done.returncode}), above", file=sys.stderr)
            return 1
        pages.append(float(found.group(1)))
        print(f"run {run}: onset → page {pages[-1]:5.1f} s", flush=True)
    page = statistics.median(pages)
    print(
        f"median of {len(pages)}: onset → page {page:.1f} s (goal ≤ {PAGE_GOAL_S:.0f} s, "
        f"{page / PAGE_GOAL_S:.2f} of it; range {min(pages):.1f} to {max(pages):.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
