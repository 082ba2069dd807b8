"""/proc/diskstats parsing, 32-bit ms unwrap and reset detection."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lunlat.sources.diskstats_format import (
    DISCARD_MS,
    FLUSH_MS,
    IN_FLIGHT,
    KEPT_FIELDS,
    MS_FIELDS,
    READ_MS,
    READS,
    WRITE_MS,
    Table,
    _parse_lines,
    parse,
)
from lunlat.sources.diskstats_unwrap import WRAP, Unwrapper

# Real lines: kernel 4.4 (14 fields), 4.19 (18: discards) and 6.x (20: flushes).
LINE_14 = b"   8       0 sda 4245 110 316590 2212 3470 1680 48514 3868 0 2788 6076"
LINE_18 = (
    b" 259       0 nvme0n1 93051 27 5853214 19848 229546 70917 17069320 202740 0 98336 228424 6 0 2432 2"
)
LINE_20 = b" 253       3 dm-3 56403 0 2971538 33073 13469 0 1928128 7175 2 12648 40868 7 0 8 1 812 11"


def line(name: str, values: list[int], major: int = 8, minor: int = 0) -> bytes:
    return f"{major} {minor} {name} {' '.join(map(str, values))}".encode()


def test_each_kernel_format_parses_to_the_same_first_eleven_fields() -> None:
    table, bad = parse(b"\n".join([LINE_14, LINE_18, LINE_20]) + b"\n")
    assert bad == []
    assert table.names == ["sda", "nvme0n1", "dm-3"]
    assert table.majors == [8, 259, 253]
    assert table.minors == [0, 0, 3]
    rows = {name: values for name, _, _, values in table.rows()}
    assert rows["sda"] == (4245, 110, 316590, 2212, 3470, 1680, 48514, 3868, 0, 2788, 6076)
    assert rows["nvme0n1"][READ_MS] == 19848
    assert rows["dm-3"][WRITE_MS] == 7175
    assert rows["dm-3"][IN_FLIGHT] == 2


@pytest.mark.parametrize("sample", [LINE_14, LINE_18, LINE_20])
def test_uniform_fast_path_and_line_path_agree(sample: bytes) -> None:
    name = sample.split()[2]
    text = b"\n".join(sample.replace(name, f"d{i}".encode()) for i in range(3)) + b"\n"
    fast, bad = parse(text)
    slow, slow_bad = _parse_lines(list(map(bytes.split, text.splitlines())))
    assert bad == slow_bad == []
    assert fast == slow
    assert len(fast.names) == 3


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (b"8 0 sda 1 2 3", "malformed_line"),  # too few fields
        (b"8 0 sda " + b" ".join([b"1"] * 12), "malformed_line"),  # 15 fields: no such format
        (b"8 0 sda " + b" ".join([b"1"] * 10) + b" -1", "malformed_line"),  # negative
        (b"8 0 sda " + b" ".join([b"1"] * 10) + b" x", "malformed_line"),  # not a number
        (b"8 0 sda " + b" ".join([b"1"] * 10) + b" 1_0", "malformed_line"),  # Python-only literal
        (b"8 0 sda " + b" ".join([b"1"] * 10) + " ٣".encode(), "malformed_line"),  # non-ASCII digit
        (b"x 0 sda " + b" ".join([b"1"] * 11), "malformed_line"),  # bad major
        (b"\xff\xfe garbage", "malformed_line"),
    ],
)
def test_malformed_lines_are_skipped_and_named(bad_line: bytes, reason: str) -> None:
    table, bad = parse(b"\n".join([LINE_14, bad_line, LINE_20]))
    assert table.names == ["sda", "dm-3"]
    assert [(b.lineno, b.reason) for b in bad] == [(2, reason)]
    assert bad[0].detail


def test_duplicate_device_keeps_the_first_and_counts_the_second() -> None:
    table, bad = parse(b"\n".join([LINE_14, LINE_14.replace(b"4245", b"1")]))
    assert table.names == ["sda"]
    assert table.columns[READS] == [4245]
    assert [b.reason for b in bad] == ["duplicate_device"]


def test_blank_lines_and_empty_input() -> None:
    table, bad = parse(b"\n\n" + LINE_14 + b"\n\n")
    assert table.names == ["sda"] and bad == []
    empty, bad = parse(b"")
    assert empty.names == [] and len(empty.columns) == KEPT_FIELDS and bad == []


def _table(rows: dict[str, tuple[int, ...]], majmin: dict[str, tuple[int, int]] | None = None) -> Table:
    majmin = majmin or {}
    return Table.from_rows(
        [(name, *majmin.get(name, (8, i)), values) for i, (name, values) in enumerate(rows.items())]
    )


def _values(table: Table) -> dict[str, tuple[int, ...]]:
    return {name: values for name, _, _, values in table.rows()}


def test_ms_wrap_at_2_32_is_undone_per_field() -> None:
    u = Unwrapper()
    near = WRAP - 10
    before = (100, 0, 800, near, 50, 0, 400, near - 5, 0, near, near)
    u.apply(_table({"sda": before}))
    # 20 ms more of reads, 30 of writes: the 32-bit fields came round past zero.
    after_raw = (110, 0, 880, 10, 60, 0, 480, 15, 1, 5, 30)
    out, resets = u.apply(_table({"sda": after_raw}))
    assert resets == []
    got = _values(out)["sda"]
    assert got[READ_MS] - before[READ_MS] == 20
    assert got[WRITE_MS] - before[WRITE_MS] == 30
    assert all(got[i] >= before[i] for i in MS_FIELDS if i < len(before))
    # The offset stays: the next sample keeps counting up from there.
    out2, _ = u.apply(_table({"sda": (120, 0, 960, 15, 70, 0, 560, 35, 0, 9, 40)}))
    assert _values(out2)["sda"][READ_MS] == WRAP + 15


def test_discard_and_flush_times_wrap_like_the_others_and_their_counts_reset() -> None:
    """Fields 15 and 17 (discard and flush ms) are `%u` like the read/write times (block/genhd.c)."""
    u = Unwrapper()
    base = (100, 0, 800, 5, 50, 0, 400, 5, 0, 10, 10)
    u.apply(_table({"sda": (*base, 7, 0, 64, WRAP - 3, 9, WRAP - 1)}))
    out, resets = u.apply(_table({"sda": (*base, 8, 0, 72, 4, 11, 2)}))
    assert resets == []
    got = _values(out)["sda"]
    assert (got[DISCARD_MS], got[FLUSH_MS]) == (WRAP + 4, WRAP + 2)
    # Fewer flushes than before: the device was re-created, raw values pass through.
    out, resets = u.apply(_table({"sda": (*base, 8, 0, 72, 5, 1, 3)}))
    assert resets == ["sda"] and _values(out)["sda"][FLUSH_MS] == 3


@pytest.mark.parametrize(("sample", "width"), [(LINE_14, 11), (LINE_18, 15), (LINE_20, 17)])
def test_the_table_says_how_many_fields_the_kernel_printed(sample: bytes, width: int) -> None:
    table, _ = parse(sample + b"\n")
    assert table.width == width
    assert len(table.rows()[0][3]) == width
    assert len(table.columns) == KEPT_FIELDS  # the fields this kernel lacks are kept as 0, never published
    assert all(table.columns[i] == [0] for i in range(width, KEPT_FIELDS))


def test_a_count_going_down_is_a_reset_not_a_wrap() -> None:
    u = Unwrapper()
    u.apply(_table({"sda": (1000, 0, 8000, 900, 10, 0, 80, 9, 0, 100, 100)}))
    out, resets = u.apply(_table({"sda": (5, 0, 40, 3, 0, 0, 0, 0, 0, 2, 3)}))
    assert resets == ["sda"]
    assert _values(out)["sda"][READ_MS] == 3  # raw values pass through: Prometheus sees the reset


def test_a_reset_clears_earlier_wrap_offsets() -> None:
    u = Unwrapper()
    u.apply(_table({"sda": (10, 0, 0, WRAP - 1, 0, 0, 0, 0, 0, 0, 0)}))
    u.apply(_table({"sda": (11, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0)}))  # wrapped
    out, resets = u.apply(_table({"sda": (1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0)}))  # device re-created
    assert resets == ["sda"]
    assert _values(out)["sda"][READ_MS] == 1


def test_new_major_minor_under_the_same_name_is_a_reset() -> None:
    u = Unwrapper()
    u.apply(_table({"loop0": (100, 0, 0, WRAP - 1, 0, 0, 0, 0, 0, 0, 0)}, {"loop0": (7, 0)}))
    out, resets = u.apply(_table({"loop0": (200, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0)}, {"loop0": (7, 9)}))
    assert resets == ["loop0"]
    assert _values(out)["loop0"][READ_MS] == 5


def test_hotplug_devices_come_and_go_without_state_leaking() -> None:
    u = Unwrapper()
    rest = (0,) * (KEPT_FIELDS - 4)  # one kernel prints one format: every line as wide as sda's
    u.apply(_table({"sda": (1,) * KEPT_FIELDS, "sdb": (1, 0, 0, WRAP - 1, *rest)}))
    u.apply(_table({"sda": (2,) * KEPT_FIELDS, "sdb": (2, 0, 0, 3, *rest)}))  # sdb wrapped
    out, resets = u.apply(_table({"sda": (3,) * KEPT_FIELDS}))  # sdb unplugged
    assert resets == [] and _values(out) == {"sda": (3,) * KEPT_FIELDS}
    # sdb is back as a new disk: no offset from its earlier life.
    out, resets = u.apply(_table({"sda": (4,) * KEPT_FIELDS, "sdb": (1, 0, 0, 2, *rest)}))
    assert resets == []
    assert _values(out)["sdb"][READ_MS] == 2


def test_in_flight_going_down_is_neither_wrap_nor_reset() -> None:
    u = Unwrapper()
    u.apply(_table({"sda": (1, 0, 0, 1, 0, 0, 0, 0, 9, 1, 1)}))
    out, resets = u.apply(_table({"sda": (2, 0, 0, 2, 0, 0, 0, 0, 0, 2, 2)}))
    assert resets == [] and _values(out)["sda"][IN_FLIGHT] == 0


def test_a_field_wider_than_32_bits_going_down_is_a_reset() -> None:
    u = Unwrapper()
    u.apply(_table({"sda": (1, 0, 0, WRAP + 5, 0, 0, 0, 0, 0, 0, 0)}))
    out, resets = u.apply(_table({"sda": (2, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0)}))
    assert resets == ["sda"] and _values(out)["sda"][READ_MS] == 7


def _scrape(u: Unwrapper, *lines: bytes) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    table, bad = parse(b"\n".join(lines) + b"\n")
    assert bad == []
    out, resets = u.apply(table)
    return _values(out), resets


def test_a_field_once_wider_than_32_bits_is_never_unwrapped_later() -> None:
    """A time field of 2**32 or more shows this kernel prints it wider than `%u`: when it later goes
    down, from a value under 2**32 too (after a reset of the device's stats), that is a reset of a
    counter that does not wrap at 2**32, never a wrap that adds 49.7 days of latency."""
    u = Unwrapper()
    wide = WRAP + 5
    _scrape(u, line("sda", [1, 0, 8, wide, 1, 0, 8, 3, 0, 4, 4]))
    _, resets = _scrape(u, line("sda", [1, 0, 8, 7, 1, 0, 8, 3, 0, 4, 4]))  # went down from >= 2**32
    assert resets == ["sda"]
    _scrape(u, line("sda", [2, 0, 16, 20, 1, 0, 8, 3, 0, 5, 5]))
    got, resets = _scrape(u, line("sda", [3, 0, 24, 10, 1, 0, 8, 3, 0, 6, 6]))
    assert resets == ["sda"]
    assert got["sda"][READ_MS] == 10  # the raw value: Prometheus sees a reset, no 2**32 jump


def test_a_field_seen_wider_than_32_bits_on_one_device_is_wide_on_every_device() -> None:
    """diskstats_show prints every line with one format string (block/genhd.c): a field wider than
    32 bits on one device is as wide on the others; its memory is one flag per field."""
    u = Unwrapper()
    _scrape(
        u,
        line("sda", [1, 0, 8, 4000, 1, 0, 8, 3, 0, 4, 4]),
        line("sdb", [1, 0, 8, WRAP + 9, 0, 0, 0, 0, 0, 1, 1]),
    )
    got, resets = _scrape(
        u,
        line("sda", [2, 0, 16, 100, 1, 0, 8, 3, 0, 5, 5]),
        line("sdb", [2, 0, 16, WRAP + 19, 0, 0, 0, 0, 0, 2, 2]),
    )
    assert resets == ["sda"] and got["sda"][READ_MS] == 100
    # A field never seen that wide still unwraps as before.
    got, resets = _scrape(
        u,
        line("sda", [3, 0, 24, 200, 2, 0, 16, 1, 0, 6, 6]),
        line("sdb", [3, 0, 24, WRAP + 29, 0, 0, 0, 0, 0, 3, 3]),
    )
    assert resets == [] and got["sda"][WRITE_MS] == WRAP + 1


# --- properties ---------------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=2**40)
ms32 = st.integers(min_value=0, max_value=WRAP - 1)


@st.composite
def device_histories(draw: st.DrawFn) -> list[list[tuple[int, ...]]]:
    """True monotonic counters of a few devices over several samples (ms may exceed 32 bits)."""
    n_devices = draw(st.integers(1, 4))
    n_samples = draw(st.integers(2, 8))
    histories = []
    for _ in range(n_devices):
        current = [draw(counts) for _ in range(KEPT_FIELDS)]
        samples = [tuple(current)]
        for _ in range(n_samples - 1):
            # Less than one wrap of growth per interval in each ms field: the unwrap premise.
            for i in range(KEPT_FIELDS):
                if i == IN_FLIGHT:
                    current[i] = draw(st.integers(0, 64))
                elif i in MS_FIELDS:
                    current[i] += draw(st.integers(0, WRAP - 1))
                else:
                    current[i] += draw(st.integers(1, 10**6))
            samples.append(tuple(current))
        histories.append(samples)
    return histories


@given(device_histories())
@settings(max_examples=200, deadline=None)
def test_unwrapped_counters_grow_by_exactly_the_true_increase(histories: list[list[tuple[int, ...]]]) -> None:
    u = Unwrapper()
    names = [f"d{i}" for i in range(len(histories))]
    first: dict[str, tuple[int, ...]] = {}
    for step in range(len(histories[0])):
        truth = {n: h[step] for n, h in zip(names, histories, strict=True)}
        raw = {n: tuple(v % WRAP if i in MS_FIELDS else v for i, v in enumerate(t)) for n, t in truth.items()}
        out, resets = u.apply(_table(raw))
        assert resets == []
        got = _values(out)
        if step == 0:
            first = got
            continue
        for n in names:
            for i in range(KEPT_FIELDS):
                if i != IN_FLIGHT:
                    assert got[n][i] - first[n][i] == truth[n][i] - histories[names.index(n)][0][i]


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_garbage_never_raises_and_every_kept_row_is_well_formed(data: bytes) -> None:
    table, bad = parse(data)
    assert len(table.columns) == KEPT_FIELDS
    assert all(len(c) == len(table.names) for c in table.columns)
    assert all(v >= 0 for c in table.columns for v in c)
    assert len(set(table.names)) == len(table.names)
    assert all(b.reason in ("malformed_line", "duplicate_device") for b in bad)


@given(
    st.lists(
        st.tuples(st.integers(0, 4095), st.integers(0, 2**20), st.lists(counts, min_size=17, max_size=17)),
        max_size=30,
    )
)
@settings(max_examples=100, deadline=None)
def test_fast_path_equals_line_path_on_valid_input(rows: list[tuple[int, int, list[int]]]) -> None:
    text = b"\n".join(line(f"dev{i}", vals, major, minor) for i, (major, minor, vals) in enumerate(rows))
    fast, bad = parse(text)
    slow, slow_bad = _parse_lines(list(map(bytes.split, text.splitlines())))
    assert bad == slow_bad == []
    assert fast == slow
    assert fast.columns[READS] == [vals[READS] for _, _, vals in rows]


def test_a_large_table_round_trips_through_the_fast_path() -> None:
    rng = random.Random(7)
    rows = [[rng.randrange(2**40) for _ in range(17)] for _ in range(2000)]
    text = b"\n".join(line(f"dm-{i}", r, 253, i) for i, r in enumerate(rows)) + b"\n"
    table, bad = parse(text)
    assert bad == []
    assert table.columns[WRITE_MS] == [r[WRITE_MS] for r in rows]
    assert table.minors == list(range(2000))
