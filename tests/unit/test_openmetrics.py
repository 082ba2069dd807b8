"""OpenMetrics 1.0 (issue 42): negotiated as prometheus_client negotiates it, every family of the
contract rendered so that prometheus_client's OpenMetrics parser takes it, the text format still
the default. The golden host's whole page: tests/golden; a real Prometheus: tests/integration."""

from __future__ import annotations

import gzip
import http.client
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.exposition import choose_encoder
from prometheus_client.parser import text_string_to_metric_families

from lunlat import contract
from lunlat.exposition import CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE, render, render_openmetrics
from lunlat.model import Family, LabelSet
from lunlat.scrape import Scraper, process_registry
from lunlat.sources.base import SourceResult
from lunlat.web.server import ListenAddress, Server, wants_openmetrics
from tests.support.openmetrics_parser import PROMETHEUS_ACCEPT, openmetrics_families

OPENMETRICS = "application/openmetrics-text"


def one_family(spec: contract.MetricSpec) -> Family:
    """A family of `spec` as a source publishes it: one series (a histogram: two, bucketed)."""
    if spec.type != "histogram":
        labels = LabelSet(spec.labels, tuple(f"{name}-1" for name in spec.labels))
        return Family(spec, [("", labels, 3)])
    family = Family(spec)
    for series in ("a", "b"):  # two series: each one's samples must stay together
        values = tuple(f"{name}-{series}" for name in spec.labels)
        for i, bound in enumerate(contract.BIO_BUCKETS):
            family.add(LabelSet((*spec.labels, "le"), (*values, repr(bound))), i, "_bucket")
        family.add(LabelSet((*spec.labels, "le"), (*values, "+Inf")), len(contract.BIO_BUCKETS), "_bucket")
        family.add(LabelSet(spec.labels, values), len(contract.BIO_BUCKETS), "_count")
        family.add(LabelSet(spec.labels, values), 0.25, "_sum")
    return family


def test_every_family_of_the_contract_is_openmetrics_the_parser_takes() -> None:
    families = [one_family(spec) for spec in contract.ALL_METRICS]
    text = render_openmetrics(families)
    assert text.endswith("\n# EOF\n") and text.count("# EOF") == 1
    parsed = {f.name: f for f in openmetrics_families(text)}
    for spec in contract.ALL_METRICS:
        # A counter's family is named without `_total`, its samples with it (OpenMetrics 1.0,
        # "Counter"); the unit is the name's base unit.
        name = spec.name.removesuffix("_total") if spec.type == "counter" else spec.name
        family = parsed[name]
        assert (family.type, family.documentation, family.unit) == (spec.type, spec.help, spec.unit)
        assert {s.name for s in family.samples} == (
            {f"{name}_bucket", f"{name}_count", f"{name}_sum"} if spec.type == "histogram" else {spec.name}
        )
    assert {spec.unit for spec in contract.ALL_METRICS} == {"", "seconds", "bytes"}
    assert contract.DEVICE_READ_TIME.unit == "seconds" and contract.DEVICE_READS.unit == ""
    # The same series and values as the text format says.
    text_samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(render(families))
        for s in f.samples
    }
    om_samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in parsed.values() for s in f.samples
    }
    assert om_samples == text_samples


def test_a_help_text_with_quotes_and_backslashes_round_trips() -> None:
    # OpenMetrics' HELP is an escaped-string: `"` escaped too, unlike the text format's HELP.
    spec = contract.MetricSpec("lunlat_odd", "gauge", 'say "hi"\\ there\nnext', ())
    family = Family(spec, [("", LabelSet((), ()), 1)])
    (parsed,) = openmetrics_families(render_openmetrics([family]))
    assert parsed.documentation == spec.help


@pytest.mark.parametrize(
    "accept",
    [
        "",
        "*/*",
        "text/plain",
        "text/plain;version=0.0.4",
        OPENMETRICS,
        f"{OPENMETRICS}; version=1.0.0",
        f"{OPENMETRICS};version=0.0.1",
        f"{OPENMETRICS};version=0.0.1,{OPENMETRICS};version=1.0.0",
        f"text/plain;version=0.0.4,{OPENMETRICS};version=1.0.0",
        f" {OPENMETRICS} ;q=0.5, text/plain",
        PROMETHEUS_ACCEPT,
        "application/openmetrics-textx",
    ],
)
def test_negotiation_is_prometheus_clients(accept: str) -> None:
    """Where client_python answers OpenMetrics 1.0.0, lunlat does; elsewhere both answer text."""
    _, content_type = choose_encoder(accept)
    theirs = content_type.startswith(OPENMETRICS) and "version=1.0.0" in content_type
    assert wants_openmetrics(accept) == theirs


def test_a_version_after_1_0_0_is_not_answered_with_1_0_0() -> None:
    # client_python answers 2.0.0 there; lunlat speaks 1.0.0 only, so that entry is passed over.
    assert not wants_openmetrics(f"{OPENMETRICS};version=2.0.0")
    assert wants_openmetrics(f"{OPENMETRICS};version=2.0.0,{OPENMETRICS};version=1.0.0")


class Disk:
    name = "disk"
    error_reasons: tuple[str, ...] = ()
    timeout: float | None = None

    def collect(self) -> SourceResult:
        return SourceResult([one_family(contract.DEVICE_READ_TIME), one_family(contract.DEVICE_IO_LATENCY)])


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(ListenAddress("127.0.0.1", 0), Scraper([Disk()], process_registry()), "/metrics")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def get(server: Server, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        assert resp.status == 200
        return {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_server_answers_openmetrics_when_asked_and_text_otherwise(server: Server) -> None:
    headers, body = get(server, {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    assert headers["content-type"] == OPENMETRICS_CONTENT_TYPE
    assert headers["content-type"] == choose_encoder(OPENMETRICS)[1]
    assert headers["content-encoding"] == "gzip"
    text = gzip.decompress(body).decode()
    names = {f.name for f in openmetrics_families(text)}
    # lunlat's families, then prometheus_client's own in OpenMetrics too, one `# EOF` at the end.
    assert {
        "lunlat_device_read_time_seconds",
        "lunlat_device_io_latency_seconds",
        "lunlat_source_up",
    } <= names
    assert "process_cpu_seconds" in names and text.count("# EOF") == 1

    headers, body = get(server, {})
    assert headers["content-type"] == CONTENT_TYPE and "content-encoding" not in headers
    assert "lunlat_device_read_time_seconds" in {
        f.name for f in text_string_to_metric_families(body.decode())
    }
    # The text format's TYPE names the counter with `_total`, and it has neither UNIT nor EOF.
    assert b"# TYPE lunlat_device_read_time_seconds_total counter\n" in body
    assert b"# UNIT" not in body and b"# EOF" not in body
