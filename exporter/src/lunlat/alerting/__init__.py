"""Alerting: the latency goal definition and the Prometheus rules generated from it."""
