"""The fake fleet of `fleet_rules.py`: N database hosts served by one HTTP server, each host a real
`lunlat serve` exposition (and a real node_exporter one of the same devices) whose counters advance.

Capture, once: a synthetic host (tests/support/fake_host) of 20 multipath LUNs, each a map over 4 SCSI paths
(two HBAs times two array ports, the layout of `scrape_vs_node_exporter.py`), labelled by a `luns:`
config as data and log of two databases, as the lab's deploy/lab/lunlat.yaml labels its LUNs. The
real `lunlat serve` and the real node_exporter (diskstats collector only) run on that tree and are
scraped at three states of its /proc/diskstats:

    S0  30 days of I/O at the normal rates;
    S1  S0 + 10 minutes at the normal rates;
    S2  S1 + 10 minutes with one data LUN slow (3 ms reads, 1.5 ms writes: above the 1 ms goal).

Each exposition becomes a template: its lines verbatim, and for every sample of a counter family
the value at S2 and two per-second rates, (S1 - S0) / 600 and (S2 - S1) / 600. Gauges keep their S2
value. No metric name is interpreted: whatever the exporters expose is served, so the fleet changes
with them.

With `histograms`, each lunlat scrape also carries the per-I/O histogram (--collector.biolatency)
of every device it shows: the biolatency source reads the real kernel's block tracepoints, never
this tree, so its counters are made here, each period's I/Os in the bucket of that period's
latency, and rendered by the exporter's own code (sources/biolatency.families, exposition.render),
so the series are the ones a host with the histogram serves.

Serving, for host h at wall time t: value = value(S2) + rate_h * tau_h(t), where rate_h is the
slow rates on every 10th host and the normal ones elsewhere, scaled by a host factor in [0.8, 1.2],
and tau_h(t) = offset_h + (t - t0) + A sin(2 pi (t - t0) / P + phi_h): time with a host offset and a
5-minute swing of the IOPS (+-42 %; the slope stays above 0, so counters never go down). Reads and
service times scale together, so a LUN's latency is its captured one.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import random
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's tests/ helpers

from scrape_vs_node_exporter import SD_MAJORS, sd_name

from lunlat import exposition, ground
from lunlat.sources import biolatency
from lunlat.sources.published import PublishedDevice
from tests.support.exporter_process import (
    LOOPBACK,
    LUNLAT_PORT,
    NODE_EXPORTER_PORT,
    ExporterProcess,
    Scrape,
    lunlat_serve,
)
from tests.support.fake_host import FakeHost, Stats

LUNS = 20
PATHS_PER_LUN = 4
SLOW_LUN = 3  # a data LUN of the first database
SLOW_EVERY = 10  # every 10th host has the slow LUN: 10 % of the fleet
CAPTURE_STEP_S = 600  # long enough that the counters' integer rounding is negligible in a rate
HISTORY_S = 30 * 86400
SWING_S, SWING_PERIOD_S = 20.0, 300.0  # slope of tau: 1 +- 2 pi 20 / 300 = 1 +- 0.42

# Per LUN: total IOPS, read share, I/O size, read and write service time (ms). 400 IOPS each, an
# OLTP data LUN 70 % reads of 8 KiB; a log LUN writes 16 KiB, and reads only at backup time.
IOPS = 400
DATA = (0.70, 8192, 0.5, 0.3)
LOG = (0.02, 16384, 0.5, 0.25)
SLOW_MS = (3.0, 1.5)
# "the standard UNIX 512-byte sectors" (kernel Documentation/block/stat.rst, read sectors), the
# same fields as /proc/diskstats' (Documentation/admin-guide/iostats.rst)
SECTOR = 512

# `name{labels} value` of the text format; neither exporter writes timestamps.
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$")
TYPE = re.compile(r"^# TYPE (\S+) (\S+)$", re.M)
# The devices a lunlat exposition shows: its read counter's labels (ground.DEVICE_LABELS).
DEVICE_SERIES = re.compile(r"^lunlat_device_reads_completed_total\{([^}]*)\}", re.M)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


# --- the synthetic host ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lun:
    dm: str
    alias: str
    paths: tuple[str, ...]
    database: str
    role: str


def build_host(root: Path) -> tuple[FakeHost, list[Lun], Path]:
    """The host's tree, its LUNs and the exporter's `luns:` config. Two databases (an Oracle and a
    SQL Server) of 8 data and 2 log LUNs each."""
    host = FakeHost(root / "host")
    luns: list[Lun] = []
    entries = []
    for n in range(LUNS):
        wwid = f"600a0980383030{n:018x}"
        paths = []
        for i in range(PATHS_PER_LUN):
            index = n * PATHS_PER_LUN + i  # the sd driver's numbering: 16 disks per major
            dev = f"{SD_MAJORS[index // 16]}:{index % 16 * 16}"
            paths.append(host.add_scsi_disk(sd_name(index), wwid=f"naa.{wwid}", dev=dev))
        alias = f"mpath{n:02d}"
        host.add_multipath(f"dm-{n}", alias=alias, wwid=f"3{wwid}", paths=paths)
        database = "Oracle PRD" if n < LUNS // 2 else "SQL Server PRD"
        role = "log" if n % (LUNS // 2) >= 8 else "data"
        luns.append(Lun(f"dm-{n}", alias, tuple(paths), database, role))
        entries.append({"match": {"alias": alias}, "database": database, "role": role, "workload": "oltp"})
    for name in host.stats:
        host.stats[name] = Stats()
    write_udev(host, luns, root / "udev")
    config = root / "lunlat.yaml"
    config.write_text(yaml.safe_dump({"luns": entries}, sort_keys=False), encoding="utf-8")
    return host, luns, config


def write_udev(host: FakeHost, luns: list[Lun], udev: Path) -> None:
    """udev's database as node_exporter reads it: one file `b<major>:<minor>` per block device under
    --path.udev.data, its `E:KEY=value` lines the device's properties; node_exporter 1.5 turns
    ID_PATH, ID_WWN, ID_MODEL, ID_SERIAL_SHORT, ID_REVISION into node_disk_info and DM_NAME, DM_UUID
    into node_disk_device_mapper_info (prometheus/node_exporter v1.5.0, collector/diskstats_linux.go,
    getUdevDeviceProperties and the udev* constants)."""
    udev.mkdir(parents=True, exist_ok=True)
    for lun in luns:
        wwid = f"600a0980383030{int(lun.dm[3:]):018x}"
        props = {"DM_NAME": lun.alias, "DM_UUID": f"mpath-3{wwid}"}
        (udev / f"b{host.dev_of(lun.dm)}").write_text("".join(f"E:{k}={v}\n" for k, v in props.items()))
        for i, path in enumerate(lun.paths):
            props = {
                "ID_PATH": f"pci-0000:5e:00.{i % 2}-fc-0x50{i // 2:014x}-lun-{int(lun.dm[3:])}",
                "ID_WWN": f"0x{wwid[:16]}",
                "ID_MODEL": "LUN_C-Mode",
                "ID_SERIAL_SHORT": wwid[8:],
                "ID_REVISION": "9800",
                "DM_MULTIPATH_DEVICE_PATH": "1",
            }
            (udev / f"b{host.dev_of(path)}").write_text("".join(f"E:{k}={v}\n" for k, v in props.items()))


Histograms = dict[biolatency.Key, biolatency.Counters]


def advance(
    host: FakeHost, luns: list[Lun], seconds: int, slow: int | None, histograms: Histograms | None = None
) -> None:
    """`seconds` of I/O on every LUN at its rates (`slow`: that LUN at SLOW_MS), each map's I/O
    spread evenly over its paths, then /proc/diskstats rewritten. Fields as the kernel's
    Documentation/admin-guide/iostats.rst names them (times in ms). `histograms`: the same I/Os
    counted by size class and latency bucket, as the biolatency programs count them."""
    for n, lun in enumerate(luns):
        read_share, size, read_ms, write_ms = DATA if lun.role == "data" else LOG
        if n == slow:
            read_ms, write_ms = SLOW_MS
        reads = round(IOPS * read_share * seconds)
        writes = round(IOPS * (1 - read_share) * seconds)
        r_ms, w_ms = round(reads * read_ms), round(writes * write_ms)
        busy = min(seconds * 1000, round((r_ms + w_ms) * 0.9))  # a little overlap at 400 IOPS
        flushes = writes // 4 if lun.role == "log" else writes // 100
        share = len(lun.paths)
        for name, part in [(lun.dm, 1), *((p, share) for p in lun.paths)]:
            old = host.stats[name]
            host.stats[name] = replace(
                old,
                reads=old.reads + reads // part,
                read_sectors=old.read_sectors + reads // part * size // SECTOR,
                read_ms=old.read_ms + r_ms // part,
                writes=old.writes + writes // part,
                writes_merged=old.writes_merged + writes // part // 20,
                write_sectors=old.write_sectors + writes // part * size // SECTOR,
                write_ms=old.write_ms + w_ms // part,
                in_flight=1,
                io_ms=old.io_ms + busy // part,
                weighted_ms=old.weighted_ms + (r_ms + w_ms) // part,
                flushes=old.flushes + flushes // part,
                flush_ms=old.flush_ms + flushes // part // 10,
            )
            if histograms is not None:
                for op, count, ms in ((0, reads // part, read_ms), (1, writes // part, write_ms)):
                    _count_ios(histograms, host.dev_of(name), op, size, count, ms)
    host.write()


def _count_ios(histograms: Histograms, dev: str, op: int, size: int, count: int, ms: float) -> None:
    """`count` I/Os of `size` bytes at `ms` each, in the bucket the programs would put them (bucket i
    holds [bound i-1, bound i): biolatency's histogram.h), a tenth of their time queued on the host."""
    major, minor = map(int, dev.split(":"))
    size_class = 0 if size <= ground.BIO_SMALL_MAX else 2 if size >= ground.BIO_LARGE_MIN else 1
    key = (biolatency.kernel_dev(major, minor), op, size_class)
    buckets = [0] * biolatency.BUCKETS
    buckets[bisect.bisect_right(ground.BIO_BUCKETS, ms / 1000)] = count
    ns = round(count * ms * 1e6)
    added = biolatency.Counters(tuple(buckets), ns, ns // 10)
    histograms[key] = histograms.get(key, biolatency.Counters()) + added


def histogram_text(scrape_text: str, host: FakeHost, histograms: Histograms) -> str:
    """The histogram families of every device `scrape_text` shows (its read counter's lun and device
    labels), rendered as the exporter renders them."""
    devices = {}
    for text in DEVICE_SERIES.findall(scrape_text):
        labels = dict(LABEL.findall(text))
        major, minor = map(int, host.dev_of(labels["device"]).split(":"))
        devices[(major, minor)] = PublishedDevice(
            labels["lun"],
            labels["device"],
            labels["role"],
            labels["kind"],
            labels["database"],
            labels["workload"],
        )
    return exposition.render(biolatency.families(histograms, devices))


# --- templates ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counter:
    """A sample that advances: its S2 value and per-second rates, normal and on a slow host."""

    prefix: str  # `name{labels} `
    base: float
    normal: float
    slow: float
    # Every captured value was written as a whole number (operations, bytes): served as one. Judged
    # by how the exporter wrote it, not by its value: lunlat writes seconds as milliseconds with an
    # exponent (`362880000e-3`), whole at the capture's round figures but not between them, and a
    # time counter served in whole seconds would move by 0 or 1 between scrapes at 0.07 s/s.
    integral: bool


@dataclass(frozen=True, slots=True)
class Template:
    """One exporter's exposition: literal text between the counters."""

    content_type: str
    parts: tuple[str | Counter, ...]
    samples: int
    counters: int


def counter_families(text: str) -> set[str]:
    """Sample names of counter families: the family's name, plus the _total, _sum, _count, _bucket,
    _created series of counters, summaries and histograms (the text format's TYPE line names the
    family)."""
    names: set[str] = set()
    for match in TYPE.finditer(text):
        if match[2] in {"counter", "summary", "histogram"}:
            base = match[1]
            names |= {base, f"{base}_total", f"{base}_sum", f"{base}_count", f"{base}_bucket"}
    return names


def values(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            found[match[1]] = match[2]
    return found


def template(s0: Scrape, s1: Scrape, s2: Scrape) -> Template:
    """The template of one exporter from its three scrapes (S0, S1, S2)."""
    text = s2.text
    counters = counter_families(text)
    v0, v1 = values(s0.text), values(s1.text)
    parts: list[str | Counter] = []
    literal: list[str] = []
    samples = advancing = 0
    for line in text.splitlines(keepends=True):
        match = SAMPLE.match(line.rstrip("\n"))
        if match is None or line.startswith("#"):
            literal.append(line)
            continue
        samples += 1
        series, value = match[1], match[2]
        name = series.split("{", 1)[0]
        if name not in counters or series not in v0 or series not in v1:
            literal.append(line)
            continue
        a, b, c = float(v0[series]), float(v1[series]), float(value)
        if a == b == c:
            literal.append(line)  # a counter that never moves here (discards, errors)
            continue
        literal.append(f"{series} ")
        parts.append("".join(literal))
        literal = ["\n"]
        integral = all(text.lstrip("-").isdigit() for text in (v0[series], v1[series], value))
        parts.append(Counter(f"{series} ", c, (b - a) / CAPTURE_STEP_S, (c - b) / CAPTURE_STEP_S, integral))
        advancing += 1
    parts.append("".join(literal))
    content_type = s2.headers.get("content-type", "text/plain; version=0.0.4; charset=utf-8")
    return Template(content_type, tuple(parts), samples, advancing)


@dataclass(frozen=True, slots=True)
class Capture:
    lunlat: Template
    node: Template | None  # None when no node_exporter was given
    lunlat_devices: int
    node_devices: int


def capture(workdir: Path, node_exporter: str | None, histograms: bool = False) -> Capture:
    """Build the host, run both exporters on it and scrape them at S0, S1 and S2 (`histograms`:
    lunlat's scrapes with the per-I/O histogram of each device they show)."""
    host, luns, config = build_host(workdir)
    counts: Histograms | None = {} if histograms else None
    advance(host, luns, HISTORY_S, None, counts)
    lunlat = ExporterProcess(
        lunlat_serve(f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}", f"--config.file={config}"),
        workdir / "lunlat.log",
        port_pattern=LUNLAT_PORT,
    )
    node = (
        ExporterProcess(
            [
                node_exporter,
                f"--path.procfs={host.procfs}",
                f"--path.sysfs={host.sysfs}",
                f"--path.udev.data={workdir / 'udev'}",
                "--collector.disable-defaults",
                "--collector.diskstats",
                f"--web.listen-address={LOOPBACK}:0",
            ],
            workdir / "node_exporter.log",
            port_pattern=NODE_EXPORTER_PORT,
            name="node_exporter",
        )
        if node_exporter
        else None
    )
    scrapes: dict[str, list[Scrape]] = {"lunlat": [], "node": []}
    with contextlib.ExitStack() as running:
        exporters = {"lunlat": running.enter_context(lunlat)}
        if node is not None:
            exporters["node"] = running.enter_context(node)
        for slow in (None, None, SLOW_LUN):
            if scrapes["lunlat"]:  # S0 is the history itself; S1 and S2 advance from it
                advance(host, luns, CAPTURE_STEP_S, slow, counts)
            for key, exporter in exporters.items():
                scrapes[key].append(exporter.scrape())
            if counts is not None:
                served = scrapes["lunlat"][-1]
                assert served.headers.get("content-type", "").startswith("text/plain"), served.headers
                extra = histogram_text(served.text, host, counts).encode()
                scrapes["lunlat"][-1] = replace(served, body=served.body + extra)
    node_devices = 0
    if node is not None:
        node_devices = len(
            set(
                re.findall(
                    r'^node_disk_reads_completed_total\{device="([^"]+)"', scrapes["node"][-1].text, re.M
                )
            )
        )
    return Capture(
        template(*scrapes["lunlat"]),
        template(*scrapes["node"]) if node is not None else None,
        len(luns),
        node_devices,
    )


# --- serving --------------------------------------------------------------------------------------


def host_name(index: int) -> str:
    return f"db{index + 1:04d}"


@dataclass(frozen=True, slots=True)
class HostClock:
    """A host's own time, factor and slowness (see the module's docstring)."""

    offset: float
    phase: float
    factor: float
    slow: bool

    def tau(self, elapsed: float) -> float:
        return self.offset + elapsed + SWING_S * math.sin(2 * math.pi * elapsed / SWING_PERIOD_S + self.phase)


def hosts(count: int, seed: int = 41) -> list[HostClock]:
    rng = random.Random(seed)
    return [
        HostClock(
            rng.uniform(0, 86400), rng.uniform(0, 2 * math.pi), rng.uniform(0.8, 1.2), i % SLOW_EVERY == 0
        )
        for i in range(count)
    ]


def render(tpl: Template, clock: HostClock, elapsed: float) -> bytes:
    tau = clock.tau(elapsed)
    out: list[str] = []
    for part in tpl.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value = part.base + (part.slow if clock.slow else part.normal) * clock.factor * tau
        out.append(str(int(value)) if part.integral else repr(value))
    return "".join(out).encode()


class FleetServer:
    """One threaded HTTP server on 127.0.0.1 (a port the kernel picks) answering
    GET /lunlat?host=db0001 and GET /node?host=db0001 for hosts db0001 … dbNNNN."""

    def __init__(self, capture: Capture, count: int) -> None:
        self.capture = capture
        self.clocks = {host_name(i): clock for i, clock in enumerate(hosts(count))}
        self.started = time.time()
        fleet = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                clock = fleet.clocks.get(parse_qs(url.query).get("host", [""])[0])
                tpl = {"/lunlat": fleet.capture.lunlat, "/node": fleet.capture.node}.get(url.path)
                if clock is None or tpl is None:
                    self.send_error(404)
                    return
                body = render(tpl, clock, time.time() - fleet.started)
                self.send_response(200)
                self.send_header("Content-Type", tpl.content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fleet", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def slow_hosts(self, names: Sequence[str]) -> list[str]:
        return [n for n in names if self.clocks[n].slow]

    def __enter__(self) -> FleetServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def host_names(count: int) -> Iterator[str]:
    return (host_name(i) for i in range(count))
