"""bench/fakefleet.py: the fake fleet advances what the exporters called counters, keeps the rest as
captured, and serves each host its own values."""

from __future__ import annotations

import itertools
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fakefleet
from fakefleet import CAPTURE_STEP_S, Capture, Counter, FleetServer, HostClock

from tests.support.exporter_process import Scrape

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def exposition(reads: int, seconds: float, in_progress: int) -> Scrape:
    text = (
        "# HELP x_reads_total Reads.\n"
        "# TYPE x_reads_total counter\n"
        f'x_reads_total{{lun="a"}} {reads}\n'
        f'x_reads_total{{lun="b"}} {reads * 2}\n'
        "# TYPE x_read_seconds_total counter\n"
        f'x_read_seconds_total{{lun="a"}} {seconds}\n'
        "# TYPE x_errors_total counter\n"
        'x_errors_total{lun="a"} 0\n'
        "# TYPE x_in_progress gauge\n"
        f'x_in_progress{{lun="a"}} {in_progress}\n'
    )
    return Scrape(200, {"content-type": CONTENT_TYPE}, text.encode(), len(text), 0.0)


# S0, S1 = S0 + 600 s at 10 reads/s, S2 = S1 + 600 s at 10 reads/s of which the service time doubles.
S0 = exposition(1000, 0.5, 1)
S1 = exposition(1000 + 10 * CAPTURE_STEP_S, 0.5 + 3.0, 2)
S2 = exposition(1000 + 20 * CAPTURE_STEP_S, 0.5 + 3.0 + 6.0, 3)


def counters() -> dict[str, Counter]:
    tpl = fakefleet.template(S0, S1, S2)
    return {p.prefix.strip(): p for p in tpl.parts if isinstance(p, Counter)}


def test_counters_get_their_normal_and_slow_rates_gauges_and_still_counters_stay() -> None:
    tpl = fakefleet.template(S0, S1, S2)
    found = counters()
    assert set(found) == {'x_reads_total{lun="a"}', 'x_reads_total{lun="b"}', 'x_read_seconds_total{lun="a"}'}
    reads = found['x_reads_total{lun="a"}']
    assert (reads.base, reads.normal, reads.slow, reads.integral) == (13000, 10, 10, True)
    assert found['x_reads_total{lun="b"}'].normal == 20
    seconds = found['x_read_seconds_total{lun="a"}']
    assert (seconds.normal, seconds.slow, seconds.integral) == (
        3.0 / CAPTURE_STEP_S,
        6.0 / CAPTURE_STEP_S,
        False,
    )
    assert (tpl.samples, tpl.counters, tpl.content_type) == (5, 3, CONTENT_TYPE)


def test_a_host_serves_the_capture_advanced_by_its_own_rates() -> None:
    tpl = fakefleet.template(S0, S1, S2)
    clock = HostClock(offset=100.0, phase=0.0, factor=1.0, slow=False)
    slow = HostClock(offset=100.0, phase=0.0, factor=1.0, slow=True)
    elapsed = 75.0
    tau = clock.tau(elapsed)
    text = fakefleet.render(tpl, clock, elapsed).decode()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert lines['x_reads_total{lun="a"}'] == str(int(13000 + 10 * tau))
    assert float(lines['x_read_seconds_total{lun="a"}']) == pytest.approx(9.5 + 3.0 / CAPTURE_STEP_S * tau)
    assert lines['x_in_progress{lun="a"}'] == "3"  # a gauge: as captured at S2
    assert lines['x_errors_total{lun="a"}'] == "0"  # a counter that never moved
    slow_lines = dict(
        line.rsplit(" ", 1)
        for line in fakefleet.render(tpl, slow, elapsed).decode().splitlines()
        if line[0] != "#"
    )
    assert float(slow_lines['x_read_seconds_total{lun="a"}']) == pytest.approx(
        9.5 + 6.0 / CAPTURE_STEP_S * tau
    )
    # The exposition's comment lines and order are the capture's.
    assert [ln for ln in text.splitlines() if ln.startswith("#")] == [
        ln for ln in S2.text.splitlines() if ln.startswith("#")
    ]


def test_counters_never_go_backwards() -> None:
    for clock in fakefleet.hosts(20):
        taus = [clock.tau(t) for t in range(0, 900)]
        assert all(b > a for a, b in itertools.pairwise(taus))


def test_one_host_in_ten_is_slow() -> None:
    assert sum(c.slow for c in fakefleet.hosts(200)) == 20


def test_the_server_answers_each_host_and_refuses_others() -> None:
    tpl = fakefleet.template(S0, S1, S2)
    with FleetServer(Capture(tpl, None, 2, 0), 3) as fleet:
        base = f"http://127.0.0.1:{fleet.port}"
        bodies = []
        for host in ("db0001", "db0002"):
            with urllib.request.urlopen(f"{base}/lunlat?host={host}", timeout=10) as answer:  # noqa: S310 - loopback
                assert answer.headers["Content-Type"] == CONTENT_TYPE
                bodies.append(answer.read())
        assert bodies[0] != bodies[1]  # each host its own offset and factor
        for path in ("/lunlat?host=db0004", "/node?host=db0001", "/other?host=db0001"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{base}{path}", timeout=10)  # noqa: S310 - loopback
            refused.value.close()  # the error answer holds its connection
            assert refused.value.code == 404


def test_the_captured_lunlat_host_has_its_luns_latencies_and_one_slow_lun(tmp_path: Path) -> None:
    """The real `lunlat serve` on the synthetic host: 20 LUNs labelled by the config, and per LUN a
    read latency (Δ read time / Δ reads) of 0.5 ms, but 3 ms on the slow LUN at the slow rates."""
    cap = fakefleet.capture(tmp_path, node_exporter=None)
    assert (cap.lunlat_devices, cap.node, cap.node_devices) == (20, None, 0)
    found = {p.prefix: p for p in cap.lunlat.parts if isinstance(p, Counter)}
    text = "".join(p if isinstance(p, str) else p.prefix for p in cap.lunlat.parts)
    assert text.count("lunlat_lun_info{") == 20
    info = [line for line in text.splitlines() if line.startswith("lunlat_lun_info{")]
    assert sum('role="log"' in line for line in info) == 4

    def latency(lun: int, slow: bool) -> float:
        def rate(family: str) -> float:
            (counter,) = (c for p, c in found.items() if p.startswith(f'{family}{{lun="mpath{lun:02d}"'))
            return counter.slow if slow else counter.normal

        return rate("lunlat_device_read_time_seconds_total") / rate("lunlat_device_reads_completed_total")

    assert latency(0, slow=False) == pytest.approx(0.0005, rel=0.01)
    assert latency(0, slow=True) == pytest.approx(0.0005, rel=0.01)
    assert latency(fakefleet.SLOW_LUN, slow=False) == pytest.approx(0.0005, rel=0.01)
    assert latency(fakefleet.SLOW_LUN, slow=True) == pytest.approx(fakefleet.SLOW_MS[0] / 1000, rel=0.01)


def test_the_captured_histograms_carry_each_luns_roles_as_the_exporter_does(tmp_path: Path) -> None:
    """With histograms, every LUN's per-I/O series are rendered with the labels of its device series
    (lun, device, kind and roles), as `lunlat serve --collector.biolatency` publishes them."""
    cap = fakefleet.capture(tmp_path, node_exporter=None, histograms=True)
    text = "".join(p if isinstance(p, str) else p.prefix for p in cap.lunlat.parts)
    label = re.compile(r'([a-z_]+)="([^"]*)"')

    def label_sets(name: str) -> set[tuple[tuple[str, str], ...]]:
        return {
            tuple(pair for pair in label.findall(labels) if pair[0] not in ("op", "size"))
            for labels in re.findall(rf"{name}\{{([^}}]*)\}}", text)
        }

    devices = label_sets("lunlat_device_reads_completed_total")
    assert len(devices) == 20
    assert all(dict(labels)["role"] in ("data", "log") for labels in devices)
    assert label_sets("lunlat_device_io_latency_seconds_count") == devices
