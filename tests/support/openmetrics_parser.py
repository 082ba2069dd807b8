"""prometheus_client's OpenMetrics parser, typed, and the Accept header Prometheus sends (issue 42)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import parser

# prometheus_client's openmetrics modules carry no type hints (0.26): the parser's signature, said once.
openmetrics_families = cast(Callable[[str], Iterator[Metric]], parser.text_string_to_metric_families)

# What Prometheus 2.42 sends (scrape/scrape.go, scrapeAcceptHeader): OpenMetrics 1.0.0 first, then 0.0.1,
# then the text format; 2.49 and later send the same by default (scrape_protocols' default order).
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
