"""Many scrapers at once: lunlat against prometheus-node-exporter on this host.

    python bench/concurrent_scrapes.py [--clients 50 200] [--rounds 5] [--warm-up N] [--devices N]
                                       [--max-time S] [--node-exporter BIN] [--node-flag F]

Starts both exporters on 127.0.0.1 (kernel-picked ports; node_exporter with its default
collectors, lunlat with its defaults), on this host's own disks or, with `--devices N`, on the
synthetic host of N block devices `scrape_vs_node_exporter.py` builds (its diskstats advanced
before each round), and, for each client count N, has curl open N connections at
once (`--parallel --parallel-immediate`: a C client, so the measurement is not the client's GIL),
each asking for /metrics with gzip as Prometheus does. Both run with `--web.max-requests` set to
the largest N, so every client is let in: a 503 at an in-flight limit is quick and would flatter
the exporter that refuses most. Only 200 answers count in the times; any other answer is a failure,
and a ratio is printed only when both exporters answered every request 200. Prints, per exporter
and N, the median and p99 of the request time and the answers, then lunlat's ratio to
node_exporter. Asserts nothing. Run it with the Python of the venv lunlat is installed in.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.exporter_process import (  # noqa: E402
    LOOPBACK,
    LUNLAT_PORT,
    NODE_EXPORTER_PORT,
    ExporterProcess,
    lunlat_serve,
)

sys.path.insert(0, str(REPO / "bench"))
from scrape_vs_node_exporter import Host  # noqa: E402

NODE_EXPORTER_NAMES = ("prometheus-node-exporter", "node_exporter")


@dataclass(frozen=True, slots=True)
class Round:
    seconds: list[float]
    codes: Counter[str]


def burst(port: int, clients: int, max_time: float) -> Round:
    """`clients` concurrent GETs of /metrics on fresh connections; each one's time and status."""
    url = f"http://{LOOPBACK}:{port}/metrics"
    argv = ["curl", "-s", "--parallel", "--parallel-immediate", "--parallel-max", str(clients),
            "--max-time", str(max_time), "-H", "Accept-Encoding: gzip"]  # fmt: skip
    for _ in range(clients):
        argv += ["-o", "/dev/null", "-w", "%{http_code} %{time_total}\n", url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=2 * max_time + 60, check=False).stdout
    seconds: list[float] = []
    codes: Counter[str] = Counter()
    for line in out.splitlines():
        code, _, total = line.partition(" ")
        codes["failed" if code == "000" else code] += 1
        if code == "200":  # a 503 or a failure is not a scrape served: kept out of the times
            seconds.append(float(total))
    codes["failed"] += clients - sum(codes.values())
    return Round(seconds, codes)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] if ordered else float("nan")


def measure(port: int, clients: int, args: argparse.Namespace, host: Host | None) -> Round:
    # Warm-up, by default at full width: first-scrape caches, threads kept for reuse.
    burst(port, clients if args.warm_up is None else args.warm_up, args.max_time)
    seconds: list[float] = []
    codes: Counter[str] = Counter()
    for round_number in range(args.rounds):
        if host is not None:
            host.write_diskstats(round_number + 1)  # every counter advanced: nothing served from a cache
        result = burst(port, clients, args.max_time)
        seconds += result.seconds
        codes += result.codes
    return Round(seconds, codes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--warm-up",
        type=int,
        help="clients of the untimed first burst (default: each N; fewer leaves the first round to start threads)",
    )
    parser.add_argument(
        "--devices", type=int, default=0, help="the synthetic host of N devices instead of this host's disks"
    )
    parser.add_argument("--max-time", type=float, default=60.0, help="curl's limit for one request, seconds")
    parser.add_argument("--lunlat-flag", action="append", default=[], help="extra flag for lunlat serve")
    parser.add_argument("--node-flag", action="append", default=[], help="extra flag for node_exporter")
    parser.add_argument(
        "--node-exporter",
        help="node_exporter binary (default: prometheus-node-exporter or node_exporter on PATH)",
    )
    args = parser.parse_args()
    if shutil.which("curl") is None:
        sys.exit("needs curl")
    node = args.node_exporter or next((n for n in NODE_EXPORTER_NAMES if shutil.which(n)), None)
    if node is None:
        sys.exit("needs node_exporter (Debian: prometheus-node-exporter, or --node-exporter BIN)")
    # Let every client in on both sides. node_exporter's in-flight limit: prometheus/node_exporter
    # node_exporter.go, flag "web.max-requests", "Maximum number of parallel scrape requests",
    # Default("40"); lunlat's flag of the same name (cli.py) also defaults to 40.
    limit = f"--web.max-requests={max(args.clients)}"
    with tempfile.TemporaryDirectory(prefix="lunlat-bench-") as tmp:
        host: Host | None = None
        paths: list[str] = []
        if args.devices > 0:
            host = Host(Path(tmp) / "host", args.devices)
            host.write_diskstats(0)
            paths = [f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}"]
            print(f"synthetic host: {len(host.devices)} block devices ({host.count('map')} multipath maps)")
        lunlat = ExporterProcess(
            lunlat_serve(limit, *paths, *args.lunlat_flag), Path(tmp) / "lunlat.log", port_pattern=LUNLAT_PORT
        )
        udev = [f"--path.udev.data={host.udev}"] if host is not None else []
        peer = ExporterProcess(
            [node, f"--web.listen-address={LOOPBACK}:0", limit, *paths, *udev, *args.node_flag],
            Path(tmp) / "node_exporter.log",
            port_pattern=NODE_EXPORTER_PORT,
            name="node_exporter",
        )
        with lunlat, peer:
            print(f"{'exporter':<14}{'clients':>8}{'median ms':>11}{'p99 ms':>9}  answers")
            for clients in args.clients:
                results = {}
                for name, process in (("lunlat", lunlat), ("node_exporter", peer)):
                    result = measure(process.port, clients, args, host)
                    results[name] = result
                    answers = ", ".join(f"{k}: {v}" for k, v in sorted(result.codes.items()))
                    median = statistics.median(result.seconds) * 1000 if result.seconds else float("nan")
                    print(
                        f"{name:<14}{clients:>8}{median:>11.1f}{p99(result.seconds) * 1000:>9.1f}  {answers}"
                    )
                ours, theirs = results["lunlat"].seconds, results["node_exporter"].seconds
                served = all(set(r.codes) == {"200"} for r in results.values())
                if not served:
                    print(f"{'ratio':<14}{clients:>8}  none: not every request was answered 200")
                elif ours and theirs:
                    print(
                        f"{'ratio':<14}{clients:>8}{statistics.median(ours) / statistics.median(theirs):>10.2f}x"
                        f"{p99(ours) / p99(theirs):>8.2f}x  (lunlat / node_exporter; below 1 = lunlat faster)"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
