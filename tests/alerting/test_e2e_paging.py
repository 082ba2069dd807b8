"""The paging path end to end with real parts: the lab's loop LUNs under the reference OLTP phase,
the lunlat exporter, the Debian Prometheus with the repo's rules, the Debian Alertmanager with the
repo's routing, grouping and inhibition, and a webhook receiver that records what is sent.

(1) every LUN below goal under OLTP → no notification; (2) one data LUN raised to 2 ms → a page
naming that LUN, database and role; (3) restored → a resolved notification. Times from onset to page
and from restore to resolution are printed; bench/time_to_page.py reports their medians.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extras import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
from lunlat_lab import commands  # noqa: E402
from tests.alerting import e2e  # noqa: E402
from tests.alerting.stack import AlertingStack, WebhookReceiver, missing_binaries, started_at  # noqa: E402
from tests.labhost import lab_skip_reason, memory_backed_dir  # noqa: E402

pytestmark = pytest.mark.lab

# The proof of (1) is a window in which every judged LUN stayed below goal (what the kernel measured,
# read back from Prometheus) and no notification came. On a shared VM, bursts of steal time (the
# hypervisor taking the vCPUs away) stall the lab's FUSE daemon and lift every LUN above 1 ms for a
# minute or so: the rules rightly judge those minutes above goal. So windows are tried until one
# is clean; each lasts longer than `for` + an evaluation + Alertmanager's group_wait.
QUIET_SECONDS = 60
QUIET_ATTEMPTS = 8
# The latency breach alerts of every role group (not the budget burn alerts).
BREACH_ALERT = re.compile(r"LunLatency(Data|Log)?(Read|Write)High")


def steal_seconds() -> float:
    """Steal time of all CPUs so far (/proc/stat), in seconds."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def quiet_window(stack: AlertingStack, hook: WebhookReceiver) -> tuple[int, dict[str, float]]:
    """Wait for a window with every judged LUN below goal; return the attempt and its worst averages.
    Fails when no window in QUIET_ATTEMPTS was clean."""
    disturbed = []
    for attempt in range(1, QUIET_ATTEMPTS + 1):
        start, started, steal_before = time.monotonic(), time.time(), steal_seconds()
        time.sleep(QUIET_SECONDS)
        window = f"{QUIET_SECONDS}s"
        above = stack.query(f"max_over_time(lunlat:latency_above_goal:bool[{window}]) > 0")
        judged = stack.query(f"max_over_time(lunlat:latency_above_goal:bool[{window}])")
        worst: dict[str, float] = {}
        for op in ("read", "write"):
            query = f"max_over_time(lunlat:{op}_latency_seconds:avg1m[{window}]) * 1000"
            for lun, ms in stack.values(query, "lun").items():
                worst[f"{lun} {op}"] = round(ms, 3)
        steal = (steal_seconds() - steal_before) / QUIET_SECONDS / (os.cpu_count() or 1)
        if not above and len(judged) >= e2e.OLTP_JUDGED:
            # Anything a breach in this window would have sent arrives within `for` + group_wait.
            time.sleep(20)
            # (An alert fired in an earlier, disturbed window may still resolve meanwhile. Budget
            # burn alerts judge the last hours, not this window: minutes above goal before it,
            # e.g. the lab's first minute, rightly start them now.)
            sent = [
                a["labels"]
                for n in hook.snapshot()
                if n.received >= start
                for a in n.alerts
                if a.get("status") == "firing"
                and started_at(a) >= started
                and BREACH_ALERT.fullmatch(a["labels"].get("alertname", ""))
            ]
            assert sent == [], f"latency breach notified with every LUN below goal: {sent}"
            return attempt, worst
        disturbed.append(f"worst {worst}, steal {steal:.0%}")
    pytest.fail(f"no {QUIET_SECONDS}s window with every LUN below goal under OLTP: {disturbed}")


@pytest.fixture
def lab_state() -> Iterator[Path]:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    missing = missing_binaries()
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (Debian: prometheus, prometheus-alertmanager)")
    state_dir = Path(tempfile.mkdtemp(prefix="lunlat-e2e-", dir=memory_backed_dir()))
    try:
        commands.up(e2e.LAB_CONFIG, state_dir)
        commands.phase(state_dir, "oltp")
        yield state_dir
    finally:
        commands.down(state_dir)


def test_breach_pages_and_restore_resolves(lab_state: Path, tmp_path: Path) -> None:
    with (
        WebhookReceiver() as hook,
        AlertingStack(tmp_path / "stack", e2e.LAB_EXPORTER_CONFIG, hook.url) as stack,
    ):
        # (1) OLTP alone: once every busy LUN is judged, a window below goal sends nothing.
        stack.wait_for_series("lunlat:latency_above_goal:bool", e2e.OLTP_JUDGED, timeout=180)
        attempt, worst = quiet_window(stack, hook)
        print(f"window {attempt}: every LUN below goal, no notification; worst 1m averages (ms): {worst}")
        test_start = time.monotonic()

        # (2) and (3): one data LUN at 2 ms pages; restored, the page resolves.
        cycle = e2e.breach_and_restore(lab_state, hook)
        print(
            f"onset → page {cycle.seconds_to_page:.1f} s (goal ≤ 60 s), "
            f"restore → resolved {cycle.seconds_to_resolve:.1f} s (goal ≤ 120 s)"
        )
        # The lab labels its LUNs by `luns:` entries and runs no database source: no source says
        # what engine "SQL Server 1" is (routing never reads the name), so the storage team is paged.
        # With the database's source configured the page carries engine="mssql" and goes to the
        # DBAs (alerts/tests/latency.test.yml, test_rules.test_alertmanager_routes).
        assert cycle.page.receiver == "storage-pager"
        assert "engine" not in e2e.breach_alerts(cycle.page, "firing")[0]["labels"]
        # The LUN's read or write breach (whichever crossed first; the other joins its group later).
        paged = e2e.breach_alerts(cycle.page, "firing")
        assert paged, cycle.page.payload
        alert = paged[0]
        op = alert["labels"]["op"]
        assert alert["labels"]["workload"] == "oltp" and alert["labels"]["layer"] == "host"
        device = e2e.device_of(lab_state, e2e.BREACH_LUN)
        assert alert["labels"]["lun"] == device, alert["labels"]
        assert f"LUN {device} (SQL Server 1 data)" in alert["annotations"]["summary"]
        assert alert["annotations"]["runbook_url"].endswith(f"latency-high.md#lunlatencydata{op}high")
        # Any other LUN notified meanwhile had really gone above goal (steal bursts): no false page.
        seconds = int(time.monotonic() - test_start) + 60
        breached = {
            (r["metric"]["lun"], r["metric"]["op"])
            for r in stack.query(f"max_over_time(lunlat:latency_above_goal:bool[{seconds}s]) > 0")
        }
        # (Breach alerts only: budget burn alerts judge hours, the lab's first minutes included.)
        unjustified = [
            (n.receiver, a["labels"])
            for n in hook.snapshot()
            for a in n.alerts
            if a["labels"].get("lun") != device
            and n.received >= test_start
            and BREACH_ALERT.fullmatch(a["labels"].get("alertname", ""))
            and (a["labels"].get("lun"), a["labels"].get("op")) not in breached
        ]
        assert unjustified == [], f"notified without a measured breach: {unjustified}"
