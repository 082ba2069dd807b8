"""Database files → block devices → LUNs, and the labels the database sources hand to the host layer.

A database reports its files by path (a datafile on a filesystem, a block device for ASM). The host
layer knows LUNs by kernel device. `FileLocator` joins the two (docs/contract.md §2): a path on a filesystem
goes through the host's mount table (`<procfs>/1/mountinfo`, so a containerised exporter that
cannot see the files still finds their devices), a device path (`/dev/mapper/…`, `/dev/sdX`, ASM
disks) through its device number or its name; then down the dm/LVM/partition stack to the LUNs.

`DbLunLabels` is where database sources publish which devices hold which database and role; the
diskstats source reads it so host-layer LUNs get `database`/`role` without a `luns:` entry
(an explicit entry still wins).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lunlat import ground, logs
from lunlat.luns import NO_LABELS, LunLabels, mount_devices
from lunlat.topology import (
    BlockDevice,
    LunView,
    MountTable,
    lower_chain,
    read_block_devices,
    read_mounts,
    resolve,
    sysfs_name,
)

log = logs.get(__name__)


@dataclass(frozen=True, slots=True)
class Location:
    """Where a file lives: every device of its stack (top first) and the LUNs at the bottom."""

    devices: tuple[str, ...] = ()
    luns: tuple[str, ...] = ()

    @property
    def lun(self) -> str:
        """The `lun` label: the LUN, or the LUNs joined by ',' when a volume spans several."""
        return ",".join(self.luns)


NOWHERE = Location()


class FileLocator:
    """Locates paths on the host's block devices; `refresh()` re-reads sysfs and the mount table."""

    def __init__(self, procfs: Path, sysfs: Path) -> None:
        self._procfs = procfs
        self._sysfs = sysfs
        self._devices: dict[str, BlockDevice] = {}
        self._views: dict[str, LunView] = {}
        self._mounts = MountTable()
        self._by_dev: dict[str, str] = {}
        self._by_dm_name: dict[str, str] = {}

    def refresh(self) -> None:
        try:
            names = [n.replace("!", "/") for n in os.listdir(self._sysfs / "class" / "block")]  # noqa: PTH208
        except OSError:
            names = []
        self._devices = read_block_devices(self._sysfs, names)
        self._mounts, _ = read_mounts(self._procfs)
        self._views = resolve(self._devices, self._mounts)
        self._by_dev = {d.dev: d.name for d in self._devices.values() if d.dev}
        self._by_dm_name = {d.dm_name: d.name for d in self._devices.values() if d.dm_name}

    def locate(self, path: str) -> Location:
        top = self._device_of(path)
        if not top:
            return NOWHERE
        chain = lower_chain(self._devices, top)
        return Location(tuple(chain), self._luns_at_bottom(chain))

    def _device_of(self, path: str) -> str:
        if path.startswith("/dev/"):
            return self._device_node(path)
        if not path.startswith("/"):
            return ""  # ASMLib (ORCL:DISK1), AFD (AFD:DISK1), '+DATA/…': no host path to follow
        hits = mount_devices(self._mounts, self._devices, path)
        return hits[0] if hits else ""

    def _device_node(self, path: str) -> str:
        try:
            st = os.stat(path)  # noqa: PTH116 - follows udev symlinks (/dev/disk/by-id, /dev/oracleasm)
        except OSError:
            st = None
        if st is not None and stat.S_ISBLK(st.st_mode):
            name = self._by_dev.get(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
            if name:
                return name
        rest = path.removeprefix("/dev/")
        if rest.startswith("mapper/"):
            return self._by_dm_name.get(rest.removeprefix("mapper/"), "")
        return rest if sysfs_name(rest) in {sysfs_name(n) for n in self._devices} else ""

    def _luns_at_bottom(self, chain: list[str]) -> tuple[str, ...]:
        """The LUNs a stack rests on: devices of kind `lun` with no `lun` below them (an LV on a
        multipath map rests on the map; a partition on its disk; a striped LV on all its PVs' LUNs)."""
        luns: list[str] = []
        for name in chain:
            view = self._views.get(name)
            if view is None or view.kind != "lun":
                continue
            below = [s for s in lower_chain(self._devices, name)[1:] if self._is_lun(s)]
            if not below and view.lun not in luns:
                luns.append(view.lun)
        if not luns:  # only paths/partitions in the chain: name the LUN they belong to
            luns = sorted({self._views[n].lun for n in chain if n in self._views})
        return tuple(sorted(luns))

    def _is_lun(self, name: str) -> bool:
        view = self._views.get(name)
        return view is not None and view.kind == "lun"


def pick_role(roles: Iterable[str]) -> str:
    present = set(roles)
    return next((r for r in ground.ROLE_PRIORITY if r in present), "")


def device_labels(
    files: Iterable[tuple[Location, str]], database: str, workload: str
) -> dict[str, LunLabels]:
    """Labels per kernel device from (location, role) of a database's files."""
    roles: dict[str, set[str]] = {}
    for location, role in files:
        for device in location.devices:
            roles.setdefault(device, set()).add(role)
    return {device: LunLabels(database, pick_role(r), workload) for device, r in roles.items()}


class DbLunLabels:
    """What the database sources found, per kernel device; read by the diskstats source.

    Sources publish from their own threads; `version` changes whenever the merged view does, so
    the diskstats source re-labels only then.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_source: dict[str, dict[str, LunLabels]] = {}
        self._order: list[str] = []
        self._retired: set[str] = set()
        self.version = 0

    def register(self, source: str) -> None:
        """Fix the precedence: sources registered first win where two claim one device."""
        with self._lock:
            self._retired.discard(source)
            if source not in self._order:
                self._order.append(source)

    def publish(self, source: str, labels: dict[str, LunLabels]) -> None:
        with self._lock:
            if source in self._retired or self._by_source.get(source) == labels:
                return
            self._by_source[source] = dict(labels)
            if source not in self._order:
                self._order.append(source)
            self.version += 1

    def keep(self, sources: Iterable[str]) -> None:
        """After a config reload: only these sources, in this order of precedence. What they
        published stays, so the host layer's labels do not flap until they publish again."""
        with self._lock:
            order = list(sources)
            # A removed source's collection may still be running: what it publishes is ignored.
            self._retired |= {s for s in self._order if s not in order}
            self._order = order
            kept = {s: self._by_source[s] for s in self._order if s in self._by_source}
            if kept != self._by_source:
                self._by_source = kept
                self.version += 1

    def merged(self) -> tuple[int, dict[str, LunLabels]]:
        with self._lock:
            out: dict[str, LunLabels] = {}
            for source in self._order:
                for device, labels in self._by_source.get(source, {}).items():
                    current = out.get(device, NO_LABELS)
                    if current.database and labels.database and current.database != labels.database:
                        log.debug(
                            "device claimed by two databases; the first configured wins",
                            device=device,
                            kept=current.database,
                        )
                    out[device] = current.merge(labels)
            return self.version, out
