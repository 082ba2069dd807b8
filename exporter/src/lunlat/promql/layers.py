"""The per-LUN latency layers as PromQL: the host layer (diskstats counters labelled through
lunlat_lun_info) and each engine's own (its `Engine.files`). The rules (alerts/) record them; the
report computes a phase's averages with the same expressions, so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lunlat import ground
from lunlat.engines.engine import Engine, FileLayer
from lunlat.engines.registry import ENGINES
from lunlat.goals import Goals, HostJoin

# Labels that identify one judged series (a LUN of a host, in one layer, with its roles).
SERIES_LABELS: tuple[str, ...] = ("job", "instance", "lun", "layer", "database", "role", "workload")
# The same without the layer: a LUN's labels where one layer is summed or the layer is set after.
LUN_LABELS: tuple[str, ...] = tuple(label for label in SERIES_LABELS if label != "layer")
_BY = ", ".join(LUN_LABELS)


def lun_sum(
    per_device: Callable[[str], str], selector: str, by: Sequence[str] = (), unlabelled: str | None = None
) -> str:
    """A LUN's device series summed per LUN, database and role (and the labels `by`).

    `per_device(kind)` is the expression per device, every series selector in it matching
    `kind="<kind>"`; an operand of `*`, so parenthesised where it is more than one term. The device
    series carry the LUN's kind and roles themselves (ground.DEVICE_ROLE_LABELS), so a LUN's series are
    summed with no join to lunlat_lun_info: the join was two thirds of the cost (docs/benchmarks.md,
    "The rules at fleet scale"). An exporter from before those labels (its series have no `kind`) is
    still joined to lunlat_lun_info, so a fleet upgraded host by host is judged throughout; a host's
    series are one or the other, never both (`or` keeps the first where a restart overlaps them).
    `unlabelled`: the lunlat_lun_info series of those exporters' LUNs (the rules' recorded
    UNLABELLED_LUNS, unlabelled_luns): PromQL evaluates both operands of the join, so joined to every
    LUN's lunlat_lun_info it cost as much as the sum itself, with nothing to join.
    """
    info = unlabelled or f'{ground.LUN_INFO.name}{{{selector}, kind="lun"}}'
    grouping = ", ".join((_BY, *by))
    # In parentheses: the callers divide and compare it, and `or` binds loosest.
    return (
        f"(\n  sum by ({grouping}) (\n"
        f"      {_indented(per_device('lun'), 6)}\n"
        "  )\n"
        "  or\n"
        f"  sum by ({grouping}) (\n"
        f"      {_indented(per_device(''), 6)}\n"
        "    * on (job, instance, lun, device) group_left (database, role, workload)\n"
        f"      {info}\n"
        "  )\n)"
    )


def unlabelled_luns(selector: str) -> str:
    """lunlat_lun_info of the LUNs of exporters whose device series carry no `kind` (lun_sum's
    `unlabelled`): an exporter's series have it or not, all of them."""
    counter = ground.DEVICE_READS.name
    return (
        f'{ground.LUN_INFO.name}{{{selector}, kind="lun"}}\n'
        f'unless on (job, instance) {counter}{{{selector}, kind="lun"}}'
    )


def _indented(text: str, spaces: int) -> str:
    """`text` with its lines after the first indented by `spaces`."""
    return text.replace("\n", "\n" + " " * spaces)


def _by_lun(
    series: str, selector: str, window: str, function: str = "rate", unlabelled: str | None = None
) -> str:
    """`function` of the LUNs' `series` (a name and its matchers, the closing brace left off) over
    `window`, summed per LUN, database and role (lun_sum)."""
    return lun_sum(
        lambda kind: f'{function}({series}, kind="{kind}"}}[{window}])', selector, unlabelled=unlabelled
    )


@dataclass(frozen=True, slots=True)
class HostLayer:
    """The host layer: lunlat's diskstats counters per LUN, by the roles they carry."""

    selector: str
    name: str = "host"
    # The exporters' LUNs whose device series carry no roles (lun_sum); lunlat_lun_info's when None.
    unlabelled: str | None = None

    def _per_lun(self, counter: str, window: str, function: str = "rate") -> str:
        return _by_lun(f"{counter}{{{self.selector}", self.selector, window, function, self.unlabelled)

    def operations(self, op: str, window: str) -> str:
        spec = ground.DEVICE_READS if op == "read" else ground.DEVICE_WRITES
        return self._per_lun(spec.name, window)

    def luns(self) -> str:
        """One series per LUN with the labels the layer's records carry (value 1): the LUNs lunlat
        publishes, whose counters these are."""
        return f'group by ({_BY}) ({ground.LUN_INFO.name}{{{self.selector}, kind="lun"}})'

    def time(self, op: str, window: str) -> str:
        spec = ground.DEVICE_READ_TIME if op == "read" else ground.DEVICE_WRITE_TIME
        return self._per_lun(spec.name, window)

    def bytes(self, op: str, window: str) -> str | None:
        spec = ground.DEVICE_READ_BYTES if op == "read" else ground.DEVICE_WRITE_BYTES
        return self._per_lun(spec.name, window)

    def queue(self, window: str, function: str = "rate") -> str | None:
        """The LUN's average I/Os in flight (diskstats' weighted time per second), by `function`
        (rate, or irate: between the window's last two samples)."""
        return self._per_lun(ground.DEVICE_IO_WEIGHTED_TIME.name, window, function)


def small_ios(selector: str, op: str, part: str, window: str, unlabelled: str | None = None) -> str:
    """Rate of the `part` (sum, count) of a LUN's small `op` I/Os (ground.BIO_SIZES' first class,
    the per-I/O histogram ground.DEVICE_IO_LATENCY), per LUN and role like the host layer's
    counters. The rules' judged latency (`judge: small`) and `lunlat report`'s judged figure are both
    this expression, so the two never disagree on which I/Os were judged. Whatever the host layer's
    source: the histogram is lunlat's own (biolatency), beside any of them."""
    series = f'{ground.DEVICE_IO_LATENCY.name}_{part}{{{selector}, op="{op}", size="{ground.BIO_SIZES[0]}"'
    return _by_lun(series, selector, window, unlabelled=unlabelled)


def io_latency_quantile(q: str, buckets: str, luns: str, window: str, by: Sequence[str]) -> str:
    """The `q` quantile of the I/Os of every size in the per-I/O histogram (ground.DEVICE_IO_LATENCY)
    of the LUNs `luns` selects (matchers on lunlat_lun_info), over `window`, by `by` (with `le`):
    `buckets`, the matchers on the histogram's buckets (e.g. the op). Computed where it is read, for
    the LUNs shown or alerted on, not recorded for every LUN each minute: over a fleet's every
    bucket series (2 ops x 3 size classes x 19 per LUN) the two quantiles were 60 s of a one-minute
    group at 500 hosts (issue 41). The LUN's own device through its lunlat_lun_info (kind lun), so
    an exporter whose series carry no `kind` is read too. No I/O in the window: no sample, not NaN
    ("If `b` has 0 observations, `NaN` is returned", Prometheus docs, querying/functions.md,
    histogram_quantile; a comparison with NaN is false and PromQL's comparison operators drop the
    samples for which it is false, querying/operators.md; every bucket bound is 0 or more)."""
    return (
        f"histogram_quantile({q},\n"
        f"  sum by ({', '.join([*by, 'le'])}) (\n"
        f"    rate({ground.DEVICE_IO_LATENCY.name}_bucket{{{buckets}}}[{window}])\n"
        f'    and on (job, instance, lun, device) {ground.LUN_INFO.name}{{{luns}, kind="lun"}}\n'
        "  )\n"
        ") >= 0"
    )


# The label both sides of an exporter's join carry for the host (added by label_replace, then summed away).
JOIN_HOST = "lunlat_host"


def _host(vector: str, host: HostJoin) -> str:
    """`vector` with JOIN_HOST, the host part of its `host.label`."""
    return f'label_replace({vector}, "{JOIN_HOST}", "$1", "{host.label}", "{_quoted(host.regex)}")'


def _quoted(text: str) -> str:
    """`text` inside a PromQL double-quoted string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


@dataclass(frozen=True, slots=True)
class ExporterHostLayer:
    """The host layer from another exporter's per-device counters (node_exporter, windows_exporter),
    labelled with lunlat's LUN, database and role by a join on the host and a device key.

    The result keeps lunlat's job and instance (`group_right` takes the labels of lunlat's side), so
    its series are the ones the database layer, the goals and the alerts already know.
    """

    selector: str  # the exporter's series
    counters: dict[str, str]  # reads, writes, read_time, write_time, read_bytes, write_bytes -> metric
    key: str  # the label naming the device on both sides after `lunlat` (device, volume)
    lunlat: str  # lunlat's side: one series per LUN and role, carrying `key`
    exporter_host: HostJoin
    lunlat_host: HostJoin
    name: str = "host"

    def _per_lun(self, counter: str, window: str, function: str = "rate") -> str:
        exporter = _host(f"{function}({counter}{{{self.selector}}}[{window}])", self.exporter_host)
        return (
            f"sum by ({_BY}) (\n"
            f"    {exporter}\n"
            f"  * on ({JOIN_HOST}, {self.key}) group_right ()\n"
            f"    {_host(self.lunlat, self.lunlat_host)}\n"
            ")"
        )

    def operations(self, op: str, window: str) -> str:
        return self._per_lun(self.counters[f"{op}s"], window)

    def luns(self) -> str:
        """One series per LUN of lunlat's side of the join (value 1): the labels its counters take."""
        return f"group by ({_BY}) ({self.lunlat})"

    def time(self, op: str, window: str) -> str:
        return self._per_lun(self.counters[f"{op}_time"], window)

    def bytes(self, op: str, window: str) -> str | None:
        return self._per_lun(self.counters[f"{op}_bytes"], window)

    def queue(self, window: str, function: str = "rate") -> str | None:
        """The LUN's average I/Os in flight, where the exporter counts diskstats' weighted time, by
        `function` (rate, or irate)."""
        counter = self.counters.get("queue")
        return None if counter is None else self._per_lun(counter, window, function)


# node_exporter's diskstats collector (prometheus/node_exporter collector/diskstats_common.go, the
# descriptors; collector/diskstats_linux.go: times are the kernel's milliseconds * secondsPerTick =
# 1/1000, bytes the sectors * unixSectorSize = 512), one series per /proc/diskstats line, label `device`
# the kernel's name (sda, dm-0): lunlat_lun_info's `device` of the same line.
NODE_EXPORTER_DISKSTATS: dict[str, str] = {
    "reads": "node_disk_reads_completed_total",
    "writes": "node_disk_writes_completed_total",
    "read_time": "node_disk_read_time_seconds_total",
    "write_time": "node_disk_write_time_seconds_total",
    "read_bytes": "node_disk_read_bytes_total",
    "write_bytes": "node_disk_written_bytes_total",
    # diskstats field 11 in seconds, HELP "The weighted # of seconds spent doing I/Os." (node_exporter's
    # own exposition; collector/diskstats_linux.go): its rate is the average I/Os in flight.
    "queue": "node_disk_io_time_weighted_seconds_total",
}

# windows_exporter's logical_disk collector (prometheus-community/windows_exporter
# internal/collector/logical_disk/logical_disk.go, docs/collector.logical_disk.md), label `volume`
# the LogicalDisk instance name ("C:", "D:", "HarddiskVolume2"). The times are the raw numerators of
# "Avg. Disk sec/Read" and "Avg. Disk sec/Write" (read_latency_seconds_total, write_latency_seconds_total:
# AvgDiskSecPerRead * TicksToSecondScaleFactor = 1e-7, internal/pdh/const.go; collected as raw
# counters, pdh.CounterTypeRaw), so Δtime / Δreads is the average read latency, as
# Windows' own counter is; since v0.8.2 ("Add logical_disk latency metrics"). Not
# read_seconds_total: that is "% Disk Read Time", the disk's busy time. No "queue": the throughput
# floor (goals throughput_floor_mib_s) is not judged on Windows volumes (docs/alerting.md).
WINDOWS_LOGICAL_DISK: dict[str, str] = {
    "reads": "windows_logical_disk_reads_total",
    "writes": "windows_logical_disk_writes_total",
    "read_time": "windows_logical_disk_read_latency_seconds_total",
    "write_time": "windows_logical_disk_write_latency_seconds_total",
    "read_bytes": "windows_logical_disk_read_bytes_total",
    "write_bytes": "windows_logical_disk_write_bytes_total",
}

# SQL Server names a file's volume as sys.dm_os_volume_stats' volume_mount_point, with its trailing
# backslash ('D:\', 'C:\MountPoints\Data1\'); the mssql source publishes it as the file's `lun`
# where no mount table leads to one. windows_exporter's `volume` is the same path without it: its own
# code looks a LogicalDisk instance name up among the volumes' mount paths with the trailing
# backslash trimmed (logical_disk.go, getAllMountedVolumes and getVolumeInfo: "If rootDrive is a NTFS
# directory"), so "D:" and "C:\MountPoints\Data1".
VOLUME_FROM_LUN = "(.+?)\\\\?"


def _windows_volumes(selector: str) -> str:
    """One series per database, LUN (volume) and role of the database files on a volume, with the
    volume as windows_exporter names it."""
    # Reads or writes: a file with only one of the two series still names its volume.
    files = "\n  or ".join(
        f'{spec.name}{{{selector}, lun!=""}}'
        for engine in ENGINES
        for spec in (engine.files.reads, engine.files.writes)
    )
    grouped = f"group by ({_BY}) (\n  {files}\n)"
    return f'label_replace({grouped}, "volume", "$1", "lun", "{_quoted(VOLUME_FROM_LUN)}")'


# windows_exporter's physical_disk collector (prometheus-community/windows_exporter
# internal/collector/physical_disk/physical_disk.go, docs/collector.physical_disk.md): label `disk`,
# the PhysicalDisk instance name cut at its first space ("1 C: D:" -> "1": the drive letters are
# dropped, so the series alone name no volume). The latency counters are the raw numerators of
# "Avg. Disk sec/Read" and "Avg. Disk sec/Write" times TicksToSecondScaleFactor (1e-7), collected raw
# like logical_disk's, so Δtime / Δops is the average; read_seconds_total is "% Disk Read Time" (busy).
WINDOWS_PHYSICAL_DISK: dict[str, str] = {
    "reads": "windows_physical_disk_reads_total",
    "writes": "windows_physical_disk_writes_total",
    "read_time": "windows_physical_disk_read_latency_seconds_total",
    "write_time": "windows_physical_disk_write_latency_seconds_total",
}
# Which disks a volume is on: windows_logical_disk_info{volume, disk} (logical_disk.go getVolumeInfo:
# IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS, the disk numbers of the volume's extents sorted and joined with
# ";"; empty when the lookup failed; since v0.26.0, "logical disk: Fix metrics for non drive letter
# disks" #1498). Only a volume on one disk (`disk` one number) is joined: a volume spanning disks
# ("3;4", a striped or spanned volume) has no one disk its I/O went to, and an empty `disk` none known.
WINDOWS_LOGICAL_DISK_INFO = "windows_logical_disk_info"
ONE_DISK = "[0-9]+"


@dataclass(frozen=True, slots=True)
class PhysicalDiskLayer:
    """The physical disk under each database volume on a Windows host: windows_exporter's
    physical_disk per `disk`, joined to the volumes of the database files through
    windows_logical_disk_info. The disk's counters are the whole disk's (every volume on it), the
    LUN a SAN presents; shown beside the volume's host layer, not judged."""

    selector: str  # windows_exporter's series
    volumes: str  # lunlat's side: one series per database, volume (lun) and role, carrying `volume`
    exporter_host: HostJoin
    lunlat_host: HostJoin

    def disks(self) -> str:
        """lunlat's volumes with the one disk each is on (`disk`)."""
        info = f'{WINDOWS_LOGICAL_DISK_INFO}{{{self.selector}, disk=~"{ONE_DISK}"}}'
        return (
            f"{_host(self.volumes, self.lunlat_host)}\n"
            f"* on ({JOIN_HOST}, volume) group_left (disk)\n"
            f"  group by ({JOIN_HOST}, volume, disk) ({_host(info, self.exporter_host)})"
        )

    def _per_lun(self, counter: str, window: str) -> str:
        exporter = _host(f"rate({counter}{{{self.selector}}}[{window}])", self.exporter_host)
        disks = self.disks().replace("\n", "\n      ")
        return (
            f"sum by ({_BY}, disk) (\n"
            f"    {exporter}\n"
            f"  * on ({JOIN_HOST}, disk) group_right ()\n"
            f"    (\n      {disks}\n    )\n"
            ")"
        )

    def operations(self, op: str, window: str) -> str:
        return self._per_lun(WINDOWS_PHYSICAL_DISK[f"{op}s"], window)

    def time(self, op: str, window: str) -> str:
        return self._per_lun(WINDOWS_PHYSICAL_DISK[f"{op}_time"], window)


def physical_disk_layer(goals: Goals) -> PhysicalDiskLayer | None:
    """The physical disks under the database volumes where the goals read the host layer from
    windows_exporter; None elsewhere (Linux hosts: the LUN is the block device already)."""
    choice = goals.host_layer
    if choice.source != "windows_exporter" or choice.selector is None:
        return None
    exporter_host, lunlat_host = choice.hosts()
    return PhysicalDiskLayer(choice.selector, _windows_volumes(goals.selector), exporter_host, lunlat_host)


def host_layer(goals: Goals) -> HostLayer | ExporterHostLayer:
    """The host layer the goals choose (`host_layer.source`)."""
    choice = goals.host_layer
    if choice.source == "lunlat" or choice.selector is None:
        return HostLayer(goals.selector)
    exporter_host, lunlat_host = choice.hosts()
    if choice.source == "node_exporter":
        info = f'{ground.LUN_INFO.name}{{{goals.selector}, kind="lun"}}'
        return ExporterHostLayer(
            choice.selector, NODE_EXPORTER_DISKSTATS, "device", info, exporter_host, lunlat_host
        )
    return ExporterHostLayer(
        choice.selector,
        WINDOWS_LOGICAL_DISK,
        "volume",
        _windows_volumes(goals.selector),
        exporter_host,
        lunlat_host,
    )


@dataclass(frozen=True, slots=True)
class DbLayer:
    """A database's own view (its engine's per-file counters, `Engine.files`), summed per LUN,
    database and role.

    Files whose LUN the exporter could not find (lun="") still form one series per database and
    role: the database's latency matters even when the mapping is unknown. Only the series the
    engine judges (FileLayer.judged) are summed.
    """

    selector: str
    files: FileLayer
    name: str = "db"
    # The `engine` label of the layer's recorded series: the engines' rules share names, and a
    # static label keeps them distinct rules (promtool's duplicate-rule lint); the alerts carry it,
    # so Alertmanager routes a page by what the database is, never by how it is named.
    engine: str = ""

    @property
    def _selector(self) -> str:
        """The goals' selector and the engine's judged matchers (FileLayer.judged)."""
        return f"{self.selector}, {self.files.judged}" if self.files.judged else self.selector

    def _per_lun(self, counter: str, window: str) -> str:
        return f"sum by ({_BY}) (\n    rate({counter}{{{self._selector}}}[{window}])\n)"

    def operations(self, op: str, window: str) -> str:
        return self._per_lun((self.files.reads if op == "read" else self.files.writes).name, window)

    def luns(self) -> str:
        """One series per LUN, database and role whose files the engine counts (value 1)."""
        reads, writes = self.files.reads.name, self.files.writes.name
        return f"group by ({_BY}) (\n    {reads}{{{self._selector}}}\n  or {writes}{{{self._selector}}}\n)"

    def time(self, op: str, window: str) -> str:
        spent = (self.files.read_time if op == "read" else self.files.write_time).name
        queued = self.files.read_queued if op == "read" else self.files.write_queued
        if queued is None:
            return self._per_lun(spent, window)
        # A file without the queued series (an engine release without it) keeps its stall as is: `or` fills a
        # zero for it, so the subtraction never drops the file.
        selector, by = self._selector, _BY
        return (
            f"sum by ({by}) (\n"
            f"    rate({spent}{{{selector}}}[{window}])\n"
            f"  - (rate({queued.name}{{{selector}}}[{window}]) or rate({spent}{{{selector}}}[{window}]) * 0)\n"
            ")"
        )

    def bytes(self, op: str, window: str) -> str | None:
        spec = self.files.read_bytes if op == "read" else self.files.write_bytes
        return None if spec is None else self._per_lun(spec.name, window)


def db_layer(engine: Engine[Any], selector: str) -> DbLayer:
    """The database layer of `engine`'s series."""
    return DbLayer(selector, engine.files, engine=engine.key)


def db_layers(selector: str) -> tuple[DbLayer, ...]:
    """The database layer of every registered engine."""
    return tuple(db_layer(engine, selector) for engine in ENGINES)


Layer = HostLayer | ExporterHostLayer | DbLayer
