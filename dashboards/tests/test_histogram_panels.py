"""The overview's per-I/O latency panels and the tail rules, run against the real Prometheus.

The biolatency source (the block layer's per-I/O histogram) needs eBPF and root, and the lab's data
(dashboards/tests/test_queries.py) gets it once that source exists. Here the exporter itself (its
scraper, exposition and HTTP server) publishes a synthetic source in the exact families the
contract defines: lunlat_lun_info, the diskstats counters and lunlat_device_io_latency_seconds
(every bucket, `_sum`, `_count`), each scrape adding one fixed step of I/Os. The Debian Prometheus
scrapes it every second with the repo's rules, and each new panel's queries (as committed in the
dashboard JSON, variables expanded as Grafana does) must return the values the step implies:
bucket shares, p50 and p99 as histogram_quantile interpolates them, the average the alerts judge,
the share of I/Os above the goal; and the tail alert must be pending for the LUN with a tail under
a fine average, not for the one whose average breaches.

Every value the step implies is a ratio of counters from the same scrapes (so rate()'s
extrapolation cancels), hence exact however Prometheus times its scrapes.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dashboards.tests import boards
from dashboards.tests.stepping import SteppingSource
from lunlat import contract
from lunlat.exposition import format_value
from lunlat.goals import duration_seconds
from lunlat.model import Family, LabelSet
from lunlat.promql import recorded
from lunlat.scrape import Scraper
from lunlat.sources.base import SourceResult
from lunlat.web.server import ListenAddress, Server
from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK

OVERVIEW = "lunlat-overview.json"
INTERVAL = "1s"
RATE_INTERVAL = "10s"  # what Grafana's $__rate_interval would be at a 1 s scrape interval, and more
# The share above goal is recorded once a minute (lunlat-slo) from the goal, itself recorded once a
# minute (lunlat-goal): each group's first evaluation comes at an offset of its own within its
# interval, so the first share can take both intervals, then 30 s for a loaded lane.
READY_TIMEOUT = duration_seconds(recorded.GOAL_INTERVAL) + duration_seconds(recorded.SLO_INTERVAL) + 30.0
BOUNDS: tuple[float, ...] = (*contract.BIO_BUCKETS, math.inf)


@dataclass(frozen=True, slots=True)
class Lun:
    """One LUN of the synthetic host: its labels and, per op, the I/Os of one step by latency (s)."""

    name: str
    device: str
    database: str
    role: str
    ios: dict[str, dict[float, int]]


# A tail under a fine average: 10 % of the reads at 5 ms, 90 % at 0.3 ms (average 0.77 ms); fast
# writes. And a LUN whose average is above goal: every read at 3 ms.
TAIL = Lun("tail_lun", "vdx", "DB1", "data", {"read": {0.0003: 900, 0.005: 100}, "write": {0.0002: 1000}})
SLOW = Lun("slow_lun", "vdy", "DB2", "log", {"read": {0.003: 500}})
LUNS = (TAIL, SLOW)


class HistogramSource(SteppingSource):
    """A source publishing LUNS in the contract's families, one step of I/Os more per collection."""

    def families(self, k: int) -> SourceResult:
        info = Family(contract.LUN_INFO)
        counters = {
            spec.name: Family(spec)
            for spec in (
                contract.DEVICE_READS,
                contract.DEVICE_WRITES,
                contract.DEVICE_READ_TIME,
                contract.DEVICE_WRITE_TIME,
            )
        }
        histogram = Family(contract.DEVICE_IO_LATENCY)
        for lun in LUNS:
            values = {
                "lun": lun.name,
                "device": lun.device,
                "database": lun.database,
                "role": lun.role,
                "workload": "oltp",
                "kind": "lun",
            }
            labels = LabelSet(
                contract.LUN_INFO_LABELS, tuple(values.get(n, "") for n in contract.LUN_INFO_LABELS)
            )
            info.add(labels, 1)
            # The device's series carry its kind and roles, as the exporter publishes them.
            device = LabelSet(
                contract.DEVICE_LABELS, tuple(values.get(n, "") for n in contract.DEVICE_LABELS)
            )
            for op, ios in lun.ios.items():
                spec_ops, spec_time = (
                    (contract.DEVICE_READS, contract.DEVICE_READ_TIME)
                    if op == "read"
                    else (contract.DEVICE_WRITES, contract.DEVICE_WRITE_TIME)
                )
                counters[spec_ops.name].add(device, k * sum(ios.values()))
                counters[spec_time.name].add(device, k * sum(lat * n for lat, n in ios.items()))
                names = (*contract.BIO_LABELS, "le")
                for bound in BOUNDS:
                    le = "+Inf" if math.isinf(bound) else format_value(bound)
                    count = k * sum(n for lat, n in ios.items() if lat <= bound)
                    histogram.add(LabelSet(names, (*device.values, op, "small", le)), count, "_bucket")
                # One size class: the panels and rules add the classes up, so one holding all is enough.
                op_labels = LabelSet(contract.BIO_LABELS, (*device.values, op, "small"))
                histogram.add(op_labels, k * sum(ios.values()), "_count")
                histogram.add(op_labels, k * sum(lat * n for lat, n in ios.items()), "_sum")
        return SourceResult([info, *counters.values(), histogram])


@pytest.fixture(scope="module")
def api() -> Iterator[prometheus_server.PromApi]:
    reason = prometheus_server.missing()
    if reason:
        pytest.skip(reason)
    scraper = Scraper([HistogramSource()])
    server = Server(ListenAddress.parse(f"{LOOPBACK}:0"), scraper)
    thread = threading.Thread(target=server.serve_forever, name="exporter", daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory(prefix="lunlat-histogram-panels-") as workdir:
            process = prometheus_server.start(
                Path(workdir) / "prometheus",
                prometheus_server.config([f"{LOOPBACK}:{server.port}"], INTERVAL),
            )
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


# --- the panels as committed, expanded as Grafana expands them ------------------------------


def _panel(title: str) -> dict[str, Any]:
    return next(p for p in boards.panels(boards.load()[OVERVIEW]) if p["title"] == title)


def _values(**chosen: str) -> dict[str, str]:
    board = boards.load()[OVERVIEW]
    values = {v.name: v.all_value or "" for v in boards.variables(board)}
    values.update({name: boards.regex_escape(value) for name, value in chosen.items()})
    return {**values, "__rate_interval": RATE_INTERVAL, "__range": "60s", "__interval": INTERVAL}


def _query(api: prometheus_server.PromApi, title: str, ref: str = "A", **chosen: str) -> list[dict[str, Any]]:
    target = next(t for t in _panel(title)["targets"] if t["refId"] == ref)
    return api.query(boards.expand(target["expr"], _values(**chosen)))


NEW_PANELS = (
    "Read latency distribution per I/O",
    "Write latency distribution per I/O",
    "Read latency per I/O: average, p50 and p99 against the goal",
    "Write latency per I/O: average, p50 and p99 against the goal",
    "I/Os slower than the goal",
)


def _empty(api: prometheus_server.PromApi) -> list[str]:
    return [
        f"{title} {target['refId']}"
        for title in NEW_PANELS
        for target in _panel(title)["targets"]
        if not _query(api, title, target["refId"])
    ]


def _wait_for_every_panel(api: prometheus_server.PromApi) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while _empty(api) and time.monotonic() < deadline:
        time.sleep(1)


def _by(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(label, "") for label in labels): float(r["value"][1]) for r in result}


def _cumulative_shares(result: list[dict[str, Any]]) -> dict[str, float]:
    buckets = _by(result, "le")
    total = buckets[("+Inf",)]
    return {le: value / total for (le,), value in buckets.items()}


def _expected_shares(luns: tuple[Lun, ...], op: str) -> dict[str, float]:
    ios = [(lat, n) for lun in luns for lat, n in lun.ios.get(op, {}).items()]
    total = sum(n for _, n in ios)
    return {
        ("+Inf" if math.isinf(b) else format_value(b)): sum(n for lat, n in ios if lat <= b) / total
        for b in BOUNDS
    }


# --- the checks -------------------------------------------------------------------------------


def test_every_new_panel_query_returns_data(api: prometheus_server.PromApi) -> None:
    assert not _empty(api), "empty although the synthetic LUNs exercise them"


def test_the_heatmaps_hold_every_bucket_of_the_selected_luns(api: prometheus_server.PromApi) -> None:
    every = _cumulative_shares(_query(api, "Read latency distribution per I/O"))
    assert every.keys() == _expected_shares(LUNS, "read").keys()
    assert "0.001" in every  # the goal is an edge
    assert every == pytest.approx(_expected_shares(LUNS, "read"), rel=1e-9)
    # one database selected: its LUN's buckets only (the filter goes through lunlat_lun_info)
    db1 = _cumulative_shares(_query(api, "Read latency distribution per I/O", database="DB1"))
    assert db1 == pytest.approx(_expected_shares((TAIL,), "read"), rel=1e-9)
    assert db1["0.004"] == pytest.approx(0.9) and db1["0.008"] == pytest.approx(1.0)
    writes = _cumulative_shares(_query(api, "Write latency distribution per I/O"))
    assert writes == pytest.approx(_expected_shares(LUNS, "write"), rel=1e-9)


def test_average_p50_and_p99_against_the_goal(api: prometheus_server.PromApi) -> None:
    title = "Read latency per I/O: average, p50 and p99 against the goal"
    assert _by(_query(api, title, "A"), "lun") == pytest.approx(
        {("tail_lun",): 0.00077, ("slow_lun",): 0.003}, rel=1e-6
    )
    # histogram_quantile interpolates inside the bucket holding the rank: tail_lun's p50 (rank 500
    # of 1000) in (0.25 ms, 0.5 ms] holding 900, its p99 (rank 990) in (4 ms, 8 ms] holding 100.
    # (Computed by the panel from the buckets, not recorded: layers.io_latency_quantile.)
    assert _by(_query(api, title, "B"), "lun") == pytest.approx(
        {("tail_lun",): 0.00025 + 0.00025 * 500 / 900, ("slow_lun",): 0.002 + 0.002 * 250 / 500},
        rel=1e-9,
    )
    assert _by(_query(api, title, "C"), "lun") == pytest.approx(
        {("tail_lun",): 0.004 + 0.004 * 90 / 100, ("slow_lun",): 0.002 + 0.002 * 495 / 500},
        rel=1e-9,
    )
    assert _by(_query(api, title, "D"), "lun") == {("",): 0.001}
    # the write panel: every write at 0.2 ms, all in (0.125 ms, 0.25 ms]
    writes = "Write latency per I/O: average, p50 and p99 against the goal"
    assert _by(_query(api, writes, "C"), "lun") == pytest.approx(
        {("tail_lun",): 0.000125 + 0.000125 * 990 / 1000}, rel=1e-9
    )
    assert _by(_query(api, title, "C", lun="tail_lun"), "lun") == pytest.approx({("tail_lun",): 0.0076})


def test_the_share_above_goal(api: prometheus_server.PromApi) -> None:
    shares = _by(_query(api, "I/Os slower than the goal"), "lun", "op")
    assert shares == pytest.approx(
        {("tail_lun", "read"): 0.1, ("tail_lun", "write"): 0.0, ("slow_lun", "read"): 1.0}, abs=1e-12
    )
    assert _by(_query(api, "I/Os slower than the goal", role="log"), "lun", "op") == pytest.approx(
        {("slow_lun", "read"): 1.0}
    )


def test_the_tail_alert_is_pending_for_the_tail_and_the_breach_for_the_slow_average(
    api: prometheus_server.PromApi,
) -> None:
    # From the alerts API, not the ALERTS series: Prometheus writes a group's ALERTS only once it
    # has restored its alerts' `for` state, after the group's second evaluation since start
    # (prometheus/prometheus v2.42.0: rules/manager.go, Group.run, "we wait for another Eval to
    # finish" before RestoreForState; rules/alerting.go, AlertingRule.Eval, the ALERTS samples only
    # once restored): up to two minutes for the tail alert's group, lunlat-slo, once a minute.
    alerts = [(a["labels"], a["state"]) for a in api.alerts()]
    tail = {
        (labels["lun"], labels["op"], state)
        for labels, state in alerts
        if labels["alertname"] == "LunLatencyTailHigh"
    }
    assert tail == {("tail_lun", "read", "pending")}
    breach = {
        (labels["alertname"], labels["lun"])
        for labels, _ in alerts
        if labels["alertname"]
        in {f"LunLatency{role}{op}High" for role in ("", "Data", "Log") for op in ("Read", "Write")}
    }
    assert breach == {("LunLatencyLogReadHigh", "slow_lun")}
