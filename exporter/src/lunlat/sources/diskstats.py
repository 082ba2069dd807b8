"""The host layer from /proc/diskstats: per-LUN counters, named and labelled by the sysfs topology.

Each collection reads the file (diskstats_format.py: every kernel's format, odd lines counted and
skipped), keeps its counters monotonic (diskstats_unwrap.py: the 32-bit wraps undone, resets passed
on to Prometheus as resets), and publishes the devices the topology names as LUNs (topology.py, the
config's `luns:` entries, the roles the database sources found), with their queue limits and their
multipath path states (pathhealth.py).
"""

from __future__ import annotations

import math
import operator
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from pathlib import Path

from lunlat import arrayid, ground, logs
from lunlat.config import DiskstatsConfig, LunEntry
from lunlat.dbfiles import DbLunLabels
from lunlat.luns import NO_LABELS, assign
from lunlat.model import Family, LabelList, LabelSet, Sample
from lunlat.pathhealth import DEFAULT_INTERVAL, PathWatcher
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.diskstats_format import (
    DISCARD_MS,
    DISCARD_SECTORS,
    DISCARD_WIDTH,
    DISCARDS,
    FLUSH_MS,
    FLUSHES,
    IN_FLIGHT,
    IO_MS,
    KEPT_FIELDS,
    READ_MS,
    READ_SECTORS,
    READS,
    SECTOR_BYTES,
    WEIGHTED_MS,
    WRITE_MS,
    WRITE_SECTORS,
    WRITES,
    Malformed,
    Table,
    parse,
)
from lunlat.sources.diskstats_unwrap import Unwrapper
from lunlat.sources.factory import BuildError, Context
from lunlat.sources.host import DeviceFilter, LunInfo, device_families
from lunlat.sources.published import PublishedDevice, PublishedDevices
from lunlat.topology import (
    BlockDevice,
    LunView,
    lower_chain,
    path_state_file,
    queue_limits,
    read_block_device,
    read_block_devices,
    read_mounts,
    related,
    resolve,
)
from lunlat.wwid import naa

log = logs.get(__name__)
NO_PATH_LABELS = LabelSet((), ())
# luns: entries that match no device named one by one in the log; past this, one line with the count.
UNMATCHED_NAMED = 20


@dataclass(slots=True)
class _Published:
    """What the topology decided, kept until the device set, the mounts or the refresh interval change."""

    names: list[str]
    majors: list[int]
    minors: list[int]
    mount_text: str
    db_version: int  # of the labels the database sources published (DbLunLabels.version)
    labels: LabelList  # ground.DEVICE_LABELS of each published device, in table order
    mask: list[bool] | None  # which table rows are published; None when all are
    info: list[Sample]
    # The labels of each published multipath LUN and the state file of each of its paths: the
    # states are read on their own cadence (pathhealth.PathWatcher: a path fails without the device
    # set changing).
    multipaths: list[tuple[LabelSet, tuple[str, ...]]] = field(default_factory=list)
    # The host's queue limits of each published device that has them (topology.queue_limits).
    queue_limits: list[Family] = field(default_factory=list)
    # Each unattached loop device's table row and reads + writes then. `losetup` on a loop device
    # that exists changes neither the device set nor the mounts (loop(4), Linux man-pages:
    # LOOP_SET_FD "Associate the loop device with the open file"; LOOP_CONFIGURE, torvalds/linux
    # commit 3448914e8cc5, does it in one call): its counters moving is the cheap sign to read its
    # sysfs again, rather than wait out the refresh interval. Only a sign: sysfs decides.
    idle_loops: list[tuple[int, int]] = field(default_factory=list)

    def woken_loops(self, table: Table) -> set[str]:
        """The unattached loop devices that counted I/O since the topology was read."""
        reads, writes = table.columns[READS], table.columns[WRITES]
        return {table.names[row] for row, done in self.idle_loops if reads[row] + writes[row] != done}


def _idle_loops(table: Table, views: dict[str, LunView]) -> list[tuple[int, int]]:
    """Each unattached loop device's table row and reads + writes now (_Published.idle_loops)."""
    reads, writes = table.columns[READS], table.columns[WRITES]
    return [
        (row, reads[row] + writes[row])
        for row, name in enumerate(table.names)
        if name in views and views[name].hidden
    ]


class DiskstatsSource:
    """Per-LUN counters from <procfs>/diskstats, named and labelled by the sysfs topology."""

    name = "diskstats"
    error_reasons: tuple[str, ...] = (
        "read_failed",
        "malformed_line",
        "duplicate_device",
        "extra_fields",
        "mixed_widths",
        "path_state_unknown",
    )
    timeout: float | None = None

    def __init__(
        self,
        procfs: Path,
        sysfs: Path,
        config: DiskstatsConfig,
        luns: Sequence[LunEntry] = (),
        refresh_interval: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        db_labels: DbLunLabels | None = None,
        published: PublishedDevices | None = None,
        path_state_interval: float = DEFAULT_INTERVAL,
        path_state_thread: bool = False,
    ) -> None:
        self._procfs = procfs
        # Path states off the scrape path; the thread only where `build` asks for it (a real serve),
        # so a test drives the readings with its clock.
        self._paths = PathWatcher(path_state_interval, clock, background=path_state_thread)
        self._board = published  # told which devices are published, for the biolatency source
        self._db_labels = db_labels
        self._sysfs = sysfs
        self._config = config
        self._filter = DeviceFilter.from_config(config)
        self._luns = list(luns)
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._unwrapper = Unwrapper()
        self._published: _Published | None = None
        self._devices: dict[str, BlockDevice] = {}
        self._sysfs_read_at = -math.inf
        self._warned_lines = logs.Once()
        self._warned_states = logs.Once()
        self._warned_format = logs.Once()
        self._warned_unmatched: set[str] = set()

    def close(self) -> None:
        """Stop reading path states (a reload retired this source)."""
        self._paths.close()

    def carry_over(self, previous: object) -> None:
        """After a reload: keep unwrapping from where the previous source was (base.CarriesState), and
        do not name again the unmatched luns: entries already named."""
        if isinstance(previous, DiskstatsSource):
            self._unwrapper = previous._unwrapper
            self._warned_unmatched = previous._warned_unmatched  # said once, not again per reload

    def collect(self) -> SourceResult:
        path = self._procfs / "diskstats"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SourceError("read_failed", f"cannot read {path}: {exc.strerror or exc}") from None
        table, bad = parse(data)
        errors: Counter[str] = Counter(b.reason for b in bad)
        for b in bad:
            self._warn_malformed(path, b)
        table, resets = self._unwrapper.apply(table)
        if resets:
            log.debug("device counters reset", devices=",".join(resets))
        published = self._topology(table)
        cols = table.columns
        if published.mask is not None:
            cols = [list(compress(column, published.mask)) for column in cols]
        columns: dict[ground.MetricSpec, list[int]] = {
            ground.DEVICE_READS: cols[READS],
            ground.DEVICE_WRITES: cols[WRITES],
            ground.DEVICE_READ_TIME: cols[READ_MS],
            ground.DEVICE_WRITE_TIME: cols[WRITE_MS],
            ground.DEVICE_READ_BYTES: list(map(operator.mul, cols[READ_SECTORS], repeat(SECTOR_BYTES))),
            ground.DEVICE_WRITE_BYTES: list(map(operator.mul, cols[WRITE_SECTORS], repeat(SECTOR_BYTES))),
            ground.DEVICE_IO_IN_PROGRESS: cols[IN_FLIGHT],
            ground.DEVICE_IO_TIME: cols[IO_MS],
            ground.DEVICE_IO_WEIGHTED_TIME: cols[WEIGHTED_MS],
        }
        # Only what this kernel prints: a 0 for a field it lacks would read as "no discards".
        # Without counters (node_exporter's are the host layer) the table is still read: it names
        # the devices the topology labels.
        families = []
        if self._config.counters:
            families = device_families(published.labels, columns)
            families.extend(_optional_families(table, cols, published))
        self._count_format(table, errors)
        families.append(Family(ground.LUN_INFO, published.info))
        families.extend(published.queue_limits)
        self._paths.watch(published.multipaths)
        reading = self._paths.reading()
        families.extend(reading.families)
        if published.multipaths:
            families.append(Family(ground.LUN_PATHS_AGE, [("", NO_PATH_LABELS, self._paths.age(reading))]))
        unknown = reading.unknown
        if unknown:
            errors["path_state_unknown"] += len(unknown)
            for state_file in unknown:
                if self._warned_states.first(state_file):
                    log.warning(
                        "path state cannot be read: not counted as failed",
                        file=state_file,
                        reason="path_state_unknown",
                    )
        return SourceResult(families, errors)

    def _count_format(self, table: Table, errors: Counter[str]) -> None:
        """Count (once per collection) and log (once) lines longer than any known format and lines
        of mixed widths: both are read, so neither is a malformed_line."""
        if table.extra:
            errors["extra_fields"] += 1
            if self._warned_format.first("extra_fields"):
                log.warning(
                    "diskstats lines longer than any known format: their first 20 fields are read, "
                    "the rest left unread (a newer kernel: an update of lunlat reads them)",
                    reason="extra_fields",
                    lines=table.extra,
                )
        if table.widths is not None:
            errors["mixed_widths"] += 1
            if self._warned_format.first("mixed_widths"):
                log.warning(
                    "diskstats lines of different widths (no kernel prints them): each device "
                    "publishes the fields its line has",
                    reason="mixed_widths",
                    widths=",".join(str(w + 3) for w in sorted(set(table.widths))),
                )

    def _warn_malformed(self, path: Path, bad: Malformed) -> None:
        # Counted every time; logged once per distinct line so a persistent oddity cannot flood the log.
        if not self._warned_lines.first(bad.line):
            return
        log.warning(
            "skipping diskstats line",
            file=str(path),
            line=bad.lineno,
            reason=bad.reason,
            detail=bad.detail,
            text=bad.line[:200],
        )

    def _shown(self, view: LunView) -> bool:
        if view.hidden or (view.kind != "lun" and not self._config.show_paths):
            return False
        return not self._filter.ignored(view.device)

    def _topology(self, table: Table) -> _Published:
        mounts, mount_text = read_mounts(self._procfs)
        now = self._clock()
        cached = self._published
        same_devices = (
            cached is not None
            and cached.names == table.names
            and cached.majors == table.majors
            and cached.minors == table.minors
        )
        stale = now - self._sysfs_read_at >= self._refresh_interval
        db_version = self._db_labels.version if self._db_labels is not None else 0
        woken = cached.woken_loops(table) if cached is not None and same_devices else set()
        if (
            cached is not None
            and same_devices
            and not woken
            and cached.mount_text == mount_text
            and cached.db_version == db_version
            and not stale
        ):
            return cached
        devices = self._block_devices(table, same_devices, stale, woken)
        if stale:
            self._sysfs_read_at = now
        views = resolve(devices, mounts)
        lun_labels, unmatched = assign(self._luns, devices, views, mounts)
        self._warn_unmatched(unmatched)
        if self._db_labels is not None:
            # What the databases report fills in; an explicit `luns:` entry wins label by label.
            db_version, from_databases = self._db_labels.merged()
            for name, found in from_databases.items():
                lun_labels[name] = lun_labels.get(name, NO_LABELS).merge(found)
        labels: list[LabelSet] = []
        mask: list[bool] = []
        info: list[Sample] = []
        depths: list[Sample] = []
        requests: list[Sample] = []
        multipaths: list[tuple[LabelSet, tuple[str, ...]]] = []
        board: dict[tuple[int, int], PublishedDevice] = {}
        for name, major, minor in zip(table.names, table.majors, table.minors, strict=True):
            view = views.get(name) or LunView(name, name, "lun")
            shown = self._shown(view)
            mask.append(shown)
            if not shown:
                continue
            extra = lun_labels.get(name, NO_LABELS)
            lun_info = LunInfo(
                lun=view.lun,
                device=view.device,
                wwid=view.wwid,
                naa=naa(view.wwid),
                array=arrayid.label(
                    extra.array,
                    view.wwid,
                    (views[n].wwid for n in lower_chain(devices, name)[1:] if n in views),
                ),
                vendor=view.vendor,
                model=view.model,
                paths=view.paths,
                database=extra.database,
                role=extra.role,
                workload=extra.workload,
                mountpoint=",".join(view.mountpoints),
                kind=view.kind,
            )
            info.append(lun_info.sample())
            board[(major, minor)] = lun_info.published()
            labels.append(lun_info.device_labels())
            paths = view.paths.split(",") if view.paths else []
            depth, nr_requests = queue_limits(devices, name, paths if view.multipath else ())
            if depth is not None:
                depths.append(("", labels[-1], depth))
            if nr_requests is not None:
                requests.append(("", labels[-1], nr_requests))
            if view.multipath:
                files = tuple(path_state_file(self._sysfs, path) for path in paths)
                multipaths.append((labels[-1], files))
        self._published = _Published(
            table.names,
            table.majors,
            table.minors,
            mount_text,
            db_version,
            LabelList(labels),
            None if all(mask) else mask,
            info,
            multipaths,
            # No family where no device has the attribute (a device without it has no series).
            [
                Family(spec, samples)
                for spec, samples in (
                    (ground.DEVICE_QUEUE_DEPTH, depths),
                    (ground.DEVICE_NR_REQUESTS, requests),
                )
                if samples
            ],
            _idle_loops(table, views),
        )
        if self._board is not None:
            self._board.publish(board)
        log.debug("topology refreshed", devices=len(table.names), shown=len(info))
        return self._published

    def _block_devices(
        self, table: Table, same_devices: bool, stale: bool, woken: set[str]
    ) -> dict[str, BlockDevice]:
        """sysfs facts: all re-read when stale; else only what a device change concerns.

        A mount change needs no sysfs read at all; a new or vanished device re-reads itself and
        the devices stacked on or under it (a new multipath map changes its paths' holders); a
        woken loop device (`woken_loops`) re-reads itself.
        """
        if stale or not self._devices:
            self._devices = read_block_devices(self._sysfs, table.names)
            return self._devices
        if same_devices:
            self._devices.update((name, read_block_device(self._sysfs, name)) for name in woken)
            return self._devices
        current = {
            f"{major}:{minor}": name
            for name, major, minor in zip(table.names, table.majors, table.minors, strict=True)
        }
        known = {n: d for n, d in self._devices.items() if current.get(d.dev) == n}
        appeared = set(table.names) - set(known)
        fresh = {name: read_block_device(self._sysfs, name) for name in appeared}
        # Devices the old facts or the new devices mention have new slaves or holders: re-read them.
        stale_names = related(self._devices, appeared | (set(self._devices) - set(known)))
        for device in fresh.values():
            stale_names.update(n for n in (*device.slaves, *device.holders, device.parent) if n)
        for name in stale_names:
            known.pop(name, None)
        known.update(fresh)
        self._devices = read_block_devices(self._sysfs, table.names, known)
        return self._devices

    def _warn_unmatched(self, unmatched: list[LunEntry]) -> None:
        """Name each newly unmatched entry once, at most UNMATCHED_NAMED of them, then one line with
        the count: a config of 24,000 entries that matched nothing logged 24,000 lines at start and
        again at every reload."""
        described = {e.match.describe() for e in unmatched}
        new = sorted(described - self._warned_unmatched)
        for what in new[:UNMATCHED_NAMED]:
            log.warning("config luns entry matches no device (yet)", match=what)
        if len(new) > UNMATCHED_NAMED:
            log.warning(
                "config luns entries match no device (yet), not named one by one",
                more=len(new) - UNMATCHED_NAMED,
                unmatched=len(described),
            )
        self._warned_unmatched = described


def _optional_families(table: Table, cols: list[list[int]], published: _Published) -> list[Family]:
    """The discard (kernel 4.18+) and flush (5.5+) families, for the devices whose line has them."""
    widths = table.widths
    if table.width < DISCARD_WIDTH and widths is None:
        return []  # a kernel before 4.18: nothing to publish, nothing to compute
    if widths is not None and published.mask is not None:
        widths = list(compress(widths, published.mask))
    families: list[Family] = []
    for needed, specs in (
        (
            DISCARD_WIDTH,
            (ground.DEVICE_DISCARDS, ground.DEVICE_DISCARD_TIME, ground.DEVICE_DISCARD_BYTES),
        ),
        (KEPT_FIELDS, (ground.DEVICE_FLUSHES, ground.DEVICE_FLUSH_TIME)),
    ):
        if table.width >= needed:  # every line has them (one kernel, one format)
            families.extend(device_families(published.labels, {s: _column(s, cols) for s in specs}))
        elif widths is not None and max(widths, default=0) >= needed:  # lines of mixed widths
            keep = [w >= needed for w in widths]
            labels = LabelList(list(compress(published.labels.sets, keep)))
            families.extend(
                device_families(labels, {s: list(compress(_column(s, cols), keep)) for s in specs})
            )
    return families


def _column(spec: ground.MetricSpec, cols: list[list[int]]) -> list[int]:
    """A discard or flush column in the metric's unit."""
    if spec is ground.DEVICE_DISCARD_BYTES:
        return list(map(operator.mul, cols[DISCARD_SECTORS], repeat(SECTOR_BYTES)))
    return cols[_OPTIONAL_FIELD[spec.name]]


_OPTIONAL_FIELD = {
    ground.DEVICE_DISCARDS.name: DISCARDS,
    ground.DEVICE_DISCARD_TIME.name: DISCARD_MS,
    ground.DEVICE_FLUSHES.name: FLUSHES,
    ground.DEVICE_FLUSH_TIME.name: FLUSH_MS,
}


def build(context: Context) -> list[DiskstatsSource] | BuildError:
    """The host layer from <procfs>/diskstats, unless psutil was chosen."""
    if context.platform != "diskstats":
        return []
    procfs = context.settings.procfs
    if not (procfs / "diskstats").is_file():
        return BuildError(f"--path.procfs: {procfs / 'diskstats'} does not exist")
    return [
        DiskstatsSource(
            procfs,
            context.settings.sysfs,
            context.diskstats(),
            context.config.luns,
            context.settings.refresh_interval,
            db_labels=context.db_labels,
            published=context.published,
            path_state_interval=context.settings.path_state_interval,
            path_state_thread=True,
        )
    ]
