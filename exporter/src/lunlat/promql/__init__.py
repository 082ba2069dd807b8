"""The PromQL lunlat's rules, dashboards and report share, built from the metric contract: the names of
the recorded series (`recorded`), the averages over the counters (`averages`) and each layer's
counters as PromQL (`layers`: the host's, from lunlat or another exporter, and each engine's)."""
