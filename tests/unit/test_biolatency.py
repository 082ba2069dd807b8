"""The biolatency source without a kernel: bpftrace's JSON lines parsed, buckets and exposition, and
the child's life (start, bad output, death and restart, unavailable) with a stand-in bpftrace."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from lunlat.config import BiolatencyConfig, parse_config
from lunlat.exposition import render
from lunlat.sources import biolatency
from lunlat.sources.base import SourceError
from lunlat.sources.biolatency import (
    BOUND_UNITS,
    BadOutputError,
    BiolatencySource,
    Engine,
    Maps,
    cumulative,
    families,
    kernel_dev,
    parse_hist,
    parse_map,
    parse_sums,
    recursion_misses,
    unavailable_cause,
)
from lunlat.sources.factory import Context, Settings
from lunlat.sources.published import PublishedDevice, PublishedDevices
from lunlat.sources.registry import build_sources

PROMTOOL = shutil.which("promtool")
LOOP = (7, 10)
DEV = kernel_dev(*LOOP)


def test_the_goal_and_every_bound_are_edges_of_the_log2_histogram() -> None:
    # 1 ms is 2^10 units of ms/1024 exactly: the script's integer ns * 1024 / 10^6 reaches 1024
    # at 1,000,000 ns and not one ns before.
    assert BOUND_UNITS[contract.BIO_BUCKETS.index(0.001)] == 1024
    assert (1_000_000 * 1024) // 1_000_000 == 1024
    assert (999_999 * 1024) // 1_000_000 == 1023
    for bound, units in zip(contract.BIO_BUCKETS, BOUND_UNITS, strict=True):
        assert units == 1 << (units.bit_length() - 1)
        assert units / biolatency.UNITS_PER_SECOND == bound
    assert len(contract.BIO_BUCKETS) == 17  # + the +Inf bucket: 18 per op


def test_buckets_add_up_cumulatively_below_each_bound() -> None:
    # bpftrace's log2 buckets [min, max]: 8-15 units (7.8-15.6 µs), 1024-2047 (1-2 ms), 2^20+ (>1 s).
    buckets = [(0, 1), (15, 2), (2047, 3), (2**21 - 1, 4)]
    counts, total = cumulative(buckets)
    assert total == 10
    by_le = dict(zip(contract.BIO_BUCKETS, counts, strict=True))
    assert by_le[contract.BIO_BUCKETS[0]] == 1  # 7.8125 µs: only the 0 bucket is below
    assert by_le[1.5625e-05] == 3
    assert by_le[0.001] == 3  # the 1-2 ms bucket is above 1 ms
    assert by_le[0.002] == 6
    assert by_le[0.512] == 6  # over a second: only in +Inf
    assert counts == sorted(counts)


def test_bpftrace_json_lines_parse() -> None:
    # The shapes bpftrace 0.17 printed on this kernel for a two-key histogram and a sum map.
    hist_line = json.dumps(
        {
            "type": "hist",
            "data": {
                "@lat": {
                    f"{DEV},0": [{"min": 8, "max": 15, "count": 5}, {"min": 1024, "max": 2047, "count": 2}],
                    f"{DEV},1": [{"max": -1, "count": 0}, {"min": 0, "max": 0, "count": 1}],
                }
            },
        }
    ).encode()
    name, entries = parse_map(hist_line)
    assert name == "@lat"
    hist = parse_hist(entries)
    assert hist[(DEV, 0)] == [(15, 5), (2047, 2)]
    assert hist[(DEV, 1)] == [(-1, 0), (0, 1)]
    name, entries = parse_map(b'{"type": "map", "data": {"@ns": {"7340042,1": 35729948}}}\n')
    assert name == "@ns"
    assert parse_sums(entries) == {(DEV, 1): 35729948}


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b'{"type": "printf", "data": "x"}\n',
        b'{"type": "map", "data": {"@ns": {"7340042": 1}}}\n',  # one key where two are printed
        b'{"type": "map", "data": {"@ns": {"7340042,5": 1}}}\n',  # no op 5
        b'{"type": "map", "data": {"@ns": {"7340042,1": -3}}}\n',
        b'{"type": "map", "data": {"@ns": {"a,b": 1}}}\n',
        b'{"type": "hist", "data": {"@lat": {"7340042,0": [{"min": 1, "count": 1}]}}}\n',
        b'{"type": "map", "data": {"@ns": [1, 2]}}\n',
        b"\xff\xfe\n",
    ],
)
def test_output_that_is_not_bpftraces_is_refused(line: bytes) -> None:
    with pytest.raises(BadOutputError):
        name, entries = parse_map(line)
        if name == "@lat":
            parse_hist(entries)
        else:
            parse_sums(entries)


def _device_families() -> str:
    maps = Maps(
        hist={(DEV, 0): [(15, 5), (1023, 2), (2047, 3)], (DEV, 1): [(524287, 1), (2**20 - 1, 1)]},
        ns={(DEV, 0): 4_500_000, (DEV, 1): 1_600_000_000},
        queue={(DEV, 0): 12_000, (DEV, 1): 0},
    )
    devices = {LOOP: PublishedDevice("ora_data", "loop10", "data"), (8, 0): PublishedDevice("sda", "sda", "")}
    return render(families(maps, devices))


def test_exposition_is_a_valid_histogram_per_lun_and_op() -> None:
    text = _device_families()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    read = {
        s.labels.get("le", s.name): s.value
        for s in samples
        if s.labels.get("device") == "loop10" and s.labels["op"] == "read" and "latency" in s.name
    }
    assert read["+Inf"] == 10
    assert read["lunlat_device_io_latency_seconds_count"] == 10
    assert read["lunlat_device_io_latency_seconds_sum"] == pytest.approx(0.0045)
    assert read["7.8125e-06"] == 0
    assert read["1.5625e-05"] == 5
    assert read["0.001"] == 7  # the 512-1023-unit bucket ends below 1 ms
    assert read["0.002"] == 10
    write = {
        s.labels.get("le", ""): s.value
        for s in samples
        if s.name.endswith("_bucket") and s.labels["device"] == "loop10" and s.labels["op"] == "write"
    }
    assert write["0.512"] == 1 and write["+Inf"] == 2  # 512 ms - 1 s: only +Inf
    # 2 published devices x 2 ops x (18 buckets + _sum + _count) + 2 x 2 queue counters.
    assert len(samples) == 2 * 2 * 20 + 2 * 2
    # An idle published device has its series, all zero.
    idle = [s for s in samples if s.labels.get("device") == "sda"]
    assert idle and all(s.value == 0 for s in idle)
    queue = [s for s in samples if s.name == "lunlat_device_io_queue_time_seconds_total"]
    assert {(s.labels["device"], s.labels["op"]): s.value for s in queue}[("loop10", "read")] == 1.2e-05


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is needed (installed by .ci/run)")
def test_promtool_accepts_the_exposition(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=_device_families(), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- the child, with a stand-in bpftrace -----------------------------------------------------------

FAKE = """#!{python}
import json, os, sys, time
mode = open({mode!r}).read().strip()
print(json.dumps({{"type": "attached_probes", "data": {{"probes": 5}}}}), flush=True)
n = 0
while True:
    n += 1
    print(json.dumps({{"type": "hist", "data": {{"@lat": {{"{dev},0": [{{"min": 8, "max": 15, "count": n}}]}}}}}}))
    print(json.dumps({{"type": "map", "data": {{"@ns": {{"{dev},0": 10000 * n}}}}}}))
    print(json.dumps({{"type": "map", "data": {{"@untimed": {{"{dev}": 2}}}}}}))
    if mode == "garbage":
        print("this is not json")
    sys.stdout.flush()
    if mode == "die":
        sys.exit(3)
    time.sleep(0.05)
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    mode = tmp_path / "mode"
    mode.write_text("ok")
    script = tmp_path / "bpftrace"
    script.write_text(FAKE.format(python=sys.executable, mode=str(mode), dev=DEV))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    tracefs = tmp_path / "tracing"
    (tracefs / "events/block/block_rq_issue").mkdir(parents=True)
    monkeypatch.setattr(biolatency, "TRACEFS", (tracefs,))
    monkeypatch.setattr(biolatency, "_euid", lambda: 0)
    monkeypatch.setattr(biolatency, "BACKOFF_FIRST", 0.1)
    yield script, mode


def _source(script: Path) -> tuple[BiolatencySource, PublishedDevices]:
    board = PublishedDevices()
    board.publish({LOOP: PublishedDevice("ora_data", "loop10", "data")})
    config = BiolatencyConfig(enabled=True, interval_seconds=1, bpftrace=str(script))
    return BiolatencySource(Engine(config), board), board


def _until_up(source: BiolatencySource, timeout: float = 20.0) -> tuple[dict[str, float], dict[str, int]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = source.collect()
        except SourceError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        text = render(result.families)
        values = {
            s.name + s.labels.get("le", ""): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.labels.get("op") == "read"
        }
        if values.get("lunlat_device_io_latency_seconds_count"):
            return values, dict(result.errors)
        time.sleep(0.05)


def test_the_child_is_read_and_ended(fake: tuple[Path, Path]) -> None:
    script, _ = fake
    source, _ = _source(script)
    try:
        values, errors = _until_up(source)
        count = values["lunlat_device_io_latency_seconds_count"]
        assert values["lunlat_device_io_latency_seconds_bucket1.5625e-05"] == count
        assert values["lunlat_device_io_latency_seconds_sum"] == pytest.approx(count * 1e-5)
        assert errors.get("untimed_io") == 2  # the child's cumulative 2, counted once
        pid = source._engine._proc.pid if source._engine._proc else None
        assert pid is not None
    finally:
        source.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_bad_lines_are_counted_and_the_rest_published(fake: tuple[Path, Path]) -> None:
    script, mode = fake
    mode.write_text("garbage")
    source, _ = _source(script)
    try:
        _until_up(source)
        time.sleep(0.3)
        result = source.collect()
        assert result.errors["bad_output"] > 0
        assert result.families[0].samples
    finally:
        source.close()


def test_a_dying_child_is_restarted_with_backoff(fake: tuple[Path, Path]) -> None:
    script, mode = fake
    mode.write_text("die")
    source, _ = _source(script)
    try:
        exits = 0
        deadline = time.monotonic() + 20
        while exits < 2 and time.monotonic() < deadline:
            try:
                result = source.collect()
                exits += result.errors["child_exited"]
            except SourceError as exc:
                exits += exc.count if exc.reason == "child_exited" else 0
            time.sleep(0.05)
        assert exits >= 2, "the child was started again after it died"
        assert source._engine.state()[0].generation >= 2
    finally:
        source.close()


def test_unavailable_names_the_cause_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = BiolatencyConfig(enabled=True)
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    assert "apt-get install bpftrace" in (unavailable_cause(config) or "")
    config = BiolatencyConfig(enabled=True, bpftrace=sys.executable)
    assert "only as root" in (unavailable_cause(config, euid=1000) or "")
    monkeypatch.setattr(biolatency, "TRACEFS", (tmp_path / "none",))
    assert "mount -t tracefs" in (unavailable_cause(config, euid=0) or "")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "needs Linux" in (unavailable_cause(config) or "")


def test_unavailable_is_source_down_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(biolatency, "_euid", lambda: 1000)
    source = BiolatencySource(
        Engine(BiolatencyConfig(enabled=True, bpftrace=sys.executable)), PublishedDevices()
    )
    try:
        counts: list[int] = []
        deadline = time.monotonic() + 10
        while len(counts) < 2 and time.monotonic() < deadline:
            try:
                source.collect()
            except SourceError as exc:
                if exc.reason == "unavailable":
                    assert "only as root" in str(exc)
                    counts.append(exc.count)
            time.sleep(0.05)
        assert counts == [1, 0]
    finally:
        source.close()


def test_the_first_scrape_already_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not "bpftrace is starting" while the supervisor thread has yet to look: the first collection
    says the cause (seen on a host without tracefs)."""
    monkeypatch.setattr(biolatency, "_euid", lambda: 1000)
    source = BiolatencySource(
        Engine(BiolatencyConfig(enabled=True, bpftrace=sys.executable)), PublishedDevices()
    )
    try:
        with pytest.raises(SourceError) as caught:
            source.collect()
        assert caught.value.reason == "unavailable" and "only as root" in str(caught.value)
    finally:
        source.close()


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


def test_recursion_misses_are_summed_over_the_processes_bpf_programs(tmp_path: Path) -> None:
    """fdinfo as kernel/bpf/syscall.c prints it: programs have prog_type and recursion_misses; a
    map's fd and an ordinary file's have neither and count nothing."""
    fdinfo = tmp_path / "4242" / "fdinfo"
    fdinfo.mkdir(parents=True)
    prog = (
        "pos:\t0\nflags:\t02000002\nprog_type:\t5\nrun_time_ns:\t{ns}\nrun_cnt:\t9\nrecursion_misses:\t{m}\n"
    )
    (fdinfo / "3").write_text(prog.format(ns=100, m=3))
    (fdinfo / "4").write_text(prog.format(ns=200, m=2))
    (fdinfo / "5").write_text("pos:\t0\nmap_type:\t1\nmax_entries:\t16384\n")
    (fdinfo / "6").write_text("pos:\t0\nflags:\t02\n")
    assert recursion_misses(4242, tmp_path) == 5
    assert recursion_misses(4343, tmp_path) == 0  # the process is gone
