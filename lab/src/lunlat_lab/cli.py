"""The `lunlat-lab` command (also `python -m lunlat_lab`): bring the lab `up` and `down`, run a
`phase` or the reference `scenario`, `set-latency`, `status`, and write the exporter's config for the
lab's LUNs (`exporter-config`).

Every default is shipped with the package (defaults.py) or is an absolute path, so each command works
from any directory. Bad input exits 2 with a message naming what is wrong; nothing prints a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lunlat import logs
from lunlat.argtypes import positive_float
from lunlat.files import write_atomic
from lunlat.reference_architecture import DEFAULT_REFERENCE_FILE
from lunlat_lab.defaults import DEFAULT_LAB_FILE, DEFAULT_STATE_DIR

PROG = "lunlat-lab"
EXIT_USAGE = 2


def parser() -> argparse.ArgumentParser:
    lab = argparse.ArgumentParser(
        prog=PROG,
        description="The lab: latency-controlled loop LUNs on a FUSE filesystem and fio workloads (root).",
    )
    actions = lab.add_subparsers(dest="lab_command", required=True, metavar="ACTION")
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help=f"where the lab keeps its files and state (default {DEFAULT_STATE_DIR})",
    )
    up = actions.add_parser("up", parents=[state], help="create the LUNs (FUSE filesystem + loop devices)")
    up.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_LAB_FILE,
        metavar="FILE",
        help="lab description (default: the one shipped with lunlat-lab, the reference architecture's)",
    )
    up.add_argument(
        "--engine",
        default=None,
        metavar="ENGINE",
        help="the FUSE daemon: native (C, libfuse 3 low-level; the default) or python (mfusepy)",
    )
    up.add_argument(
        "--log.level",
        dest="log_level",
        choices=tuple(logs.LEVELS),
        default="info",
        help="the lab daemon's log level in DIR/fuse.log; debug adds each live-calibration window "
        "(kernel and daemon mean per LUN, op and size class)",
    )
    exporter_config = actions.add_parser(
        "exporter-config",
        help="write the exporter's config for the lab's LUNs (or, with --check, compare it)",
        description=(
            "Write the exporter's config labelling the lab's LUNs (luns: entries by loop_file), generated from the "
            "lab description, to FILE or standard output. With --check, write nothing and exit 1 when FILE is "
            "stale (CI runs this)."
        ),
    )
    exporter_config.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_LAB_FILE,
        metavar="FILE",
        help="default: the shipped description",
    )
    exporter_config.add_argument(
        "--output", type=Path, metavar="FILE", help="default: standard output (--check needs a FILE)"
    )
    exporter_config.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the file differs from what would be written",
    )
    actions.add_parser(
        "down", parents=[state], help="remove every loop device, mount and process the lab made"
    )
    phase = actions.add_parser("phase", parents=[state], help="run a phase's workloads (idle stops them)")
    phase.add_argument("name")
    latency = actions.add_parser("set-latency", parents=[state], help="change a LUN's delays at run time")
    latency.add_argument("lun")
    latency.add_argument("read_ms", type=float, metavar="READ_MS")
    latency.add_argument("write_ms", type=float, metavar="WRITE_MS")
    latency.add_argument("--jitter", type=float, help="coefficient of variation of the delays")
    status = actions.add_parser("status", parents=[state], help="each LUN's device, delays and live latency")
    status.add_argument("--window", type=positive_float, default=1.0, metavar="SECONDS")
    scenario = actions.add_parser("scenario", parents=[state], help="run the reference phases and compare")
    scenario.add_argument("--exporter", metavar="URL", help="lunlat /metrics to read (default: start one)")
    scenario.add_argument(
        "--duration",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="measured seconds per phase (default 60)",
    )
    scenario.add_argument("--warmup", type=positive_float, default=5.0, metavar="SECONDS")
    scenario.add_argument("--phases", help="comma-separated phases (default: all, in config order)")
    scenario.add_argument(
        "--output", type=Path, metavar="DIR", help="results directory (default ./lab-results/TIME)"
    )
    scenario.add_argument(
        "--prometheus.url",
        dest="prometheus_url",
        metavar="URL",
        help="the Prometheus scraping the exporter: run `lunlat report` on the phases into DIR/report",
    )
    scenario.add_argument(
        "--goals", type=Path, metavar="FILE", help="the report's goals (as lunlat report's --goals)"
    )
    scenario.add_argument(
        "--reference",
        type=Path,
        nargs="?",
        const=DEFAULT_REFERENCE_FILE,
        metavar="FILE",
        help=(
            "set each LUN to the reference's averages of each phase (default: the reference shipped with "
            "lunlat) and end with them beside the measured ones (DIR/reference.csv; the report's too)"
        ),
    )
    return lab


def _exporter_config(args: argparse.Namespace) -> int:
    from lunlat_lab import commands, exporter_config  # noqa: PLC0415 - --help loads no lab module

    text = exporter_config.render(commands.load_lab(args.config))
    if args.output is None:
        sys.stdout.write(text)
        return 0
    if not args.check:
        write_atomic(args.output, text)
        print(f"{args.output}: written from {args.config}")
        return 0
    try:
        current = args.output.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{args.output}: cannot read ({exc.strerror}); run `{PROG} exporter-config`", file=sys.stderr)
        return 1
    if current != text:
        print(
            f"{args.output} is stale: it differs from what {args.config} gives; run `{PROG} exporter-config`",
            file=sys.stderr,
        )
        return 1
    print(f"{args.output}: up to date with {args.config}")
    return 0


def run(args: argparse.Namespace) -> int:
    from lunlat_lab import commands  # noqa: PLC0415 - --help loads no lab module
    from lunlat_lab.daemon_engines import DEFAULT_ENGINE, parse_engine  # noqa: PLC0415
    from lunlat_lab.errors import LabError  # noqa: PLC0415

    try:
        if args.lab_command == "exporter-config":
            return _exporter_config(args)
        if args.lab_command == "up":
            try:
                engine = parse_engine(args.engine or DEFAULT_ENGINE)
            except ValueError as exc:
                raise LabError(str(exc)) from None
            commands.up(args.config, args.state_dir, engine, log_level=args.log_level)
        elif args.lab_command == "down":
            done = commands.down(args.state_dir)
            print("\n".join(done) if done else f"nothing to clean in {args.state_dir}")
        elif args.lab_command == "phase":
            state = commands.phase(args.state_dir, args.name)
            print(f"phase {state.phase or 'idle'}" + (f" (fio pid {state.fio_pid})" if state.fio_pid else ""))
        elif args.lab_command == "set-latency":
            commands.set_latency(args.state_dir, args.lun, args.read_ms, args.write_ms, args.jitter)
            print(f"{args.lun}: read {args.read_ms} ms, write {args.write_ms} ms")
        elif args.lab_command == "status":
            state, rows = commands.status(args.state_dir, args.window)
            print(commands.format_status(state, rows, args.window))
        elif args.lab_command == "scenario":
            output = args.output or Path("lab-results") / time.strftime("%Y%m%dT%H%M%S")
            phases = [p.strip() for p in args.phases.split(",")] if args.phases else None
            if args.prometheus_url and not args.prometheus_url.startswith(("http://", "https://")):
                raise LabError(f"--prometheus.url must be an http(s) URL, got {args.prometheus_url!r}")
            path = commands.scenario(
                args.state_dir, args.exporter, args.duration, args.warmup, phases, output,
                args.prometheus_url, args.goals, args.reference,
            )  # fmt: skip
            print(f"results: {path}")
    except LabError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    lab = parser()
    args = lab.parse_args(argv)
    if args.lab_command == "exporter-config" and args.check and args.output is None:
        lab.error("exporter-config --check needs --output FILE (the file to compare)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
