"""/proc/diskstats lines of kernels to come and of odd trees, and the 32-bit count wrap.

Kernel facts (torvalds/linux Documentation/admin-guide/iostats.rst, block/genhd.c diskstats_show):
4.18 appended four discard fields and 5.5 two flush fields to each line, so a kernel may append
again; every line is printed with one format string. The counts are `unsigned long` (struct
disk_stats, include/linux/part_stat.h) printed `%lu`: 32 bits wide on a 32-bit kernel, where they
wrap at 2**32 like the `%u` millisecond fields.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lunlat import contract
from lunlat.config import DiskstatsConfig
from lunlat.sources.base import SourceResult
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.diskstats_format import (
    DISCARDS,
    FLUSH_MS,
    IN_FLIGHT,
    KEPT_FIELDS,
    READ_MS,
    READ_SECTORS,
    READS,
    WRITES,
    Table,
    parse,
)
from lunlat.sources.diskstats_unwrap import WRAP, Unwrapper
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

DISCARD_FLUSH = {
    s.name
    for s in (
        contract.DEVICE_DISCARDS,
        contract.DEVICE_DISCARD_TIME,
        contract.DEVICE_DISCARD_BYTES,
        contract.DEVICE_FLUSHES,
        contract.DEVICE_FLUSH_TIME,
    )
}


def make_host(root: Path) -> FakeHost:
    h = FakeHost(root)
    for name in ("sda", "sdb", "sdc"):
        h.add_scsi_disk(name, wwid=f"naa.5000c500a1b2c3d{'abc'.index(name[-1])}")
    h.write()
    return h


def rewrite(host: FakeHost, edit: dict[str, str]) -> None:
    """Rewrite the diskstats lines of some devices: `edit[name]` is " <fields>" appended, or
    "cut:N" to keep only the first N fields of the line."""
    lines = []
    for text in (host.procfs / "diskstats").read_text().splitlines():
        name = text.split()[2]
        change = edit.get(name)
        if change is None:
            lines.append(text)
        elif change.startswith("cut:"):
            lines.append(" ".join(text.split()[: int(change[4:])]))
        else:
            lines.append(text + change)
    (host.procfs / "diskstats").write_text("".join(line + "\n" for line in lines))


def source(host: FakeHost) -> DiskstatsSource:
    return DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig(), clock=FakeClock())


def by_family(result: SourceResult) -> dict[str, dict[str, float]]:
    """Each family's value by device."""
    return {
        f.spec.name: {labels.as_dict()["device"]: f.value(s) for s in f.all_samples() for labels in (s[1],)}
        for f in result.families
    }


# --- longer lines --------------------------------------------------------------------------------


def test_a_line_longer_than_any_known_format_keeps_its_known_fields(tmp_path: Path) -> None:
    h = make_host(tmp_path)
    rewrite(h, {n: " 11 12 13" for n in ("sda", "sdb", "sdc")})  # a kernel that appends three fields
    table, bad = parse((h.procfs / "diskstats").read_bytes())
    assert bad == []
    assert table.names == ["sda", "sdb", "sdc"]
    assert table.width == 17
    assert [row[3] for row in table.rows()] == [h.stats[n].fields() for n in ("sda", "sdb", "sdc")]


@pytest.mark.parametrize("how", ["every line", "one line"])
def test_longer_lines_are_published_and_counted_once_per_scrape(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make_host(tmp_path)
    names = ("sda", "sdb", "sdc") if how == "every line" else ("sdb",)
    rewrite(h, {n: " 11 12 13" for n in names})
    src = source(h)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            result = src.collect()
            assert result.errors["extra_fields"] == 1
            assert result.errors["malformed_line"] == 0
            got = by_family(result)
            for name in ("sda", "sdb", "sdc"):
                assert got[contract.DEVICE_READS.name][name] == h.stats[name].reads
                assert got[contract.DEVICE_FLUSH_TIME.name][name] == h.stats[name].flush_ms / 1000
    assert len([r for r in caplog.records if "extra_fields" in str(r.__dict__)]) == 1


def test_a_line_it_cannot_read_is_still_malformed(tmp_path: Path) -> None:
    h = make_host(tmp_path)
    rewrite(h, {"sdb": " 11 x 13", "sdc": "cut:16"})  # a longer line is read; 16 fields is no format
    result = source(h).collect()
    assert result.errors["malformed_line"] == 1
    assert set(by_family(result)[contract.DEVICE_READS.name]) == {"sda", "sdb"}


# --- mixed widths --------------------------------------------------------------------------------


def test_mixed_widths_keep_each_devices_fields_and_are_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = make_host(tmp_path)
    rewrite(h, {"sdb": "cut:14", "sdc": "cut:18"})  # as procfs' test fixtures mix them
    src = source(h)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            result = src.collect()
            assert result.errors["mixed_widths"] == 1
            got = by_family(result)
            assert set(got[contract.DEVICE_READS.name]) == {"sda", "sdb", "sdc"}
            assert set(got[contract.DEVICE_DISCARDS.name]) == {"sda", "sdc"}
            assert set(got[contract.DEVICE_FLUSHES.name]) == {"sda"}
            assert got[contract.DEVICE_DISCARDS.name]["sdc"] == h.stats["sdc"].discards
            assert got[contract.DEVICE_FLUSH_TIME.name]["sda"] == h.stats["sda"].flush_ms / 1000
    assert len([r for r in caplog.records if "mixed_widths" in str(r.__dict__)]) == 1


def test_one_width_is_no_error(tmp_path: Path) -> None:
    h = make_host(tmp_path)
    rewrite(h, {n: "cut:14" for n in ("sda", "sdb", "sdc")})  # a kernel before 4.18
    result = source(h).collect()
    assert result.errors["mixed_widths"] == 0
    assert not DISCARD_FLUSH & {f.spec.name for f in result.families}


# --- the 32-bit count wrap -----------------------------------------------------------------------


def line(name: str, values: list[int]) -> bytes:
    return f"8 0 {name} {' '.join(map(str, values))}".encode()


def test_a_count_wrap_after_a_time_wrap_keeps_both_offsets() -> None:
    """A 32-bit kernel: reads wrap at 2**32 as read ms did before; over 16 reads nothing jumps."""
    u = Unwrapper()
    reads, sectors, read_ms = WRAP - 8, WRAP - 40, WRAP - 12  # read ms wraps first, then sectors, then reads
    seen: list[tuple[int, int, int]] = []
    for _ in range(16):
        values = [reads % WRAP, 0, sectors % WRAP, read_ms % WRAP, 7, 0, 56, 9, 0, 100, 200]
        table, bad = parse(line("sda", values) + b"\n")
        assert bad == []
        out, resets = u.apply(table)
        assert resets == []
        row = out.rows()[0][3]
        seen.append((row[READS], row[READ_SECTORS], row[READ_MS]))
        reads, sectors, read_ms = reads + 1, sectors + 8, read_ms + 5
    assert seen[-1] == (WRAP + 7, WRAP + 80, WRAP + 63)
    assert all(b[i] - a[i] == step for a, b in itertools.pairwise(seen) for i, step in enumerate((1, 8, 5)))


def test_a_count_going_down_on_a_kernel_with_64_bit_counts_is_a_reset() -> None:
    u = Unwrapper()
    u.apply(parse(line("sda", [WRAP + 5, 0, 8, 3, 0, 0, 0, 0, 0, 1, 1]) + b"\n")[0])  # a count past 2**32
    u.apply(parse(line("sda", [WRAP - 2, 0, 16, 4, 0, 0, 0, 0, 0, 2, 2]) + b"\n")[0])
    out, resets = u.apply(parse(line("sda", [3, 0, 24, 5, 0, 0, 0, 0, 0, 3, 3]) + b"\n")[0])
    assert resets == ["sda"] and out.rows()[0][3][READS] == 3


def test_every_count_going_down_together_is_a_reset_not_a_wrap() -> None:
    u = Unwrapper()
    u.apply(parse(line("sda", [WRAP - 2, 0, WRAP - 9, 30, 40, 0, 320, 50, 0, 90, 80]) + b"\n")[0])
    out, resets = u.apply(parse(line("sda", [1, 0, 8, 1, 0, 0, 0, 0, 0, 1, 1]) + b"\n")[0])
    assert resets == ["sda"] and out.rows()[0][3][READS] == 1


def test_discard_and_flush_counts_wrap_too() -> None:
    u = Unwrapper()
    rest = [5, 0, 40, 3, 0, 9, 9]
    u.apply(parse(line("sda", [10, 0, 80, 9, *rest, WRAP - 1, 0, 8, 2, 4, 7]) + b"\n")[0])
    out, resets = u.apply(parse(line("sda", [11, 0, 88, 9, *rest, 2, 0, 24, 3, 5, 8]) + b"\n")[0])
    assert resets == []
    assert out.rows()[0][3][DISCARDS] == WRAP + 2
    assert out.rows()[0][3][FLUSH_MS] == 8


@st.composite
def histories_32bit(draw: st.DrawFn) -> list[tuple[int, ...]]:
    """True counters of one device on a 32-bit kernel, every field printed modulo 2**32. Each grows
    by less than 2**31 per interval (the unwrap premise) and writes never wrap (a count of the
    device that does not wrap with the others, as a real device's many counts do not all at once)."""
    current = [draw(st.integers(0, WRAP - 1)) for _ in range(KEPT_FIELDS)]
    current[WRITES] = draw(st.integers(1, 1000))
    samples = [tuple(current)]
    for _ in range(draw(st.integers(2, 10))):
        for i in range(KEPT_FIELDS):
            if i == IN_FLIGHT:
                current[i] = draw(st.integers(0, 64))
            elif i == WRITES:
                current[i] += draw(st.integers(0, 1000))
            else:
                current[i] += draw(st.integers(0, WRAP // 2 - 1))
        samples.append(tuple(current))
    return samples


@given(histories_32bit())
@settings(max_examples=200, deadline=None)
def test_on_a_32_bit_kernel_every_counter_grows_by_exactly_the_true_increase(
    history: list[tuple[int, ...]],
) -> None:
    u = Unwrapper()
    first: tuple[int, ...] = ()
    for step, truth in enumerate(history):
        raw = tuple(v if i == IN_FLIGHT else v % WRAP for i, v in enumerate(truth))
        out, resets = u.apply(Table.from_rows([("sda", 8, 0, raw)]))
        assert resets == []
        got = out.rows()[0][3]
        if step == 0:
            first = got
            continue
        for i in range(KEPT_FIELDS):
            if i != IN_FLIGHT:
                assert got[i] - first[i] == truth[i] - history[0][i]
