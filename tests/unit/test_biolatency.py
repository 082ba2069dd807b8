"""The biolatency source without a kernel: counters summed over CPUs, buckets and exposition, where it
cannot run (the cause and the fix, counted once), and how it is switched on."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from lunlat.config import BiolatencyConfig
from lunlat.configfile import parse_config
from lunlat.exposition import render
from lunlat.sources import biolatency
from lunlat.sources.base import SourceError
from lunlat.sources.biolatency import (
    CAP_BPF,
    CAP_PERFMON,
    VALUE_SIZE,
    BiolatencySource,
    Counters,
    Engine,
    families,
    kernel_dev,
    unavailable_cause,
)
from lunlat.sources.factory import Context, Settings
from lunlat.sources.published import PublishedDevice, PublishedDevices
from lunlat.sources.registry import build_sources
from lunlat.yamlmodel import ConfigError

PROMTOOL = shutil.which("promtool")
LOOP = (7, 10)
DEV = kernel_dev(*LOOP)


def _percpu(*cpus: list[int]) -> bytes:
    """A per-CPU element as the kernel hands it over: each CPU's counters in turn."""
    words = VALUE_SIZE // 8
    return b"".join(struct.pack(f"<{words}Q", *(c + [0] * (words - len(c)))) for c in cpus)


def test_counters_are_summed_over_cpus_and_cumulated_below_each_bound() -> None:
    cpu0 = [1, 2, 0, 0, 0, 0, 0, 0, 3] + [0] * 8 + [4] + [500, 70, 1]
    cpu1 = [0, 1] + [0] * 15 + [1] + [100, 30, 2]
    c = Counters.from_percpu(_percpu(cpu0, cpu1))
    assert (c.ns, c.queue_ns, c.untimed) == (600, 100, 3)
    below, total = c.cumulative()
    assert total == 1 + 3 + 3 + 5
    by_le = dict(zip(contract.BIO_BUCKETS, below, strict=True))
    assert by_le[contract.BIO_BUCKETS[0]] == 1  # below 7.8125 µs: bucket 0
    assert by_le[1.5625e-05] == 4
    assert by_le[0.001] == 4  # bucket 8 holds [1 ms, 2 ms): above the goal
    assert by_le[0.002] == 7
    assert by_le[0.512] == 7  # the last bucket (at or over 512 ms) is only in +Inf
    assert below == sorted(below)


def _device_families() -> str:
    read = Counters((0, 5, 0, 0, 0, 0, 0, 2, 3) + (0,) * 9, 4_500_000, 12_000)
    write = Counters((0,) * 16 + (1, 1), 1_600_000_000, 0)
    counters = {(DEV, 0, 0): read, (DEV, 1, 2): write}
    devices = {LOOP: PublishedDevice("ora_data", "loop10", "data"), (8, 0): PublishedDevice("sda", "sda", "")}
    return render(families(counters, devices))


def test_exposition_is_a_valid_histogram_per_lun_and_op() -> None:
    text = _device_families()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    read = {
        s.labels.get("le", s.name): s.value
        for s in samples
        if s.labels.get("device") == "loop10"
        and (s.labels["op"], s.labels["size"]) == ("read", "small")
        and "latency" in s.name
    }
    assert read["+Inf"] == 10
    assert read["lunlat_device_io_latency_seconds_count"] == 10
    assert read["lunlat_device_io_latency_seconds_sum"] == pytest.approx(0.0045)
    assert read["7.8125e-06"] == 0
    assert read["1.5625e-05"] == 5
    assert read["0.001"] == 7  # bucket 8, [1 ms, 2 ms), is above 1 ms
    assert read["0.002"] == 10
    write = {
        (s.labels["size"], s.labels.get("le", "")): s.value
        for s in samples
        if s.name.endswith("_bucket") and s.labels["device"] == "loop10" and s.labels["op"] == "write"
    }
    assert write[("large", "0.512")] == 1 and write[("large", "+Inf")] == 2  # at or over 512 ms: only +Inf
    assert write[("small", "+Inf")] == write[("middle", "+Inf")] == 0  # each size class apart
    # 2 published devices x 2 ops x 3 size classes x (18 buckets + _sum + _count) + a queue counter each.
    assert len(samples) == 2 * 2 * 3 * 20 + 2 * 2 * 3
    # An idle published device has its series, all zero.
    idle = [s for s in samples if s.labels.get("device") == "sda"]
    assert idle and all(s.value == 0 for s in idle)
    queue = [s for s in samples if s.name == "lunlat_device_io_queue_time_seconds_total"]
    by_series = {(s.labels["device"], s.labels["op"], s.labels["size"]): s.value for s in queue}
    assert by_series[("loop10", "read", "small")] == 1.2e-05


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: prometheus)")
def test_promtool_accepts_the_exposition(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=_device_families(), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_unavailable_names_the_cause_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    btf = tmp_path / "vmlinux"
    btf.write_bytes(b"")
    unprivileged = unavailable_cause(euid=1000, capabilities=0, btf=btf) or ""
    assert "CAP_BPF and CAP_PERFMON" in unprivileged and "turn biolatency off" in unprivileged
    only_bpf = unavailable_cause(euid=1000, capabilities=1 << CAP_BPF, btf=btf) or ""
    assert "CAP_PERFMON" in only_bpf
    assert unavailable_cause(euid=1000, capabilities=(1 << CAP_BPF) | (1 << CAP_PERFMON), btf=btf) is None
    assert unavailable_cause(euid=0, capabilities=0, btf=btf) is None
    assert "no BTF" in (unavailable_cause(euid=0, capabilities=0, btf=tmp_path / "none") or "")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "needs Linux" in (unavailable_cause(euid=0) or "")


def test_unavailable_is_source_down_counted_once_and_retried_a_minute_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(biolatency, "unavailable_cause", lambda: "needs root (the cause, the fix)")
    now = [0.0]
    source = BiolatencySource(
        Engine(BiolatencyConfig(enabled=True), clock=lambda: now[0]), PublishedDevices()
    )
    tries = []
    monkeypatch.setattr(Engine, "_load", lambda self: tries.append(now[0]))
    try:
        counts: list[int] = []
        for at in (0.0, 10.0, 59.0):
            now[0] = at
            with pytest.raises(SourceError) as caught:
                source.collect()
            assert caught.value.reason == "unavailable" and "needs root" in str(caught.value)
            counts.append(caught.value.count)
        assert counts == [1, 0, 0]  # one error counted, one log line: the first scrape names the cause
        monkeypatch.setattr(biolatency, "unavailable_cause", lambda: None)
        now[0] = 61.0
        source.collect()  # the minute is up: tried again, and now it loads (the stand-in _load)
        assert tries == [61.0]
    finally:
        source.close()


def test_max_devices_is_bounded_and_old_bpftrace_keys_are_named(tmp_path: Path) -> None:
    assert parse_config("biolatency: {enabled: true}").biolatency.max_devices == 512
    for text, key in (
        ("biolatency: {max_devices: 0}", "biolatency.max_devices"),
        ("biolatency: {interval_seconds: 5}", "biolatency.interval_seconds"),  # bpftrace's, gone
    ):
        with pytest.raises(ConfigError) as caught:
            parse_config(text)
        assert key in str(caught.value)


def test_off_by_default_and_on_by_flag_or_key(tmp_path: Path) -> None:
    procfs = tmp_path / "proc"
    procfs.mkdir()
    (procfs / "diskstats").write_text("")
    settings = Settings(procfs, tmp_path)
    assert "biolatency" not in [s.name for s in build_sources(parse_config(""), settings).sources]
    on = build_sources(parse_config("biolatency: {enabled: true}"), settings)
    assert [s.name for s in on.sources] == ["diskstats", "biolatency"]
    flagged = Settings(procfs, tmp_path, biolatency=True)
    assert Context.of(parse_config(""), flagged).biolatency().enabled
    off = Settings(procfs, tmp_path, biolatency=False)
    assert not Context.of(parse_config("biolatency: {enabled: true}"), off).biolatency().enabled
    psutil = Settings(procfs, tmp_path, host_source="psutil", biolatency=True)
    built = build_sources(parse_config(""), psutil)
    assert built.problems and "diskstats host source" in built.problems[0]
    for source in (*on.sources, *built.sources):
        close = getattr(source, "close", None)
        if close:
            close()
