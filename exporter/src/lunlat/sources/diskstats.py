"""/proc/diskstats: parse every kernel format, undo the 32-bit wrap of the ms fields, detect resets.

Kernel facts (Documentation/admin-guide/iostats.rst, block/genhd.c diskstats_show):
- a line is `major minor name` + 11 (< 4.18), 15 (4.18+: discards) or 17 (5.5+: flushes) fields;
- the six time fields are printed as 32-bit unsigned milliseconds (`%u`) and wrap after ~49.7 days
  of summed latency; the count fields are 64-bit (`%lu`) on 64-bit kernels and do not wrap;
- field 9 (I/Os in flight) is a gauge.
"""

from __future__ import annotations

import logging
import operator
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from lunlat import contract
from lunlat.config import DiskstatsConfig, LunEntry
from lunlat.luns import NO_LABELS, assign
from lunlat.model import Family, LabelSet, Sample
from lunlat.sources.base import SourceError, SourceResult
from lunlat.sources.host import device_families
from lunlat.topology import LunView, read_block_devices, read_mounts, resolve

log = logging.getLogger(__name__)

# Indexes into the stats fields (0-based, after major, minor and name).
READS, READS_MERGED, READ_SECTORS, READ_MS = 0, 1, 2, 3
WRITES, WRITES_MERGED, WRITE_SECTORS, WRITE_MS = 4, 5, 6, 7
IN_FLIGHT, IO_MS, WEIGHTED_MS = 8, 9, 10
DISCARD_MS, FLUSH_MS = 14, 16

MS_FIELDS: tuple[int, ...] = (READ_MS, WRITE_MS, IO_MS, WEIGHTED_MS, DISCARD_MS, FLUSH_MS)
SECTOR_BYTES = 512  # diskstats sectors are always 512 bytes, whatever the device's block size
WRAP = 1 << 32
FIELD_COUNTS = (14, 18, 20)  # whole-line field counts of the three kernel formats


class DiskStat(NamedTuple):
    major: int
    minor: int
    name: str
    values: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Malformed:
    lineno: int
    line: str
    reason: str  # counted reason: malformed_line | duplicate_device
    detail: str


def parse(text: str) -> tuple[list[DiskStat], list[Malformed]]:
    """Parse /proc/diskstats text; lines that are not one of the kernel formats are returned apart."""
    stats: list[DiskStat] = []
    bad: list[Malformed] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in FIELD_COUNTS:
            bad.append(Malformed(lineno, line, "malformed_line", f"{len(parts)} fields, expected 14, 18 or 20"))
            continue
        numbers = parts[3:]
        digits = parts[0] + parts[1] + "".join(numbers)
        # int() would also take "-1", "+1", "1_0" and non-ASCII digits; the kernel prints none of them.
        if not (digits.isascii() and digits.isdigit()):
            bad.append(Malformed(lineno, line, "malformed_line", "a number field is not a non-negative integer"))
            continue
        name = parts[2]
        if name in seen:
            bad.append(Malformed(lineno, line, "duplicate_device", f"device {name} listed twice"))
            continue
        seen.add(name)
        stats.append(DiskStat(int(parts[0]), int(parts[1]), name, tuple(map(int, numbers))))
    return stats, bad


class _Memory(NamedTuple):
    major: int
    minor: int
    raw: tuple[int, ...]
    offsets: tuple[int, ...] | None  # added to the raw ms fields; None while nothing wrapped


class Unwrapper:
    """Turns raw samples into monotonic counters per device across calls.

    - A 32-bit ms field lower than last time while no 64-bit count went down: it wrapped, add 2**32.
    - A count lower than last time, a new major:minor or a different format: the device was
      re-created or its stats reset; the raw values pass through so Prometheus sees a counter reset.
    - Devices that vanish are forgotten (no state grows with loop/dm churn).
    """

    def __init__(self) -> None:
        self._memory: dict[str, _Memory] = {}

    def apply(self, stats: list[DiskStat]) -> tuple[list[DiskStat], list[str]]:
        """Return the unwrapped samples and the names of the devices that were reset."""
        memory: dict[str, _Memory] = {}
        out: list[DiskStat] = []
        resets: list[str] = []
        lt = operator.lt
        for stat in stats:
            raw = stat.values
            prev = self._memory.get(stat.name)
            offsets: tuple[int, ...] | None = None
            if prev is not None and (prev.major, prev.minor) == (stat.major, stat.minor) and len(prev.raw) == len(raw):
                offsets = prev.offsets
                if raw != prev.raw and any(map(lt, raw, prev.raw)):
                    offsets, reset = _follow(prev, raw)
                    if reset:
                        resets.append(stat.name)
            elif prev is not None:
                resets.append(stat.name)
            memory[stat.name] = _Memory(stat.major, stat.minor, raw, offsets)
            if offsets is not None:
                stat = stat._replace(values=tuple(map(operator.add, raw, offsets)))
            out.append(stat)
        self._memory = memory
        return out, resets


def _follow(prev: _Memory, raw: tuple[int, ...]) -> tuple[tuple[int, ...] | None, bool]:
    """Some field went down: decide between a wrap of ms fields and a reset of the device."""
    for i, (new, old) in enumerate(zip(raw, prev.raw, strict=True)):
        if new < old and i not in MS_FIELDS and i != IN_FLIGHT:
            return None, True  # a 64-bit count went down: stats were reset
    offsets = list(prev.offsets or (0,) * len(raw))
    for i in MS_FIELDS:
        if i < len(raw) and raw[i] < prev.raw[i]:
            if prev.raw[i] >= WRAP:  # not a 32-bit field on this kernel: cannot have wrapped
                return None, True
            offsets[i] += WRAP
    return tuple(offsets), False


# --- the source ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Published:
    """What the topology decided, cached until the device set, the mounts or the clock say otherwise."""

    key: list[tuple[int, int, str]]
    mount_text: str
    refreshed: float
    labels: dict[str, LabelSet | None]  # device -> its (lun, device) labels, None when not published
    info: list[Sample]


class DiskstatsSource:
    """Per-LUN counters from <procfs>/diskstats, named and labelled by the sysfs topology."""

    name = "diskstats"
    error_reasons: tuple[str, ...] = ("read_failed", "malformed_line", "duplicate_device")
    timeout: float | None = None

    def __init__(
        self,
        procfs: Path,
        sysfs: Path,
        config: DiskstatsConfig,
        luns: Sequence[LunEntry] = (),
        refresh_interval: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._procfs = procfs
        self._sysfs = sysfs
        self._config = config
        self._include = re.compile(config.include) if config.include else None
        self._exclude = re.compile(config.exclude) if config.exclude else None
        self._luns = list(luns)
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._unwrapper = Unwrapper()
        self._published: _Published | None = None
        self._warned_lines: set[str] = set()
        self._warned_unmatched: set[str] = set()

    def collect(self) -> SourceResult:
        path = self._procfs / "diskstats"
        try:
            text = path.read_text(encoding="ascii", errors="replace")
        except OSError as exc:
            raise SourceError("read_failed", f"cannot read {path}: {exc.strerror or exc}") from None
        stats, bad = parse(text)
        errors: Counter[str] = Counter(b.reason for b in bad)
        for b in bad:
            self._warn_malformed(path, b)
        published = self._topology(stats)
        labels: list[LabelSet] = []
        shown: list[DiskStat] = []
        for stat in stats:
            label_set = published.labels.get(stat.name)
            if label_set is not None:
                labels.append(label_set)
                shown.append(stat)
        shown, resets = self._unwrapper.apply(shown)
        if resets:
            log.debug("device counters reset", extra={"kv": {"devices": ",".join(resets)}})
        values = [s.values for s in shown]
        columns: dict[contract.MetricSpec, list[int]] = {
            contract.DEVICE_READS: [v[READS] for v in values],
            contract.DEVICE_WRITES: [v[WRITES] for v in values],
            contract.DEVICE_READ_TIME: [v[READ_MS] for v in values],
            contract.DEVICE_WRITE_TIME: [v[WRITE_MS] for v in values],
            contract.DEVICE_READ_BYTES: [v[READ_SECTORS] * SECTOR_BYTES for v in values],
            contract.DEVICE_WRITE_BYTES: [v[WRITE_SECTORS] * SECTOR_BYTES for v in values],
            contract.DEVICE_IO_IN_PROGRESS: [v[IN_FLIGHT] for v in values],
            contract.DEVICE_IO_TIME: [v[IO_MS] for v in values],
            contract.DEVICE_IO_WEIGHTED_TIME: [v[WEIGHTED_MS] for v in values],
        }
        families = device_families(labels, columns)
        families.append(Family(contract.LUN_INFO, published.info))
        return SourceResult(families, errors)

    def _warn_malformed(self, path: Path, bad: Malformed) -> None:
        # Counted every time; logged once per distinct line so a persistent oddity cannot flood the log.
        if bad.line in self._warned_lines or len(self._warned_lines) >= 256:
            return
        self._warned_lines.add(bad.line)
        log.warning(
            "skipping diskstats line",
            extra={"kv": {"file": str(path), "line": bad.lineno, "reason": bad.reason, "detail": bad.detail,
                          "text": bad.line[:200]}},
        )

    def _shown(self, view: LunView) -> bool:
        if view.hidden or (view.kind != "lun" and not self._config.show_paths):
            return False
        if self._include is not None and not self._include.search(view.device):
            return False
        return not (self._exclude is not None and self._exclude.search(view.device))

    def _topology(self, stats: list[DiskStat]) -> _Published:
        key = [s[:3] for s in stats]
        mounts, mount_text = read_mounts(self._procfs)
        now = self._clock()
        cached = self._published
        if (
            cached is not None
            and cached.key == key
            and cached.mount_text == mount_text
            and now - cached.refreshed < self._refresh_interval
        ):
            return cached
        devices = read_block_devices(self._sysfs, (s.name for s in stats))
        views = resolve(devices, mounts)
        lun_labels, unmatched = assign(self._luns, devices, views, mounts)
        self._warn_unmatched(unmatched)
        labels: dict[str, LabelSet | None] = {}
        info: list[Sample] = []
        for stat in stats:
            view = views.get(stat.name) or LunView(stat.name, stat.name, "lun")
            if not self._shown(view):
                labels[stat.name] = None
                continue
            labels[stat.name] = LabelSet(contract.DEVICE_LABELS, (view.lun, view.device))
            extra = lun_labels.get(stat.name, NO_LABELS)
            info_values = (
                view.lun, view.device, view.wwid, view.vendor, view.model, view.paths,
                extra.database, extra.role, extra.workload, ",".join(view.mountpoints), view.kind,
            )  # fmt: skip
            info.append(("", LabelSet(contract.LUN_INFO_LABELS, info_values), 1))
        self._published = _Published(key, mount_text, now, labels, info)
        log.debug("topology refreshed", extra={"kv": {"devices": len(stats), "shown": len(info)}})
        return self._published

    def _warn_unmatched(self, unmatched: list[LunEntry]) -> None:
        described = {e.match.describe() for e in unmatched}
        for what in sorted(described - self._warned_unmatched):
            log.warning("config luns entry matches no device (yet)", extra={"kv": {"match": what}})
        self._warned_unmatched = described
