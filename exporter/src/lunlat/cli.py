"""The `lunlat` command: `serve` the exporter, `check-config` a config file, watch LUNs with `top`
(the top package), write a `report`. The rules, the dashboards and the lab are their own distributions and
commands (`lunlat-rules`, `lunlat-dashboards`, `lunlat-lab`).

Flags follow the Prometheus exporter conventions (--web.listen-address, --path.procfs, --log.level …).
Bad input exits 2 with a message naming what is wrong; nothing here prints a traceback.

Building the parser imports no command's code: `lunlat serve` loads no report, rules, dashboards or lab
module (tests/unit/test_serve_imports.py). Each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from lunlat import __version__, logs, memtune, pathhealth
from lunlat.argtypes import non_negative_int, positive_float, positive_int
from lunlat.config import Config, ConfigError
from lunlat.configfile import load_config
from lunlat.dbtarget import DatabaseTarget
from lunlat.engines.registry import ENGINES, engine
from lunlat.reference_architecture import DEFAULT_REFERENCE_FILE
from lunlat.reload import Reloader
from lunlat.scrape import Scraper, process_registry
from lunlat.sources.factory import HOST_SOURCES, Settings
from lunlat.sources.registry import build_sources, close_sources
from lunlat.top import command as top_command
from lunlat.web.config import WebGate
from lunlat.web.limits import DEFAULT_MAX_CONNECTIONS, Limits, raise_open_file_limit
from lunlat.web.server import ListenAddress, ListenAddressError, Server
from lunlat.yamlmodel import key_path

log = logs.get("lunlat.cli")

# Not in Prometheus' default port allocations as far as could be checked (the 9100-9999 block is
# full; registrations continue above 10000). See README "Port".
DEFAULT_PORT = 10431
EXIT_USAGE = 2
# lunlat.goals.DEFAULT_GOALS_FILE, not imported from there so that parsing the command line does
# not load the goals' models (tests/unit/test_cli.py checks that both are the same path).
DEFAULT_GOALS_FILE = Path("alerts/goals.yaml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lunlat", description="Per-LUN read and write latency exporter for Prometheus."
    )
    parser.add_argument("--version", action="version", version=f"lunlat {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the exporter", description="Serve /metrics over HTTP.")
    serve.add_argument(
        "--web.listen-address",
        dest="listen",
        default=f":{DEFAULT_PORT}",
        metavar="ADDR",
        help=f"address to listen on: :PORT, HOST:PORT or [IPv6]:PORT (default :{DEFAULT_PORT})",
    )
    serve.add_argument(
        "--web.telemetry-path",
        dest="telemetry_path",
        default="/metrics",
        metavar="PATH",
        help="path under which to expose metrics (default /metrics)",
    )
    serve.add_argument(
        "--web.max-requests",
        dest="max_requests",
        type=non_negative_int,
        default=40,
        metavar="N",
        help="scrapes served at once; more get 503 (0 = no limit; default 40)",
    )
    serve.add_argument(
        "--web.max-connections",
        dest="max_connections",
        type=positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="connections open at once; past it the longest idle one is closed (503 when every one is "
        f"busy with a request; default {DEFAULT_MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--web.enable-lifecycle",
        dest="enable_lifecycle",
        action="store_true",
        help="answer POST/PUT /-/reload by re-reading the config file (SIGHUP always does)",
    )
    serve.add_argument(
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        metavar="FILE",
        help="exporter-toolkit web config: TLS, basic auth, headers (node_exporter's format)",
    )
    serve.add_argument(
        "--config.file",
        dest="config_file",
        type=Path,
        metavar="FILE",
        help="YAML config; without it every LUN of the host is published",
    )
    serve.add_argument(
        "--path.procfs",
        dest="procfs",
        type=Path,
        default=Path("/proc"),
        metavar="DIR",
        help="procfs mountpoint (default /proc)",
    )
    serve.add_argument(
        "--path.sysfs",
        dest="sysfs",
        type=Path,
        default=Path("/sys"),
        metavar="DIR",
        help="sysfs mountpoint (default /sys)",
    )
    serve.add_argument(
        "--collector.diskstats.show-paths",
        dest="show_paths",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also publish multipath path devices and partitions (overrides the config)",
    )
    serve.add_argument(
        "--collector.diskstats.counters",
        dest="counters",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="publish the device counters; --no-collector.diskstats.counters keeps names, roles and path "
        "health only, for a host layer read from node_exporter (overrides diskstats.counters)",
    )
    serve.add_argument(
        "--collector.biolatency",
        dest="biolatency",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="per-I/O latency histograms from the kernel's block tracepoints via eBPF (root or CAP_BPF+CAP_PERFMON; "
        "overrides biolatency.enabled, off by default)",
    )
    serve.add_argument(
        "--collector.host.source",
        dest="host_source",
        choices=HOST_SOURCES,
        default="auto",
        help="host counters from <procfs>/diskstats, or psutil where there is none (default auto)",
    )
    serve.add_argument(
        "--collector.topology.refresh-interval",
        dest="refresh_interval",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="re-read sysfs at least this often; device or mount changes re-read it at once (default 300)",
    )
    serve.add_argument(
        "--collector.diskstats.path-state-interval",
        dest="path_state_interval",
        type=path_state_interval,
        default=pathhealth.DEFAULT_INTERVAL,
        metavar="SECONDS",
        help="read multipath path states this often, off the scrape path; a scrape never serves a reading "
        f"this old (default {pathhealth.DEFAULT_INTERVAL:g}, {pathhealth.MIN_INTERVAL:g} to "
        f"{pathhealth.MAX_INTERVAL:g}: a lost path shows within a 15 s scrape interval)",
    )
    serve.add_argument("--log.level", dest="log_level", choices=tuple(logs.LEVELS), default="info")
    serve.add_argument("--log.format", dest="log_format", choices=logs.FORMATS, default="logfmt")

    check = commands.add_parser(
        "check-config",
        help="validate a config file",
        description="Validate a config file: exit 0 when valid, 2 with the problems when not.",
    )
    check.add_argument("file", type=Path)
    # As promtool's `check config --syntax-only` (prometheus/prometheus cmd/promtool/main.go): for a
    # file checked away from where it runs (CI), without the secrets it will find there.
    check.add_argument(
        "--syntax-only",
        action="store_true",
        help="check the file only, not the password files and variables it names",
    )
    _report_parser(commands)
    top_command.add_parser(commands)
    return parser


def _report_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report",
        help="the reference tables per phase, as CSV and a self-contained HTML page",
        description=(
            "Read lunlat's series from Prometheus over a time range and write DIR/tables.csv (average "
            "latency, IOPS, throughput per phase, layer, LUN and op, and the latency of the I/Os the goals "
            "judge, against the goal, as the alerts judge it) and DIR/index.html "
            "(verdict, the reference's tables per phase, plots). Times: RFC 3339 or Unix seconds."
        ),
    )
    report.add_argument("--prometheus.url", dest="prometheus_url", required=True, metavar="URL")
    report.add_argument("--from", dest="start", required=True, metavar="TIME")
    report.add_argument("--to", dest="end", required=True, metavar="TIME")
    report.add_argument(
        "--phase",
        dest="phases",
        action="append",
        default=[],
        metavar="NAME=FROM..TO",
        help="a phase of the test (repeat; default: the whole range is one phase)",
    )
    report.add_argument(
        "--goals",
        type=Path,
        metavar="FILE",
        help=f"latency goals (default {DEFAULT_GOALS_FILE} if present, else 1 ms for every LUN)",
    )
    report.add_argument(
        "--reference",
        type=Path,
        nargs="?",
        const=DEFAULT_REFERENCE_FILE,
        metavar="FILE",
        help="the reference's averages (without FILE: the reference architecture's, shipped with lunlat): "
        "each table cell beside its reference value",
    )
    report.add_argument("--output", type=Path, required=True, metavar="DIR")
    # None: the report's own title (lunlat.report.DEFAULT_TITLE), which lives with the report's code.
    report.add_argument("--title", help="the page's title")


def source_settings(args: argparse.Namespace) -> Settings:
    """What `serve`'s flags say about the sources; the registry builds them."""
    return Settings(
        args.procfs,
        args.sysfs,
        args.host_source,
        args.show_paths,
        args.refresh_interval,
        args.biolatency,
        path_state_interval=args.path_state_interval,
        counters=args.counters,
    )


def path_state_interval(text: str) -> float:
    """--collector.diskstats.path-state-interval: seconds within pathhealth's bounds."""
    value = positive_float(text)
    if not pathhealth.MIN_INTERVAL <= value <= pathhealth.MAX_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be between {pathhealth.MIN_INTERVAL:g} and {pathhealth.MAX_INTERVAL:g} seconds "
            "(above the 15 s scrape interval a lost path would show a scrape late)"
        )
    return value


def _usage_error(message: str) -> int:
    print(f"lunlat: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _load(path: Path | None, check_secrets: bool = False) -> Config:
    try:
        return load_config(path, check_secrets)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"lunlat: config error: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def _target_name(config: Config, loc: tuple[int | str, ...]) -> str:
    """The `name` of the database target at key path `loc` ((<engine section>, 0, …))."""
    target: DatabaseTarget = config.targets(engine(str(loc[0])))[int(loc[1])]
    return target.name


def serve(args: argparse.Namespace) -> int:
    logs.setup(args.log_level, args.log_format)
    raise_open_file_limit()  # before anything opens files, as Go programs start (web/limits.py)
    if not args.telemetry_path.startswith("/"):
        return _usage_error(f"--web.telemetry-path must start with /, got {args.telemetry_path!r}")
    try:
        address = ListenAddress.parse(args.listen)
    except ListenAddressError as exc:
        return _usage_error(f"--web.listen-address: {exc}")
    web = None
    if args.web_config_file is not None:
        try:
            web = WebGate.load(args.web_config_file)
        except ConfigError as exc:
            for web_problem in exc.problems:
                print(f"lunlat: web config error: {web_problem}", file=sys.stderr)
            return EXIT_USAGE
    config = _load(args.config_file)
    # A password file may be mounted after the exporter starts (a Kubernetes secret, a Vault agent):
    # warn and start; the target reports up 0 until the secret can be read (README, "Configuration").
    # A FIFO or /dev/zero there is refused at once (files.read_regular), so this never blocks.
    for loc, problem in config.secret_problems():
        log.warning(
            "database password not readable yet",
            target=_target_name(config, loc),
            key=key_path(loc),
            err=problem,
        )
    built = build_sources(config, source_settings(args))
    if built.problems:
        built.close()
        for problem in built.problems:
            _usage_error(problem)
        return EXIT_USAGE
    sources = built.sources
    scraper = Scraper(sources, process_registry())
    reloader = Reloader(args.config_file, source_settings(args), scraper, built.db_labels)
    # A scrape of a large host allocates ~100k short-lived objects; with CPython's default gen-0
    # threshold (700) that triggers dozens of collections walking every startup object each time.
    # Freezing startup objects and a higher threshold cut the scrape time by ~20 % (bench/).
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    memtune.fix_mmap_threshold()  # large bodies go back to the system when freed
    try:
        server = Server(
            address,
            scraper,
            args.telemetry_path,
            args.max_requests,
            web,
            reload=reloader.reload if args.enable_lifecycle else None,
            limits=Limits(max_connections=args.max_connections),
        )
    except OSError as exc:
        print(f"lunlat: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return 1

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("shutting down", signal=signal.Signals(signum).name)
        threading.Thread(target=server.shutdown, daemon=True).start()

    def reload(_signum: int, _frame: FrameType | None) -> None:
        # Not in the handler itself: it runs in the main thread, which serves requests.
        threading.Thread(target=reloader.reload, name="reload", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, reload)
    log.info(
        "listening",
        address=args.listen,
        port=server.port,
        path=args.telemetry_path,
        tls=web is not None and web.tls,
        sources=",".join(s.name for s in sources),
        version=__version__,
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
        scraper.close()
        # Sources holding kernel objects (biolatency's BPF programs) or a session end them now, not at exit.
        close_sources(scraper.sources)
    return 0


def check_config(args: argparse.Namespace) -> int:
    config = _load(args.file, check_secrets=not args.syntax_only)
    databases = "".join(
        f", {len(targets)} {candidate.title} targets"
        for candidate in ENGINES
        if (targets := config.targets(candidate))
    )
    print(f"{args.file}: valid ({len(config.luns)} luns entries{databases})")
    return 0


def _run_report(args: argparse.Namespace) -> int:
    from lunlat.report import run  # noqa: PLC0415 - only `report` needs it

    return run(args)


# One entry per subcommand: what runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": serve,
    "check-config": check_config,
    "report": _run_report,
    "top": top_command.run,
}


# Commands that left `lunlat` for a distribution of their own: said plainly instead of "invalid choice".
MOVED = {
    "rules": "`lunlat-rules generate` (pip install lunlat-rules: the alerts/ folder of the repository)",
    "dashboards": "`lunlat-dashboards generate` (pip install lunlat-dashboards: the dashboards/ folder)",
    "lab": "`lunlat-lab` (pip install lunlat-lab: the lab/ folder)",
}


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in MOVED:
        print(f"lunlat: `lunlat {given[0]}` is now {MOVED[given[0]]}", file=sys.stderr)
        return EXIT_USAGE
    args = _parser().parse_args(given)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
