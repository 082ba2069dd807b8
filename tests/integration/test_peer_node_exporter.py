"""Peer comparison: lunlat and prometheus-node-exporter read the same fake /proc/diskstats and must
publish the same per-device counters.

One comparison per kernel format (14, 18 and 20 whole-line fields). The sysfs tree is empty, so
every device is its own LUN and lunlat shows them all; node_exporter is told to exclude nothing.
Values cover 0, small, large (> 2**40) and ms fields just below the 32-bit wrap. Each comparison
scrapes twice: the second time after every counter advanced (and with gzip), so a stale cache in
either exporter shows up as a difference.

node_exporter turns ms into seconds as `float64(ms) * (1.0/1000.0)` while lunlat prints `ms e-3`,
which may differ in the last bit of the double: times are compared as integer milliseconds and
with math.isclose(rel_tol=1e-15); everything else must be equal.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, NODE_EXPORTER_PORT, ExporterProcess

pytestmark = pytest.mark.peer

NODE_EXPORTER_NAMES = ("prometheus-node-exporter", "node_exporter")

# Stats field indexes (0-based, after major, minor and name), as in iostats.rst.
READS, READ_SECTORS, READ_MS, WRITES, WRITE_SECTORS, WRITE_MS = 0, 2, 3, 4, 6, 7
IN_FLIGHT, IO_MS, WEIGHTED_MS = 8, 9, 10
MS_FIELDS = frozenset({READ_MS, WRITE_MS, IO_MS, WEIGHTED_MS, 14, 16})  # 14: discard ms, 16: flush ms
MAX_MS = 2**32 - 1  # the kernel prints the ms fields as 32-bit unsigned

# The three kernel formats: stats fields after `major minor name` (< 4.18, 4.18+, 5.5+).
FORMATS = {14: 11, 18: 15, 20: 17}


@dataclass(frozen=True, slots=True)
class Pair:
    lunlat: str
    node: str
    kind: str  # count: equal | ms: equal as integer ms and isclose | gauge: equal | sectors: lunlat's bytes
    since: int = 11  # the stats field count (FORMATS) from which the kernel prints the field


PAIRS: tuple[Pair, ...] = (
    Pair(contract.DEVICE_READS.name, "node_disk_reads_completed_total", "count"),
    Pair(contract.DEVICE_WRITES.name, "node_disk_writes_completed_total", "count"),
    Pair(contract.DEVICE_READ_TIME.name, "node_disk_read_time_seconds_total", "ms"),
    Pair(contract.DEVICE_WRITE_TIME.name, "node_disk_write_time_seconds_total", "ms"),
    Pair(contract.DEVICE_READ_BYTES.name, "node_disk_read_bytes_total", "count"),
    Pair(contract.DEVICE_WRITE_BYTES.name, "node_disk_written_bytes_total", "count"),
    Pair(contract.DEVICE_IO_IN_PROGRESS.name, "node_disk_io_now", "gauge"),
    Pair(contract.DEVICE_IO_TIME.name, "node_disk_io_time_seconds_total", "ms"),
    Pair(contract.DEVICE_IO_WEIGHTED_TIME.name, "node_disk_io_time_weighted_seconds_total", "ms"),
    # node_exporter's names for fields 12-17 (collector/diskstats_linux.go): discards from 4.18,
    # flushes from 5.5; it publishes sectors where lunlat publishes bytes.
    Pair(contract.DEVICE_DISCARDS.name, "node_disk_discards_completed_total", "count", 15),
    Pair(contract.DEVICE_DISCARD_BYTES.name, "node_disk_discarded_sectors_total", "sectors", 15),
    Pair(contract.DEVICE_DISCARD_TIME.name, "node_disk_discard_time_seconds_total", "ms", 15),
    Pair(contract.DEVICE_FLUSHES.name, "node_disk_flush_requests_total", "count", 17),
    Pair(contract.DEVICE_FLUSH_TIME.name, "node_disk_flush_requests_time_seconds_total", "ms", 17),
)

BIG = 2**40  # "large": beyond 32 bits and beyond what a float32 or a 1 TiB counter holds


def _device_values() -> dict[tuple[int, int, str], list[int]]:
    """17 stats fields per device (formats with fewer fields take the first 11 or 15).

    None of the names is in lunlat's default exclude (ram, zram, fd, sr).
    """
    small = list(range(1, 18))
    return {
        (8, 0, "sda"): [0] * 17,
        (8, 16, "sdb"): small,
        # large counts and sectors; every ms field just below the 32-bit wrap
        (253, 0, "dm-0"): [
            *(BIG + 11, BIG + 12, BIG * 1024 + 13, MAX_MS),  # reads, merged, sectors (bytes > 2**53), ms
            *(BIG + 15, BIG + 16, BIG + 17, MAX_MS - 1),  # writes, merged, sectors, ms
            *(0, MAX_MS - 2, MAX_MS - 3),  # in flight, io ms, weighted ms
            *(BIG, BIG + 1, BIG + 2, MAX_MS - 4, BIG + 3, MAX_MS - 5),
        ],
        # a mix: zero next to small next to large; odd ms values that are not exact in binary
        (259, 0, "nvme0n1"): [
            *(2**53 - 1, 0, 2**44 + 1, 1),
            *(7, 2**41 + 3, 0, 999_999_999),
            *(1, 0, 4_294_000_001),
            *(0, 3, 2**42, 4_293_967_295, 5, 123_456_789),
        ],
        (252, 0, "vda"): [
            *(48_213, 1_207, 9_817_522, 31_337),
            *(125_901, 88_812, 44_123_008, 1_234_567),
            *(3, 987_654, 2_718_281),
            *(11, 0, 2_048, 17, 901, 4_242),
        ],
        (9, 0, "md0"): [
            *(2**63, 0, 2**50, 2**31),  # a 64-bit count past 2**53: both round it to the same double
            *(2**62 + 1, 0, 2**45 + 7, 2**31 + 1),
            *(255, 2**32 - 1000, 2**32 - 999),
            *(0, 0, 0, 0, 0, 0),
        ],
    }


def _advanced(values: list[int], step: int) -> list[int]:
    """Every counter moved forward (ms fields only while they stay 32-bit: no wrap here, as
    node_exporter does not undo wraps); the in-flight gauge moved too."""
    out = []
    for i, value in enumerate(values):
        if i == IN_FLIGHT:
            out.append(value + 1 if value < 10 else value - 1)
        elif i in MS_FIELDS and value + step > MAX_MS:
            out.append(value)
        else:
            out.append(value + step)
    return out


def _diskstats(devices: dict[tuple[int, int, str], list[int]], fields: int) -> str:
    stats = FORMATS[fields]
    lines = []
    for (major, minor, name), values in devices.items():
        line = f"{major:4d} {minor:7d} {name} " + " ".join(map(str, values[:stats]))
        assert len(line.split()) == fields
        lines.append(line)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Tree:
    procfs: Path
    sysfs: Path
    udev: Path

    @classmethod
    def make(cls, root: Path) -> Tree:
        tree = cls(root / "proc", root / "sys", root / "udev")
        (tree.procfs / "1").mkdir(parents=True)
        (tree.procfs / "1" / "mountinfo").write_text("")
        tree.sysfs.mkdir()
        tree.udev.mkdir()
        return tree

    def write_diskstats(self, text: str) -> None:
        tmp = self.procfs / "diskstats.tmp"
        tmp.write_text(text)
        tmp.replace(self.procfs / "diskstats")  # whole file at once: a scrape never sees half


@pytest.fixture(scope="module")
def node_exporter_binary() -> str:
    for name in NODE_EXPORTER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"node_exporter not installed (none of {', '.join(NODE_EXPORTER_NAMES)} on PATH)")


@pytest.fixture
def exporters(
    node_exporter_binary: str, tmp_path: Path
) -> Iterator[tuple[Tree, ExporterProcess, ExporterProcess]]:
    """A fake tree and both exporters on it; both are stopped at teardown whatever happened."""
    tree = Tree.make(tmp_path / "host")
    tree.write_diskstats("")  # replaced by each test before its first scrape
    listen = f"--web.listen-address={LOOPBACK}:0"
    node = ExporterProcess(
        [
            node_exporter_binary,
            f"--path.procfs={tree.procfs}",
            f"--path.sysfs={tree.sysfs}",
            f"--path.udev.data={tree.udev}",
            "--collector.disable-defaults",
            "--collector.diskstats",
            "--collector.diskstats.device-exclude=^$",  # every device (1.5: no include with exclude)
            listen,
        ],
        tmp_path / "node_exporter.log",
        port_pattern=NODE_EXPORTER_PORT,
        name="node_exporter",
    )
    lunlat = ExporterProcess(
        [
            sys.executable,
            "-m",
            "lunlat",
            "serve",
            f"--path.procfs={tree.procfs}",
            f"--path.sysfs={tree.sysfs}",
            "--log.level=debug",
            listen,
        ],
        tmp_path / "lunlat.log",
        port_pattern=LUNLAT_PORT,
        name="lunlat",
    )
    with ExitStack() as stack:
        stack.enter_context(node)
        stack.enter_context(lunlat)
        yield tree, node, lunlat


def _by_device(text: str, names: set[str]) -> dict[str, dict[str, float]]:
    """metric name -> device -> value, for the named metrics.

    Values as Prometheus stores them, float64: prometheus_client's parser returns an integer
    literal as an exact int, which would compare unequal to the same double.
    """
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                per_device = out.setdefault(sample.name, {})
                device = sample.labels["device"]
                assert device not in per_device, f"{sample.name}{{device={device!r}}} exposed twice"
                per_device[device] = float(sample.value)
    return out


def _differences(node_text: str, lunlat_text: str, expected: set[str], stats: int) -> list[str]:
    node = _by_device(node_text, {p.node for p in PAIRS})
    ours = _by_device(lunlat_text, {p.lunlat for p in PAIRS})
    problems: list[str] = []
    for pair in PAIRS:
        node_values, our_values = node.get(pair.node, {}), ours.get(pair.lunlat, {})
        if pair.since > stats:  # a field this kernel format lacks: neither exporter publishes it
            if node_values or our_values:
                problems.append(
                    f"{stats} stats fields: {pair.node} {node_values}, {pair.lunlat} {our_values}"
                )
            continue
        if set(node_values) != expected or set(our_values) != expected:
            problems.append(
                f"devices differ: {pair.node} {sorted(node_values)}, {pair.lunlat} {sorted(our_values)}, "
                f"diskstats {sorted(expected)}"
            )
            continue
        for device in sorted(expected):
            n, o = node_values[device], our_values[device]
            if pair.kind == "ms":
                same = round(n * 1000) == round(o * 1000) and math.isclose(n, o, rel_tol=1e-15)
            elif pair.kind == "sectors":
                same = n * 512 == o
            else:
                same = n == o
            if not same:
                problems.append(f"{device}: {pair.node} = {n!r} but {pair.lunlat} = {o!r}")
    return problems


@pytest.mark.parametrize(
    "fields", sorted(FORMATS), ids=[f"{n}-fields" for n in sorted(FORMATS)]
)  # 14: before 4.18, 18: 4.18+ (discards), 20: 5.5+ (flushes)
def test_same_counters_as_node_exporter(
    fields: int, exporters: tuple[Tree, ExporterProcess, ExporterProcess]
) -> None:
    tree, node, lunlat = exporters
    devices = _device_values()
    expected = {name for _, _, name in devices}
    assert expected

    for step, gzip_ok in ((0, False), (1_000, True)):
        current = {key: _advanced(values, step) if step else values for key, values in devices.items()}
        tree.write_diskstats(_diskstats(current, fields))
        node_scrape = node.scrape(gzip_ok=gzip_ok)
        lunlat_scrape = lunlat.scrape(gzip_ok=gzip_ok)
        if gzip_ok:
            assert node_scrape.gzipped and lunlat_scrape.gzipped
        problems = _differences(node_scrape.text, lunlat_scrape.text, expected, FORMATS[fields])
        assert not problems, (
            f"{fields}-field diskstats, scrape {'2 (advanced, gzip)' if step else '1'}: "
            f"{len(problems)} differences:\n" + "\n".join(problems) + "\n" + lunlat.log_tail()
        )

    # With an empty sysfs each device is its own LUN.
    luns = _lun_labels(lunlat.scrape().text)
    assert luns == {name: name for name in expected}


def _lun_labels(text: str) -> dict[str, str]:
    return {
        s.labels["device"]: s.labels["lun"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == contract.DEVICE_READS.name
    }
