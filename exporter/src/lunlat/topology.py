"""Block-device topology from sysfs and the mount table: which kernel device is which LUN.

Pure functions over a sysfs root and a procfs root (tests and benchmarks pass fake trees):
- `read_block_devices` reads the facts of each device once (dm name/uuid, WWID, vendor, model,
  slaves, holders, partition parent, loop backing, queue limits);
- `read_mounts` reads the mount table of the host (`<procfs>/1/mountinfo`, so a containerised
  exporter with the host's /proc mounted sees the host's mounts);
- `resolve` names every device by its LUN (docs/contract.md §2): multipath alias / dm name, else WWID, else
  the kernel name; multipath path devices and partitions are kinds of their own, hidden by default.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lunlat.wwid import clean as clean_wwid

_DM_PARTITION = re.compile(r"^part\d+-")
_MPATH = "mpath-"
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class BlockDevice:
    """What sysfs says about one kernel block device ("" where it says nothing)."""

    name: str
    dev: str = ""  # "MAJ:MIN"
    partition: bool = False
    parent: str = ""  # whole device a partition belongs to
    dm_name: str = ""
    dm_uuid: str = ""
    wwid: str = ""
    vendor: str = ""
    model: str = ""
    slaves: tuple[str, ...] = ()
    holders: tuple[str, ...] = ()
    loop_attached: bool | None = None  # None: not a loop device
    loop_file: str = ""  # backing file of an attached loop device
    # The host's queue limits (None where the device has no such attribute; `queue_limits`):
    queue_depth: int | None = None  # SCSI device/queue_depth: commands sent to the device at once
    nr_requests: int | None = None  # queue/nr_requests: requests the block layer may allocate

    @property
    def multipath(self) -> bool:
        return self.dm_uuid.startswith(_MPATH)

    @property
    def dm_partition(self) -> bool:
        return bool(_DM_PARTITION.match(self.dm_uuid))


@dataclass(frozen=True, slots=True)
class LunView:
    """A device as lunlat publishes it."""

    device: str
    lun: str
    kind: str  # lun | path | partition (ground.KINDS)
    wwid: str = ""
    vendor: str = ""
    model: str = ""
    paths: str = ""  # comma-separated path devices of a multipath LUN
    mountpoints: tuple[str, ...] = ()
    hidden: bool = False  # never shown (an unattached loop device holds no LUN)
    multipath: bool = False  # a multipath map (kind lun): its path health is published, even with 0 paths


@dataclass(slots=True)
class MountTable:
    by_dev: dict[str, list[str]] = field(default_factory=dict)  # "MAJ:MIN" -> mountpoints
    by_source: dict[str, list[str]] = field(default_factory=dict)  # "/dev/…" -> mountpoints

    def all(self) -> list[tuple[str, str, str]]:
        """(mountpoint, dev, source) for every mount."""
        rows: list[tuple[str, str, str]] = []
        for dev, points in self.by_dev.items():
            rows.extend((p, dev, "") for p in points)
        for source, points in self.by_source.items():
            rows.extend((p, "", source) for p in points)
        return rows


def _read(path: str) -> str:
    """A file's text, stripped; '' when it cannot be read. Plain os calls, no file object: pathlib
    costs 2/3 of a sysfs walk and a buffered file object a third of a path-state read, and every
    multipath path's state is read at every scrape."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace").strip()


def _listdir(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listdir(path)))  # noqa: PTH208 - see _read
    except OSError:
        return ()


def sysfs_name(device: str) -> str:
    """/proc/diskstats writes `cciss/c0d0` where sysfs has `cciss!c0d0`."""
    return device.replace("/", "!")


def read_block_device(sysfs: Path, name: str) -> BlockDevice:
    """Facts of one device. One listdir says which attributes exist, so absent ones cost nothing."""
    base = f"{sysfs}/class/block/{sysfs_name(name)}"
    entries = set(_listdir(base))
    if not entries:
        base = f"{sysfs}/block/{sysfs_name(name)}"
        entries = set(_listdir(base))
    inside_disk = ""
    if not entries and (disk := _disk_named_in(name)):
        # /sys/block lists whole devices only; a partition is a directory inside its disk's.
        base = f"{sysfs}/block/{sysfs_name(disk)}/{sysfs_name(name)}"
        entries = set(_listdir(base))
        inside_disk = disk if entries else ""
    if not entries:
        return BlockDevice(name)
    partition = "partition" in entries or bool(inside_disk) or _in_a_disk_dir(sysfs, base, entries)
    parent = inside_disk
    if partition and not parent:
        parent = os.path.basename(os.path.dirname(os.path.realpath(base))).replace("!", "/")  # noqa: PTH119, PTH120
    loop_attached: bool | None = None
    loop_file = ""
    # A loop device without loop/backing_file is unattached; its partitions (loop0p1) have no loop/.
    if "loop" in entries or (name.startswith("loop") and not partition):
        loop_file = _read(f"{base}/loop/backing_file")
        loop_attached = bool(loop_file)
    has_device = "device" in entries
    # SCSI disks keep identity under device/; NVMe namespaces have wwid at the top and the
    # controller's model under device/.
    # A SCSI name string designator comes with the NUL padding the kernel copies (wwid.clean).
    wwid = clean_wwid(
        (_read(f"{base}/device/wwid") if has_device else "")
        or (_read(f"{base}/wwid") if "wwid" in entries else "")
    )
    has_dm = "dm" in entries
    return BlockDevice(
        name=name,
        dev=_read(f"{base}/dev"),
        partition=partition,
        parent=parent,
        dm_name=_read(f"{base}/dm/name") if has_dm else "",
        dm_uuid=_read(f"{base}/dm/uuid") if has_dm else "",
        wwid=wwid,
        vendor=_read(f"{base}/device/vendor") if has_device else "",
        model=_read(f"{base}/device/model") if has_device else "",
        slaves=tuple(x.replace("!", "/") for x in _listdir(f"{base}/slaves")) if "slaves" in entries else (),
        holders=tuple(x.replace("!", "/") for x in _listdir(f"{base}/holders"))
        if "holders" in entries
        else (),
        loop_attached=loop_attached,
        loop_file=loop_file,
        queue_depth=_count(f"{base}/device/queue_depth") if has_device else None,
        nr_requests=_count(f"{base}/queue/nr_requests") if "queue" in entries else None,
    )


# The two queue limits, each the kernel's own attribute:
# - `queue/nr_requests` (torvalds/linux Documentation/ABI/stable/sysfs-block, "/sys/block/<disk>/queue/
#   nr_requests": "how many requests may be allocated in the block layer"), a count of requests, on
#   every device with a request queue (a whole disk, a dm or loop device; not a partition);
# - `device/queue_depth` of a SCSI disk: its SCSI device's attribute (drivers/scsi/scsi_sysfs.c,
#   DEVICE_ATTR(queue_depth), printed "%d\n" from struct scsi_device's queue_depth), the depth
#   scsi_change_queue_depth sets (drivers/scsi/scsi.c: "number of commands allowed to be queued to the
#   driver"), a count of commands. An NVMe namespace's `device` is its controller and a virtio disk's
#   the virtio device: neither has the file, so neither has the limit.
def _count(path: str) -> int | None:
    """A sysfs count (a non-negative decimal integer); None when absent or not one."""
    text = _read(path)
    return int(text) if text.isascii() and text.isdigit() else None


def queue_limits(
    devices: dict[str, BlockDevice], name: str, paths: Iterable[str] = ()
) -> tuple[int | None, int | None]:
    """(queue_depth, nr_requests) of device `name` as published. A multipath map (its `paths`) has no
    SCSI device of its own: dm-multipath sends its I/O down every path, so its queue depth is the sum
    of its paths' (those that have one; None when none has). Its nr_requests is its own queue's."""
    device = devices.get(name)
    if device is None:
        return None, None
    depth = device.queue_depth
    if depth is None:
        depths = [
            d for path in paths if (p := devices.get(path)) is not None and (d := p.queue_depth) is not None
        ]
        depth = sum(depths) if depths else None
    return depth, device.nr_requests


# Where the `partition` file or class/block is missing, a partition is still known by the kernel's
# layout: its device's parent is the disk's (block/partitions/core.c add_partition: pdev->parent =
# ddev), so its directory is inside the disk's; it is named `<disk><n>`, or `<disk>p<n>` when the
# disk's name ends in a digit (add_partition: dev_set_name "%sp%d" / "%s%d"); and it has `holders/` but no
# `slaves/`, which only a whole disk gets (block/genhd.c device_add_disk).
_PARTITION_NAME = re.compile(r"^(.*?)(p?)\d+$")


def _disk_named_in(name: str) -> str:
    """The disk a partition named `name` would belong to, by the kernel's naming; "" if none."""
    m = _PARTITION_NAME.match(name)
    if m is None or not m.group(1):
        return ""
    disk, p = m.group(1), m.group(2)
    if p and not disk[-1:].isdigit():  # "sdp1" is partition 1 of sdp, not of sd
        disk += p
    return disk


def _in_a_disk_dir(sysfs: Path, base: str, entries: set[str]) -> bool:
    """Whether the device at `base` (no `partition` file) sits inside another block device's
    directory: a partition. A whole disk has `slaves/` and sits in a `block/` directory (or its
    NVMe controller's, which is no block device). One readlink per such device, at topology reads."""
    if "slaves" in entries:
        return False
    try:
        target = os.readlink(base)  # noqa: PTH115 - see _read
    except OSError:
        return False
    above = target.rstrip("/").split("/")[-2:-1]
    if not above or above[0] in ("block", "", ".", ".."):
        return False
    return os.path.isdir(f"{sysfs}/block/{above[0]}")  # noqa: PTH112 - see _read


def read_block_devices(
    sysfs: Path, names: Iterable[str], known: dict[str, BlockDevice] | None = None
) -> dict[str, BlockDevice]:
    """Facts for the named devices and every device they stack on or under (holders, slaves).

    Devices in `known` are taken from there instead of being read again.
    """
    devices: dict[str, BlockDevice] = {}
    known = known or {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in devices:
            continue
        device = known.get(name) or read_block_device(sysfs, name)
        devices[name] = device
        todo.extend(n for n in (*device.slaves, *device.holders, device.parent) if n and n not in devices)
    return devices


def related(devices: dict[str, BlockDevice], names: set[str]) -> set[str]:
    """Devices whose facts mention any of `names` (as slave, holder or parent)."""
    return {
        d.name
        for d in devices.values()
        if names.intersection(d.slaves) or names.intersection(d.holders) or d.parent in names
    }


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040 …)."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> MountTable:
    table = MountTable()
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-", 6)
        except ValueError:
            continue  # not a mountinfo line: ignore rather than guess
        if len(fields) < sep + 3:
            continue
        dev, mountpoint, source = fields[2], _unescape(fields[4]), _unescape(fields[sep + 2])
        # btrfs reports anonymous devices (major 0): the source path names the device. NFS, tmpfs and
        # overlay mounts are kept too, naming no device, so a path under them matches no LUN.
        if dev.startswith("0:"):
            table.by_source.setdefault(source, []).append(mountpoint)
        else:
            table.by_dev.setdefault(dev, []).append(mountpoint)
    return table


def mountinfo_path(procfs: Path) -> Path:
    host = procfs / "1" / "mountinfo"
    return host if host.exists() else procfs / "self" / "mountinfo"


def read_mounts(procfs: Path) -> tuple[MountTable, str]:
    """The mount table and its raw text (callers compare the text to notice changes cheaply)."""
    text = _read(str(mountinfo_path(procfs)))
    return parse_mountinfo(text), text


def lower_chain(devices: dict[str, BlockDevice], name: str) -> list[str]:
    """The device and every device below it: partition parents and dm slaves, recursively.

    A file on an LVM volume on a multipath map is on the LV, on the map and on its paths.
    """
    chain: list[str] = []
    todo = [name]
    while todo:
        current = todo.pop()
        if current in chain:
            continue
        chain.append(current)
        device = devices.get(current)
        if device is None:
            continue
        if device.parent:
            todo.append(device.parent)
        todo.extend(device.slaves)
    return chain


def _own_lun(device: BlockDevice) -> str:
    if device.dm_name:
        return device.dm_name
    if device.multipath:
        return device.dm_uuid[len(_MPATH) :]
    return device.wwid or device.name


def _multipath_holder(
    devices: dict[str, BlockDevice], device: BlockDevice, listed_by: dict[str, BlockDevice]
) -> BlockDevice | None:
    """The multipath map a path belongs to: from its holders/, else from the map's slaves/ (the
    kernel links both together, block/holder.c bd_link_disk_holder; a tree may keep only one)."""
    for holder in device.holders:
        h = devices.get(holder)
        if h is not None and h.multipath:
            return h
    return listed_by.get(device.name)


def _partition_parent(devices: dict[str, BlockDevice], device: BlockDevice) -> BlockDevice | None:
    if device.partition and device.parent:
        return devices.get(device.parent, BlockDevice(device.parent))
    if device.dm_partition and device.slaves:
        return devices.get(device.slaves[0], BlockDevice(device.slaves[0]))
    return None


def _mountpoints(devices: dict[str, BlockDevice], mounts: MountTable) -> dict[str, list[str]]:
    """Mountpoints per device, carried down to every device below the mounted one."""
    by_name: dict[str, list[str]] = {}
    dev_to_name = {d.dev: d.name for d in devices.values() if d.dev}
    dm_to_name = {d.dm_name: d.name for d in devices.values() if d.dm_name}
    mounted: list[tuple[str, str]] = []
    for dev, points in mounts.by_dev.items():
        if dev in dev_to_name:
            mounted.extend((dev_to_name[dev], p) for p in points)
    for source, points in mounts.by_source.items():
        if not source.startswith("/dev/"):
            continue
        base = source.removeprefix("/dev/")
        name = dm_to_name.get(base.removeprefix("mapper/")) or (base if base in devices else "")
        if name:
            mounted.extend((name, p) for p in points)
    for name, point in mounted:
        for below in lower_chain(devices, name):
            points_below = by_name.setdefault(below, [])
            if point not in points_below:
                points_below.append(point)
    return by_name


def resolve(devices: dict[str, BlockDevice], mounts: MountTable) -> dict[str, LunView]:
    """A LunView for every device: its LUN name, kind and identity."""
    points = _mountpoints(devices, mounts)
    listed_by = {slave: d for d in devices.values() if d.multipath for slave in d.slaves}
    views: dict[str, LunView] = {}
    for name, device in devices.items():
        owner = device
        kind = "lun"
        # A partition of a multipath map's path is still a partition (of the path): walk up once.
        parent = _partition_parent(devices, device)
        if parent is not None:
            kind, owner = "partition", parent
        holder = _multipath_holder(devices, owner, listed_by)
        if holder is not None:
            owner = holder
            kind = "path" if kind == "lun" else kind
        identity = owner
        if owner.multipath:
            paths = ",".join(sorted(owner.slaves))
            first_path = next((devices[s] for s in sorted(owner.slaves) if s in devices), None)
            wwid = owner.dm_uuid[len(_MPATH) :]
            vendor = first_path.vendor if first_path else ""
            model = first_path.model if first_path else ""
        else:
            paths, wwid, vendor, model = "", identity.wwid, identity.vendor, identity.model
        views[name] = LunView(
            device=name,
            lun=_own_lun(owner),
            kind=kind,
            wwid=wwid,
            vendor=vendor,
            model=model,
            paths=paths if kind == "lun" else "",
            mountpoints=tuple(sorted(points.get(name, ()))),
            hidden=device.loop_attached is False,
            multipath=kind == "lun" and owner.multipath,
        )
    return views


# --- multipath path health ------------------------------------------------------------------------
# Whether a path of a multipath map can carry I/O, as the driver of the path device says in sysfs,
# `<path device>/device/state`:
# - SCSI (sdX): `device` is the scsi_device, whose `state` prints its sdev_state by name
#   (torvalds/linux drivers/scsi/scsi_sysfs.c: sdev_states[], show_state_field): created, running,
#   cancel, deleted, quiesce, offline, transport-offline, blocked, created-blocked. Only `running`
#   takes I/O: `blocked` while the transport recovers (an FC remote port lost, until
#   fast_io_fail_tmo), `transport-offline` after it, `offline` when error handling gave up.
# - NVMe (dm-multipath over NVMe namespaces): `device` is the controller, whose `state`
#   (drivers/nvme/host/sysfs.c, nvme_sysfs_show_state) is new, live, resetting, connecting,
#   deleting, "deleting (no IO)" or dead; only `live` takes I/O.
# The path device's directory is reached as `<sysfs>/class/block/<p>` and, for a whole device, as
# `<sysfs>/block/<p>` (both links into /sys/devices: torvalds/linux
# Documentation/admin-guide/sysfs-rules.rst); a tree may have either (procfs' test fixtures and
# node_exporter use only /sys/block: prometheus/procfs v0.21.1 blockdevice/dm_multipath.go,
# dmMultipathPaths), so the state is read under whichever the tree has, as read_block_device does.
# dm-multipath's own verdict (a path it failed after an I/O error, "F" per path in `dmsetup status`:
# drivers/md/dm-mpath.c, multipath_status) is not in sysfs: a map's dm/ directory holds only name,
# uuid, suspended, use_blk_mq and rq_based_seq_io_merge_deadline (drivers/md/dm-sysfs.c), and the
# status comes only through the device-mapper ioctl, which needs CAP_SYS_ADMIN (drivers/md/dm-ioctl.c,
# ctl_ioctl). So a path dm-multipath failed while its SCSI device still says `running` (a target
# port answering with errors) is not counted here; its latency is (docs/metrics.md, "Path health").
HEALTHY_PATH_STATES: frozenset[str] = frozenset({"running", "live"})


class PathState(enum.Enum):
    """What one reading of a path's state says (path_state)."""

    OK = "ok"  # running / live
    FAILED = "failed"  # any other state, or the device gone from sysfs
    STATELESS = "stateless"  # a device type without a state attribute (virtio): cannot say
    UNKNOWN = "unknown"  # a state attribute that cannot be read now, or reads empty


def path_state_file(sysfs: Path, name: str) -> str:
    """Where the state of path device `name` is read (see HEALTHY_PATH_STATES): under the layout the
    tree has, decided when the topology is read, so a scrape reads one file per path."""
    dirname = sysfs_name(name)
    for base in (f"{sysfs}/class/block/{dirname}", f"{sysfs}/block/{dirname}"):
        if os.path.isdir(base):  # noqa: PTH112 - see _read
            return f"{base}/device/state"
    return f"{sysfs}/block/{dirname}/device/state"


def path_state(state_file: str) -> PathState:
    """What the path whose state file this is can do now (read at every call).

    Only when the state does not read as a word is anything else looked at:
    - no device directory at all (a path deleted after dev_loss_tmo while the map still lists it):
      failed;
    - a device without a state attribute (virtio): stateless, not counted as failed;
    - a state attribute that cannot be read or reads empty: unknown, kept apart from failed.
      node_exporter 1.12.1 drops every dmmultipath series of the host then (procfs v0.21.1
      dmMultipathPaths returns the read error, collector/dmmultipath_linux.go Update returns
      ErrNoData on ErrNotExist) and counts an empty state as failed (isPathActive).
    """
    state = _read(state_file)
    if state:
        return PathState.OK if state in HEALTHY_PATH_STATES else PathState.FAILED
    device_dir = os.path.dirname(state_file)  # noqa: PTH120 - see _read
    if not os.path.isdir(os.path.dirname(device_dir)):  # noqa: PTH112, PTH120
        return PathState.FAILED
    if not os.path.lexists(state_file):
        return PathState.STATELESS
    return PathState.UNKNOWN
