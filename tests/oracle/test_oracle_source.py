"""The Oracle source against the emulated views: its real SQL, real python-oracledb errors.

Latencies, roles and LUNs per file; µs precision; histograms consistent with the waits; instance
restarts; RAC and CDB; ASM; and every fault while the host layer keeps being served.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig
from lunlat.dbfiles import DbLunLabels, FileLocator
from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.engines.oracle import sql
from lunlat.engines.oracle.config import OracleTarget
from lunlat.engines.oracle.source import ALL_CONTROL, ALL_REDO, OracleSource
from lunlat.model import Family
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.diskstats import DiskstatsSource
from tests.oracle.emulation import EmulatedConnection, OracleEmulation
from tests.oracle.simulator import IO, Choice, Commits, Constant, Load
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

DATA_READ = Load(
    IO("data", "read", 400, Constant(425)),
    IO("data", "write", 100, Constant(800)),
    IO("log", "write", 200, Constant(300)),
    commits=Commits(200),
)


def mpath(h: FakeHost, name: str, alias: str, path: str, wwid_tail: str) -> str:
    wwid = "3600a09803830363472" + wwid_tail.rjust(13, "0")
    h.add_scsi_disk(path, wwid="naa." + wwid[1:])
    return h.add_multipath(name, alias=alias, wwid=wwid, paths=[path])


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return oracle_host(tmp_path)


def oracle_host(tmp_path: Path) -> FakeHost:
    """Datafiles on an LV on ora_data; redo members multiplexed over ora_redo_a and ora_redo_b; a
    control file copy on each of ora_data and ora_redo_b; three ASM disks as multipath maps."""
    h = FakeHost(tmp_path)
    h.add_scsi_disk("sda", wwid="naa.5000c500a1b2c3d4")
    h.add_partition("sda", 1)
    mpath(h, "dm-3", "ora_data", "sdb", "1")
    h.add_lvm("dm-4", vg="vgora", lv="oradata", on=["dm-3"])
    mpath(h, "dm-5", "ora_redo_a", "sdc", "2")
    mpath(h, "dm-6", "ora_redo_b", "sdd", "3")
    mpath(h, "dm-7", "asm_data1", "sde", "4")
    mpath(h, "dm-8", "asm_data2", "sdf", "5")
    mpath(h, "dm-9", "asm_fra1", "sdg", "6")
    h.mount("/", "sda1")
    h.mount("/u02/oradata", "dm-4")
    h.mount("/u03/redo", "dm-5")
    h.mount("/u04/redo", "dm-6")
    h.write()
    return h


def target(**changes: Any) -> OracleTarget:
    values: dict[str, Any] = {
        "name": "Oracle",
        "dsn": "db1:1521/ORCL",
        "user": "lunlat",
        "password_env": "LUNLAT_TEST_UNUSED",
        "workload": "oltp",
        "timeout_seconds": 2,
    }
    values.update(changes)
    return OracleTarget(**values)


def source_for(
    emu: OracleEmulation,
    host: FakeHost | None = None,
    labels: DbLunLabels | None = None,
    clock: Callable[[], float] | None = None,
    connect: Callable[[], EmulatedConnection] | None = None,
    **changes: Any,
) -> OracleSource:
    locator = FileLocator(host.procfs, host.sysfs) if host is not None else None
    return OracleSource(target(**changes), connect or emu.connect, locator, labels, clock or time.monotonic)


def families(result: SourceResult) -> dict[str, Family]:
    return {f.spec.name: f for f in result.families}


def values(result: SourceResult, spec: contract.MetricSpec) -> dict[tuple[str, ...], float]:
    return families(result)[spec.name].by_labels()


def by(
    spec_labels: tuple[str, ...], values: dict[tuple[str, ...], float], **want: str
) -> dict[tuple[str, ...], float]:
    index = {name: spec_labels.index(name) for name in want}
    return {k: v for k, v in values.items() if all(k[index[n]] == w for n, w in want.items())}


def two_minutes(emu: OracleEmulation, source: OracleSource, load: Load) -> tuple[SourceResult, SourceResult]:
    """Two collections a minute of `load` apart (after a first minute of it), neither with errors."""
    emu.advance(60, load)
    first = source.collect()
    emu.advance(60, load)
    second = source.collect()
    assert not first.errors and not second.errors
    return first, second


def delta(
    before: SourceResult, after: SourceResult, spec: contract.MetricSpec
) -> dict[tuple[str, ...], float]:
    old, new = values(before, spec), values(after, spec)
    return {k: new[k] - old.get(k, 0.0) for k in new}


# --- values, roles, LUNs ---------------------------------------------------------------------


def test_per_file_latency_role_and_lun_are_right_and_425_us_stays_425_us(host: FakeHost) -> None:
    emu = OracleEmulation()
    source = source_for(emu, host)
    first, second = two_minutes(emu, source, DATA_READ)
    labels = oracle_metrics.ORACLE_FILE_LABELS
    reads = delta(first, second, oracle_metrics.ORACLE_FILE_READS)
    read_time = delta(first, second, oracle_metrics.ORACLE_FILE_READ_TIME)
    data = by(labels, reads, role="data")
    assert len(data) == 3 and sum(data.values()) == 400 * 60
    for key, n in data.items():
        file, lun = key[labels.index("file")], key[labels.index("lun")]
        assert file.startswith("/u02/oradata/ORCL/") and lun == "ora_data"
        assert (key[labels.index("database")], key[labels.index("workload")]) == ("Oracle", "oltp")
        assert read_time[key] / n == pytest.approx(425e-6, abs=1e-6 / n * 2)  # ms counters: ±1 ms per delta
    writes = delta(first, second, oracle_metrics.ORACLE_FILE_WRITES)
    write_time = delta(first, second, oracle_metrics.ORACLE_FILE_WRITE_TIME)
    ((log_key, log_writes),) = by(labels, writes, role="log").items()
    assert log_key[labels.index("file")] == ALL_REDO
    assert log_key[labels.index("lun")] == "ora_redo_a,ora_redo_b"  # multiplexed members
    assert write_time[log_key] / log_writes == pytest.approx(300e-6, rel=1e-3)
    ((control_key, _),) = by(labels, writes, role="control").items()
    assert control_key[labels.index("file")] == ALL_CONTROL
    assert control_key[labels.index("lun")] == "ora_data,ora_redo_b"
    # Wait events are µs counters: the average is exact, not rounded to a millisecond.
    events = oracle_metrics.ORACLE_EVENT_LABELS
    waits = delta(first, second, oracle_metrics.ORACLE_WAITS)
    waited = delta(first, second, oracle_metrics.ORACLE_WAIT_TIME)
    ((seq_key, seq_waits),) = by(events, waits, event="db file sequential read").items()
    assert seq_key[events.index("role")] == "data" and seq_waits == 400 * 60
    assert waited[seq_key] / seq_waits == pytest.approx(425e-6, rel=1e-12)
    ((lgwr_key, lgwr),) = by(events, waits, event="log file parallel write").items()
    assert waited[lgwr_key] / lgwr == pytest.approx(300e-6, rel=1e-12)
    # Idle events the instance also reports are not published.
    assert all(k[events.index("event")] in sql.IO_EVENTS for k in waits)


def test_a_slow_sync_standby_is_published_as_replica_waits_not_as_log_lun_latency(host: FakeHost) -> None:
    # Data Guard SYNC: the redo LUN writes in 300 µs, the standby answers in 20 ms. Commits wait for
    # the standby; the log role's write latency (files and 'log file parallel write') stays 300 µs
    # and the standby's time is its own series, role replica.
    load = Load(IO("log", "write", 100, Constant(300)), commits=Commits(100), standby=Constant(20_000))
    emu = OracleEmulation()
    source = source_for(emu, host)
    first, second = two_minutes(emu, source, load)
    events = oracle_metrics.ORACLE_EVENT_LABELS
    waits = delta(first, second, oracle_metrics.ORACLE_WAITS)
    waited = delta(first, second, oracle_metrics.ORACLE_WAIT_TIME)
    ((remote_key, remote),) = by(events, waits, event="SYNC Remote Write").items()
    assert remote_key[events.index("role")] == "replica" and remote == 100 * 60
    assert remote_key[events.index("measure")] == "per_io"
    assert waited[remote_key] / remote == pytest.approx(20e-3, rel=1e-12)
    log_waits = by(events, waits, role="log")
    lgwr = next(k for k in log_waits if k[events.index("event")] == "log file parallel write")
    assert waited[lgwr] / log_waits[lgwr] == pytest.approx(300e-6, rel=1e-12)
    sync = next(k for k in log_waits if k[events.index("event")] == "log file sync")
    assert waited[sync] / log_waits[sync] > 20e-3  # the commit feels the standby
    files = oracle_metrics.ORACLE_FILE_LABELS
    writes = delta(first, second, oracle_metrics.ORACLE_FILE_WRITES)
    ((log_file, log_writes),) = by(files, writes, role="log").items()
    assert delta(first, second, oracle_metrics.ORACLE_FILE_WRITE_TIME)[
        log_file
    ] / log_writes == pytest.approx(300e-6, rel=1e-3)


def test_sync_single_block_reads_are_published_per_file_apart_from_batched_reads(host: FakeHost) -> None:
    # 425 µs synchronous single-block reads next to single-block reads in asynchronous batches
    # ("db file parallel read") at 3 ms: the file's read service time mixes both, the synchronous
    # read latency (SMALL_SYNC_READ_*) is the 425 µs a session waits per read.
    load = Load(
        IO("data", "read", 300, Constant(425)),
        IO("data", "read", 100, Constant(3000), event="db file parallel read"),
        background=False,
    )
    emu = OracleEmulation()
    source = source_for(emu, host)
    first, second = two_minutes(emu, source, load)
    labels = oracle_metrics.ORACLE_FILE_LABELS
    sync_reads = by(labels, delta(first, second, oracle_metrics.ORACLE_FILE_SYNC_READS), role="data")
    sync_time = delta(first, second, oracle_metrics.ORACLE_FILE_SYNC_READ_TIME)
    reads = delta(first, second, oracle_metrics.ORACLE_FILE_READS)
    assert len(sync_reads) == 3 and sum(sync_reads.values()) == 300 * 60
    for key, n in sync_reads.items():
        assert key[labels.index("lun")] == "ora_data"
        assert sync_time[key] / n == pytest.approx(425e-6, abs=2e-3 / n)  # ms counters: ±1 ms each
        assert reads[key] > n  # the batched reads are reads, not synchronous ones
    # Redo and control files have no synchronous single-block reads in this load.
    for role in ("log", "control"):
        assert set(
            by(labels, delta(first, second, oracle_metrics.ORACLE_FILE_SYNC_READS), role=role).values()
        ) == {0}


def test_wait_events_say_whether_one_wait_is_one_io(host: FakeHost) -> None:
    # Single-block reads, full scans (large reads: 'direct path read'), DBWR's batched writes, LGWR
    # and commits: each event's series names what time / waits means for it.
    load = Load(
        IO("data", "read", 200, Constant(425), large_fraction=0.5),
        IO("data", "write", 50, Constant(800), event="db file parallel write"),
        IO("log", "write", 100, Constant(300)),
        commits=Commits(100),
    )
    emu = OracleEmulation()
    source = source_for(emu, host)
    emu.advance(60, load)
    result = source.collect()
    assert not result.errors
    labels = oracle_metrics.ORACLE_EVENT_LABELS
    measures = {
        key[labels.index("event")]: key[labels.index("measure")]
        for key in values(result, oracle_metrics.ORACLE_WAITS)
    }
    assert measures == {
        "db file sequential read": "per_io",
        "direct path read": "time_spent",
        "db file parallel write": "time_spent",
        "log file parallel write": "per_io",
        "log file sync": "per_commit",
    }
    # The histogram's series carry the same label.
    histogram = families(result)[oracle_metrics.ORACLE_WAIT_DURATION.name]
    counted = {sample[1].values for sample in histogram.all_samples() if sample[0] == "_count"}
    assert {k[labels.index("event")]: k[labels.index("measure")] for k in counted} == measures


def test_the_oracle_text_exposes_microseconds_exactly(host: FakeHost) -> None:
    emu = OracleEmulation()
    source = source_for(emu, host)
    emu.advance(1, Load(IO("data", "read", 3, Constant(425)), background=False))
    scraper = Scraper([source])
    body = scraper.scrape(5)
    scraper.close()
    line = next(
        x
        for x in body.splitlines()
        if x.startswith("lunlat_oracle_wait_event_time_seconds_total{") and "sequential" in x
    )
    assert line.endswith(" 1275e-6")  # 3 waits of 425 µs, as Oracle counted them


def test_histograms_are_consistent_with_the_waits_and_resolve_the_goal(host: FakeHost) -> None:
    emu = OracleEmulation()
    source = source_for(emu, host)
    mix = Choice([(300, 6), (700, 3), (2500, 1)])  # 10 % of reads above the 1 ms goal (sampled, seeded)
    emu.advance(60, Load(IO("data", "read", 500, mix), background=False))
    result = source.collect()
    waits = values(result, oracle_metrics.ORACLE_WAITS)
    histogram = families(result)[oracle_metrics.ORACLE_WAIT_DURATION.name]
    buckets: dict[tuple[str, ...], dict[str, float]] = {}
    counts: dict[tuple[str, ...], float] = {}
    sums: dict[tuple[str, ...], float] = {}
    for suffix, labels, value in histogram.all_samples():
        if suffix == "_bucket":
            buckets.setdefault(labels.values[:-1], {})[labels.values[-1]] = value
        elif suffix == "_count":
            counts[labels.values] = value
        else:
            sums[labels.values] = value
    assert set(buckets) == set(counts) == set(sums) == set(waits)
    for key, per_le in buckets.items():
        cumulative = list(per_le.values())
        assert cumulative == sorted(cumulative), "buckets must be monotonic"
        assert per_le["+Inf"] == counts[key] == waits[key], "_count is the waits"
        assert len(per_le) == 27  # the same 26 bounds + +Inf for every event, always
    (seq,) = [
        k
        for k in buckets
        if k[oracle_metrics.ORACLE_EVENT_LABELS.index("event")] == "db file sequential read"
    ]
    total = counts[seq]
    assert buckets[seq]["0.000256"] == 0
    assert buckets[seq]["0.000512"] == pytest.approx(0.6 * total, rel=0.02)  # the 300 µs reads
    assert buckets[seq]["0.001024"] == pytest.approx(0.9 * total, rel=0.02)  # …and the 700 µs ones
    assert buckets[seq]["0.002048"] == buckets[seq]["0.001024"]
    assert total - buckets[seq]["0.001024"] == pytest.approx(0.1 * total, rel=0.1)  # above the goal
    # _sum is an estimate from the bucket bounds: close to the true total, documented as such.
    true_sum = values(result, oracle_metrics.ORACLE_WAIT_TIME)[seq]
    assert sums[seq] == pytest.approx(true_sum, rel=0.35)


# --- host layer labels --------------------------------------------------------------------------


def test_database_files_label_the_host_layer_luns(host: FakeHost) -> None:
    emu = OracleEmulation()
    registry = DbLunLabels()
    oracle = source_for(emu, host, registry)
    disks = DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig(), db_labels=registry)
    oracle.collect()
    (info,) = [f for f in disks.collect().families if f.spec is contract.LUN_INFO]
    got = {
        s[1].as_dict()["lun"]: (s[1].as_dict()["database"], s[1].as_dict()["role"])
        for s in info.all_samples()
    }
    assert got["ora_data"] == ("Oracle", "data")  # datafiles, tempfile and a control file copy
    assert got["ora_redo_a"] == ("Oracle", "log")
    assert got["ora_redo_b"] == ("Oracle", "log")  # redo members and a control file copy
    assert got["asm_data1"] == ("", "")
    assert got["vgora-oradata"] == ("Oracle", "data")


def test_asm_disks_are_published_per_lun_and_their_luns_labelled(host: FakeHost) -> None:
    emu = OracleEmulation(asm=True)
    registry = DbLunLabels()
    source = source_for(emu, host, registry)
    emu.advance(60, DATA_READ)
    first = source.collect()
    emu.advance(60, DATA_READ)
    second = source.collect()
    asm = oracle_metrics.ORACLE_ASM_LABELS
    reads = delta(first, second, oracle_metrics.ORACLE_ASM_READS)
    read_time = delta(first, second, oracle_metrics.ORACLE_ASM_READ_TIME)
    data_disks = by(asm, reads, diskgroup="DATA")
    assert {k[asm.index("lun")] for k in data_disks} == {"asm_data1", "asm_data2"}
    assert sum(data_disks.values()) == 400 * 60
    for key, n in data_disks.items():
        assert read_time[key] / n == pytest.approx(425e-6, rel=1e-6)
    assert {k[asm.index("diskgroup")] for k in reads} == {"DATA", "FRA"}  # candidates (group 0) left out
    # A file's `lun` is its disk group's LUNs (ASM stripes it over all of them), from the first
    # scrape on, so the database layer meets the host layer on the same LUNs.
    files = oracle_metrics.ORACLE_FILE_LABELS
    for result in (first, second):
        by_role = {
            (k[files.index("role")], k[files.index("lun")])
            for k in values(result, oracle_metrics.ORACLE_FILE_READS)
        }
        assert ("data", "asm_data1,asm_data2") in by_role
        assert ("log", "asm_data1,asm_data2,asm_fra1") in by_role  # members in +DATA and +FRA
        assert all(lun for _, lun in by_role), by_role
    _, labels = registry.merged()
    assert (labels["dm-7"].database, labels["dm-7"].role) == ("Oracle", "data")
    assert labels["dm-9"].role == "log"  # FRA holds the second redo members and a control file


def test_a_database_without_asm_publishes_no_asm_series_and_no_error(host: FakeHost) -> None:
    emu = OracleEmulation()
    result = source_for(emu, host).collect()
    assert not result.errors
    assert values(result, oracle_metrics.ORACLE_ASM_READS) == {}


# --- RAC and CDB ---------------------------------------------------------------------------------


def test_rac_instances_and_cdb_containers_become_labels(host: FakeHost) -> None:
    emu = OracleEmulation(instances=2, cdb=True, pdbs=("SALES",))
    source = source_for(emu, host)
    emu.advance(30, DATA_READ, inst_id=1)
    emu.advance(30, Load(IO("data", "read", 100, Constant(900))), inst_id=2)
    result = source.collect()
    assert not result.errors
    labels = oracle_metrics.ORACLE_FILE_LABELS
    reads = values(result, oracle_metrics.ORACLE_FILE_READS)
    assert {k[labels.index("db_instance")] for k in reads} == {"orcl1", "orcl2"}
    assert {k[labels.index("db")] for k in by(labels, reads, role="data")} >= {"CDB$ROOT", "SALES"}
    per_instance = Counter[str]()
    for key, n in by(labels, reads, role="data").items():
        per_instance[key[labels.index("db_instance")]] += int(n)
    assert per_instance == {"orcl1": 400 * 30, "orcl2": 100 * 30}
    sales = by(labels, reads, role="data", db="SALES")
    assert all(k[labels.index("file")].startswith("/u02/oradata/ORCL/sales/") for k in sales)


def test_from_the_cdb_root_each_pdbs_waits_are_its_own(host: FakeHost) -> None:
    # SALES reads at 425 µs, HR at 2 ms, next to LGWR's writes at 300 µs. Each container's
    # 'db file sequential read' keeps its own latency under its own `db`, not one instance-wide mix.
    emu = OracleEmulation(cdb=True, pdbs=("SALES", "HR"))
    source = source_for(emu, host)
    load = Load(
        IO("data", "read", 300, Constant(425), container="SALES"),
        IO("data", "read", 100, Constant(2000), container="HR"),
        IO("log", "write", 100, Constant(300)),
        background=False,
    )
    first, second = two_minutes(emu, source, load)
    labels = oracle_metrics.ORACLE_EVENT_LABELS
    waits = delta(first, second, oracle_metrics.ORACLE_WAITS)
    waited = delta(first, second, oracle_metrics.ORACLE_WAIT_TIME)
    reads = by(labels, waits, event="db file sequential read")
    assert {k[labels.index("db")]: n for k, n in reads.items()} == {"SALES": 300 * 60, "HR": 100 * 60}
    for key, n in reads.items():
        expected = 425e-6 if key[labels.index("db")] == "SALES" else 2000e-6
        assert waited[key] / n == pytest.approx(expected, rel=1e-9)


def test_a_new_datafile_gets_its_name_without_waiting_for_the_refresh(host: FakeHost) -> None:
    clock = FakeClock()
    emu = OracleEmulation()
    source = source_for(emu, host, clock=clock)
    source.collect()
    emu.add_datafile("/u02/oradata/ORCL/users02.dbf")
    emu.advance(10, Load(IO("data", "read", 100, Constant(500), files=("/u02/oradata/ORCL/users02.dbf",))))
    clock.now += 31  # lookups for unknown files are rate-limited to one per 30 s
    result = source.collect()
    files = {
        k[oracle_metrics.ORACLE_FILE_LABELS.index("file")]
        for k in values(result, oracle_metrics.ORACLE_FILE_READS)
    }
    assert "/u02/oradata/ORCL/users02.dbf" in files
    assert not any(f.startswith("file#") for f in files)


# --- restarts and faults -------------------------------------------------------------------------


def test_instance_restart_drops_the_session_then_counters_start_again(host: FakeHost) -> None:
    clock = FakeClock()
    emu = OracleEmulation()
    source = source_for(emu, host, clock=clock)
    emu.advance(60, DATA_READ)
    before = source.collect()
    emu.restart()
    with pytest.raises(SourceError) as lost:
        source.collect()
    assert lost.value.reason == "connection_lost" and "DPY-4011" in str(lost.value)
    emu.advance(30, DATA_READ)
    clock.now += 1  # the first backoff step
    lookups = sum("v$datafile" in s.lower() for s in emu.executed)
    after = source.collect()
    assert sum("v$datafile" in s.lower() for s in emu.executed) == lookups + 1, "names looked up again"
    old, new = (
        values(before, oracle_metrics.ORACLE_FILE_READS),
        values(after, oracle_metrics.ORACLE_FILE_READS),
    )
    # Every counter of the restarted instance is lower: Prometheus sees a reset, never a negative rate.
    assert old.keys() == new.keys()
    assert all(new[k] < old[k] for k in old if old[k] > 0)


def scrape_both(
    host: FakeHost, source: OracleSource, timeout: float = 5.0
) -> tuple[dict[str, bool], dict[tuple[str, str], float]]:
    """One scrape with the host layer beside the Oracle source: who was up, and the error counters."""
    disks = DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig())
    scraper = Scraper([disks, source])
    try:
        outcomes = scraper.collect(timeout)
        up = {s.name: o.up for s, o in outcomes}
        assert any(f.spec is contract.DEVICE_READS for f in outcomes[0][1].families), "host layer served"
        errors = families_errors(scraper.health_families(outcomes))
    finally:
        scraper.close()
    return up, errors


def families_errors(health: list[Family]) -> dict[tuple[str, str], float]:
    (errors,) = [f for f in health if f.spec is contract.SOURCE_ERRORS]
    return {(k[0], k[1]): v for k, v in errors.by_labels().items()}


@pytest.fixture
def emu() -> Iterator[OracleEmulation]:
    e = OracleEmulation()
    yield e
    e.release()


def test_a_login_that_hangs_is_cut_at_the_timeout_and_the_host_layer_is_served(
    host: FakeHost, emu: OracleEmulation
) -> None:
    emu.connect_delay = 30
    source = source_for(emu, host, timeout_seconds=0.3)
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, "oracle:Oracle": False}
    assert errors[("oracle:Oracle", "connect_timeout")] == 1


def test_a_query_past_the_call_timeout_fails_this_scrape_and_the_next_reconnects(
    host: FakeHost, emu: OracleEmulation
) -> None:
    emu.advance(10, DATA_READ)
    source = source_for(emu, host, timeout_seconds=0.3)
    source.collect()
    emu.hang("gv\\$con_system_event", 30)
    with pytest.raises(SourceError) as caught:
        source.collect()
    assert caught.value.reason == "query_timeout" and "DPY-4024" in str(caught.value)
    emu.clear_hangs()
    connects = emu.connects
    result = source.collect()  # a timeout drops the session but needs no backoff
    assert emu.connects == connects + 1 and values(result, oracle_metrics.ORACLE_WAITS)


def test_a_hung_query_never_delays_the_scrape_past_its_deadline(host: FakeHost, emu: OracleEmulation) -> None:
    emu.hang("gv\\$iostat_file", 30, breakable=False)
    source = source_for(emu, host, timeout_seconds=5)
    up, errors = scrape_both(host, source, timeout=0.5)
    assert up == {"diskstats": True, "oracle:Oracle": False}
    assert errors[("oracle:Oracle", "timeout")] == 1


def test_a_connection_lost_mid_scrape_is_reopened_after_the_backoff(
    host: FakeHost, emu: OracleEmulation
) -> None:
    clock = FakeClock()
    source = source_for(emu, host, clock=clock)
    source.collect()
    emu.lose_connection_after(1)  # the second query of the next scrape finds the socket closed
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, "oracle:Oracle": False}
    assert errors[("oracle:Oracle", "connection_lost")] == 1
    up, errors = scrape_both(host, source)  # within the backoff: still down, nothing new counted
    assert up["oracle:Oracle"] is False and errors[("oracle:Oracle", "connection_lost")] == 0
    clock.now += 1
    up, _ = scrape_both(host, source)
    assert up == {"diskstats": True, "oracle:Oracle": True}


def test_a_missing_grant_disables_that_query_only_and_is_retried_later(
    host: FakeHost, emu: OracleEmulation, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    emu.advance(10, DATA_READ)
    emu.revoke("gv$con_event_histogram_micro")  # 19c: the per-container histogram
    source = source_for(emu, host, clock=clock)
    first = source.collect()
    assert first.errors == Counter({"no_grant": 1})
    assert families(first)[oracle_metrics.ORACLE_WAIT_DURATION.name].samples == []
    assert values(first, oracle_metrics.ORACLE_FILE_READS) and values(first, oracle_metrics.ORACLE_WAITS)
    assert sum("grants.sql" in r.getMessage() for r in caplog.records) == 1
    queried = sum("event_histogram_micro" in s for s in emu.executed)
    second = source.collect()
    assert not second.errors and sum("event_histogram_micro" in s for s in emu.executed) == queried
    up, _ = scrape_both(host, source)  # partial data is still data: the source stays up
    assert up == {"diskstats": True, "oracle:Oracle": True}
    emu.grant("gv$con_event_histogram_micro")
    clock.now += 600
    third = source.collect()
    assert not third.errors and families(third)[oracle_metrics.ORACLE_WAIT_DURATION.name].samples


def test_a_restarting_database_is_retried_with_backoff_until_it_opens(
    host: FakeHost, emu: OracleEmulation
) -> None:
    clock = FakeClock()
    source = source_for(emu, host, clock=clock)
    source.collect()
    emu.restart(hold=True)
    up, errors = scrape_both(host, source)
    assert up == {"diskstats": True, "oracle:Oracle": False}
    assert errors[("oracle:Oracle", "connection_lost")] == 1
    attempts = []
    for _ in range(12):
        before = emu.connect_attempts
        try:
            source.collect()
        except SourceError as exc:
            assert exc.reason in ("connection_lost", "connect_failed")
        attempts.append(emu.connect_attempts - before)
        clock.now += 1
    # The lost session starts the backoff (1 s), then 2, 4, 8 s: attempts at 1, 3 and 7 s.
    assert [i for i, n in enumerate(attempts) if n] == [1, 3, 7]
    assert emu.connect_attempts - emu.connects >= 3  # each one refused with ORA-01033
    emu.open()
    clock.now += 8
    assert source.collect().families


class Corrupting:
    """A connection whose V$SYSTEM_EVENT rows (and V$DATAFILE's first row, with `lookups`) carry
    values a driver should never return."""

    def __init__(self, inner: EmulatedConnection, lookups: bool = False) -> None:
        self._inner = inner
        self._lookups = lookups
        self.call_timeout = 0
        self.version = inner.version

    def cursor(self) -> Any:
        inner = self._inner.cursor()
        outer = self

        class Cursor:
            arraysize = 100

            def execute(self, statement: str) -> None:
                outer._inner.call_timeout = outer.call_timeout
                # The per-event statement (the per-class one reads the same view, grouped).
                self._gv = "gv$con_system_event" in statement and "group by" not in statement.lower()
                self._datafile = outer._lookups and "v$datafile" in statement
                inner.execute(statement)

            def fetchall(self) -> list[Any]:
                rows = inner.fetchall()
                if self._gv and rows:
                    rows[0] = (*rows[0][:3], None, rows[0][4])
                    rows[1] = (*rows[1][:3], -5, rows[1][4])
                if self._datafile and rows:
                    rows[0] = (rows[0][0], rows[0][1], None)  # a datafile without a name
                return rows

            def close(self) -> None:
                inner.close()

        return Cursor()

    def close(self) -> None:
        self._inner.close()


def test_bad_rows_are_skipped_and_counted_never_published(host: FakeHost, emu: OracleEmulation) -> None:
    emu.advance(10, DATA_READ)
    source = source_for(emu, host, connect=lambda: Corrupting(emu.connect()))  # type: ignore[arg-type,return-value]
    result = source.collect()
    assert result.errors == Counter({"bad_row": 2})
    good = emu.query(sql.SYSTEM_EVENT.sql)
    assert len(values(result, oracle_metrics.ORACLE_WAITS)) == len(good) - 2
    assert all(v >= 0 for v in values(result, oracle_metrics.ORACLE_WAITS).values())


def test_a_bad_lookup_row_is_skipped_and_its_file_keeps_a_number(
    host: FakeHost, emu: OracleEmulation
) -> None:
    emu.advance(10, DATA_READ)
    source = source_for(emu, host, connect=lambda: Corrupting(emu.connect(), lookups=True))  # type: ignore[arg-type,return-value]
    result = source.collect()
    assert result.errors == Counter({"bad_row": 3})  # two event rows, one datafile row
    files = {
        k[oracle_metrics.ORACLE_FILE_LABELS.index("file")]
        for k in values(result, oracle_metrics.ORACLE_FILE_READS)
    }
    assert "file#1" in files and len([f for f in files if f.startswith("/u02/")]) >= 2


class Duplicating:
    """A connection whose answers to the statements naming `views` carry their first row twice."""

    def __init__(self, inner: EmulatedConnection, views: tuple[str, ...]) -> None:
        self._inner = inner
        self._views = views
        self.call_timeout = 0
        self.version = inner.version

    def cursor(self) -> Any:
        inner = self._inner.cursor()
        outer = self

        class Cursor:
            arraysize = 100

            def execute(self, statement: str) -> None:
                outer._inner.call_timeout = outer.call_timeout
                self._twice = any(
                    re.search(rf"\bfrom\s+{re.escape(v)}\b", statement, re.I) for v in outer._views
                )
                inner.execute(statement)

            def fetchall(self) -> list[Any]:
                rows: list[Any] = inner.fetchall()
                return [rows[0], *rows] if self._twice and rows else rows

            def close(self) -> None:
                inner.close()

        return Cursor()

    def close(self) -> None:
        self._inner.close()


def one_sample_per_series(result: SourceResult) -> None:
    """What Prometheus requires of a page: no two samples with the same name and labels."""
    for family in result.families:
        keys = [(suffix, labels.text) for suffix, labels, _ in family.all_samples()]
        assert len(keys) == len(set(keys)), family.spec.name


def test_rows_with_the_same_labels_are_summed_into_one_series_counted_and_said_once(
    host: FakeHost, emu: OracleEmulation, caplog: pytest.LogCaptureFixture
) -> None:
    emu.advance(10, DATA_READ)
    files, events = emu.query(sql.IOSTAT_FILE.sql), emu.query(sql.SYSTEM_EVENT.sql)
    views = ("gv$iostat_file", "gv$con_system_event", "gv$con_event_histogram_micro")
    source = source_for(emu, host, connect=lambda: Duplicating(emu.connect(), views))  # type: ignore[arg-type,return-value]
    clean = source_for(emu, host).collect()
    results = [source.collect(), source.collect()]
    for result in results:
        one_sample_per_series(result)
        # A file row, an event row, a wait class row (from the same view), a bucket row.
        assert result.errors == Counter({"duplicate_row": 4})
    # Every row's I/O is in its series, whichever row came first: the duplicated ones twice.
    reads, clean_reads = (
        values(results[0], oracle_metrics.ORACLE_FILE_READS),
        values(clean, oracle_metrics.ORACLE_FILE_READS),
    )
    assert len(reads) == len(clean_reads) == len({r[:4] for r in files})
    assert sum(reads.values()) == sum(clean_reads.values()) + files[0][4]
    waits, clean_waits = (
        values(results[0], oracle_metrics.ORACLE_WAITS),
        values(clean, oracle_metrics.ORACLE_WAITS),
    )
    assert len(waits) == len(clean_waits) == len(events)
    assert sum(waits.values()) == sum(clean_waits.values()) + events[0][3]
    said = [r for r in caplog.records if "same labels" in r.getMessage()]
    assert len(said) == 4, [r.getMessage() for r in said]  # once per duplicated series, not per scrape


# --- what the login can read ---------------------------------------------------------------------


def capability(result: SourceResult, which: str = "asm") -> dict[tuple[str, ...], float]:
    """The capability series of one capability (`which`)."""
    return {k: v for k, v in values(result, contract.SOURCE_CAPABILITY).items() if k[1] == which}


def test_a_pdb_login_on_asm_says_once_that_asm_cannot_be_read(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    # The documented one-PDB login (the compose profile's FREEPDB1): V$ASM_DISK_STAT has no rows
    # from a PDB, so the +DATA files get no lun. That must show in a metric and in the log, once.
    emu = OracleEmulation(cdb=True, pdbs=("FREEPDB1",), asm=True)
    source = source_for(emu, host, connect=lambda: emu.connect(container="FREEPDB1"))
    emu.advance(60, DATA_READ)
    results = [source.collect() for _ in range(3)]
    for result in results:
        assert values(result, oracle_metrics.ORACLE_ASM_READS) == {}
        assert capability(result) == {("oracle:Oracle", "asm"): 0}
    warnings = [r.getMessage() for r in caplog.records if "ASM disks cannot be read" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "CDB$ROOT" in warnings[0]


def test_a_root_login_on_asm_and_a_database_on_file_systems_can_read_what_they_use(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    for emu in (OracleEmulation(cdb=True, pdbs=("FREEPDB1",), asm=True), OracleEmulation()):
        emu.advance(60, DATA_READ)
        result = source_for(emu, host).collect()
        assert capability(result) == {("oracle:Oracle", "asm"): 1}
    # A database without ASM files has nothing to read there, from a PDB login too.
    emu = OracleEmulation(cdb=True, pdbs=("FREEPDB1",))
    result = source_for(emu, host, connect=lambda: emu.connect(container="FREEPDB1")).collect()
    assert capability(result) == {("oracle:Oracle", "asm"): 1}
    assert not any("ASM disks cannot be read" in r.getMessage() for r in caplog.records)


def test_asm_readable_again_clears_the_capability_and_a_new_loss_is_logged_again(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    emu = OracleEmulation(asm=True)
    clock = FakeClock()
    source = source_for(emu, host, clock=clock)
    emu.revoke("gv$asm_disk_stat")
    assert capability(source.collect()) == {("oracle:Oracle", "asm"): 0}
    emu.grant("gv$asm_disk_stat")
    clock.now += 3600  # past the no_grant pause
    assert capability(source.collect()) == {("oracle:Oracle", "asm"): 1}
    emu.revoke("gv$asm_disk_stat")
    clock.now += 3600
    assert capability(source.collect()) == {("oracle:Oracle", "asm"): 0}
    assert sum("ASM disks cannot be read" in r.getMessage() for r in caplog.records) == 2


# --- wait histograms: per container where the release has the view ------------------------------

PDB_READS = Load(
    IO("data", "read", 300, Constant(425), container="SALES"),
    IO("data", "read", 100, Constant(2000), container="HR"),
    IO("log", "write", 100, Constant(300)),
    background=False,
)


def histogram_counts(result: SourceResult) -> dict[tuple[str, str], float]:
    """(db, event) -> the histogram's `_count`."""
    labels = oracle_metrics.ORACLE_EVENT_LABELS
    return {
        (s[1].values[labels.index("db")], s[1].values[labels.index("event")]): s[2]
        for s in families(result)[oracle_metrics.ORACLE_WAIT_DURATION.name].all_samples()
        if s[0] == "_count"
    }


def test_from_19c_the_histograms_are_per_container_like_the_wait_counters(host: FakeHost) -> None:
    emu = OracleEmulation(cdb=True, pdbs=("SALES", "HR"), version="19.24.0.0.0")
    source = source_for(emu, host)
    emu.advance(60, PDB_READS)
    result = source.collect()
    assert not result.errors
    counts = histogram_counts(result)
    assert counts[("SALES", "db file sequential read")] == 300 * 60
    assert counts[("HR", "db file sequential read")] == 100 * 60
    assert ("", "db file sequential read") not in counts  # no instance-wide mix next to them
    # The same label sets as the wait counters: a histogram series and its counter line up.
    labels = oracle_metrics.ORACLE_EVENT_LABELS
    for key, n in values(result, oracle_metrics.ORACLE_WAITS).items():
        assert counts[(key[labels.index("db")], key[labels.index("event")])] == n
    # SALES's 425 µs reads and HR's 2 ms reads each sit in their own bucket.
    buckets = {
        (s[1].values[labels.index("db")], s[1].values[-1]): s[2]
        for s in families(result)[oracle_metrics.ORACLE_WAIT_DURATION.name].all_samples()
        if s[0] == "_bucket" and s[1].values[labels.index("event")] == "db file sequential read"
    }
    assert buckets[("SALES", "0.000512")] == 300 * 60 and buckets[("SALES", "0.000256")] == 0
    assert buckets[("HR", "0.002048")] == 100 * 60 and buckets[("HR", "0.001024")] == 0


def test_before_18c_the_histograms_are_instance_wide_and_the_missing_view_is_never_read(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    # The Database Reference documents V$CON_EVENT_HISTOGRAM_MICRO from 18c: on 12.2 the source
    # reads the instance-wide histogram (db empty) and says so once, not a no_grant error forever.
    caplog.set_level(logging.INFO)
    emu = OracleEmulation(cdb=True, pdbs=("SALES", "HR"), version="12.2.0.1.0")
    source = source_for(emu, host)
    emu.advance(60, PDB_READS)
    results = [source.collect() for _ in range(3)]
    assert all(not r.errors for r in results)
    assert not any("con_event_histogram" in s for s in emu.executed)
    counts = histogram_counts(results[-1])
    assert counts[("", "db file sequential read")] == 400 * 60
    assert {db for db, _ in counts} == {""}
    said = [r.getMessage() for r in caplog.records if "histograms are instance-wide" in r.getMessage()]
    assert len(said) == 1, said


# --- what kind of database the login is on ------------------------------------------------------


def test_a_non_cdb_is_told_by_v_database_cdb_not_by_the_rows_of_v_containers(host: FakeHost) -> None:
    # V$DATABASE.CDB says whether the database is a CDB (Oracle Database Reference, V$DATABASE; the
    # OpenTelemetry oracledb receiver reads the same column). Without V$CONTAINERS (its grant revoked)
    # a 12.2 non-CDB's instance-wide histogram is still its own: the capability stays 1.
    emu = OracleEmulation(cdb=False, version="12.2.0.1.0")
    emu.revoke("v$containers")
    emu.advance(60, DATA_READ)
    result = source_for(emu, host).collect()
    assert capability(result, "container_histograms") == {("oracle:Oracle", "container_histograms"): 1}
    # A 12.2 CDB root: the histogram is the instance's, not any container's.
    emu = OracleEmulation(cdb=True, pdbs=("SALES",), version="12.2.0.1.0")
    emu.revoke("v$containers")
    emu.advance(60, DATA_READ)
    result = source_for(emu, host).collect()
    assert capability(result, "container_histograms") == {("oracle:Oracle", "container_histograms"): 0}


# --- Exadata and the wait classes -----------------------------------------------------------------


def test_exadata_cell_reads_are_wait_events_with_their_role_and_measure(host: FakeHost) -> None:
    # On Exadata a buffer-cache single-block read waits 'cell single block physical read', the cell
    # counterpart of 'db file sequential read' (events.py cites the Exadata guide).
    emu = OracleEmulation()
    emu.advance(
        60,
        Load(
            IO("data", "read", 100, Constant(300), event="cell single block physical read"),
            IO("data", "read", 10, Constant(2000), large_fraction=1.0, event="cell smart table scan"),
            background=False,
        ),
    )
    result = source_for(emu, host).collect()
    labels = oracle_metrics.ORACLE_EVENT_LABELS
    waits = values(result, oracle_metrics.ORACLE_WAITS)
    seen = {k[labels.index("event")]: (k[labels.index("role")], k[labels.index("measure")]) for k in waits}
    assert seen["cell single block physical read"] == ("data", "per_io")
    assert seen["cell smart table scan"] == ("data", "time_spent")


def test_the_wait_class_series_catch_io_events_lunlat_does_not_list(host: FakeHost) -> None:
    # 'True Cache: single block fetch' is a User I/O event (Oracle True Cache guide, appendix C) that
    # events.py does not list: the per-class series still counts its time, per container.
    emu = OracleEmulation()
    emu.advance(
        60,
        Load(
            IO("data", "read", 100, Constant(500)),  # db file sequential read, User I/O
            IO("data", "read", 50, Constant(1000), event="True Cache: single block fetch"),
            IO("log", "write", 20, Constant(400)),  # log file parallel write, System I/O
            background=False,
        ),
    )
    result = source_for(emu, host).collect()
    labels = oracle_metrics.ORACLE_WAIT_CLASS_LABELS
    time_waited = values(result, oracle_metrics.ORACLE_WAIT_CLASS_TIME)
    waits = values(result, oracle_metrics.ORACLE_WAIT_CLASS_WAITS)
    by_class = {k[labels.index("wait_class")]: v for k, v in time_waited.items()}
    assert by_class["User I/O"] == pytest.approx(6000 * 0.0005 + 3000 * 0.001)
    assert by_class["System I/O"] == pytest.approx(1200 * 0.0004)
    assert {k[labels.index("wait_class")]: v for k, v in waits.items()} == {
        "User I/O": 9000,
        "System I/O": 1200,
    }
    assert {k[labels.index("db")] for k in waits} == {"ORCL"}


def test_asm_disk_times_are_this_database_s_not_every_client_s(host: FakeHost) -> None:
    # V$ASM_DISK_STAT counts a disk's I/O from every database on the disk group; V$ASM_DISK_IOSTAT
    # "queried from the database instance" shows that instance's rows only (Oracle Database
    # Reference, V$ASM_DISK_IOSTAT). Another database reading the same disks slowly must not show
    # in this database's ASM disk series.
    emu = OracleEmulation(asm=True)
    emu.advance(60, Load(IO("data", "read", 100, Constant(500)), background=False))
    disk = next(d.path for d in emu.db.disks if d.group_number != 0)
    emu.db.other_client_io(disk, reads=1000, read_micros=20_000)
    result = source_for(emu, host).collect()
    labels = oracle_metrics.ORACLE_ASM_LABELS
    reads = values(result, oracle_metrics.ORACLE_ASM_READS)
    read_time = values(result, oracle_metrics.ORACLE_ASM_READ_TIME)
    assert sum(reads.values()) == 6000
    for key, n in reads.items():
        if n:
            assert read_time[key] / n == pytest.approx(0.0005, rel=1e-6), key[labels.index("path")]


# --- the file map through a missing grant and a lost session (issue 43) ------------------------

FILE_VIEWS = (
    "v$datafile",
    "v$tempfile",
    "v$logfile",
    "v$controlfile",
)  # deploy/oracle/revoke.sql's file views


def map_age(result: SourceResult) -> float | None:
    """lunlat_database_file_map_age_seconds of the source, None when it has no map."""
    found = values(result, contract.DB_FILE_MAP_AGE)
    assert set(found) <= {("oracle:Oracle",)}, found
    return found.get(("oracle:Oracle",))


def file_luns(result: SourceResult) -> dict[tuple[str, str], str]:
    """(file, role) -> lun of every file series."""
    labels = oracle_metrics.ORACLE_FILE_LABELS
    file, role, lun = (labels.index(n) for n in ("file", "role", "lun"))
    return {(k[file], k[role]): k[lun] for k in values(result, oracle_metrics.ORACLE_FILE_READS)}


def claimed(registry: DbLunLabels) -> dict[str, tuple[str, str]]:
    return {device: (found.database, found.role) for device, found in registry.merged()[1].items()}


def reconnect(source: OracleSource, clock: FakeClock) -> SourceResult:
    with pytest.raises(SourceError) as lost:
        source.collect()
    assert lost.value.reason == "connection_lost"
    clock.now += 1  # past the reconnect backoff
    return source.collect()


def test_revoked_file_views_and_a_killed_session_keep_the_last_file_map_and_a_restored_grant_is_read_at_once(
    host: FakeHost,
) -> None:
    clock = FakeClock()
    emu = OracleEmulation()
    emu.advance(10, DATA_READ)
    registry = DbLunLabels()
    source = source_for(emu, host, registry, clock=clock)
    first = source.collect()
    luns, roles = file_luns(first), claimed(registry)
    assert luns[("/u02/oradata/ORCL/system01.dbf", "data")] == "ora_data" and roles
    for view in FILE_VIEWS:
        emu.revoke(view)
    emu.kill_sessions()
    denied = reconnect(source, clock)
    assert denied.errors == Counter({"no_grant": len(FILE_VIEWS)})
    assert file_luns(denied) == luns  # every file keeps its name and LUN
    clock.now += 45
    later = source.collect()
    assert not later.errors and file_luns(later) == luns  # not asked again before the backoff
    assert claimed(registry) == roles  # the LUNs keep their roles
    assert (map_age(first), map_age(denied), map_age(later)) == (0.0, 1.0, 46.0)
    for view in FILE_VIEWS:
        emu.grant(view)
    emu.kill_sessions()
    fresh = reconnect(source, clock)  # at the next session, not after a pause
    assert not fresh.errors and map_age(fresh) == 0.0 and file_luns(fresh) == luns


def test_a_file_map_past_its_age_limit_is_dropped_with_the_luns_roles(host: FakeHost) -> None:
    clock = FakeClock()
    emu = OracleEmulation()
    emu.advance(10, DATA_READ)
    registry = DbLunLabels()
    source = source_for(emu, host, registry, clock=clock, file_map_max_age_seconds=600)
    source.collect()
    for view in FILE_VIEWS:
        emu.revoke(view)
    emu.kill_sessions()
    reconnect(source, clock)
    clock.now += 599
    at_limit = source.collect()
    clock.now += 1
    past = source.collect()
    assert map_age(at_limit) == 600.0 and file_luns(at_limit)[("/u02/oradata/ORCL/system01.dbf", "data")]
    assert map_age(past) is None and values(past, contract.DB_FILE_MAP_MAX_AGE) == {("oracle:Oracle",): 600.0}
    assert all(lun == "" for lun in file_luns(past).values())
    assert all(database == "" for database, _ in claimed(registry).values())


def test_a_revoked_asm_view_and_a_killed_session_keep_the_asm_luns_and_their_roles(host: FakeHost) -> None:
    # ASM files are on their disk group's disks, which GV$ASM_DISK_STAT names at each scrape: that view
    # is part of the file map of a database in ASM.
    clock = FakeClock()
    emu = OracleEmulation(asm=True)
    emu.advance(10, DATA_READ)
    registry = DbLunLabels()
    source = source_for(emu, host, registry, clock=clock)
    first = source.collect()
    luns, roles = file_luns(first), claimed(registry)
    assert roles["dm-7"] == ("Oracle", "data") and roles["dm-9"] == ("Oracle", "log")
    emu.revoke("gv$asm_disk_stat")
    emu.kill_sessions()
    denied = reconnect(source, clock)
    assert denied.errors == Counter({"no_grant": 1})
    assert file_luns(denied) == luns and claimed(registry) == roles
    assert capability(denied) == {("oracle:Oracle", "asm"): 0}  # the ASM disk series are missing
    clock.now += 45
    assert map_age(source.collect()) == 46.0
    emu.grant("gv$asm_disk_stat")
    emu.kill_sessions()
    fresh = reconnect(source, clock)
    assert not fresh.errors and map_age(fresh) == 0.0 and capability(fresh) == {("oracle:Oracle", "asm"): 1}
