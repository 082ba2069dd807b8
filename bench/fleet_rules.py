"""What lunlat's rules cost a real Prometheus at fleet scale, beside node-mixin's disk rules.

    .venv/bin/python bench/fleet_rules.py [--hosts 50 200] [--minutes 2] [--prometheus BIN ...] [--keep]
    .venv/bin/python bench/fleet_rules.py --rules before.rules.yml alerts/lunlat.rules.yml --no-baseline

A fake fleet (bench/fakefleet.py: every host a captured real `lunlat serve` exposition of 20
multipath LUNs, and node_exporter's view of the same devices, counters advancing at ~400 IOPS per
LUN, one slow LUN on 10 % of the hosts) is scraped by a real Prometheus at 15 s, evaluating at 15 s.
For each fleet size and each peer, one Prometheus:

1. without rules: until every target is up, then `--idle` seconds measured;
2. the peer's rules loaded (config rewritten, SIGHUP), `--warm-up` seconds let pass (the first
   evaluations create every recorded series), then `--minutes` measured.

Peers: `lunlat` (job "lunlat", alerts/lunlat.rules.yml as generated) and `node-mixin` (job "node",
node_exporter's diskstats collector, bench/node-mixin-disk.rules.yml). Prints per size: raw and
recorded series per LUN, Prometheus CPU per minute without and with rules, rule CPU per
LUN-minute, each group's median and max evaluation time, missed evaluations, Prometheus RSS, and
lunlat's ratio to node-mixin, and the rules that took the most evaluation time. `--rules` runs
several lunlat rule files in turn over the same fleet (a change measured against what it replaces,
back to back); the ratio is then the first file's to the last's. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's tests/ helpers

import fakefleet
from fakefleet import Capture, FleetServer

from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, ExporterProcess, scrape

ROOT = Path(__file__).resolve().parents[1]
INTERVAL_S = 15
NODE_MIXIN_RULES = Path(__file__).resolve().parent / "node-mixin-disk.rules.yml"
TOP_RULES = 12  # how many of the slowest rules are named
POLL_S = 3.0  # well under the 15 s interval: every evaluation's (timestamp, duration) is seen
NODE_EXPORTER_NAMES = ("prometheus-node-exporter", "node_exporter")


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    job: str  # the job the rules select on
    path: str  # the fleet server's view
    rules: Path


LUNLAT = Peer("lunlat", "lunlat", "/lunlat", prometheus_server.RULES)
NODE_MIXIN = Peer("node-mixin", "node", "/node", NODE_MIXIN_RULES)


# --- Prometheus' own metrics ----------------------------------------------------------------------

# The rule manager's metrics (prometheus/prometheus v2.42.0, rules/manager.go, NewGroupMetrics):
# prometheus_rule_group_last_duration_seconds is the wall time of the group's last evaluation
# (time.Since(start) in Group.run), _last_evaluation_timestamp_seconds its start, and
# _iterations_missed_total counts the intervals skipped because an evaluation overran; each is
# labelled rule_group="<file>;<group>" (GroupKey). process_cpu_seconds_total and
# process_resident_memory_bytes are client_golang's process collector, v1.14.0 in Prometheus 2.42
# (prometheus/process_collector_other.go: procfs' stat.CPUTime(), user + system time, and
# stat.ResidentMemory(), from /proc/self/stat).
OWN = re.compile(
    r"^(process_cpu_seconds_total|process_resident_memory_bytes"
    r"|prometheus_rule_group_(?:last_duration_seconds|last_evaluation_timestamp_seconds"
    r"|iterations_missed_total|iterations_total)"
    r"|prometheus_rule_evaluation_failures_total)"
    r'(?:\{rule_group="[^"]*;([^"]*)"\})? (\S+)$',
    re.M,
)


@dataclass(frozen=True, slots=True)
class Own:
    """One reading of Prometheus' /metrics: process figures, and per rule group."""

    at: float
    cpu: float
    rss: float
    groups: dict[str, dict[str, float]]  # group -> metric -> value


def read_own(process: ExporterProcess) -> Own:
    text = scrape(process.port, "/metrics", timeout=30).text
    top: dict[str, float] = {}
    groups: dict[str, dict[str, float]] = {}
    for name, group, value in OWN.findall(text):
        if group:
            groups.setdefault(group, {})[name] = float(value)
        else:
            top[name] = float(value)
    return Own(
        time.time(),
        top["process_cpu_seconds_total"],
        top["process_resident_memory_bytes"],
        groups,
    )


def group_delta(before: Own, after: Own, metric: str) -> dict[str, float]:
    return {
        g: m.get(metric, 0.0) - before.groups.get(g, {}).get(metric, 0.0) for g, m in after.groups.items()
    }


# --- one Prometheus, one peer ---------------------------------------------------------------------


@dataclass
class Result:
    peer: str
    hosts: int
    luns: int
    devices: int  # what the peer's series are per: LUNs for lunlat, node_exporter's devices for node
    raw_samples: float = 0.0  # scraped per round (sum of scrape_samples_scraped), all targets
    recorded: float = 0.0
    cpu_idle: float = 0.0  # Prometheus CPU seconds per second, without rules
    cpu_rules: float = 0.0  # with rules
    rss_idle: float = 0.0
    rss_rules: float = 0.0
    durations: dict[str, list[float]] = field(default_factory=dict)  # group -> evaluation times (s)
    # (group, rule) -> evaluation times (s), one per evaluation seen (the rules API's own figure)
    rule_times: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    missed: dict[str, float] = field(default_factory=dict)  # in the measured window
    missed_since_load: dict[str, float] = field(default_factory=dict)
    failures: float = 0.0
    window_s: float = 0.0
    max_scrape_s: float = 0.0
    firing: dict[str, int] = field(default_factory=dict)

    def rule_cpu_ms_per_lun_minute(self) -> float:
        return (self.cpu_rules - self.cpu_idle) * 60 * 1000 / self.luns

    def rule_cpu_ms_per_device_minute(self) -> float:
        return self.rule_cpu_ms_per_lun_minute() * self.luns / self.devices

    def rule_time_ms_per_lun_minute(self) -> float:
        """The groups' evaluation wall time, summed, per LUN and minute of the window."""
        total = sum(sum(d) for d in self.durations.values())
        return total / (self.window_s / 60) * 1000 / self.luns if self.window_s else 0.0


def scrape_config(peer: Peer, targets: list[str], port: int) -> dict[str, Any]:
    """One job over the fleet server: each target is a host name, sent as ?host=<name> and kept as
    `instance`. A target's `__param_<name>` labels become its URL's query parameters
    (prometheus/prometheus v2.42.0, scrape/target.go, Target.URL), and `instance` is set to
    `__address__` after relabelling only "if it was not set during relabeling"
    (docs/configuration/configuration.md, <relabel_config>, same tag); `__address__` is then
    pointed at the server."""
    return {
        "job_name": peer.job,
        "metrics_path": peer.path,
        "static_configs": [{"targets": targets}],
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_host"},
            {"source_labels": ["__address__"], "target_label": "instance"},
            {"target_label": "__address__", "replacement": f"{LOOPBACK}:{port}"},
        ],
    }


def config(peer: Peer, targets: list[str], port: int, rules: bool) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": f"{INTERVAL_S}s", "evaluation_interval": f"{INTERVAL_S}s"},
        "rule_files": [str(peer.rules)] if rules else [],
        "scrape_configs": [scrape_config(peer, targets, port)],
    }


def record_names(rules: Path) -> list[str]:
    groups = yaml.safe_load(rules.read_text(encoding="utf-8"))["groups"]
    return sorted({r["record"] for g in groups for r in g["rules"] if "record" in r})


def wait_up(api: prometheus_server.PromApi, job: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        up = api.query(f'count(up{{job="{job}"}} == 1)')
        if up and int(float(up[0]["value"][1])) >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{job}: not every one of {count} targets up after {timeout:g}s")
        time.sleep(1)


def wait_rules(api: prometheus_server.PromApi, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not api.rule_groups():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rules not loaded {timeout:g}s after SIGHUP")
        time.sleep(0.5)


# Each rule's own last evaluation: the rules API gives every rule its `evaluationTime` (seconds, the
# wall time of its last evaluation) and `lastEvaluation` (when it began), beside the group's
# (prometheus/prometheus v2.42.0, web/api/v1/api.go: recordingRule and AlertingRule;
# docs/querying/api.md, "Rules"). A rule is named by its group, its name and its position in the
# group, as one name may be recorded by several rules (one per layer, per op).
def read_rule_times(
    api: prometheus_server.PromApi, since: float, seen: dict[tuple[str, str], dict[str, float]]
) -> None:
    for group in api.rule_groups():
        for index, rule in enumerate(group["rules"]):
            began = rule.get("lastEvaluation", "")
            if not began or began.startswith("0001-"):
                continue
            if _rfc3339(began) < since:
                continue
            key = (group["name"], f"{index:02d} {rule['name']}")
            seen.setdefault(key, {})[began] = float(rule.get("evaluationTime", 0.0))


def _rfc3339(text: str) -> float:
    """Seconds since the epoch of Prometheus' RFC 3339 timestamps (nanoseconds cut to micro)."""
    head, _, rest = text.partition(".")
    zone = rest.lstrip("0123456789") if rest else head[19:]
    fraction = rest[: len(rest) - len(zone)][:6] or "0"
    stamp = head[:19] + "." + fraction + (zone.replace("Z", "+00:00") or "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def scalar(api: prometheus_server.PromApi, promql: str) -> float:
    found = api.query(promql)
    return float(found[0]["value"][1]) if found else 0.0


def watch(
    process: ExporterProcess, api: prometheus_server.PromApi, start: Own, seconds: float, per_rule: bool
) -> tuple[Own, float, dict[str, dict[float, float]], dict[tuple[str, str], dict[str, float]]]:
    """Read /metrics every POLL_S for `seconds` from `start`: the last reading, the peak RSS, each
    group's evaluations that began in the window (start -> duration) and, with `per_rule`, each
    rule's (read from the rules API, which costs Prometheus a little CPU of its own)."""
    end_at = start.at + seconds
    seen: dict[str, dict[float, float]] = {}
    rule_seen: dict[tuple[str, str], dict[str, float]] = {}
    peak = start.rss
    last = start
    while True:
        last = read_own(process)
        peak = max(peak, last.rss)
        for group, metrics in last.groups.items():
            ts = metrics.get("prometheus_rule_group_last_evaluation_timestamp_seconds", 0.0)
            if ts >= start.at:  # evaluations that began inside the window
                seen.setdefault(group, {})[ts] = metrics["prometheus_rule_group_last_duration_seconds"]
        if per_rule:
            read_rule_times(api, start.at, rule_seen)
        if last.at >= end_at:
            return last, peak, seen, rule_seen
        time.sleep(min(POLL_S, max(0.0, end_at - time.time())))


def profile_in_background(base: str, seconds: float, into: Path | None, name: str) -> threading.Thread | None:
    """Where the rules' CPU goes: Prometheus' Go CPU profile over the measured window, from its
    `/debug/pprof/profile?seconds=N` (net/http/pprof, which Prometheus' web handler serves:
    prometheus/prometheus v2.42.0, web/web.go, `router.Get("/debug/*subpath", serveDebug)`),
    written to INTO/NAME.pprof for `go tool pprof -top`."""
    if into is None:
        return None
    into.mkdir(parents=True, exist_ok=True)
    url = f"{base}/debug/pprof/profile?seconds={int(seconds)}"

    def fetch() -> None:
        with urllib.request.urlopen(url, timeout=seconds + 60) as response:  # noqa: S310 - loopback
            (into / f"{name}.pprof").write_bytes(response.read())

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    return thread


def run_peer(
    peer: Peer,
    server: str,
    fleet: FleetServer,
    hosts: int,
    cap: Capture,
    workdir: Path,
    args: argparse.Namespace,
) -> Result:
    targets = list(fakefleet.host_names(hosts))
    devices = cap.node_devices if peer is NODE_MIXIN else cap.lunlat_devices
    result = Result(peer.name, hosts, hosts * cap.lunlat_devices, hosts * devices)
    cfg = config(peer, targets, fleet.port, rules=False)
    process = prometheus_server.start(workdir, cfg, server)
    try:
        api = prometheus_server.api(process)
        wait_up(api, peer.job, hosts, timeout=4 * INTERVAL_S)
        before = read_own(process)
        time.sleep(args.idle)
        after = read_own(process)
        result.cpu_idle = (after.cpu - before.cpu) / (after.at - before.at)
        result.rss_idle = after.rss
        result.raw_samples = scalar(api, f'sum(scrape_samples_scraped{{job="{peer.job}"}})')

        # Rules on: the same file rewritten, and SIGHUP, Prometheus' reload signal ("The rule files
        # can be reloaded at runtime by sending SIGHUP": docs/configuration/recording_rules.md, v2.42.0).
        path = workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config(peer, targets, fleet.port, rules=True), sort_keys=False))
        os.kill(process.pid, signal.SIGHUP)
        wait_rules(api)
        loaded = read_own(process)
        time.sleep(args.warm_up)
        start = read_own(process)
        profiler = profile_in_background(api.base, args.minutes * 60, args.profile, workdir.name)
        last, peak, seen, rule_seen = watch(process, api, start, args.minutes * 60, args.per_rule)
        if profiler:
            profiler.join()
        result.window_s = last.at - start.at
        result.cpu_rules = (last.cpu - start.cpu) / result.window_s
        result.rss_rules = peak
        result.durations = {g: list(d.values()) for g, d in seen.items()}
        result.rule_times = {k: list(d.values()) for k, d in rule_seen.items()}
        result.missed = group_delta(start, last, "prometheus_rule_group_iterations_missed_total")
        result.missed_since_load = group_delta(loaded, last, "prometheus_rule_group_iterations_missed_total")
        result.failures = sum(group_delta(start, last, "prometheus_rule_evaluation_failures_total").values())
        names = "|".join(record_names(peer.rules))
        result.recorded = scalar(api, f'count({{__name__=~"{names}"}})')
        result.max_scrape_s = scalar(api, f'max(scrape_duration_seconds{{job="{peer.job}"}})')
        result.firing = {
            r["metric"].get("alertname", ""): int(float(r["value"][1]))
            for r in api.query('count by (alertname) (ALERTS{alertstate="firing"})')
        }
    finally:
        process.stop()
    return result


# --- report ---------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


def report(results: list[Result]) -> None:
    """One column per peer; the ratio is the first peer's to the last's (lunlat's to node-mixin's,
    or, with --rules, the first rule file's to the last's)."""
    first, last = results[0], results[-1]
    compared = len(results) > 1
    node = next((r for r in results if r.peer == NODE_MIXIN.name), None)
    print(f"\n== {first.hosts} hosts, {first.luns:,} LUNs", end="")
    print(f" ({node.devices:,} devices in node_exporter's view)" if node else "")
    rows: list[list[str]] = []

    def row(label: str, get: Any, r: Any = None) -> None:
        cells = [label, *(get(x) for x in results)]
        if compared:
            cells.append(ratio(r(first), r(last)) if r else "")
        rows.append(cells)

    row("raw samples per scrape round", lambda x: f"{x.raw_samples:,.0f}")
    row("raw series per LUN", lambda x: f"{x.raw_samples / x.luns:.1f}")
    row("recorded series per LUN", lambda x: f"{x.recorded / x.luns:.1f}")
    row("recorded series per device", lambda x: f"{x.recorded / x.devices:.1f}")
    row(
        "Prometheus CPU s/min, no rules -> rules",
        lambda x: f"{x.cpu_idle * 60:.2f} -> {x.cpu_rules * 60:.2f}",
    )
    row(
        "rule CPU ms per LUN-minute (process CPU, rules - none)",
        lambda x: f"{x.rule_cpu_ms_per_lun_minute():.3f}",
        Result.rule_cpu_ms_per_lun_minute,
    )
    if node:
        row(
            "rule CPU ms per device-minute (node: maps and paths)",
            lambda x: f"{x.rule_cpu_ms_per_device_minute():.3f}",
            Result.rule_cpu_ms_per_device_minute,
        )
    row(
        "rule time ms per LUN-minute (sum of group durations)",
        lambda x: f"{x.rule_time_ms_per_lun_minute():.3f}",
        Result.rule_time_ms_per_lun_minute,
    )
    row("Prometheus RSS, no rules / rules (peak)", lambda x: f"{mib(x.rss_idle)} / {mib(x.rss_rules)}")
    row(
        "missed evaluations in window (since load)",
        lambda x: f"{sum(x.missed.values()):.0f} ({sum(x.missed_since_load.values()):.0f})",
    )
    row("slowest scrape of a host", lambda x: ms(x.max_scrape_s))
    header = ["", *(x.peer for x in results)]
    if compared:
        header.append(f"{first.peer}/{last.peer}")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for cells in [header, *rows]:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    for result in results:
        print(f"{result.peer}: rule groups over {result.window_s:.0f} s (evaluations, median / max, missed)")
        for group, durations in sorted(result.durations.items()):
            print(
                f"  {group:<28} {len(durations):>3}  {ms(statistics.median(durations)):>9} / "
                f"{ms(max(durations)):>9}  {result.missed.get(group, 0):.0f}"
            )
        if result.rule_times:
            total = sum(sum(v) for v in result.rule_times.values())
            slowest = sorted(result.rule_times.items(), key=lambda kv: -sum(kv[1]))[:TOP_RULES]
            print(
                f"  the {len(slowest)} rules that took the most time (median per evaluation, share of all rules' time)"
            )
            for (group, name), times in slowest:
                print(
                    f"    {group:<20} {name:<52} {ms(statistics.median(times)):>9}  {sum(times) / total:6.1%}"
                )
        if result.failures:
            print(f"  rule evaluation failures: {result.failures:.0f}")
        if result.firing:
            print("  firing: " + ", ".join(f"{k} x{v}" for k, v in sorted(result.firing.items())))


# --- main -----------------------------------------------------------------------------------------


def node_exporter_binary(given: str | None) -> str | None:
    for name in (given,) if given else NODE_EXPORTER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def describe(server: str) -> str:
    """The binary and the first line of its --version (a `go install` build prints no version)."""
    out = subprocess.run([server, "--version"], capture_output=True, text=True, check=False)
    first = (out.stdout + out.stderr).splitlines()[:1]
    return f"{server}: {first[0] if first else '?'}"


@contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every child and the temporary tree are cleaned up."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--hosts", type=int, nargs="+", default=[50, 200], help="fleet sizes (default 50 200)"
    )
    parser.add_argument(
        "--minutes", type=float, default=2.0, help="measured minutes with rules, per peer (default 2)"
    )
    parser.add_argument(
        "--idle", type=float, default=45.0, help="measured seconds without rules (default 45)"
    )
    parser.add_argument(
        "--warm-up", type=float, default=30.0, help="seconds after loading the rules, unmeasured (default 30)"
    )
    parser.add_argument(
        "--prometheus",
        nargs="+",
        default=[prometheus_server.PROMETHEUS],
        help="Prometheus server binaries, each run in turn (default: Debian's prometheus)",
    )
    parser.add_argument(
        "--node-exporter", help="node_exporter binary (default: prometheus-node-exporter or node_exporter)"
    )
    parser.add_argument("--no-baseline", action="store_true", help="lunlat only, no node-mixin peer")
    parser.add_argument(
        "--histograms",
        action="store_true",
        help="every lunlat host also serves the per-I/O histogram of each device (--collector.biolatency)",
    )
    parser.add_argument(
        "--per-rule",
        action="store_true",
        help="also read each rule's evaluation time (rules API, every poll) and name the slowest",
    )
    parser.add_argument(
        "--rules",
        type=Path,
        nargs="+",
        help="lunlat rule files, each run in turn over the same fleet (default: alerts/lunlat.rules.yml)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="write Prometheus' Go CPU profile of each measured window into this directory",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the working directory (TSDBs, logs), path printed"
    )
    args = parser.parse_args(argv)
    if min(args.hosts) < 1 or args.minutes <= 0 or args.idle <= 0 or args.warm_up < 0:
        parser.error("--hosts must be >= 1, --minutes and --idle > 0, --warm-up >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    servers = [shutil.which(s) or s for s in args.prometheus]
    missing = [s for s in [*servers, *map(str, args.rules or [])] if not Path(s).is_file()]
    node_bin = None if args.no_baseline else node_exporter_binary(args.node_exporter)
    if missing or (not args.no_baseline and node_bin is None):
        print(
            f"cannot run: missing {', '.join(missing) or 'node_exporter (Debian: prometheus-node-exporter)'}",
            file=sys.stderr,
        )
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="lunlat-fleet-"))
    try:
        with terminated_as_interrupt():
            cap = fakefleet.capture(workdir / "capture", node_bin, args.histograms)
            print(
                f"{os.cpu_count()} cores; per host: lunlat {cap.lunlat.samples} samples "
                f"({cap.lunlat.counters} advancing) for {cap.lunlat_devices} LUNs"
                + (
                    f", node_exporter {cap.node.samples} ({cap.node.counters} advancing) for {cap.node_devices} devices"
                    if cap.node
                    else ""
                )
            )
            print("load average before: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
            lunlats = (
                [Peer(f"lunlat:{r.name}", LUNLAT.job, LUNLAT.path, r.resolve()) for r in args.rules]
                if args.rules
                else [LUNLAT]
            )
            peers = lunlats if args.no_baseline else [*lunlats, NODE_MIXIN]
            with FleetServer(cap, max(args.hosts)) as fleet:
                for server in servers:
                    print(f"Prometheus: {describe(server)}")
                    for hosts in args.hosts:
                        results = []
                        for peer in peers:
                            began = time.monotonic()
                            results.append(
                                run_peer(
                                    peer,
                                    server,
                                    fleet,
                                    hosts,
                                    cap,
                                    workdir / f"{Path(server).name}-{hosts}-{peer.name}",
                                    args,
                                )
                            )
                            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                            print(
                                f"  {peer.name} at {hosts} hosts: {time.monotonic() - began:.0f} s, "
                                f"load average after {load}",
                                flush=True,
                            )
                        report(results)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
