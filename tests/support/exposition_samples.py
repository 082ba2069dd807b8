"""A page of the text exposition read back as numbers, with prometheus_client's parser: every sample by
name and labels, and the exporter's own health series (`lunlat_source_up`, `lunlat_source_errors_total`)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

# A sample's key: its name and its labels, sorted.
SampleKey = tuple[str, tuple[tuple[str, str], ...]]


def samples(text: str) -> dict[SampleKey, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def up(text: str, source: str) -> float:
    return samples(text)[("lunlat_source_up", (("source", source),))]


def errors(text: str, source: str, reason: str) -> float:
    return samples(text)[("lunlat_source_errors_total", (("reason", reason), ("source", source)))]
