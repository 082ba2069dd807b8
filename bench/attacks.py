"""The attacks of issue 25 against `lunlat serve` and node_exporter, side by side on 127.0.0.1.

    python bench/attacks.py [--attack headers idle slowloris slowread auth] [--rounds 1]
                            [--node-exporter PATH] [--lunlat CMD] [--devices 10000]

For each attack both exporters are started afresh (kernel-picked ports, soft RLIMIT_NOFILE 1024
with the hard limit left as it is, as under a systemd unit without LimitNOFILE), then attacked one
after the other. While an exporter is attacked, a thread samples its peak RSS, threads and open fds
every 50 ms, and a real scraper (curl, a C client, so its timing is not this script's GIL) GETs
/metrics with gzip every 200 ms as Prometheus would. Every attack is bounded in count and time,
talks to loopback only and stops by itself. Prints one table per attack; asserts nothing. Run it
with the Python of the venv lunlat is installed in; it needs curl and prlimit (util-linux).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import os
import platform
import re
import resource
import secrets
import select
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
import psutil

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]  # the sibling bench scripts and tests.support.exporter_process

from concurrent_scrapes import p99  # noqa: E402
from scrape_vs_node_exporter import Host, mib, node_exporter_binary  # noqa: E402

from tests.support.exporter_process import LOOPBACK, NODE_EXPORTER_PORT, ExporterError, ExporterProcess  # noqa: E402

ATTACKS = ("headers", "idle", "slowloris", "slowread", "auth")
USER = "prometheus"
CHUNK = 64 * 1024
# curl's exit codes when it got no HTTP answer (curl/curl docs/cmdline-opts/_EXITCODES.md).
CURL_FAILURES = {7: "refused", 28: "timeout", 52: "empty reply", 55: "send failed", 56: "reset"}


# --- watching the exporter ---------------------------------------------------------------------


@dataclass(slots=True)
class Usage:
    rss: int = 0
    threads: int = 0
    fds: int = 0


def usage_of(process: psutil.Process) -> Usage | None:
    """One sample; None once the process is gone."""
    try:
        with process.oneshot():
            return Usage(int(process.memory_info().rss), process.num_threads(), process.num_fds())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


class Sampler:
    """Peak RSS, threads and open fds of one process, sampled every `interval` s in a thread."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.process = psutil.Process(pid)
        self.peak = Usage()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = usage_of(self.process)
            if now is None:
                return
            self.peak.rss = max(self.peak.rss, now.rss)
            self.peak.threads = max(self.peak.threads, now.threads)
            self.peak.fds = max(self.peak.fds, now.fds)
            self._stop.wait(self._interval)


def curl_get(port: int, user_password: str | None, timeout: float) -> tuple[str, float | None]:
    """One GET /metrics with gzip on a fresh connection: (HTTP code or failure, seconds or None)."""
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "--max-time", f"{timeout:g}",
            "-H", "Accept-Encoding: gzip", f"http://{LOOPBACK}:{port}/metrics"]  # fmt: skip
    if user_password is not None:
        argv[1:1] = ["-u", user_password]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 10, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", None
    code, _, seconds = done.stdout.partition(" ")
    if code not in ("", "000"):
        return code, float(seconds)
    return CURL_FAILURES.get(done.returncode, f"curl exit {done.returncode}"), None


class Scraper:
    """A Prometheus-like client in a thread: GET /metrics every `interval` s, one at a time."""

    def __init__(self, port: int, user_password: str | None, interval: float, timeout: float) -> None:
        self.seconds: list[float] = []
        self.codes: Counter[str] = Counter()
        self._args = (port, user_password, timeout)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()  # the scrape in flight ends within its --max-time

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            code, seconds = curl_get(*self._args)
            self.codes[code] += 1
            if seconds is not None:
                self.seconds.append(seconds)
            self._stop.wait(max(0.0, started + self._interval - time.monotonic()))


# --- socket helpers ----------------------------------------------------------------------------


def connect(port: int, timeout: float, rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf:  # before connect, so the window the server sees is small from the start
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(timeout)
        sock.connect((LOOPBACK, port))
    except BaseException:
        sock.close()
        raise
    return sock


def failure(exc: OSError) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "reset"
    return type(exc).__name__


def peer_state(sock: socket.socket) -> str:
    """'open' (nothing from the server), 'answered' (it sent bytes) or 'closed', without blocking:
    poll(), which unlike select() takes fds above 1023, then a peek at what is there."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return "open"
    try:
        data = sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return "closed"
    return "answered" if data else "closed"


def read_status(sock: socket.socket, timeout: float) -> str:
    """The status code of the answer on `sock` (or why there is none)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data and len(data) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        if not data:
            return failure(exc)
    if not data:
        return "closed"
    match = re.match(rb"HTTP/\d\.\d (\d{3})", data)
    return match.group(1).decode() if match else "garbage"


def close_all(socks: Sequence[socket.socket]) -> None:
    for sock in socks:
        sock.close()


# --- the attacks -------------------------------------------------------------------------------
# Each takes the exporter's port and the options, runs for a bounded time and returns what the
# attacking clients saw, as counts.


def big_headers(port: int, args: argparse.Namespace) -> Counter[str]:
    """`--header-clients` requests of `--header-lines` lines of `--header-line-bytes` each, sent
    whole but for the final blank line, held `--hold` s, then completed; the answers are counted.
    CPython's http.client takes lines of up to 65,536 bytes and up to 100 lines counting the blank
    one that ends the headers (python/cpython Lib/http/client.py _MAXLINE, _MAXHEADERS, _read_headers),
    so the defaults (99 lines with Host, 65,000 B each) are the most it accepts; one more line and it
    answers 431, but only after it has read them all. Go's server stops reading at 1 MiB + 4 KiB and
    answers 431 (golang/go src/net/http/server.go DefaultMaxHeaderBytes, initialReadLimitSize)."""
    pad = b"a" * (args.header_line_bytes - len(b"X-Pad-000: \r\n"))
    head = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
        b"X-Pad-%03d: %s\r\n" % (i, pad) for i in range(args.header_lines - 1)
    )
    release = threading.Event()
    answers: list[str] = ["no answer"] * args.header_clients
    sent = threading.Semaphore(0)

    def client(i: int) -> None:
        try:
            with connect(port, timeout=args.scrape_timeout) as sock:
                answers[i] = send_then_hold(sock, head, sent, release, args.scrape_timeout)
        except OSError as exc:
            answers[i] = failure(exc)
            sent.release()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.header_clients)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + args.scrape_timeout
    for _ in threads:  # every client has sent its headers, been answered or failed
        sent.acquire(timeout=max(0.0, deadline - time.monotonic()))
    time.sleep(args.hold)
    release.set()
    for thread in threads:
        thread.join(args.scrape_timeout + 5)
    return Counter(answers)


def send_then_hold(
    sock: socket.socket, head: bytes, sent: threading.Semaphore, release: threading.Event, timeout: float
) -> str:
    view = memoryview(head)
    try:
        for offset in range(0, len(view), CHUNK):
            if peer_state(sock) != "open":  # answered early (Go's 431) or cut: stop sending
                sent.release()
                return read_status(sock, timeout)
            sock.sendall(view[offset : offset + CHUNK])
    except OSError as exc:
        sent.release()
        status = read_status(sock, 1.0)
        return status if status.isdigit() else f"{failure(exc)} while sending"
    sent.release()
    release.wait()
    # the server may have answered and closed during the hold: then read what it said
    with contextlib.suppress(OSError):
        sock.sendall(b"\r\n")
    return read_status(sock, timeout)


def idle_connections(port: int, args: argparse.Namespace) -> Counter[str]:
    """`--idle-conns` connections that send nothing, opened within `--idle-seconds` and held for
    `--idle-seconds` more; then how many the server left open, answered or closed. Go raises its own
    soft RLIMIT_NOFILE to the hard limit at start (golang/go src/syscall/rlimit.go), CPython does not,
    so at soft 1024 only node_exporter can hold them all."""
    socks: list[socket.socket] = []
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + args.idle_seconds
    for _ in range(args.idle_conns):
        left = deadline - time.monotonic()
        if left <= 0:
            counts["not tried (time)"] += 1
            continue
        try:
            socks.append(connect(port, timeout=min(1.0, left)))
        except OSError as exc:
            counts[f"connect {failure(exc)}"] += 1
    try:
        time.sleep(args.idle_seconds)
        counts.update(f"held, {peer_state(sock)}" for sock in socks)
    finally:
        close_all(socks)
    return counts


def slowloris(port: int, args: argparse.Namespace) -> Counter[str]:
    """`--slowloris-clients` connections sending a request line, then one byte of a header that never
    ends each second for `--slowloris-seconds`; then how many are still connected. node_exporter
    serves with a bare `http.Server{}` (prometheus/node_exporter node_exporter.go) and the toolkit sets
    no timeout on it (prometheus/exporter-toolkit web/tls_config.go): with no ReadHeaderTimeout Go
    waits for headers forever (golang/go src/net/http/server.go)."""
    socks: list[socket.socket] = []
    counts: Counter[str] = Counter()
    started = time.monotonic()
    for _ in range(args.slowloris_clients):
        if time.monotonic() > started + args.slowloris_seconds:  # a server that stopped accepting
            counts["not tried (time)"] += 1
            continue
        try:
            sock = connect(port, timeout=1.0)
            socks.append(sock)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            sock.setblocking(False)  # one byte never fills the buffer; a dead peer raises at once
        except OSError as exc:
            counts[f"connect {failure(exc)}"] += 1
    alive = {sock: True for sock in socks}
    try:
        tick = started
        while time.monotonic() < started + args.slowloris_seconds:
            tick += 1.0
            time.sleep(max(0.0, tick - time.monotonic()))
            for sock in socks:
                if alive[sock]:
                    try:
                        sock.send(b"a")
                    except OSError:
                        alive[sock] = False
        counts.update(
            "still connected" if alive[sock] and peer_state(sock) == "open" else "cut" for sock in socks
        )
    finally:
        close_all(socks)
    return counts


def slow_readers(port: int, args: argparse.Namespace) -> Counter[str]:
    """`--slow-readers` GETs of /metrics without gzip (the biggest answer), read at
    `--slow-read-rate` bytes per second each for `--slow-read-seconds` through a small receive
    buffer; counts each reader's answer code and whether it got the whole answer. Both exporters
    serve 40 scrapes at once by default and answer 503 past that (`--web.max-requests`; node_exporter
    through promhttp's MaxRequestsInFlight, whose slot is freed when the handler returns, i.e. after
    the body is written: prometheus/client_golang prometheus/promhttp/http.go), so 40 slow readers
    can hold every slot."""
    request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    readers: dict[socket.socket, bytes] = {}
    done: set[socket.socket] = set()
    counts: Counter[str] = Counter()
    started = time.monotonic()
    for _ in range(args.slow_readers):
        try:
            sock = connect(port, timeout=1.0, rcvbuf=4096)
            sock.sendall(request)
            sock.setblocking(False)  # recv takes what has arrived, up to the rate, and never waits
            readers[sock] = b""
        except OSError as exc:
            counts[f"connect {failure(exc)}"] += 1
    try:
        tick = started
        while time.monotonic() < started + args.slow_read_seconds and len(done) < len(readers):
            tick += 1.0
            time.sleep(max(0.0, tick - time.monotonic()))
            for sock in readers.keys() - done:
                try:
                    chunk = sock.recv(args.slow_read_rate)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    done.add(sock)
                elif len(readers[sock]) < 64:  # the status line is all that is kept
                    readers[sock] += chunk[:64]
        for sock, first in readers.items():
            match = re.match(rb"HTTP/\d\.\d (\d{3})", first)
            code = match.group(1).decode() if match else "no answer"
            counts[f"{code} {'whole' if sock in done else 'reading'}"] += 1
    finally:
        close_all(list(readers))
    return counts


def wrong_passwords(port: int, args: argparse.Namespace) -> Counter[str]:
    """`--auth-clients` connections, each sending GETs with a new wrong password (never the same
    twice, so no cache of failed checks helps) as fast as answered, for `--auth-seconds`. The toolkit
    caches checks and runs one bcrypt at a time (prometheus/exporter-toolkit web/handler.go bcryptMtx,
    web/cache.go); the real scraper's right password is checked once, at the warm-up."""
    deadline = time.monotonic() + args.auth_seconds
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def client(i: int) -> None:
        mine: Counter[str] = Counter()
        # http.client keeps the connection alive between answers and reopens it after a failure
        connection = http.client.HTTPConnection(LOOPBACK, port, timeout=args.scrape_timeout)
        n = 0
        while time.monotonic() < deadline:
            n += 1
            token = base64.b64encode(f"{USER}:wrong-{i}-{n}-{secrets.token_hex(4)}".encode()).decode()
            try:
                connection.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
                response = connection.getresponse()
                response.read()
                mine[str(response.status)] += 1
            except OSError as exc:
                mine[failure(exc)] += 1
                connection.close()
            except http.client.HTTPException as exc:
                mine[type(exc).__name__] += 1
                connection.close()
        connection.close()
        with lock:
            counts.update(mine)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.auth_clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(args.auth_seconds + args.scrape_timeout)
    return counts


@dataclass(frozen=True, slots=True)
class Attack:
    name: str
    title: str
    run: Callable[[int, argparse.Namespace], Counter[str]]


def attacks(args: argparse.Namespace) -> dict[str, Attack]:
    a = args
    return {
        "headers": Attack(
            "headers",
            f"{a.header_clients} requests of {a.header_lines} header lines x {a.header_line_bytes:,} B "
            f"(~{mib(a.header_lines * a.header_line_bytes)} each), held {a.hold:g} s, then completed",
            big_headers,
        ),
        "idle": Attack(
            "idle",
            f"{a.idle_conns:,} idle connections (connect, send nothing), held {a.idle_seconds:g} s; "
            f"exporters at soft RLIMIT_NOFILE {a.nofile}",
            idle_connections,
        ),
        "slowloris": Attack(
            "slowloris",
            f"{a.slowloris_clients} slowloris clients, one header byte per second for {a.slowloris_seconds:g} s",
            slowloris,
        ),
        "slowread": Attack(
            "slowread",
            f"{a.slow_readers} slow readers of /metrics at {a.slow_read_rate} B/s for {a.slow_read_seconds:g} s, "
            f"synthetic host of {a.devices:,} devices",
            slow_readers,
        ),
        "auth": Attack(
            "auth",
            f"basic auth (bcrypt cost 10) on both; {a.auth_clients} connections sending distinct wrong "
            f"passwords for {a.auth_seconds:g} s; the real scraper authenticates",
            wrong_passwords,
        ),
    }


# --- one attack on one exporter ----------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    before: Usage
    peak: Usage
    after: Usage | None  # None: the exporter died
    seconds: list[float]
    codes: Counter[str]
    attackers: Counter[str]


def attack_one(
    exporter: ExporterProcess, attack: Attack, args: argparse.Namespace, auth: str | None
) -> Outcome:
    sampler = Sampler(exporter.pid)
    before = usage_of(sampler.process) or Usage()
    with sampler, Scraper(exporter.port, auth, args.scrape_interval, args.scrape_timeout) as scraper:
        attackers = attack.run(exporter.port, args)
    time.sleep(args.settle)  # "after": once the attack's connections are closed and handled
    try:
        exporter.pid  # noqa: B018 - raises ExporterError when the child has exited
        after = usage_of(sampler.process)
    except ExporterError:
        after = None
    return Outcome(before, sampler.peak, after, scraper.seconds, scraper.codes, attackers)


# --- the exporters -----------------------------------------------------------------------------


@dataclass(slots=True)
class Setup:
    node: str
    lunlat: list[str]
    root: Path
    nofile: tuple[int, int]
    host: Host | None = None
    web_config: Path | None = None
    auth: str | None = None  # user:password of the real scraper
    node_extra: list[str] = field(default_factory=list)  # --node-exporter-flag
    lunlat_extra: list[str] = field(default_factory=list)  # --lunlat-flag


def start_pair(setup: Setup, attack: str) -> tuple[ExporterProcess, ExporterProcess]:
    listen = f"--web.listen-address={LOOPBACK}:0"
    node_flags: list[str] = [listen]
    lunlat_flags: list[str] = ["serve", listen]
    if attack == "slowread":
        assert setup.host is not None
        host = setup.host
        # as in scrape_vs_node_exporter.py: node_exporter's diskstats collector only, on the same tree
        node_flags += [f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}",
                       f"--path.udev.data={host.udev}", "--collector.disable-defaults", "--collector.diskstats"]  # fmt: skip
        lunlat_flags += [f"--path.procfs={host.procfs}", f"--path.sysfs={host.sysfs}"]
    if attack == "auth":
        assert setup.web_config is not None
        node_flags.append(f"--web.config.file={setup.web_config}")
        lunlat_flags.append(f"--web.config.file={setup.web_config}")
    # prlimit(1) sets the limit and execs the exporter: same pid, limits as systemd would leave them
    # (soft 1024, hard higher) for a unit without LimitNOFILE.
    limit = ["prlimit", f"--nofile={setup.nofile[0]}:{setup.nofile[1]}", "--"]
    node = ExporterProcess(
        [*limit, setup.node, *node_flags, *setup.node_extra],
        setup.root / f"node_exporter-{attack}.log",
        port_pattern=NODE_EXPORTER_PORT,
        name="node_exporter",
        start_timeout=60,
    )
    lunlat = ExporterProcess(
        [*limit, *setup.lunlat, *lunlat_flags, *setup.lunlat_extra],
        setup.root / f"lunlat-{attack}.log",
        port_pattern=None,  # the port it listens on (psutil), whatever its log level or format
        name="lunlat",
        start_timeout=60,
    )
    try:
        node.start()
        lunlat.start()
    except BaseException:
        node.stop()
        raise
    return node, lunlat


def run_round(
    setup: Setup, attack: Attack, args: argparse.Namespace, round_number: int
) -> dict[str, Outcome]:
    node, lunlat = start_pair(setup, attack.name)
    auth = setup.auth if attack.name == "auth" else None  # only these exporters ask for a password
    try:
        pair = (node, lunlat) if round_number % 2 == 0 else (lunlat, node)
        for exporter in pair:  # warm-up: lunlat's first scrape reads the sysfs topology
            curl_get(exporter.port, auth, 60)
        return {e.name: attack_one(e, attack, args, auth) for e in pair}
    finally:
        for exporter in (node, lunlat):
            exporter.stop()


# --- the report --------------------------------------------------------------------------------


def median_int(values: Sequence[int]) -> int:
    return round(statistics.median(values))


def ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f}" if values else "-"


def counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def report(attack: Attack, outcomes: dict[str, list[Outcome]]) -> None:
    print(f"\n== {attack.name}: {attack.title}")
    header = (
        f"{'exporter':<14}{'RSS before':>11}{'peak':>11}{'after':>11}{'threads':>8}{'fds':>6}"
        f"{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}  real scrapes | attackers saw"
    )
    print(header)
    print("-" * len(header))
    for name, runs in outcomes.items():
        afters = [o.after.rss for o in runs if o.after is not None]
        died = sum(o.after is None for o in runs)
        after = mib(statistics.median(afters)) if afters else "-"
        scrapes = [o for o in runs if o.seconds]
        print(
            f"{name:<14}{mib(median_int([o.before.rss for o in runs])):>11}"
            f"{mib(median_int([o.peak.rss for o in runs])):>11}{after:>11}"
            f"{median_int([o.peak.threads for o in runs]):>8}{median_int([o.peak.fds for o in runs]):>6}"
            f"{ms([statistics.median(o.seconds) for o in scrapes]):>8}"
            f"{ms([p99(o.seconds) for o in scrapes]):>8}{ms([max(o.seconds) for o in scrapes]):>8}"
            f"  {counts(sum((o.codes for o in runs), Counter()))} | "
            f"{counts(sum((o.attackers for o in runs), Counter()))}"
            + (f"  EXITED in {died} of {len(runs)} rounds" if died else "")
        )


# --- setup and main ----------------------------------------------------------------------------


def version_of_node_exporter(binary: str) -> str:
    """`--version`, or the module version in the Go build info of a `go install`ed binary (which
    prints an empty version: no -ldflags)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"version (\d\S*)", out.stdout + out.stderr)
    if match:
        return match.group(1)
    found = re.search(rb"\tgithub\.com/prometheus/node_exporter\t(v[^\t\n]+)", Path(binary).read_bytes())
    return found.group(1).decode() if found else "?"


def version_of_lunlat(command: list[str]) -> str:
    out = subprocess.run([*command, "--version"], capture_output=True, text=True, check=False)
    return (out.stdout + out.stderr).strip() or f"? (exit {out.returncode})"


def file_limits(args: argparse.Namespace) -> tuple[int, int]:
    """Raise this script's own soft fd limit (it holds every attacking socket) and return the
    exporters' (soft, hard): soft `--nofile`, hard left as inherited."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    need = args.idle_conns + 100
    if hard != resource.RLIM_INFINITY and hard < need:
        print(f"note: hard RLIMIT_NOFILE {hard} < {need}: this script cannot open every idle connection")
    return min(args.nofile, hard), hard


def web_config(root: Path) -> tuple[Path, str]:
    """A toolkit web config with one bcrypt (cost 10) user; returns its path and user:password."""
    password = secrets.token_urlsafe(16)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
    path = root / "web-config.yml"
    path.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    return path, f"{USER}:{password}"


def run(args: argparse.Namespace, root: Path) -> None:
    node = node_exporter_binary(args.node_exporter)
    lunlat = shlex.split(args.lunlat)
    setup = Setup(
        node,
        lunlat,
        root,
        file_limits(args),
        node_extra=args.node_exporter_flag,
        lunlat_extra=args.lunlat_flag,
    )
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {platform.machine()}, "
        f"Python {platform.python_version()}; node_exporter {version_of_node_exporter(node)} ({node}); "
        f"{version_of_lunlat(lunlat)}"
    )
    print(
        f"exporters at RLIMIT_NOFILE soft {setup.nofile[0]} hard {setup.nofile[1]}; real scraper: curl, gzip, "
        f"every {args.scrape_interval:g} s, timeout {args.scrape_timeout:g} s; {args.rounds} round(s): "
        "figures are medians over rounds, answer counts are sums"
    )
    chosen = [attacks(args)[name] for name in args.attack]
    if "slowread" in args.attack:
        started = time.monotonic()
        setup.host = Host(root / "host", args.devices)
        setup.host.write_diskstats(0)
        print(
            f"synthetic host of {len(setup.host.devices):,} devices built in {time.monotonic() - started:.0f} s"
        )
    if "auth" in args.attack:
        setup.web_config, setup.auth = web_config(root)
    for attack in chosen:
        started = time.monotonic()
        outcomes: dict[str, list[Outcome]] = {"node_exporter": [], "lunlat": []}
        for round_number in range(args.rounds):
            for name, outcome in run_round(setup, attack, args, round_number).items():
                outcomes[name].append(outcome)
        report(attack, outcomes)
        print(f"({time.monotonic() - started:.0f} s)")
    print(
        "\nRSS in MiB; threads and fds are peaks during the attack; p50/p99/max: the real scraper's "
        "answered requests; 'after': RSS once the attack ended and --settle passed."
    )


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--attack", nargs="+", choices=ATTACKS, default=list(ATTACKS), help="which attacks (default: all)")
    add(
        "--rounds", type=int, default=1, help="rounds per attack, medians taken (default 1, to keep it short)"
    )
    add("--node-exporter", metavar="PATH", help="node_exporter binary (default: on PATH)")
    add("--lunlat", metavar="CMD", default=str(Path(sys.executable).parent / "lunlat"),
        help="command that runs lunlat; must exec it, not fork it (default: lunlat beside this Python)")  # fmt: skip
    add("--lunlat-flag", action="append", default=[], help="extra flag for lunlat serve (repeatable)")
    add("--node-exporter-flag", action="append", default=[], help="extra flag for node_exporter (repeatable)")
    add("--nofile", type=int, default=1024, help="the exporters' soft RLIMIT_NOFILE (default 1024)")
    add("--scrape-interval", type=float, default=0.2, metavar="S")
    add("--scrape-timeout", type=float, default=10.0, metavar="S", help="the real scraper's (default 10)")
    add(
        "--settle",
        type=float,
        default=2.0,
        metavar="S",
        help="wait after an attack before 'after' (default 2)",
    )
    add("--header-clients", type=int, default=10)
    add("--header-lines", type=int, default=99, help="per request, Host included (default 99)")
    add("--header-line-bytes", type=int, default=65_000)
    add("--hold", type=float, default=5.0, metavar="S", help="how long the big headers are held (default 5)")
    add("--idle-conns", type=int, default=1100)
    add("--idle-seconds", type=float, default=10.0, metavar="S")
    add("--slowloris-clients", type=int, default=300)
    add("--slowloris-seconds", type=float, default=20.0, metavar="S")
    add("--slow-readers", type=int, default=40)
    add("--slow-read-rate", type=int, default=512, metavar="BYTES", help="per reader per second")
    add("--slow-read-seconds", type=float, default=20.0, metavar="S")
    add("--devices", type=int, default=10_000, help="synthetic host size for slowread (default 10000)")
    add("--auth-clients", type=int, default=100)
    add("--auth-seconds", type=float, default=10.0, metavar="S")
    add("--keep", action="store_true", help="keep the logs and the synthetic tree (path printed)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.devices < 10 or args.header_lines < 1:
        parser.error("--rounds and --header-lines must be >= 1, --devices >= 10")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    for tool in ("curl", "prlimit"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool} on PATH")
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="lunlat-attacks-"))
    try:
        run(args, root)
    finally:
        if args.keep:
            print(f"logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
