"""Bytes per sample of lunlat's series in the stores a fleet ships to: VictoriaMetrics and Prometheus' TSDB.

    .venv/bin/python bench/fleet_bytes_per_sample.py [--luns 20] [--hours 24] [--no-recorded]

One host's day, as the stores would get it: a fake host (tests/support/fake_host) of N multipath LUNs with
two paths each, labelled data and log of two databases in the config; a simulated OLTP day in 15 s
steps (per LUN reads and writes drawn around a diurnal rate, service times lognormal around
0.5 ms, the paths sharing their map's I/O). After each step the real `lunlat serve` is scraped and
every sample of its exposition is stamped with the step's time, as a scrape would. The day is
then loaded into
- VictoriaMetrics (Debian `victoria-metrics`): /api/v1/import, flushed and merged, then its own
  `vm_data_size_bytes` / `vm_rows` of the data parts (the inverted index is reported apart);
- Prometheus' TSDB (Debian `promtool`): `promtool tsdb create-blocks-from openmetrics`, then the
  blocks' chunk bytes / `numSamples` (index apart; 2-hour blocks, as the head writes them before
  compaction);
- unless --no-recorded, vmalert (Debian `victoria-metrics`) replays the recording rules of
  alerts/lunlat.rules.yml over the day into VictoriaMetrics at a 15 s interval; the recorded series
  are measured as the growth.

Prints series per LUN and per host, samples and bytes per sample per store; asserts nothing.
Counters drawn at random compress worse than a quiet LUN's, so this is the busy end.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's tests/ helpers

from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.support.fake_host import FakeHost

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "alerts" / "lunlat.rules.yml"
STEP_S = 15
SECTORS_PER_IO = 16  # 8 KiB
HOST = "db01"
# `name{labels}` and value of an exposition line (lunlat writes no timestamps).
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(slots=True)
class Series:
    name: str
    labels: dict[str, str]
    timestamps: list[int]  # ms
    values: list[str]


@dataclass(frozen=True, slots=True)
class Size:
    data_bytes: int
    index_bytes: int
    samples: int

    def per_sample(self) -> float:
        return self.data_bytes / self.samples if self.samples else math.nan


# --- one host's day ------------------------------------------------------------------------------


def build_host(root: Path, luns: int) -> tuple[FakeHost, list[tuple[str, list[str]]], Path]:
    """N multipath maps of two paths; the config names half the LUNs data and half log of two
    databases. Returns the host, (map, paths) pairs and the exporter's config file."""
    host = FakeHost(root)
    maps: list[tuple[str, list[str]]] = []
    entries = []
    for n in range(luns):
        paths = [host.add_scsi_disk(f"p{n}x{i}", wwid=f"naa.600a0980383030{n:018x}") for i in range(2)]
        alias = f"lun{n:03d}"
        host.add_multipath(f"dm-{n}", alias=alias, wwid=f"3600a0980383030{n:018x}", paths=paths)
        maps.append((f"dm-{n}", paths))
        role = "data" if n % 2 == 0 else "log"
        entries.append(
            {"match": {"alias": alias}, "database": f"DB{n % 4 // 2}", "role": role, "workload": "oltp"}
        )
    host.write()
    config = root / "lunlat.yaml"
    config.write_text(yaml.safe_dump({"luns": entries}), encoding="utf-8")
    return host, maps, config


def advance(host: FakeHost, maps: list[tuple[str, list[str]]], rng: random.Random, t: float) -> None:
    """One step of I/O on every LUN: a diurnal OLTP rate (peak mid-day), reads 3:1 over writes."""
    day = 0.55 + 0.45 * math.sin(2 * math.pi * (t % 86400) / 86400 - math.pi / 2)
    for dm, paths in maps:
        iops = 400 * day * rng.lognormvariate(0, 0.2)
        reads = int(rng.gauss(0.75 * iops * STEP_S, math.sqrt(iops * STEP_S)))
        writes = int(rng.gauss(0.25 * iops * STEP_S, math.sqrt(iops * STEP_S / 3)))
        reads, writes = max(reads, 0), max(writes, 0)
        read_ms = int(reads * 0.5 * rng.lognormvariate(0, 0.25))
        write_ms = int(writes * 0.6 * rng.lognormvariate(0, 0.25))
        busy_ms = min(STEP_S * 1000, (read_ms + write_ms) // 2)
        shares = [(reads // 2, writes // 2, read_ms // 2, write_ms // 2)] * 2
        for name, (r, w, rms, wms) in [
            (dm, (reads, writes, read_ms, write_ms)),
            *zip(paths, shares, strict=True),
        ]:
            old = host.stats[name]
            host.stats[name] = replace(
                old,
                reads=old.reads + r,
                read_sectors=old.read_sectors + SECTORS_PER_IO * r,
                read_ms=old.read_ms + rms,
                writes=old.writes + w,
                writes_merged=old.writes_merged + w // 20,
                write_sectors=old.write_sectors + SECTORS_PER_IO * w,
                write_ms=old.write_ms + wms,
                in_flight=rng.randint(0, 3),
                io_ms=old.io_ms + busy_ms,
                weighted_ms=old.weighted_ms + rms + wms,
                flushes=old.flushes + w // 50,
            )
    host.write()


def record_day(
    exporter: ExporterProcess, host: FakeHost, maps: list[tuple[str, list[str]]], hours: float
) -> dict[str, Series]:
    rng = random.Random(7)
    end = int(time.time()) // STEP_S * STEP_S
    steps = int(hours * 3600 / STEP_S)
    series: dict[str, Series] = {}
    for step in range(steps):
        t = end - (steps - 1 - step) * STEP_S
        advance(host, maps, rng, t)
        for line in exporter.scrape().text.splitlines():
            if not line or line.startswith("#"):
                continue
            match = SAMPLE.match(line)
            if match is None:
                raise SystemExit(f"unexpected exposition line: {line!r}")
            name, labels, value = match.groups()
            key = f"{name}{labels or ''}"
            entry = series.get(key)
            if entry is None:
                parsed = {
                    k: bytes(v, "utf-8").decode("unicode_escape") for k, v in LABEL.findall(labels or "")
                }
                entry = series[key] = Series(name, {**parsed, "job": "lunlat", "instance": HOST}, [], [])
            entry.timestamps.append(t * 1000)
            entry.values.append(value)
    return series


# --- VictoriaMetrics -------------------------------------------------------------------------------


def http(url: str, data: bytes | None = None) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=600) as response:  # noqa: S310 - loopback
        return bytes(response.read())


def vm_metrics(base: str) -> dict[str, float]:
    """VictoriaMetrics' own storage metrics, by `name{type}`."""
    found: dict[str, float] = {}
    for line in http(f"{base}/metrics").decode().splitlines():
        match = re.match(
            r'^(vm_data_size_bytes|vm_rows|vm_active_merges|vm_pending_rows)\{type="([^"]+)"\} (\S+)$', line
        )
        if match:
            found[f"{match[1]}{{{match[2]}}}"] = float(match[3])
    return found


def vm_size(base: str) -> Size:
    """Flush, merge until idle, then the data parts' bytes and rows (the index apart)."""
    http(f"{base}/internal/force_flush")
    http(f"{base}/internal/force_merge")
    for _ in range(600):
        metrics = vm_metrics(base)
        busy = sum(v for k, v in metrics.items() if k.startswith(("vm_active_merges", "vm_pending_rows")))
        if busy == 0:
            break
        time.sleep(1)
    parts = ("storage/inmemory", "storage/small", "storage/big")
    return Size(
        data_bytes=int(sum(metrics.get(f"vm_data_size_bytes{{{p}}}", 0) for p in parts)),
        index_bytes=int(sum(v for k, v in metrics.items() if k.startswith("vm_data_size_bytes{indexdb"))),
        samples=int(sum(metrics.get(f"vm_rows{{{p}}}", 0) for p in parts)),
    )


def vm_import(base: str, series: dict[str, Series]) -> None:
    lines = (
        json.dumps(
            {
                "metric": {"__name__": s.name, **s.labels},
                "values": [float(v) for v in s.values],
                "timestamps": s.timestamps,
            }
        )
        for s in series.values()
    )
    http(f"{base}/api/v1/import", "\n".join(lines).encode())


def vmalert_replay(base: str, start_ms: int, end_ms: int, workdir: Path) -> None:
    iso = [datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for ms in (start_ms, end_ms)]
    # Recording rules only: the alerts' annotation templates call `query`, which vmalert refuses in
    # replay mode, and ALERTS series exist only while something fires.
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    for group in groups:
        group["rules"] = [rule for rule in group["rules"] if "record" in rule]
    rules = workdir / "recording.rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [g for g in groups if g["rules"]]}), encoding="utf-8")
    log = workdir / "vmalert.log"
    with log.open("wb") as out:
        done = subprocess.run(
            [
                "vmalert",
                f"-rule={rules}",
                f"-datasource.url={base}",
                f"-remoteWrite.url={base}",
                f"-evaluationInterval={STEP_S}s",
                # The replay's range queries step by this (vmalert's default is 5m): one point per
                # evaluation, as a running vmalert would write.
                f"-datasource.queryStep={STEP_S}s",
                f"-replay.timeFrom={iso[0]}",
                f"-replay.timeTo={iso[1]}",
                # lunlat's rules read what the previous ones recorded: written within a second,
                # searchable in VictoriaMetrics a second later, before the next rule's queries.
                "-remoteWrite.flushInterval=1s",
                "-replay.rulesDelay=3s",
                f"-httpListenAddr={LOOPBACK}:0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=3600,
            check=False,
        )
    if done.returncode != 0:
        errors = [line for line in log.read_text(errors="replace").splitlines() if "error" in line.lower()]
        raise SystemExit(
            f"vmalert's replay failed ({done.returncode}): " + "\n".join(e[-400:] for e in errors[-3:])
        )


def replay_rules(base: str, series: dict[str, Series], workdir: Path) -> Size:
    """vmalert's replay of the recording rules over the recorded day; the store's size after it."""
    first = min(s.timestamps[0] for s in series.values())
    last = max(s.timestamps[-1] for s in series.values())
    vmalert_replay(base, first, last, workdir)
    return vm_size(base)


def vm_export(base: str, match: str) -> dict[str, Series]:
    """The matching series with every sample, from VictoriaMetrics' /api/v1/export."""
    found: dict[str, Series] = {}
    for line in http(f"{base}/api/v1/export?{urllib.parse.urlencode({'match[]': match})}").splitlines():
        row = json.loads(line)
        labels = dict(row["metric"])
        name = labels.pop("__name__")
        key = json.dumps([name, sorted(labels.items())])
        found[key] = Series(name, labels, list(row["timestamps"]), [repr(float(v)) for v in row["values"]])
    return found


# --- Prometheus' TSDB ------------------------------------------------------------------------------


def openmetrics(series: dict[str, Series]) -> Iterator[str]:
    """The day as OpenMetrics, each family's series together (the format's rule), no metadata."""
    for s in sorted(series.values(), key=lambda s: s.name):
        labels = ",".join(f'{k}="{json.dumps(v)[1:-1]}"' for k, v in sorted(s.labels.items()))
        for ts, value in zip(s.timestamps, s.values, strict=True):
            yield f"{s.name}{{{labels}}} {value} {ts / 1000:.3f}\n"
    yield "# EOF\n"


def prometheus_size(series: dict[str, Series], workdir: Path) -> Size:
    workdir.mkdir(parents=True)
    source = workdir / "day.om"
    with source.open("w", encoding="utf-8") as out:
        out.writelines(openmetrics(series))
    blocks = workdir / "tsdb"
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(blocks)],
        check=True,
        capture_output=True,
        timeout=3600,
    )
    data = index = samples = 0
    for meta in blocks.glob("*/meta.json"):
        samples += json.loads(meta.read_text())["stats"]["numSamples"]
        data += sum(f.stat().st_size for f in (meta.parent / "chunks").iterdir())
        index += (meta.parent / "index").stat().st_size
    return Size(data, index, samples)


# --- report ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--luns", type=int, default=20, help="multipath LUNs of the host (default 20)")
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours (default 24)")
    parser.add_argument("--no-recorded", action="store_true", help="skip vmalert's replay of the rules")
    args = parser.parse_args()
    missing = [b for b in ("victoria-metrics", "vmalert", "promtool") if shutil.which(b) is None]
    if missing:
        print(
            f"cannot run: missing {', '.join(missing)} (Debian: victoria-metrics, prometheus)",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="lunlat-bytes-") as tmp:
        workdir = Path(tmp)
        host, maps, config = build_host(workdir / "host", args.luns)
        exporter = ExporterProcess(
            lunlat_serve(
                f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}", f"--config.file={config}"
            ),
            workdir / "lunlat.log",
            port_pattern=LUNLAT_PORT,
        )
        with exporter:
            began = time.monotonic()
            series = record_day(exporter, host, maps, args.hours)
        samples = sum(len(s.values) for s in series.values())
        lunlat_series = [s for s in series.values() if s.name.startswith("lunlat_")]
        device_series = [s for s in lunlat_series if "lun" in s.labels]
        print(
            f"simulated {args.hours:g} h of {args.luns} LUNs ({args.luns * 3} devices with paths) in {time.monotonic() - began:.0f} s"
        )
        print(
            f"series: {len(series)} in all, {len(lunlat_series)} lunlat_*, {len(device_series) / args.luns:.1f} per LUN; {samples:,} samples"
        )

        vm = ExporterProcess(
            [
                "victoria-metrics",
                f"-storageDataPath={workdir / 'vm'}",
                f"-httpListenAddr={LOOPBACK}:0",
                "-retentionPeriod=1y",
            ],
            workdir / "vm.log",
            name="victoria-metrics",
            start_timeout=60.0,
        )
        with vm:
            base = f"http://{LOOPBACK}:{vm.port}"
            vm_import(base, series)
            rows = [("VictoriaMetrics, raw", vm_size(base))]
            recorded: dict[str, Series] = {}
            if not args.no_recorded:
                rows.append(("VictoriaMetrics, raw + recorded", replay_rules(base, series, workdir)))
                recorded = vm_export(base, '{__name__=~"lunlat:.+"}')
                print(f"recorded series: {len(recorded)}, {len(recorded) / args.luns:.1f} per LUN")
        rows.append(("Prometheus TSDB (2 h blocks), raw", prometheus_size(series, workdir / "raw")))
        if recorded:
            rows.append(
                ("Prometheus TSDB (2 h blocks), recorded", prometheus_size(recorded, workdir / "recorded"))
            )
    if len(rows) > 2:  # the recorded series in VictoriaMetrics: what the replay added
        raw, both = rows[0][1], rows[1][1]
        rows[1] = (
            "VictoriaMetrics, recorded",
            Size(
                both.data_bytes - raw.data_bytes,
                both.index_bytes - raw.index_bytes,
                both.samples - raw.samples,
            ),
        )
    print(f"\n{'store':<42} {'samples':>12} {'data bytes':>12} {'bytes/sample':>13} {'index bytes':>12}")
    for label, size in rows:
        print(
            f"{label:<42} {size.samples:>12,} {size.data_bytes:>12,} {size.per_sample():>13.2f} {size.index_bytes:>12,}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
