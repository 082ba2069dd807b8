"""Where `lunlat top`'s samples come from: the exporter's own diskstats source on this host, a
running exporter's /metrics, or that and the same host's node_exporter joined on `device`."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from lunlat import ground
from lunlat.config import ConfigError
from lunlat.configfile import load_config
from lunlat.promql import averages
from lunlat.promql.layers import NODE_EXPORTER_DISKSTATS
from lunlat.sources.base import SourceError
from lunlat.sources.factory import BuildError, Context, Settings
from lunlat.top.frames import (
    COUNTER_FIELDS,
    Sample,
    Snapshot,
    TopError,
    exposition_samples,
    family_samples,
    snapshot,
)

if TYPE_CHECKING:
    from lunlat.sources.diskstats import DiskstatsSource

URL_TIMEOUT = 10.0

# node_exporter's diskstats counters as lunlat names them (the rules' names, lunlat.promql.layers), with
# the weighted I/O time for aqu-sz. Both in seconds and bytes, as lunlat's own.
_FROM_NODE_EXPORTER: dict[str, str] = {
    **{
        NODE_EXPORTER_DISKSTATS[key]: spec.name
        for op in averages.OPS
        for key, spec in (
            (f"{op}s", averages.ops_counter(op)),
            (f"{op}_time", averages.time_counter(op)),
            (f"{op}_bytes", averages.bytes_counter(op)),
        )
    },
    NODE_EXPORTER_DISKSTATS["queue"]: ground.DEVICE_IO_WEIGHTED_TIME.name,
}


class LocalReader:
    """The exporter's diskstats source, built from the config as `serve` builds it."""

    def __init__(self, config_file: Path | None, procfs: Path, sysfs: Path) -> None:
        from lunlat.sources import diskstats  # noqa: PLC0415

        try:
            config = load_config(config_file)
        except ConfigError as exc:
            raise TopError(f"config error: {'; '.join(map(str, exc.problems))}") from None
        # Counters on whatever the config says: `counters: false` hands the host layer to
        # node_exporter in Prometheus, but top reads the kernel's counters itself.
        settings = Settings(procfs, sysfs, "diskstats", counters=True)
        built = diskstats.build(Context.of(config, settings))
        if isinstance(built, BuildError):
            raise TopError(str(built))
        self._source: DiskstatsSource = built[0]
        self.where = str(procfs / "diskstats")

    def read(self) -> Snapshot:
        try:
            result = self._source.collect()
        except SourceError as exc:
            raise TopError(str(exc)) from None
        return snapshot(family_samples(result.families), time.monotonic())


class UrlReader:
    """A running exporter's /metrics."""

    def __init__(self, url: str) -> None:
        if "://" not in url:
            url = f"http://{url}"
        scheme, _, rest = url.partition("://")
        if scheme not in ("http", "https"):
            raise TopError(f"--url: not an http(s) URL: {url!r}")
        if "/" not in rest:
            url += "/metrics"
        self.url = url
        self.where = url

    def read(self) -> Snapshot:
        return snapshot(self.samples(), time.monotonic())

    def samples(self) -> list[Sample]:
        try:
            with urllib.request.urlopen(self.url, timeout=URL_TIMEOUT) as response:  # noqa: S310 - http(s) only
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            raise TopError(f"cannot read {self.url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise TopError(f"cannot read {self.url}: {reason}") from None
        try:
            return list(exposition_samples(text))
        except (ValueError, TypeError, IndexError) as exc:
            raise TopError(f"{self.url} is not the Prometheus text format: {exc}") from None


class NodeExporterReader:
    """lunlat's /metrics (names, roles, histograms) and node_exporter's (the counters), joined on
    `device` with lunlat_lun_info{kind="lun"} as the rules' node_exporter host layer joins them:
    a path or a device lunlat does not name is no LUN. Both URLs are one host's, so the host needs
    no join here."""

    def __init__(self, lunlat: UrlReader, exporter: UrlReader) -> None:
        self.lunlat, self.exporter = lunlat, exporter
        self.where = f"{lunlat.url} + {exporter.url}"

    def read(self) -> Snapshot:
        own = self.lunlat.samples()
        theirs = self.exporter.samples()
        at = time.monotonic()
        luns = {
            labels.get("device", ""): labels.get("lun", "")
            for name, labels, _ in own
            if name == ground.LUN_INFO.name and labels.get("kind") == "lun"
        }
        joined: list[Sample] = [s for s in own if s[0] not in COUNTER_FIELDS]
        for name, labels, value in theirs:
            ours = _FROM_NODE_EXPORTER.get(name)
            lun = luns.get(labels.get("device", ""))
            if ours is not None and lun is not None:
                joined.append((ours, {"lun": lun, "device": labels["device"]}, value))
        if not any(s[0] in COUNTER_FIELDS for s in joined) and any(
            s[0] in _FROM_NODE_EXPORTER for s in theirs
        ):
            raise TopError(
                f"none of {self.exporter.url}'s devices is a LUN of {self.lunlat.url} "
                f"({ground.LUN_INFO.name}{{kind='lun'}} by device): give the node_exporter of "
                "the host lunlat runs on"
            )
        return snapshot(joined, at)


Reader = LocalReader | UrlReader | NodeExporterReader
