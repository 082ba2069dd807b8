"""Labels from the config's `luns:` entries: which LUN holds which database, role and workload."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from lunlat import wwid
from lunlat.config import LunEntry, LunMatch
from lunlat.topology import BlockDevice, LunView, MountTable, lower_chain


@dataclass(frozen=True, slots=True)
class LunLabels:
    database: str = ""
    role: str = ""
    workload: str = ""
    array: str = ""  # the `luns:` entry's `array:`; lunlat_lun_info's `array` is arrayid.label of it

    def fill(self, entry: LunEntry) -> LunLabels:
        """Keep what is set; take from `entry` what is not (first matching entry wins, per label)."""
        return LunLabels(
            self.database or (entry.database or ""),
            self.role or (entry.role or ""),
            self.workload or (entry.workload or ""),
            self.array or (entry.array or ""),
        )

    def merge(self, other: LunLabels) -> LunLabels:
        """Keep what is set; take the rest from `other`."""
        return LunLabels(
            self.database or other.database,
            self.role or other.role,
            self.workload or other.workload,
            self.array or other.array,
        )


NO_LABELS = LunLabels()


def mount_devices(mounts: MountTable, devices: dict[str, BlockDevice], path: str) -> list[str]:
    """Devices holding `path`: those of the longest mountpoint that contains it."""
    target = PurePosixPath(path)
    best: list[tuple[str, str]] = []
    best_len = -1
    for point, dev, source in mounts.all():
        mp = PurePosixPath(point)
        if target == mp or mp in target.parents:
            length = len(mp.parts)
            if length > best_len:
                best, best_len = [(dev, source)], length
            elif length == best_len:
                best.append((dev, source))
    names: list[str] = []
    for dev, source in best:
        for device in devices.values():
            hit = (dev and device.dev == dev) or (
                source
                and (
                    source == f"/dev/{device.name}"
                    or (device.dm_name and source == f"/dev/mapper/{device.dm_name}")
                )
            )
            if hit and device.name not in names:
                names.append(device.name)
    return names


def matched_devices(  # noqa: PLR0911 - one return per kind of match
    match: LunMatch, devices: dict[str, BlockDevice], views: dict[str, LunView], mounts: MountTable
) -> list[str]:
    """The devices a match names, before following the stack down."""
    if match.alias is not None:
        return [d.name for d in devices.values() if d.dm_name == match.alias]
    if match.device is not None:
        name = match.device.removeprefix("/dev/")
        if name.startswith("mapper/"):
            return [d.name for d in devices.values() if d.dm_name == name.removeprefix("mapper/")]
        return [name] if name in devices else []
    if match.wwid is not None:
        wanted = wwid.parse(match.wwid)
        return [v.device for v in views.values() if v.wwid and wanted.same(wwid.parse(v.wwid))]
    if match.mount is not None:
        return mount_devices(mounts, devices, match.mount)
    if match.loop_file is not None:
        want = match.loop_file
        # The kernel appends " (deleted)" when the file was removed while attached.
        files = {d.name: d.loop_file.removesuffix(" (deleted)") for d in devices.values() if d.loop_file}
        if "/" in want:
            return [name for name, f in files.items() if f == want]
        return [name for name, f in files.items() if PurePosixPath(f).name == want]
    return []


def assign(
    entries: Sequence[LunEntry],
    devices: dict[str, BlockDevice],
    views: dict[str, LunView],
    mounts: MountTable,
) -> tuple[dict[str, LunLabels], list[LunEntry]]:
    """Labels per device, and the entries that matched no device (worth a warning, not an error:
    the LUN may appear later)."""
    labels: dict[str, LunLabels] = {}
    unmatched: list[LunEntry] = []
    for entry in entries:
        hits = matched_devices(entry.match, devices, views, mounts)
        if not hits:
            unmatched.append(entry)
        for hit in hits:
            for name in lower_chain(devices, hit):
                labels[name] = labels.get(name, NO_LABELS).fill(entry)
    # Partitions and paths shown with show_paths carry their LUN's labels unless matched themselves.
    lun_device = {v.lun: v.device for v in views.values() if v.kind == "lun"}
    for name, view in views.items():
        if view.kind != "lun" and name not in labels and view.lun in lun_device:
            inherited = labels.get(lun_device[view.lun])
            if inherited is not None:
                labels[name] = inherited
    return labels, unmatched
