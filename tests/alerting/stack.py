"""The paging path with real parts: lunlat exporter → Prometheus (the repo's rules) → Alertmanager
(the repo's routing, grouping and inhibition) → a webhook receiver that records every notification.

Used by the end-to-end alerting test and by bench/time_to_page.py:

    with WebhookReceiver() as hook, AlertingStack(workdir, exporter_config, hook.url) as stack:
        hook.wait_for(lambda n: ..., timeout=180)

Prometheus and Alertmanager are the Debian binaries (`prometheus`, `prometheus-alertmanager`), or
another Prometheus (`AlertingStack.prometheus_binary`: the Prometheus 3 build); each listens on a
port the kernel picks. Scrape and rule evaluation run every 15 s, as the issue asks, unless the
stack is given another interval.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tests.support import prometheus_server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess
from tests.support.prometheus_server import PromApi

REPO = Path(__file__).resolve().parents[2]
ALERTMANAGER_CONFIG = REPO / "alerts" / "alertmanager.yml"
INTERVAL = "15s"

PROMETHEUS = prometheus_server.PROMETHEUS
ALERTMANAGER = "prometheus-alertmanager"  # Debian's name; upstream calls it alertmanager


def wait_full_window(api: PromApi, luns: int, interval: str = INTERVAL) -> None:
    """Until the series of all `luns` LUNs (of every exporter) span a whole rate window, then two
    evaluations more. Before that a rate() over [1m] sees only part of the load (its extrapolation
    stops near a series' first sample), or none of a LUN scraped once so far: an alert whose `for`
    is 0s fires on its own LUN's first two samples, and its annotations would then name rates of
    neighbours that are not yet measured. Prometheus re-renders an active alert's annotations at every
    evaluation, so the ones read after this see the whole load."""
    seconds = float(interval.removesuffix("s"))
    samples = int(60 / seconds)
    api.wait_for_series(f'count_over_time(lunlat_lun_info{{kind="lun"}}[1m]) >= {samples}', luns, 120.0)
    time.sleep(2 * seconds)


def alertmanager_binary() -> str | None:
    return shutil.which(ALERTMANAGER) or shutil.which("alertmanager")


def missing_binaries() -> list[str]:
    found = [shutil.which(PROMETHEUS), alertmanager_binary()]
    return [name for name, path in zip((PROMETHEUS, ALERTMANAGER), found, strict=True) if path is None]


@dataclass(frozen=True, slots=True)
class Notification:
    """One webhook call from Alertmanager: when it arrived and what it said."""

    received: float  # time.monotonic()
    payload: dict[str, Any]

    @property
    def status(self) -> str:
        return str(self.payload.get("status", ""))

    @property
    def receiver(self) -> str:
        return str(self.payload.get("receiver", ""))

    @property
    def alerts(self) -> list[dict[str, Any]]:
        return list(self.payload.get("alerts", []))


def started_at(alert: dict[str, Any]) -> float:
    """An alert's startsAt (RFC 3339 with nanoseconds, from Alertmanager) as epoch seconds; 0 when
    missing or unparsable."""
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", str(alert.get("startsAt", ""))).replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(trimmed).timestamp()
    except ValueError:
        return 0.0


@dataclass
class WebhookReceiver:
    """Records Alertmanager's webhook notifications (JSON POSTs) with their arrival time."""

    notifications: list[Notification] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _changed: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)

    def __enter__(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = json.loads(body)
                except ValueError:
                    self.send_error(400, "not JSON")
                    return
                with receiver._changed:
                    receiver.notifications.append(Notification(time.monotonic(), payload))
                    receiver._changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://{LOOPBACK}:{self._server.server_address[1]}/alerts"

    def snapshot(self) -> list[Notification]:
        with self._changed:
            return list(self.notifications)

    def wait_for(
        self, matches: Callable[[Notification], bool], timeout: float, since: float = 0.0
    ) -> Notification:
        """The first notification received after `since` (monotonic) that `matches`; TimeoutError
        listing what did arrive when none does within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for notification in self.notifications:
                    if notification.received >= since and matches(notification):
                        return notification
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [
                        (n.receiver, n.status, [a["labels"].get("alertname") for a in n.alerts])
                        for n in self.notifications
                    ]
                    raise TimeoutError(f"no matching notification within {timeout:g}s; received: {seen}")
                self._changed.wait(left)


def alertmanager_config(webhook_url: str) -> dict[str, Any]:
    """The repo's Alertmanager config with every receiver replaced by the test webhook. Routing,
    grouping, timers and inhibition are kept as they are: they are what is under test."""
    config: dict[str, Any] = yaml.safe_load(ALERTMANAGER_CONFIG.read_text(encoding="utf-8"))
    config["global"] = {"resolve_timeout": config.get("global", {}).get("resolve_timeout", "5m")}
    config["receivers"] = [
        {"name": r["name"], "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
        for r in config["receivers"]
    ]
    return config


def start_alertmanager(workdir: Path, webhook_url: str) -> ExporterProcess:
    """Alertmanager with the repo's config (receivers → `webhook_url`) under `workdir`, on a port the
    kernel picks; returns once ready. Also used by the fleet test (tests/deploy/test_fleet.py)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "alertmanager.yml"
    config.write_text(yaml.safe_dump(alertmanager_config(webhook_url), sort_keys=False), encoding="utf-8")
    process = ExporterProcess(
        [
            alertmanager_binary() or ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={workdir / 'alertmanager-data'}",
            f"--web.listen-address={LOOPBACK}:0",
            "--cluster.listen-address=",  # a single instance: no gossip port
        ],
        workdir / "alertmanager.log",
        name="alertmanager",
        start_timeout=60.0,
    ).start()
    try:
        prometheus_server.wait_ready(process)
    except BaseException:
        process.stop()
        raise
    return process


@dataclass
class AlertingStack:
    """Exporter, Alertmanager and Prometheus as child processes under `workdir`."""

    workdir: Path
    exporter_config: Path
    webhook_url: str
    # More flags for `lunlat serve`, e.g. ("--collector.biolatency",).
    exporter_args: tuple[str, ...] = ()
    # The Prometheus server (prometheus_server.binary) and its scrape and evaluation interval.
    prometheus_binary: str = PROMETHEUS
    interval: str = INTERVAL
    processes: list[ExporterProcess] = field(default_factory=list)
    alertmanager: ExporterProcess = field(init=False)
    exporter: ExporterProcess = field(init=False)
    prometheus: ExporterProcess = field(init=False)
    api: PromApi = field(init=False)

    def __enter__(self) -> AlertingStack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def _start(self) -> None:
        self.alertmanager = start_alertmanager(self.workdir, self.webhook_url)
        self.processes.append(self.alertmanager)
        self.exporter = self._spawn(
            [
                sys.executable,
                "-m",
                "lunlat",
                "serve",
                f"--web.listen-address={LOOPBACK}:0",
                f"--config.file={self.exporter_config}",
                *self.exporter_args,
            ],
            "lunlat",
            port_pattern=True,
        )
        cfg = prometheus_server.config(
            [f"{LOOPBACK}:{self.exporter.port}"], self.interval, f"{LOOPBACK}:{self.alertmanager.port}"
        )
        self.prometheus = prometheus_server.start(self.workdir, cfg, self.prometheus_binary)
        self.processes.append(self.prometheus)
        self.api = prometheus_server.api(self.prometheus)

    def _spawn(self, argv: list[str], name: str, *, port_pattern: bool = False) -> ExporterProcess:
        process = ExporterProcess(
            argv,
            self.workdir / f"{name}.log",
            port_pattern=LUNLAT_PORT if port_pattern else None,
            name=name,
            start_timeout=60.0,
        )
        self.processes.append(process)
        return process.start()

    # --- Prometheus' HTTP API -------------------------------------------------------------------------

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query; the result vector."""
        return self.api.query(promql)

    def values(self, promql: str, label: str) -> dict[str, float]:
        return self.api.values(promql, label)

    def wait_for_series(self, promql: str, count: int, timeout: float) -> list[dict[str, Any]]:
        """Poll until the query returns at least `count` series."""
        return self.api.wait_for_series(promql, count, timeout)
