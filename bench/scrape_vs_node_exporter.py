"""Scrape time of lunlat against prometheus-node-exporter (diskstats collector) on one synthetic host.

    python bench/scrape_vs_node_exporter.py [--devices 10000] [--rounds 15]

Builds a fake host of N block devices in a temporary directory (procfs, sysfs and udev data; see
README.md), starts both exporters on it on 127.0.0.1, and before each scrape pass rewrites
diskstats with every counter advanced, so neither can answer from a cache. Each round scrapes each
exporter once without and once with `Accept-Encoding: gzip`, alternating which goes first. Prints
a table; asserts nothing. Run it with the Python of the venv lunlat is installed in.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

LOOPBACK = "127.0.0.1"
NODE_EXPORTER_NAMES = ("prometheus-node-exporter", "node_exporter")
LUNLAT_PORT = re.compile(r"\bmsg=listening\b.*\bport=(\d+)\b")
NODE_EXPORTER_PORT = re.compile(r'msg="Listening on" address=\S*:(\d+)\b')
STATS_FIELDS = 17  # the 5.5+ format: 20 whole-line fields
MS_FIELDS = (3, 7, 9, 10, 14, 16)
PATHS_PER_MAP = 4  # two HBAs times two array ports: the common SAN layout
SD_MAJORS = (8, *range(65, 72), *range(128, 136))  # 16 disks of 16 minors each
DM_MAJOR, EXT_MAJOR, VIRTIO_MAJOR = 253, 259, 252


# --- the synthetic host ------------------------------------------------------------------------


@dataclass(slots=True)
class Device:
    name: str
    major: int
    minor: int
    kind: str  # map | path | disk | partition | lv
    syspath: Path  # real directory under <sysfs>/devices
    udev: dict[str, str] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)

    @property
    def dev(self) -> str:
        return f"{self.major}:{self.minor}"


def sd_name(index: int) -> str:
    """sda … sdz, sdaa … sdzz, sdaaa …: the kernel's bijective base 26."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return "sd" + letters


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


class Host:
    """A fake procfs + sysfs + udev data tree of `devices` block devices."""

    def __init__(self, root: Path, devices: int) -> None:
        self.procfs = root / "proc"
        self.sysfs = root / "sys"
        self.udev = root / "udev"
        self.devices: list[Device] = []
        self._sd = 0
        self._ext_minor = 0
        self._dm = 0
        self._build(devices)

    # layout: a boot disk with 3 partitions and 2 LVs, 2 local NVMe, then multipath maps of 4 paths;
    # whatever does not fill a whole map is plain (non-multipath) SAN disks.
    def _build(self, total: int) -> None:
        boot = self._scsi_disk("disk", "VMware", "Virtual disk", host=0)
        for part in (1, 2, 3):
            self._partition(boot, part)
        for vg_lv in ("rootvg-root", "rootvg-swap"):
            self._dm_device(vg_lv, f"LVM-{self._dm:032x}", [f"{boot.name}3"], "lv")
        for n in range(2):
            self._nvme(n)
        left = total - len(self.devices)
        maps, plain = divmod(max(left, 0), PATHS_PER_MAP + 1)
        for m in range(maps):
            wwid = f"3600a0980{m:024x}"
            paths = [
                self._scsi_disk("path", "NETAPP", "LUN C-Mode", host=1 + p, wwid=wwid)
                for p in range(PATHS_PER_MAP)
            ]
            self._dm_device(f"mpath{m}", f"mpath-{wwid}", [p.name for p in paths], "map")
        for _ in range(plain):
            self._scsi_disk("disk", "PURE", "FlashArray", host=9)
        self._write_tree()

    def _scsi_disk(self, kind: str, vendor: str, model: str, host: int, wwid: str = "") -> Device:
        index = self._sd
        self._sd += 1
        if index < len(SD_MAJORS) * 16:
            major, minor = SD_MAJORS[index // 16], (index % 16) * 16
        else:
            major, minor = EXT_MAJOR, self._next_ext()
        name = sd_name(index)
        wwid = wwid or f"3624a9370{index:024x}"
        hctl = f"{host}:0:{index // 256}:{index % 256}"
        scsi = (
            self.sysfs
            / "devices/pci0000:00/0000:00:10.0"
            / f"host{host}/target{hctl.rsplit(':', 1)[0]}/{hctl}"
        )
        device = Device(name, major, minor, kind, scsi / "block" / name)
        for key, value in (("vendor", vendor), ("model", model), ("rev", "9800"), ("state", "running")):
            _write(scsi / key, value)
        _write(scsi / "wwid", f"naa.{wwid[1:]}")
        _link(device.syspath / "device", scsi)
        device.links = [f"disk/by-id/scsi-{wwid}", f"disk/by-id/wwn-0x{wwid[1:]}", f"disk/by-path/fc-{hctl}"]
        device.udev = {
            "ID_SCSI": "1",
            "ID_VENDOR": vendor,
            "ID_MODEL": model.replace(" ", "_"),
            "ID_REVISION": "9800",
            "ID_TYPE": "disk",
            "ID_SERIAL": wwid,
            "ID_SERIAL_SHORT": wwid[1:],
            "ID_WWN": f"0x{wwid[1:17]}",
            "ID_PATH": f"fc-{hctl}",
            "SCSI_IDENT_SERIAL": f"S{index:011d}",
        }
        if kind == "path":
            device.udev["DM_MULTIPATH_DEVICE_PATH"] = "1"
            device.udev["SYSTEMD_READY"] = "0"
        self.devices.append(device)
        return device

    def _partition(self, disk: Device, number: int) -> None:
        name = f"{disk.name}{number}"
        device = Device(name, disk.major, disk.minor + number, "partition", disk.syspath / name)
        _write(device.syspath / "partition", str(number))
        device.udev = {**disk.udev, "DEVTYPE": "partition", "ID_PART_ENTRY_NUMBER": str(number)}
        device.links = [f"{link}-part{number}" for link in disk.links]
        self.devices.append(device)

    def _nvme(self, n: int) -> None:
        controller = self.sysfs / f"devices/pci0000:00/0000:00:1d.{n}/nvme/nvme{n}"
        name = f"nvme{n}n1"
        device = Device(name, EXT_MAJOR, self._next_ext(), "disk", controller / name)
        _write(controller / "model", "SAMSUNG MZQL23T8HCLS")
        _write(controller / "serial", f"S64HNE0R{n:06d}")
        _write(device.syspath / "wwid", f"eui.36344730526{n:05d}")
        _link(device.syspath / "device", controller)
        device.udev = {
            "ID_MODEL": "SAMSUNG_MZQL23T8HCLS",
            "ID_SERIAL_SHORT": f"S64HNE0R{n:06d}",
            "ID_WWN": f"eui.36344730526{n:05d}",
            "ID_PATH": f"pci-0000:00:1d.{n}-nvme-1",
        }
        device.links = [f"disk/by-id/nvme-eui.36344730526{n:05d}"]
        self.devices.append(device)

    def _dm_device(self, dm_name: str, uuid: str, slaves: Sequence[str], kind: str) -> None:
        name = f"dm-{self._dm}"
        device = Device(name, DM_MAJOR, self._dm, kind, self.sysfs / "devices/virtual/block" / name)
        self._dm += 1
        _write(device.syspath / "dm/name", dm_name)
        _write(device.syspath / "dm/uuid", uuid)
        _write(device.syspath / "dm/suspended", "0")
        by_name = {d.name: d for d in self.devices}
        for slave in slaves:
            _link(device.syspath / "slaves" / slave, by_name[slave].syspath)
            _link(by_name[slave].syspath / "holders" / name, device.syspath)
        device.udev = {"DM_NAME": dm_name, "DM_UUID": uuid, "DM_SUSPENDED": "0", "DM_UDEV_RULES_VSN": "2"}
        device.links = [f"mapper/{dm_name}", f"disk/by-id/dm-name-{dm_name}", f"disk/by-id/dm-uuid-{uuid}"]
        self.devices.append(device)

    def _next_ext(self) -> int:
        self._ext_minor += 1
        return self._ext_minor - 1

    def _write_tree(self) -> None:
        for number, device in enumerate(self.devices):
            _write(device.syspath / "dev", device.dev)
            _write(device.syspath / "size", str(2**31))
            _write(device.syspath / "ro", "0")
            _link(self.sysfs / "class/block" / device.name, device.syspath)
            if device.kind != "partition":
                _link(self.sysfs / "block" / device.name, device.syspath)
                for key, value in (
                    ("rotational", "0"),
                    ("logical_block_size", "512"),
                    ("scheduler", "[none]"),
                ):
                    _write(device.syspath / "queue" / key, value)
            lines = [f"S:{link}" for link in device.links]
            lines += [f"I:{1_000_000 + number}", "G:systemd", "Q:systemd", "V:1"]
            lines += [f"E:{k}={v}" for k, v in {"DEVNAME": f"/dev/{device.name}", **device.udev}.items()]
            _write(self.udev / f"b{device.dev}", "\n".join(lines))
        mounts = [
            "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw",
            "23 1 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw",
            "1 0 253:0 / / rw,relatime shared:1 - xfs /dev/mapper/rootvg-root rw,attr2,inode64,noquota",
            "24 1 8:1 / /boot rw,relatime shared:3 - xfs /dev/sda1 rw,attr2,inode64,noquota",
        ]
        maps = [d for d in self.devices if d.kind == "map"]
        for i, device in enumerate(maps[:200]):
            dm_name = device.udev["DM_NAME"]
            mounts.append(
                f"{100 + i} 1 {device.dev} / /u02/oradata/{dm_name} rw,noatime shared:{100 + i} - xfs "
                f"/dev/mapper/{dm_name} rw,attr2,inode64,logbufs=8,noquota"
            )
        _write(self.procfs / "1" / "mountinfo", "\n".join(mounts))

    def write_diskstats(self, round_number: int) -> None:
        """Every counter advanced by a per-device step times the round; ms fields stay 32-bit."""
        lines = []
        for i, device in enumerate(self.devices):
            step = i % 97 + 1
            base = (i * 7919) % 1_000_000
            values = [base * (f + 1) + step * (f + 1) * round_number for f in range(STATS_FIELDS)]
            values[8] = (i + round_number) % 32  # I/Os in flight: a gauge
            for f in MS_FIELDS:
                values[f] %= 2**32
            lines.append(f"{device.major:4d} {device.minor:7d} {device.name} " + " ".join(map(str, values)))
        tmp = self.procfs / "diskstats.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self.procfs / "diskstats")  # one rename: a scrape never reads half a file

    def count(self, kind: str) -> int:
        return sum(d.kind == kind for d in self.devices)


# --- the exporters -----------------------------------------------------------------------------


@dataclass(slots=True)
class Result:
    seconds: float
    wire_bytes: int
    body: bytes


def scrape(port: int, gzip_ok: bool) -> Result:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=120)
    try:
        started = time.perf_counter()
        connection.request("GET", "/metrics", headers={"Accept-Encoding": "gzip" if gzip_ok else "identity"})
        response = connection.getresponse()
        wire = response.read()
        seconds = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"port {port}: HTTP {response.status}: {wire[:200]!r}")
        encoding = response.getheader("Content-Encoding", "")
    finally:
        connection.close()
    if gzip_ok and encoding != "gzip":
        raise RuntimeError(f"port {port}: asked for gzip, got Content-Encoding {encoding!r}")
    return Result(seconds, len(wire), gzip.decompress(wire) if encoding == "gzip" else wire)


class Exporter:
    """A child process logging to a file; `port_pattern` finds its port in the log."""

    def __init__(self, name: str, argv: list[str], log_path: Path, port_pattern: re.Pattern[str]) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.port_pattern = port_pattern
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while not self.port:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not listening after {timeout:g}s:\n{self.log_tail()}")
            match = self.port_pattern.search(self.log_path.read_text(errors="replace"))
            if match:
                self.port = int(match.group(1))
            else:
                time.sleep(0.05)

    def rss(self) -> int:
        assert self.process is not None
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def log_tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-10:])

    def stop(self) -> None:
        process, self.process = self.process, None
        try:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None


def node_exporter_binary(given: str | None) -> str:
    for name in (given,) if given else NODE_EXPORTER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit(
        f"node_exporter not found (tried {', '.join((given,) if given else NODE_EXPORTER_NAMES)})"
    )


def node_exporter_version(binary: str) -> str:
    result = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"version (\S+)", result.stdout + result.stderr)
    return match.group(1) if match else "?"


# --- measuring ---------------------------------------------------------------------------------


def samples(body: bytes) -> int:
    return sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))


def series_of(body: bytes, metric: bytes) -> int:
    return body.count(b"\n" + metric + b"{")


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def run(args: argparse.Namespace, root: Path) -> None:
    node_bin = node_exporter_binary(args.node_exporter)
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {platform.machine()}, "
        f"Python {platform.python_version()}, node_exporter {node_exporter_version(node_bin)}"
    )
    print("note: this VM is noisy; the medians and their ratio are what count, not single scrapes.")
    started = time.perf_counter()
    host = Host(root / "host", args.devices)
    host.write_diskstats(0)
    print(
        f"synthetic host: {len(host.devices)} block devices = {host.count('map')} multipath maps (dm) "
        f"x {PATHS_PER_MAP} sd paths ({host.count('path')}), {host.count('disk')} plain disks, "
        f"{host.count('lv')} LVs, {host.count('partition')} partitions; built in {time.perf_counter() - started:.1f}s"
    )
    listen = f"--web.listen-address={LOOPBACK}:0"
    node = Exporter(
        "node_exporter",
        [
            node_bin,
            f"--path.procfs={host.procfs}",
            f"--path.sysfs={host.sysfs}",
            f"--path.udev.data={host.udev}",
            "--collector.disable-defaults",
            "--collector.diskstats",
            listen,
        ],
        root / "node_exporter.log",
        NODE_EXPORTER_PORT,
    )
    lunlat = Exporter(
        "lunlat",
        [
            sys.executable,
            "-m",
            "lunlat",
            "serve",
            f"--path.procfs={host.procfs}",
            f"--path.sysfs={host.sysfs}",
            *(["--collector.diskstats.show-paths"] if args.lunlat_show_paths else []),
            listen,
        ],
        root / "lunlat.log",
        LUNLAT_PORT,
    )
    exporters = (node, lunlat)
    try:
        for exporter in exporters:
            exporter.start()
        measure(node, lunlat, host, args)
    finally:
        for exporter in exporters:
            exporter.stop()


def measure(node: Exporter, lunlat: Exporter, host: Host, args: argparse.Namespace) -> None:
    exporters = (node, lunlat)
    rounds: int = args.rounds
    # 2 untimed warm-up scrapes each; the first, cold one is printed apart.
    cold = {e.name: scrape(e.port, gzip_ok=False).seconds for e in exporters}
    for e in exporters:
        scrape(e.port, gzip_ok=False)
    times: dict[tuple[str, bool], list[float]] = {(e.name, z): [] for e in exporters for z in (False, True)}
    last: dict[tuple[str, bool], Result] = {}
    generation = 0
    for r in range(rounds):
        order = exporters if r % 2 == 0 else exporters[::-1]
        for gzip_ok in (False, True):
            generation += 1
            host.write_diskstats(generation)
            for e in order:
                result = scrape(e.port, gzip_ok)
                times[e.name, gzip_ok].append(result.seconds)
                last[e.name, gzip_ok] = result
    rss = {e.name: e.rss() for e in exporters}

    node_body, lunlat_body = last["node_exporter", False].body, last["lunlat", False].body
    node_devices = series_of(node_body, b"node_disk_reads_completed_total")
    lunlat_devices = series_of(lunlat_body, b"lunlat_device_reads_completed_total")
    node_families = len({m.group(1) for m in re.finditer(rb"\nnode_disk_(\w+)\{", node_body)})
    print(
        f"node_exporter exposes {node_devices} devices x {node_families} node_disk_* families "
        "(default device-exclude: maps, sd paths, disks, LVs; no partitions)"
    )
    lunlat_shows = (
        "--collector.diskstats.show-paths: every device"
        if args.lunlat_show_paths
        else "defaults: LUNs only = maps, disks, LVs; paths and partitions hidden"
    )
    print(
        f"lunlat exposes {lunlat_devices} devices x 9 lunlat_device_* families + lunlat_lun_info ({lunlat_shows})"
    )
    print(
        f"{rounds} rounds; before each pass diskstats is rewritten with every counter advanced; "
        f"order alternates; cold first scrape: node_exporter {cold['node_exporter'] * 1000:.0f} ms, "
        f"lunlat {cold['lunlat'] * 1000:.0f} ms (its sysfs topology read)"
    )
    print()
    header = f"{'exporter':<14} {'encoding':<8} {'median ms':>10} {'p90 ms':>8} {'samples':>8} {'bytes':>11} {'RSS after':>10}"
    print(header)
    print("-" * len(header))
    for e in exporters:
        for gzip_ok in (False, True):
            key = (e.name, gzip_ok)
            result = last[key]
            print(
                f"{e.name:<14} {'gzip' if gzip_ok else 'plain':<8} {statistics.median(times[key]) * 1000:>10.1f} "
                f"{p90(times[key]) * 1000:>8.1f} {samples(result.body):>8} {result.wire_bytes:>11,} "
                f"{mib(rss[e.name]) if not gzip_ok else '':>10}"
            )
    print()
    ratios = {
        z: statistics.median(times["node_exporter", z]) / statistics.median(times["lunlat", z])
        for z in (False, True)
    }
    print(
        f"median ratio node_exporter/lunlat: plain {ratios[False]:.2f}x, gzip {ratios[True]:.2f}x "
        f"(lunlat's goal: >= 15x; not asserted)"
    )
    per_device = [
        statistics.median(times[e.name, False]) / max(n, 1) * 1e6
        for e, n in ((node, node_devices), (lunlat, lunlat_devices))
    ]
    print(
        f"plain median per exposed device: node_exporter {per_device[0]:.0f} us, lunlat {per_device[1]:.0f} us"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--devices", type=int, default=10_000, help="block devices on the synthetic host")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds (each: plain and gzip)")
    parser.add_argument(
        "--node-exporter",
        metavar="NAME",
        help="node_exporter binary (default: prometheus-node-exporter or node_exporter on PATH)",
    )
    parser.add_argument(
        "--lunlat-show-paths",
        action="store_true",
        help="run lunlat with --collector.diskstats.show-paths (about the device set node_exporter shows)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the synthetic tree and the logs (path printed)"
    )
    args = parser.parse_args(argv)
    if args.devices < 10 or args.rounds < 1:
        parser.error("--devices must be >= 10 and --rounds >= 1")
    root = Path(tempfile.mkdtemp(prefix="lunlat-bench-"))
    try:
        run(args, root)
    finally:
        if args.keep:
            print(f"tree and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
