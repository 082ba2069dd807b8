"""Run an exporter as a child process for integration tests: start it, wait for its port, scrape it, stop it.

    with ExporterProcess([...argv...], tmp_path / "x.log", port_pattern=LUNLAT_PORT) as exporter:
        text = exporter.scrape().text

The child's stdout and stderr go to a log file (never a pipe, which a chatty child could fill and
block on); the log's tail is quoted in every error. Leaving the `with` block, or calling `stop()`,
ends the child with SIGTERM, then SIGKILL after a grace period, and always reaps it.
"""

from __future__ import annotations

import gzip
import http.client
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

import psutil

LOOPBACK = "127.0.0.1"
# `--web.listen-address=127.0.0.1:0` lets the kernel pick a free port; these find it in the log.
LUNLAT_PORT = re.compile(r"\bmsg=listening\b.*\bport=(\d+)\b")


def lunlat_serve(*flags: str) -> list[str]:
    """argv of `lunlat serve` run by this Python on a port the kernel picks (LUNLAT_PORT finds it)."""
    return [sys.executable, "-m", "lunlat", "serve", f"--web.listen-address={LOOPBACK}:0", *flags]


NODE_EXPORTER_PORT = re.compile(r'msg="Listening on" address=\S*:(\d+)\b')


class ExporterError(RuntimeError):
    """The child exited early, never listened, or answered a scrape with an error status."""


@dataclass(frozen=True, slots=True)
class Scrape:
    status: int
    headers: Mapping[str, str]
    body: bytes  # decompressed when the answer was gzip-encoded
    wire_bytes: int  # body size as sent (compressed or not)
    seconds: float  # request sent to last byte received, decompression excluded

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    @property
    def gzipped(self) -> bool:
        return self.headers.get("content-encoding", "").lower() == "gzip"


def scrape(
    port: int,
    path: str = "/metrics",
    *,
    gzip_ok: bool = False,
    host: str = LOOPBACK,
    timeout: float = 60.0,
    accept: str | None = None,
) -> Scrape:
    """One GET over a fresh connection, as Prometheus does it (it sends Accept-Encoding: gzip);
    `accept`: the Accept header, none by default."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Accept-Encoding": "gzip" if gzip_ok else "identity"}
    if accept is not None:
        headers["Accept"] = accept
    try:
        started = time.perf_counter()
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        wire = response.read()
        seconds = time.perf_counter() - started
        headers = {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()
    body = gzip.decompress(wire) if headers.get("content-encoding", "").lower() == "gzip" else wire
    return Scrape(response.status, headers, body, len(wire), seconds)


def listening_ports(pid: int) -> list[int]:
    """TCP ports the process listens on (psutil; for children that do not log their port)."""
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
    return sorted({c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN and c.laddr})


@dataclass
class ExporterProcess:
    """A child exporter process. `port_pattern`'s group 1, found in the log, is its port; without a
    pattern the first TCP port the child listens on is."""

    argv: Sequence[str]
    log_path: Path
    port_pattern: re.Pattern[str] | None = None
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    start_timeout: float = 30.0
    stop_timeout: float = 10.0
    name: str = ""
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: IO[bytes] | None = field(default=None, init=False, repr=False)
    _port: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name:  # `python -m pkg …` is named pkg
            argv = list(self.argv)
            module = argv.index("-m") + 1 if "-m" in argv[:-1] else 0
            self.name = argv[module] if module else Path(argv[0]).name

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> ExporterProcess:
        """Start the child and wait until it listens; on any failure the child is stopped first."""
        if self._process is not None:
            raise ExporterError(f"{self.name}: already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        try:
            self._process = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=dict(self.env) if self.env is not None else None,
                cwd=self.cwd,
            )
            self._port = self._wait_for_port()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after `stop_timeout`; reaps the child. Returns its exit status
        (negative: killed by that signal), None when it was never started. Safe to call twice."""
        process, self._process = self._process, None
        status: int | None = None
        try:
            if process is not None:
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(self.stop_timeout)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
                status = process.returncode
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
        return status

    def __enter__(self) -> ExporterProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- while running ----------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._running().pid

    @property
    def port(self) -> int:
        if self._port is None:
            raise ExporterError(f"{self.name}: not listening")
        return self._port

    def url(self, path: str = "/metrics") -> str:
        return f"http://{LOOPBACK}:{self.port}{path}"

    def scrape(
        self,
        path: str = "/metrics",
        *,
        gzip_ok: bool = False,
        timeout: float = 60.0,
        accept: str | None = None,
    ) -> Scrape:
        """GET `path`; an answer other than 200 raises ExporterError with the log's tail."""
        self._running()
        result = scrape(self.port, path, gzip_ok=gzip_ok, timeout=timeout, accept=accept)
        if result.status != 200:
            raise ExporterError(
                f"{self.name}: GET {path} answered {result.status}: {result.body[:300]!r}\n{self.log_tail()}"
            )
        return result

    def rss(self) -> int:
        """Resident set size of the child in bytes."""
        return int(psutil.Process(self.pid).memory_info().rss)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        tail = self.log_text().splitlines()[-lines:]
        return f"--- last {len(tail)} log lines of {self.name} ({self.log_path.name}) ---\n" + "\n".join(tail)

    # --- internals --------------------------------------------------------------------------------

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise ExporterError(f"{self.name}: not started")
        if self._process.poll() is not None:
            raise ExporterError(
                f"{self.name}: exited with status {self._process.returncode}\n{self.log_tail()}"
            )
        return self._process

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + self.start_timeout
        while True:
            process = self._running()  # raises, quoting the log, if the child already exited
            if self.port_pattern is not None:
                match = self.port_pattern.search(self.log_text())
                if match:
                    return int(match.group(1))
            else:
                ports = listening_ports(process.pid)
                if ports:
                    return ports[0]
            if time.monotonic() > deadline:
                raise ExporterError(
                    f"{self.name}: not listening after {self.start_timeout:g}s\n{self.log_tail()}"
                )
            time.sleep(0.02)
