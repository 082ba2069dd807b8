"""Sources: one module per place lunlat reads latency counters from, all behind `base.Source`."""
