"""What the kernel never prints but a fuzzer (or a broken procfs) does: one odd line costs that
line only, and the exposition stays valid for promtool whatever /proc/diskstats holds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lunlat import contract
from lunlat.exposition import render
from lunlat.sources.base import SourceResult
from lunlat.sources.diskstats_format import parse
from tests.support.device_series import by_device
from tests.support.fake_host import FakeHost
from tests.support.skip_unless_installed import command
from tests.unit.test_diskstats_source import assert_consistent, collect, source
from tests.unit.test_diskstats_source import host as host  # noqa: PLC0414 - the fixture, re-exported

GOOD = b"   8       0 sda 4245 110 316590 2212 3470 1680 48514 3868 0 2788 6076"
U64_MAX = 2**64 - 1


def fields(name: bytes, values: list[int] | None = None) -> bytes:
    return b"8 16 " + name + b" " + b" ".join(str(v).encode() for v in (values or [1] * 11))


ODD_LINES = {
    "nul-in-name": fields(b"sd\x00b"),
    "invalid-utf8-name": fields(b"sd\xff\xfe"),
    "control-char-name": fields(b"sd\x07b"),
    "dot-dot-name": fields(b".."),
    "huge-number": fields(b"sdb", [10**400] + [1] * 10),
    "just-past-u64": fields(b"sdb", [1] * 10 + [2**64]),
    "too-many-fields": fields(b"sdb", [1] * 12),
    "too-few-fields": fields(b"sdb", [1] * 3),
    "negative": b"8 16 sdb -1 " + b" ".join([b"1"] * 10),
}


def promtool_check(text: str) -> None:
    result = subprocess.run(
        [command("promtool", "prometheus"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[:2000]


@pytest.mark.parametrize("odd", ODD_LINES.values(), ids=ODD_LINES.keys())
def test_an_odd_line_is_malformed_alone_on_both_parse_paths(odd: bytes) -> None:
    # Two good lines around it: the line-by-line path. The odd line alone: the uniform fast path.
    table, bad = parse(b"\n".join([GOOD, odd, GOOD.replace(b"sda", b"sdc")]))
    assert table.names == ["sda", "sdc"]
    assert [(b.lineno, b.reason) for b in bad] == [(2, "malformed_line")]
    table, bad = parse(odd + b"\n")
    assert table.names == [] and [b.reason for b in bad] == ["malformed_line"]


def test_the_widest_kernel_number_is_kept() -> None:
    table, bad = parse(fields(b"sdb", [U64_MAX] * 11))
    assert bad == [] and table.columns[0] == [U64_MAX]


@pytest.mark.parametrize("odd", ODD_LINES.values(), ids=ODD_LINES.keys())
def test_an_odd_line_costs_only_itself_and_the_exposition_stays_valid(host: FakeHost, odd: bytes) -> None:
    diskstats = host.procfs / "diskstats"
    diskstats.write_bytes(diskstats.read_bytes() + odd + b"\n")
    got = collect(source(host))
    assert got.result.errors["malformed_line"] == 1
    assert got.devices() == {"sda", "dm-3", "dm-4", "nvme0n1"}
    assert_consistent(host, got)
    promtool_check(render(got.result.families))


def test_the_widest_kernel_numbers_make_a_valid_exposition(host: FakeHost) -> None:
    diskstats = host.procfs / "diskstats"
    diskstats.write_bytes(diskstats.read_bytes() + fields(b"sdz", [U64_MAX] * 17) + b"\n")
    got = collect(source(host))
    assert not got.result.errors
    assert by_device(got.family(contract.DEVICE_READ_BYTES.name))[("sdz", "sdz")] == float(U64_MAX * 512)
    promtool_check(render(got.result.families))


# --- fuzzing -------------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(0, 2**32), st.integers(0, 2**66), st.integers(-5, 10**400), st.sampled_from([U64_MAX, 2**64])
)
names = st.one_of(
    st.sampled_from([b"sda", b"dm-3", b"sdq", b"cciss/c0d0", b".", b"..", b"\x00"]),
    st.binary(min_size=1, max_size=10),
)
line_like = st.builds(
    lambda major, minor, name, values: b" ".join([str(major).encode(), str(minor).encode(), name, *values]),
    numbers,
    numbers,
    names,
    st.lists(numbers.map(lambda n: str(n).encode()), min_size=9, max_size=19),
)
odd_lines = st.lists(st.one_of(line_like, st.binary(max_size=120)), min_size=1, max_size=6)


@given(extra=odd_lines, junk=st.binary(max_size=60), at=st.floats(0, 1))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_bytes_in_diskstats_never_raise_nor_make_an_invalid_exposition(
    host: FakeHost, extra: list[bytes], junk: bytes, at: float
) -> None:
    diskstats = host.procfs / "diskstats"
    original = _original(diskstats)
    # Lines appended: every original device is still published with its values.
    diskstats.write_bytes(original + b"\n".join(extra) + b"\n")
    got = collect(source(host))
    assert {"sda", "dm-3", "dm-4", "nvme0n1"} <= got.devices()
    reads = by_device(got.family(contract.DEVICE_READS.name))
    assert reads[(got.lun_of()["sda"], "sda")] == host.stats["sda"].reads
    promtool_check(render(got.result.families))
    # Bytes inserted anywhere: whatever survives, nothing raises and the exposition is valid.
    cut = int(at * len(original))
    diskstats.write_bytes(original[:cut] + junk + original[cut:])
    result: SourceResult = source(host).collect()
    promtool_check(render(result.families))


_ORIGINALS: dict[Path, bytes] = {}


def _original(diskstats: Path) -> bytes:
    """The fixture's diskstats as first written (hypothesis reuses the fixture across examples)."""
    return _ORIGINALS.setdefault(diskstats, diskstats.read_bytes())


def test_an_odd_line_is_logged_with_its_odd_bytes_escaped() -> None:
    _, bad = parse(b"\n".join([GOOD, fields(b"sd\x1b[2J\xff"), GOOD.replace(b"sda", b"sdc")]))
    (odd,) = bad
    assert odd.line.startswith("8 16 sd\\x1b[2J\\xff 1 ") and odd.line.isprintable()
