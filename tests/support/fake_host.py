"""Fake sysfs and procfs trees that mirror the Linux layout, for topology and diskstats tests.

The layout follows a real host closely because the code under test resolves symlinks:

- whole devices are directories under `<sysfs>/devices/…` (SCSI disks below their SCSI device,
  dm and loop devices under `devices/virtual/block`, NVMe namespaces under their controller);
- `<sysfs>/class/block/<name>` links to every device, `<sysfs>/block/<name>` to whole devices only,
  `<sysfs>/dev/block/MAJ:MIN` to every device; all links are relative, as the kernel makes them;
- partitions are subdirectories of their disk's directory, with a `partition` file;
- `slaves/` and `holders/` hold relative links to the devices below and above;
- kernel names with '/' (`cciss/c0d0`) are spelled with '!' in sysfs (`cciss!c0d0`).

sysfs is written as devices are added; `write()` writes the procfs files (`diskstats` and
`1/mountinfo`) from the devices, their stats and the mounts.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from dataclasses import astuple, dataclass, field
from pathlib import Path

SCSI_HOST = "devices/pci0000:00/0000:00:03.0/0000:5e:00.0/host0"
VIRTUAL_BLOCK = "devices/virtual/block"
NVME_PCI = "devices/pci0000:00/0000:00:1d.0"
VIRTIO_PCI = "devices/pci0000:00/0000:00:04.0"

MAJOR_SD = 8
MAJOR_SD_MORE = 65  # sdq … sdaf
MAJOR_LOOP = 7
MAJOR_DM = 253
MAJOR_VIRTIO = 252
MAJOR_CCISS = 104
MAJOR_EXTENDED = 259  # NVMe namespaces and partitions of devices with few minors (loop, nvme)


@dataclass(frozen=True, slots=True)
class Stats:
    """The 17 numbers after `major minor name` in a 5.5+ /proc/diskstats line (times in ms)."""

    reads: int = 0
    reads_merged: int = 0
    read_sectors: int = 0
    read_ms: int = 0
    writes: int = 0
    writes_merged: int = 0
    write_sectors: int = 0
    write_ms: int = 0
    in_flight: int = 0
    io_ms: int = 0
    weighted_ms: int = 0
    discards: int = 0
    discards_merged: int = 0
    discard_sectors: int = 0
    discard_ms: int = 0
    flushes: int = 0
    flush_ms: int = 0

    @classmethod
    def distinct(cls, seed: int) -> Stats:
        """Stats whose every field differs from the same field of any other seed (and from the
        other fields of this one), so a value published for the wrong device or field shows."""
        return cls(*(seed * 1000 + 17 * field_no + 3 for field_no in range(17)))

    def fields(self) -> tuple[int, ...]:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class Mount:
    mount_id: int
    parent_id: int
    dev: str  # "MAJ:MIN" as mountinfo prints it
    mountpoint: str
    fstype: str
    source: str
    root: str = "/"


def escape_mountinfo(text: str) -> str:
    """The kernel's escaping of mountinfo fields: space, tab, newline and backslash as octal."""
    return "".join(f"\\{ord(c):03o}" if c in " \t\n\\" else c for c in text)


def sysfs_name(name: str) -> str:
    return name.replace("/", "!")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@dataclass
class FakeHost:
    """A host's block devices and mounts, as sysfs and procfs show them, under `root`."""

    root: Path
    sysfs: Path = field(init=False)
    procfs: Path = field(init=False)
    stats: dict[str, Stats] = field(default_factory=dict)  # by kernel name, in diskstats order
    mounts: list[Mount] = field(default_factory=list)
    extra_diskstats_lines: list[str] = field(default_factory=list)  # written after the devices
    _dirs: dict[str, Path] = field(default_factory=dict)
    _devs: dict[str, str] = field(default_factory=dict)
    _next_minor: dict[int, int] = field(default_factory=dict)
    _next_target: int = 0
    _next_mount_id: int = 30
    _owed: dict[tuple[str, str], float] = field(default_factory=dict)  # fractions not yet counted

    def __post_init__(self) -> None:
        self.sysfs = self.root / "sys"
        self.procfs = self.root / "proc"
        for directory in (self.sysfs / "class" / "block", self.sysfs / "block", self.procfs / "1"):
            directory.mkdir(parents=True, exist_ok=True)

    def add_reads(self, device: str, count: int, sectors: int, ms: float, seconds: float = 1.0) -> None:
        """`count` reads per second of `sectors` 512-byte sectors at `ms` each, `seconds`' worth,
        added to `device`'s stats: their time added to the weighted time too (I/Os in flight =
        reads/s x latency). `write()` publishes them. A thread that advances a host should pass
        the seconds really gone by: on a busy machine its loop takes longer than its wait, and
        counting each turn as one second would lower every rate the exporter measures. The
        counters are whole numbers: what a call cannot count yet (a fraction of a read or of a
        millisecond) is owed to the next, so short turns lose nothing to rounding."""
        old = self.stats[device]
        done = self._whole(device, "reads", count * seconds)
        busy = self._whole(device, "ms", done * ms)
        self.stats[device] = dataclasses.replace(
            old,
            reads=old.reads + done,
            read_sectors=old.read_sectors + done * sectors,
            read_ms=old.read_ms + busy,
            io_ms=old.io_ms + self._whole(device, "io_ms", 1000 * seconds),
            weighted_ms=old.weighted_ms + busy,
        )

    def _whole(self, device: str, counter: str, amount: float) -> int:
        """The whole part of `amount` plus what earlier calls owed this counter; the rest owed."""
        total = amount + self._owed.get((device, counter), 0.0)
        whole = int(total)
        self._owed[device, counter] = total - whole
        return whole

    # --- devices -------------------------------------------------------------------------------

    def add_scsi_disk(
        self,
        name: str,
        *,
        wwid: str | None = None,
        vendor: str = "NETAPP",
        model: str = "LUN C-Mode",
        dev: str | None = None,
        state: str = "running",
    ) -> str:
        """A SCSI disk (`sdX`, or any name, e.g. `cciss/c0d0`) below its SCSI device, which holds
        `wwid` (omitted when None), `vendor` and `model` padded with spaces as the kernel does, and
        its `state` (drivers/scsi/scsi_sysfs.c, sdev_states[])."""
        target = self._next_target
        self._next_target += 1
        scsi = self.sysfs / SCSI_HOST / f"target0:0:{target}" / f"0:0:{target}:0"
        _write(scsi / "vendor", f"{vendor:<8}")
        _write(scsi / "model", f"{model:<16}")
        _write(scsi / "state", state)
        if wwid is not None:
            _write(scsi / "wwid", wwid)
        disk = scsi / "block" / sysfs_name(name)
        if dev is None:
            letters = re.fullmatch(r"sd([a-p])", name)
            if letters is not None:  # sda is 8:0, sdb 8:16 … as the sd driver numbers them
                dev = f"{MAJOR_SD}:{16 * (ord(letters.group(1)) - ord('a'))}"
            else:
                dev = self._devnum(MAJOR_CCISS if name.startswith("cciss/") else MAJOR_SD_MORE, 16)
        self._register(name, disk, dev, whole=True)
        _link(disk / "device", scsi)
        return name

    def add_virtio(self, name: str, *, dev: str | None = None) -> str:
        """A virtio disk: no WWID anywhere; its `device` is the virtio device (PCI vendor id)."""
        virtio = self.sysfs / VIRTIO_PCI / f"virtio{len(self._dirs)}"
        _write(virtio / "vendor", "0x1af4")
        _write(virtio / "device", "0x0002")
        disk = virtio / "block" / name
        self._register(name, disk, dev or self._devnum(MAJOR_VIRTIO, 16), whole=True)
        _link(disk / "device", virtio)
        return name

    def add_nvme(
        self,
        name: str = "nvme0n1",
        *,
        wwid: str = "eui.0025388b71b3c0a1",
        model: str = "Samsung SSD 980 PRO 1TB",
        dev: str | None = None,
    ) -> str:
        """An NVMe namespace: `wwid` at its top, `device` links to the controller holding `model`."""
        named = re.fullmatch(r"(nvme\d+)n\d+", name)
        if named is None:
            raise ValueError(f"not an NVMe namespace name: {name}")
        controller_name = named.group(1)  # nvme0n1 -> nvme0
        controller = self.sysfs / NVME_PCI / "0000:3d:00.0" / "nvme" / controller_name
        _write(controller / "model", f"{model:<40}")
        _write(controller / "serial", "S5GXNF0R123456")
        _write(controller / "state", "live")
        namespace = controller / name
        self._register(name, namespace, dev or self._devnum(MAJOR_EXTENDED, 1), whole=True)
        _write(namespace / "wwid", wwid)
        _link(namespace / "device", controller)
        return name

    def add_loop(self, name: str, *, backing_file: str | None = None) -> str:
        """A loop device; `backing_file` None leaves it unattached (no `loop/` directory)."""
        number = int(name.removeprefix("loop"))
        self._register(name, self.sysfs / VIRTUAL_BLOCK / name, f"{MAJOR_LOOP}:{number}", whole=True)
        self.set_loop_backing(name, backing_file)
        return name

    def add_ramdisk(self, name: str) -> str:
        """A RAM disk (`ramN`, major 1): the kind of device the default exclude drops."""
        number = int(name.removeprefix("ram"))
        self._register(name, self.sysfs / VIRTUAL_BLOCK / name, f"1:{number}", whole=True)
        return name

    def set_queue_limits(
        self, name: str, *, queue_depth: int | None = None, nr_requests: int | None = None
    ) -> None:
        """The device's host queue limits: `queue_depth` in its SCSI device (`device/queue_depth`, a SCSI
        disk only), `nr_requests` in its request queue (`queue/nr_requests`), as the kernel prints them."""
        if queue_depth is not None:
            _write(self._dirs[name] / "device" / "queue_depth", str(queue_depth))
        if nr_requests is not None:
            _write(self._dirs[name] / "queue" / "nr_requests", str(nr_requests))

    def set_loop_backing(self, name: str, backing_file: str | None) -> None:
        loop = self._dirs[name] / "loop"
        if backing_file is None:
            if loop.exists():
                for child in loop.iterdir():
                    child.unlink()
                loop.rmdir()
        else:
            _write(loop / "backing_file", backing_file)
            _write(loop / "offset", "0")

    def add_partition(self, disk: str, number: int, *, dev: str | None = None) -> str:
        """Partition `number` of `disk`: a subdirectory of the disk's directory. Returns its name
        (`sdb1`, `nvme0n1p1`, `cciss/c0d0p1`)."""
        name = f"{disk}p{number}" if disk[-1].isdigit() else f"{disk}{number}"
        disk_dir = self._dirs[disk]
        if dev is None:
            major, minor = (int(x) for x in self._devs[disk].split(":"))
            dev = f"{major}:{minor + number}" if major not in (MAJOR_LOOP, MAJOR_EXTENDED) else None
        self._register(name, disk_dir / sysfs_name(name), dev or self._devnum(MAJOR_EXTENDED, 1), whole=False)
        _write(disk_dir / sysfs_name(name) / "partition", str(number))
        return name

    def add_dm(self, name: str, *, dm_name: str, dm_uuid: str, slaves: list[str]) -> str:
        """A device-mapper device `dm-N` stacked on `slaves` (linked both ways: slaves/holders)."""
        number = int(name.removeprefix("dm-"))
        directory = self.sysfs / VIRTUAL_BLOCK / name
        self._register(name, directory, f"{MAJOR_DM}:{number}", whole=True)
        _write(directory / "dm" / "name", dm_name)
        _write(directory / "dm" / "uuid", dm_uuid)
        _write(directory / "dm" / "suspended", "0")
        for slave in slaves:
            _link(directory / "slaves" / sysfs_name(slave), self._dirs[slave])
            _link(self._dirs[slave] / "holders" / name, directory)
        return name

    def add_multipath(self, name: str, *, alias: str, wwid: str, paths: list[str]) -> str:
        """A multipath map (`wwid` in multipath's spelling, `3600a…`), dm uuid `mpath-<wwid>`."""
        return self.add_dm(name, dm_name=alias, dm_uuid=f"mpath-{wwid}", slaves=paths)

    def add_lvm(self, name: str, *, vg: str, lv: str, on: list[str]) -> str:
        """An LVM logical volume on the physical volumes `on`; dm name `<vg>-<lv>`."""
        vg_uuid = "Qx3kT0aNpWm1YfLc8RzVb2Jd5HgE7sKu"
        lv_uuid = f"{len(self._dirs):08d}vRf4Tn2LpXz9QmWc6YbHs1Ke"
        return self.add_dm(name, dm_name=f"{vg}-{lv}", dm_uuid=f"LVM-{vg_uuid}{lv_uuid}", slaves=on)

    def add_kpartx(self, name: str, *, map_name: str, number: int) -> str:
        """Partition `number` of multipath map `map_name` as kpartx makes it (uuid `partN-mpath-…`)."""
        map_dir = self._dirs[map_name]
        alias = (map_dir / "dm" / "name").read_text().strip()
        uuid = (map_dir / "dm" / "uuid").read_text().strip()
        return self.add_dm(
            name, dm_name=f"{alias}{number}", dm_uuid=f"part{number}-{uuid}", slaves=[map_name]
        )

    def set_state(self, name: str, state: str) -> None:
        """Set the `state` of the device below block device `name` (a SCSI device's, an NVMe
        controller's), as the kernel changes it when a path is lost or comes back."""
        _write(self._dirs[name] / "device" / "state", state)

    def remove_block_device(self, name: str) -> None:
        """What the kernel leaves of a deleted path device still in a map: nothing under sysfs
        (its directory and class/block link gone), a dangling link in the map's slaves/."""
        shutil.rmtree(self._dirs.pop(name))  # never follows the links inside
        (self.sysfs / "class" / "block" / sysfs_name(name)).unlink()
        (self.sysfs / "block" / sysfs_name(name)).unlink(missing_ok=True)
        self.stats.pop(name, None)

    def rename_dm(self, name: str, dm_name: str) -> None:
        _write(self._dirs[name] / "dm" / "name", dm_name)

    def dev_of(self, name: str) -> str:
        return self._devs[name]

    def dir_of(self, name: str) -> Path:
        return self._dirs[name]

    def _devnum(self, major: int, step: int) -> str:
        minor = self._next_minor.get(major, 0)
        self._next_minor[major] = minor + step
        return f"{major}:{minor}"

    def _register(self, name: str, directory: Path, dev: str, *, whole: bool) -> None:
        if name in self._dirs:
            raise ValueError(f"device {name} added twice")
        directory.mkdir(parents=True)
        _write(directory / "dev", dev)
        (directory / "holders").mkdir()
        if whole:
            (directory / "slaves").mkdir()
            _link(self.sysfs / "block" / sysfs_name(name), directory)
        _link(self.sysfs / "class" / "block" / sysfs_name(name), directory)
        _link(self.sysfs / "dev" / "block" / dev, directory)
        self._dirs[name] = directory
        self._devs[name] = dev
        self.stats[name] = Stats.distinct(len(self.stats) + 1)

    # --- mounts --------------------------------------------------------------------------------

    def mount(
        self,
        mountpoint: str,
        device: str | None = None,
        *,
        source: str | None = None,
        dev: str | None = None,
        fstype: str = "xfs",
    ) -> None:
        """Mount `device` (its MAJ:MIN and /dev path) at `mountpoint`; or give `dev` and `source`
        as mountinfo shows them (btrfs: dev `0:NN`, source the /dev path of a member device)."""
        if device is not None:
            dev = dev or self._devs[device]
            if source is None:
                dm_name = self._dirs[device] / "dm" / "name"
                source = (
                    f"/dev/mapper/{dm_name.read_text().strip()}" if dm_name.exists() else f"/dev/{device}"
                )
        if dev is None or source is None:
            raise ValueError("give a device, or both dev and source")
        parent = self.mounts[0].mount_id if self.mounts else 1
        self.mounts.append(Mount(self._next_mount_id, parent, dev, mountpoint, fstype, source))
        self._next_mount_id += 1

    def unmount(self, mountpoint: str) -> None:
        self.mounts = [m for m in self.mounts if m.mountpoint != mountpoint]

    # --- procfs --------------------------------------------------------------------------------

    def diskstats_text(self) -> str:
        lines = []
        for name, stats in self.stats.items():
            major, minor = self._devs[name].split(":")
            numbers = " ".join(str(n) for n in stats.fields())
            lines.append(f"{major:>4} {minor:>7} {name} {numbers}")
        lines.extend(self.extra_diskstats_lines)
        return "".join(line + "\n" for line in lines)

    def mountinfo_text(self) -> str:
        return "".join(
            f"{m.mount_id} {m.parent_id} {m.dev} {escape_mountinfo(m.root)} "
            f"{escape_mountinfo(m.mountpoint)} rw,relatime shared:{m.mount_id} - {m.fstype} "
            f"{escape_mountinfo(m.source)} rw\n"
            for m in self.mounts
        )

    def write(self) -> None:
        """Write <procfs>/diskstats and <procfs>/1/mountinfo from the current state."""
        (self.procfs / "diskstats").write_text(self.diskstats_text())
        (self.procfs / "1" / "mountinfo").write_text(self.mountinfo_text())
