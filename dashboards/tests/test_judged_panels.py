"""The panels of what is judged (issue 37), run against the real Prometheus on fed data.

The overview's judged latency beside the LUN's average, the count of flagged averages beside the LUNs
breaching, the average I/O size per LUN, latency and IOPS per size class; the interference dashboard's
DSS throughput against its floor; the overview's remaining error budget per database and role.

The exporter itself (its scraper, exposition and HTTP server) publishes a synthetic source in the
contract's families (lunlat_lun_info, the diskstats counters, lunlat_device_io_latency_seconds by op
and size class), each scrape adding one fixed step of I/Os: the issue's case, 8 KiB reads at 0.4 ms
beside 1 MiB reads at 7.3 ms on one LUN, a log LUN writing at 2 ms, a DSS LUN of 1 MiB scans under
its floor and a LUN without the histogram. The Debian Prometheus scrapes it every second with the
rules generated from goals with a DSS floor (alerts/tests/judged/dss.goals.yaml), and each panel's
queries (as committed, or as generated from those goals; variables expanded as Grafana does) must
return what the step implies. Every value checked is a ratio of counters from the same scrapes (so
rate()'s extrapolation cancels), exact however Prometheus times its scrapes.

The per-I/O SLO sums (recorded.SLO_EVENTS_SUM, SLO_BAD_EVENTS_SUM) are fed to a second Prometheus as
history (promtool's backfill, one sum per step, recorded.SLO_SUM_WINDOW, over hours), since the budget
sums a whole SLO period: the budget panel must count the events of the period, none before it, and a
series younger than the last step too.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dashboards.tests import boards, lint
from dashboards.tests.stepping import SteppingSource
from lunlat import contract
from lunlat.exposition import format_value
from lunlat.goals import Goals, duration_seconds, load_goals, parse_goals
from lunlat.model import Family, LabelSet
from lunlat.promql import recorded
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceResult
from lunlat.web.server import ListenAddress, Server
from lunlat_dashboards import overview, panels, render_all, to_json
from lunlat_rules.rules import render
from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK
from tests.support.polling import wait_until

OVERVIEW = "lunlat-overview.json"
INTERFERENCE = "lunlat-workload-interference.json"
DSS_GOALS = boards.REPO / "alerts" / "tests" / "judged" / "dss.goals.yaml"
INTERVAL = "1s"
RATE_INTERVAL = "10s"  # what Grafana's $__rate_interval would be at a 1 s scrape interval, and more
READY_TIMEOUT = 90.0
BOUNDS: tuple[float, ...] = (*contract.BIO_BUCKETS, math.inf)
KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Io:
    """I/Os of one step: `count` of `size_bytes` each, every one taking `seconds`."""

    size_bytes: int
    seconds: float
    count: int

    @property
    def size_class(self) -> str:
        """contract.BIO_SIZES by the request's bytes, as the biolatency programs class it."""
        if self.size_bytes <= contract.BIO_SMALL_MAX:
            return contract.BIO_SIZES[0]
        return contract.BIO_SIZES[2] if self.size_bytes >= contract.BIO_LARGE_MIN else contract.BIO_SIZES[1]


@dataclass(frozen=True, slots=True)
class Lun:
    name: str
    device: str
    database: str
    role: str
    workload: str
    ios: dict[str, tuple[Io, ...]]
    histogram: bool = True


# The case: 8 KiB OLTP reads well within the goal beside 1 MiB scans whose transfer takes the
# LUN's average over it (1.85 ms): flagged, not breaching.
MIXED = Lun(
    "mixed_lun",
    "vdx",
    "DB1",
    "data",
    "oltp",
    {"read": (Io(8 * KIB, 0.0004, 150), Io(MIB, 0.0073, 40)), "write": (Io(8 * KIB, 0.0002, 50),)},
)
# A log LUN whose every write waits 2 ms: breaching (writes are judged on every I/O).
SLOW = Lun("slow_lun", "vdy", "DB2", "log", "oltp", {"write": (Io(8 * KIB, 0.002, 100),)})
# A DSS LUN of scans alone: no small read to judge, its average flagged; about 100 MiB/s against the
# 400 MiB/s floor of dss.goals.yaml.
DSS = Lun("dss_lun", "vdz", "DB3", "data", "dss", {"read": (Io(MIB, 0.005, 100),)})
# A host without the per-I/O histogram: every read judged (judged="all"), its size from diskstats.
BARE = Lun("bare_lun", "vdw", "DB4", "data", "oltp", {"read": (Io(64 * KIB, 0.0005, 100),)}, histogram=False)
LUNS = (MIXED, SLOW, DSS, BARE)


def _average_of(ios: tuple[Io, ...]) -> float:
    return _total(ios, "seconds") / _total(ios, "count")


def _total(ios: tuple[Io, ...], what: str) -> float:
    return sum(
        io.count * {"count": 1.0, "seconds": io.seconds, "bytes": float(io.size_bytes)}[what] for io in ios
    )


class SizedSource(SteppingSource):
    """A source publishing LUNS in the contract's families, one step of I/Os more per collection."""

    def families(self, k: int) -> SourceResult:
        info = Family(contract.LUN_INFO)
        specs = {
            "read": (contract.DEVICE_READS, contract.DEVICE_READ_TIME, contract.DEVICE_READ_BYTES),
            "write": (contract.DEVICE_WRITES, contract.DEVICE_WRITE_TIME, contract.DEVICE_WRITE_BYTES),
        }
        counters = {spec.name: Family(spec) for triple in specs.values() for spec in triple}
        histogram = Family(contract.DEVICE_IO_LATENCY)
        for lun in LUNS:
            values = {
                "lun": lun.name,
                "device": lun.device,
                "database": lun.database,
                "role": lun.role,
                "workload": lun.workload,
                "kind": "lun",
            }
            info.add(
                LabelSet(
                    contract.LUN_INFO_LABELS, tuple(values.get(n, "") for n in contract.LUN_INFO_LABELS)
                ),
                1,
            )
            # The device's series carry its kind and roles, as the exporter publishes them.
            device = LabelSet(
                contract.DEVICE_LABELS, tuple(values.get(n, "") for n in contract.DEVICE_LABELS)
            )
            for op, (ops, seconds, bytes_) in specs.items():
                ios = lun.ios.get(op, ())
                counters[ops.name].add(device, k * _total(ios, "count"))
                counters[seconds.name].add(device, k * _total(ios, "seconds"))
                counters[bytes_.name].add(device, k * _total(ios, "bytes"))
                if not lun.histogram:
                    continue
                for size in contract.BIO_SIZES:
                    of_size = [io for io in ios if io.size_class == size]
                    if not of_size:
                        continue
                    for bound in BOUNDS:
                        le = "+Inf" if math.isinf(bound) else format_value(bound)
                        count = k * sum(io.count for io in of_size if io.seconds <= bound)
                        names = (*contract.BIO_LABELS, "le")
                        histogram.add(LabelSet(names, (*device.values, op, size, le)), count, "_bucket")
                    labels = LabelSet(contract.BIO_LABELS, (*device.values, op, size))
                    histogram.add(labels, k * _total(tuple(of_size), "count"), "_count")
                    histogram.add(labels, k * _total(tuple(of_size), "seconds"), "_sum")
        return SourceResult([info, *counters.values(), histogram])


def _dss_goals() -> Goals:
    return load_goals(DSS_GOALS)


@pytest.fixture(scope="module")
def api() -> Iterator[prometheus_server.PromApi]:
    reason = prometheus_server.missing()
    if reason:
        pytest.skip(reason)
    scraper = Scraper([SizedSource()])
    server = Server(ListenAddress.parse(f"{LOOPBACK}:0"), scraper)
    thread = threading.Thread(target=server.serve_forever, name="exporter", daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory(prefix="lunlat-judged-panels-") as workdir:
            # The rules of the goals with a DSS floor: the floor is recorded, the rest as shipped.
            rules = Path(workdir) / "lunlat.rules.yml"
            rules.write_text(render(_dss_goals()), encoding="utf-8")
            cfg = prometheus_server.config([f"{LOOPBACK}:{server.port}"], INTERVAL)
            cfg["rule_files"] = [str(rules)]
            process = prometheus_server.start(Path(workdir) / "prometheus", cfg)
            try:
                found = prometheus_server.api(process)
                _wait_for_every_panel(found)
                yield found
            finally:
                process.stop()
    finally:
        server.shutdown()
        server.server_close()
        scraper.close()


# --- the panels as committed (or generated from the DSS goals), expanded as Grafana does --------


def _dss_boards() -> dict[str, dict[str, Any]]:
    return {name: json.loads(text) for name, text in render_all(_dss_goals()).items()}


def _board(name: str) -> dict[str, Any]:
    # The floor row exists only where a tier sets a floor: the interference board of the DSS goals.
    return _dss_boards()[name] if name == INTERFERENCE else boards.load()[name]


def _panel(board: dict[str, Any], title: str) -> dict[str, Any]:
    return next(p for p in boards.panels(board) if p["title"] == title)


def _values(board: dict[str, Any], **chosen: str) -> dict[str, str]:
    values = {
        v.name: v.all_value if v.all_value is not None else (v.current or "") for v in boards.variables(board)
    }
    values.update({name: boards.regex_escape(value) for name, value in chosen.items()})
    return {**values, "__rate_interval": RATE_INTERVAL, "__range": "60s", "__interval": INTERVAL}


def _query(
    api: prometheus_server.PromApi,
    name: str,
    title: str,
    ref: str = "A",
    at: float | None = None,
    **chosen: str,
) -> list[dict[str, Any]]:
    board = _board(name)
    target = next(t for t in _panel(board, title)["targets"] if t["refId"] == ref)
    return api.query(boards.expand(target["expr"], _values(board, **chosen)), at=at)


JUDGED = tuple(f"Judged {op} latency beside the LUN's average" for op in recorded.OPS)
NEW_PANELS: tuple[tuple[str, str], ...] = (
    *((OVERVIEW, title) for title in JUDGED),
    (OVERVIEW, "Averages above goal, judged within it (flagged)"),
    (OVERVIEW, "Average I/O size per LUN"),
    (OVERVIEW, "Latency by I/O size class"),
    (OVERVIEW, "IOPS by I/O size class"),
    (INTERFERENCE, "Throughput against its floor"),
)


def _empty(api: prometheus_server.PromApi) -> list[str]:
    return [
        f"{title} {target['refId']}"
        for name, title in NEW_PANELS
        for target in _panel(_board(name), title)["targets"]
        if not _query(api, name, title, target["refId"])
    ]


def _judged_ios(lun: Lun, op: str) -> tuple[Io, ...]:
    """The I/Os the default goal judges (judge: {read: small, write: all}): a host without the
    histogram has every read judged."""
    ios = lun.ios.get(op, ())
    if op == "read" and lun.histogram:
        return tuple(io for io in ios if io.size_class == "small")
    return ios


JUDGED_PAIRS = {(lun.name, op) for lun in LUNS for op in recorded.OPS if _judged_ios(lun, op)}
BREACHING = {
    (lun.name, op)
    for lun in LUNS
    for op in recorded.OPS
    if (judged := _judged_ios(lun, op)) and _average_of(judged) > contract.DEFAULT_GOAL_SECONDS
}
FLAGGED = {
    (lun.name, op)
    for lun in LUNS
    for op, ios in lun.ios.items()
    if _average_of(ios) > contract.DEFAULT_GOAL_SECONDS and (lun.name, op) not in BREACHING
}


def _wait_for_every_panel(api: prometheus_server.PromApi) -> None:
    """Until every new panel has data and every judged LUN and op is judged: the rules' 1-minute
    rates reach the idle guard only once their window holds most of a minute of scrapes. A bound,
    not a measurement."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        judged = {(r["metric"]["lun"], r["metric"]["op"]) for r in api.query(recorded.ABOVE_GOAL)}
        if judged == JUDGED_PAIRS and not _empty(api):
            return
        time.sleep(1)


def _by(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(label, "") for label in labels): float(r["value"][1]) for r in result}


def _average(lun: Lun, op: str) -> float:
    return _total(lun.ios[op], "seconds") / _total(lun.ios[op], "count")


# --- the checks -------------------------------------------------------------------------------


def test_every_new_panel_query_returns_data(api: prometheus_server.PromApi) -> None:
    assert not _empty(api), "empty although the synthetic LUNs exercise them"


def test_the_judged_latency_beside_the_average(api: prometheus_server.PromApi) -> None:
    """Read it as the issue does: mixed_lun averages 1.85 ms, its small reads 0.4 ms."""
    reads, writes = JUDGED
    at = time.time()
    small_reads = MIXED.ios["read"][0]
    assert small_reads.size_class == "small"
    assert _by(_query(api, OVERVIEW, reads, "A", at), "lun", "judged") == pytest.approx(
        {(MIXED.name, "small"): small_reads.seconds, (BARE.name, "all"): _average(BARE, "read")}, rel=1e-6
    )  # dss_lun reads no small I/O: nothing of it to judge
    assert _by(_query(api, OVERVIEW, reads, "B", at), "lun") == pytest.approx(
        {(lun.name,): _average(lun, "read") for lun in (MIXED, DSS, BARE)}, rel=1e-6
    )
    assert _average(MIXED, "read") > contract.DEFAULT_GOAL_SECONDS
    assert _by(_query(api, OVERVIEW, reads, "C", at), "lun") == {("",): contract.DEFAULT_GOAL_SECONDS}
    # writes are judged on every I/O (judge: {write: all}): judged and average are the same
    judged_writes = _by(_query(api, OVERVIEW, writes, "A", at), "lun", "judged")
    assert judged_writes == pytest.approx(
        {(lun.name, "all"): _average(lun, "write") for lun in (MIXED, SLOW)}, rel=1e-6
    )
    assert _by(_query(api, OVERVIEW, writes, "B", at), "lun") == pytest.approx(
        {(lun.name,): _average(lun, "write") for lun in (MIXED, SLOW)}, rel=1e-6
    )
    # the database variable narrows both lines to its LUN
    assert _by(_query(api, OVERVIEW, reads, "A", at, database=BARE.database), "lun") == pytest.approx(
        {(BARE.name,): _average(BARE, "read")}, rel=1e-6
    )


def test_flagged_averages_beside_the_luns_breaching(api: prometheus_server.PromApi) -> None:
    """mixed_lun's and dss_lun's read averages are above the goal with nothing judged above it
    (flagged: LunLatencyAverageHigh's case); slow_lun's writes breach (and are not flagged)."""
    # the scenario as the issue tells it (what the sets are computed from the fed data to be)
    assert {(MIXED.name, "read"), (DSS.name, "read")} == FLAGGED
    assert {(SLOW.name, "write")} == BREACHING
    flagged_title, at = "Averages above goal, judged within it (flagged)", time.time()

    def count(title: str, **chosen: str) -> list[float]:
        return [float(r["value"][1]) for r in _query(api, OVERVIEW, title, at=at, **chosen)]

    assert count(flagged_title) == [len(FLAGGED)]
    assert count("LUNs breaching now") == [len(BREACHING)]

    # The bool agrees, once lunlat-slo, which records it once a minute (recorded.SLO_GROUP), has
    # judged a minute of the breach: up to two of its intervals after the fixture is ready.
    def by_bool() -> set[tuple[str, str]]:
        return {(r["metric"]["lun"], r["metric"]["op"]) for r in api.query(f"{recorded.ABOVE_GOAL} == 1")}

    slo_interval = duration_seconds(recorded.SLO_INTERVAL)
    wait_until(
        lambda: by_bool() == BREACHING, f"{recorded.ABOVE_GOAL} of {BREACHING}", 2 * slo_interval + 30, 1
    )
    # one database at a time: DB3's LUN (scans only) is flagged, DB2's (breaching) is not
    assert count(flagged_title, database=DSS.database) == [1.0]
    assert count(flagged_title, database=SLOW.database) == [0.0]


def test_the_average_io_size_of_every_lun(api: prometheus_server.PromApi) -> None:
    """Bytes per I/O from the kernel counters, with the histogram or without it (bare_lun)."""
    sizes = _by(_query(api, OVERVIEW, "Average I/O size per LUN"), "lun", "op")
    expected = {
        (lun.name, op): _total(ios, "bytes") / _total(ios, "count")
        for lun in LUNS
        for op, ios in lun.ios.items()
    }
    assert sizes == pytest.approx(expected, rel=1e-9)
    assert sizes[(BARE.name, "read")] == 64 * KIB


def test_latency_and_iops_by_size_class(api: prometheus_server.PromApi) -> None:
    at = time.time()
    latency = _by(_query(api, OVERVIEW, "Latency by I/O size class", at=at), "lun", "op", "size", "database")
    # one I/O latency per class in the fed data; bare_lun has no histogram: not drawn here
    fed = {
        (lun.name, op, io.size_class, lun.database): io
        for lun in LUNS
        if lun.histogram
        for op, ios in lun.ios.items()
        for io in ios
    }
    assert {"small", "large"} <= {size for _, _, size, _ in fed}
    assert latency == pytest.approx({key: io.seconds for key, io in fed.items()}, rel=1e-6)
    iops = _by(_query(api, OVERVIEW, "IOPS by I/O size class", at=at), "lun", "op", "size")
    assert iops.keys() == {key[:3] for key in fed}
    # IOPS relative to one class: the ratio of the fed counts (the rate's extrapolation cancels)
    base = (MIXED.name, "read", "small")
    assert {key: value / iops[base] for key, value in iops.items()} == pytest.approx(
        {key[:3]: io.count / fed[(*base, MIXED.database)].count for key, io in fed.items()}, rel=1e-9
    )
    only_log = _by(_query(api, OVERVIEW, "Latency by I/O size class", at=at, role="log"), "lun")
    assert only_log.keys() == {(SLOW.name,)}


def test_dss_throughput_against_its_floor(api: prometheus_server.PromApi) -> None:
    """Only the LUN whose tier sets a floor; its floor as the goals say, what it moved as the
    throughput panel shows it, reads and writes together."""
    title, at = "Throughput against its floor", time.time()
    floor = _by(_query(api, INTERFERENCE, title, "B", at), "lun")
    (override,) = _dss_goals().overrides
    assert override.throughput_floor_mib_s is not None
    assert floor == {(DSS.name,): override.throughput_floor_mib_s * MIB}
    moved = _by(_query(api, INTERFERENCE, title, "A", at), "lun")
    assert moved.keys() == {(DSS.name,)}
    throughput = _by(_query(api, OVERVIEW, "Throughput per LUN", at=at, lun=DSS.name), "op")
    assert moved[(DSS.name,)] == pytest.approx(sum(throughput.values()), rel=1e-9)
    assert moved[(DSS.name,)] < floor[(DSS.name,)]  # about 100 MiB/s a step a second, a quarter of it
    # the floor row is drawn for goals whose tiers set a floor only
    assert INTERFERENCE in boards.load() and not any(
        p["title"] == title for p in boards.panels(boards.load()[INTERFERENCE])
    )


# --- the remaining error budget, on a period of fed history ---------------------------------


# Goals with a 6-hour SLO period, so hours of history stand for a period (the burn windows must fit in it).
BUDGET_GOALS = """
slo:
  objective: 0.99
  period: 6h
  fast: [{long: 1h, short: 5m, burn_rate: 14.4}]
  slow: [{long: 6h, short: 30m, burn_rate: 1}]
"""
STEP = int(duration_seconds(recorded.SLO_SUM_WINDOW))  # seconds: the sums' step (overview.SLO_SUM_STEP)
PERIOD_STEPS = int(duration_seconds("6h")) // STEP  # BUDGET_GOALS' period in steps
BUDGET_TITLE = "Remaining error budget per database and role"


@dataclass(frozen=True, slots=True)
class Sums:
    """One SLO series' sums, one per step: (seconds after the end of the history, events, bad events)."""

    labels: dict[str, str]
    points: tuple[tuple[int, float, float], ...]


def _slo_labels(database: str, role: str, op: str, layer: str, indicator: str) -> dict[str, str]:
    values = {
        "job": "lunlat",
        "instance": "dbhost:9431",
        "database": database,
        "role": role,
        "workload": "oltp",
        "layer": layer,
        "op": op,
        "indicator": indicator,
    }
    assert tuple(values) == recorded.SLO_LABELS
    return {**values, "severity": "page", "engine": "oracle"}


# Counted in the period: 61 sums of the last 5 hours, bad only in the last 31. Before it (7-8 hours
# back) every event bad, which would spend the budget many times over if counted.
LOG = Sums(
    _slo_labels("DB1", "log", "write", "host", "io"),
    tuple((-STEP * i, 10000.0, 40.0 if i <= 30 else 0.0) for i in range(61))
    + tuple((-STEP * i, 10000.0, 10000.0) for i in range(PERIOD_STEPS + 24, PERIOD_STEPS + 37)),
)
# Minutes where no histogram exists: one judged evaluation per sum here, 2 of the 61 bad.
DATA = Sums(
    _slo_labels("DB2", "data", "read", "db", "minute"),
    tuple((-STEP * i, 1.0, 1.0 if i in (12, 24) else 0.0) for i in range(61)),
)
# A series younger than the last step: one sum half a step after it.
YOUNG = Sums(_slo_labels("DB3", "log", "write", "host", "io"), ((STEP // 2, 1000.0, 10.0),))


def _openmetrics(end: int, series: tuple[Sums, ...]) -> str:
    lines = []
    for name, index in ((recorded.SLO_EVENTS_SUM, 1), (recorded.SLO_BAD_EVENTS_SUM, 2)):
        lines.append(f"# TYPE {name} gauge")
        for sums in series:
            labels = ",".join(f'{k}="{v}"' for k, v in sums.labels.items())
            for point in sorted(sums.points):
                lines.append(f"{name}{{{labels}}} {point[index]} {end + point[0]}")
    return "\n".join([*lines, "# EOF", ""])


def _bad_share(sums: Sums, period: float) -> float:
    """Bad events / events of the sums inside the period ending at the history's end, or, for a
    series with none there (younger than the last step), of all it has."""
    inside = [p for p in sums.points if -period < p[0] <= 0] or list(sums.points)
    return sum(p[2] for p in inside) / sum(p[1] for p in inside)


def _budget_board(goals: Goals) -> dict[str, Any]:
    """The overview as generated once the rules record the SLO sums (their rules are being written)."""
    records = panels.rules_record(goals) | {recorded.SLO_EVENTS_SUM, recorded.SLO_BAD_EVENTS_SUM}
    return to_json(overview.build(goals, records).build())


@pytest.fixture(scope="module")
def history() -> Iterator[tuple[prometheus_server.PromApi, int]]:
    """A Prometheus holding the sums as history ending at a step 12 steps ago; yields it and
    that end."""
    reason = prometheus_server.missing()
    if reason:
        pytest.skip(reason)
    end = (int(time.time()) // STEP - 12) * STEP
    with tempfile.TemporaryDirectory(prefix="lunlat-budget-") as workdir:
        source = Path(workdir) / "sums.om"
        source.write_text(_openmetrics(end, (LOG, DATA, YOUNG)), encoding="utf-8")
        data = Path(workdir) / "prometheus" / "prometheus-data"
        data.mkdir(parents=True)
        # promtool tsdb create-blocks-from openmetrics: prometheus.io/docs/prometheus/latest/storage,
        # "Backfilling from OpenMetrics format"; Prometheus loads the blocks at start.
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            check=True,
            capture_output=True,
        )
        process = prometheus_server.start(Path(workdir) / "prometheus", {"global": {"scrape_interval": "1m"}})
        try:
            yield prometheus_server.api(process), end
        finally:
            process.stop()


def _budget(
    api: prometheus_server.PromApi, board: dict[str, Any], at: float, **chosen: str
) -> dict[tuple[str, ...], float]:
    target = _panel(board, BUDGET_TITLE)["targets"][0]
    assert target.get("instant"), "one bar per series: the budget now"
    return _by(
        api.query(boards.expand(target["expr"], _values(board, **chosen)), at=at), "database", "indicator"
    )


def test_the_remaining_error_budget_over_the_period(history: tuple[prometheus_server.PromApi, int]) -> None:
    api, end = history
    goals = parse_goals(BUDGET_GOALS)
    board = _budget_board(goals)
    budget = goals.slo.error_budget
    # Before the next step: the young series' one sum has no step of its own yet.
    got = _budget(api, board, end + STEP * 3 // 4)
    period = duration_seconds(goals.slo.period)
    expected = {
        (sums.labels["database"], sums.labels["indicator"]): 1 - _bad_share(sums, period) / budget
        for sums in (LOG, DATA, YOUNG)
    }
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert got[("DB1", "io")] > 0 > got[("DB2", "minute")]  # within its objective; missed
    assert _budget(api, board, end + STEP * 3 // 4, database="DB2").keys() == {("DB2", "minute")}


def test_the_budget_row_is_drawn_where_the_rules_record_the_sums() -> None:
    """The committed overview has the row exactly when the committed rules record both sums; as
    generated for rules that do, its query passes the lint against those rules' names."""
    committed = boards.load()[OVERVIEW]
    drawn = any(p["title"] == BUDGET_TITLE for p in boards.panels(committed))
    known = lint.known_metrics((boards.REPO / "alerts" / "lunlat.rules.yml").read_text(encoding="utf-8"))
    assert drawn == ({recorded.SLO_EVENTS_SUM, recorded.SLO_BAD_EVENTS_SUM} <= known)
    board = _budget_board(load_goals(boards.REPO / "alerts" / "goals.yaml"))
    names = known | {recorded.SLO_EVENTS_SUM, recorded.SLO_BAD_EVENTS_SUM}
    problems = [*lint.panel_problems(OVERVIEW, board), *lint.query_problems(OVERVIEW, board, names)]
    assert not problems, "\n".join(problems)
    expr = _panel(board, BUDGET_TITLE)["targets"][0]["expr"]
    goals = load_goals(boards.REPO / "alerts" / "goals.yaml")
    assert f"[{goals.slo.period}:{overview.SLO_SUM_STEP}]" in expr  # the goals' period, the sums' step
    assert f") / {goals.slo.error_budget:g}\n)" in expr  # the default objective's branch, last
    for entry in goals.slo.objectives:  # and each objective's, first
        assert expr.index(f") / {entry.error_budget:g}\n") < expr.index(f") / {goals.slo.error_budget:g}\n)")


def test_the_floor_row_passes_the_lint_against_the_rules_of_the_same_goals() -> None:
    board = _dss_boards()[INTERFERENCE]
    problems = [
        *lint.panel_problems(INTERFERENCE, board),
        *lint.query_problems(INTERFERENCE, board, lint.known_metrics(render(_dss_goals()))),
    ]
    assert not problems, "\n".join(problems)
