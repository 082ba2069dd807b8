"""`lunlat top`: a live per-LUN view like `iostat -x`, from /proc/diskstats or a running exporter.

Two places a sample can come from, one shape they end up in (`Snapshot`: the exporter's metric
names and labels):

- locally, the exporter's own diskstats source (parse, 32-bit unwrap, topology, `luns:` labels) is
  built from the config and collected: LUN names and labels are exactly what `serve` publishes;
- with `--url`, a running exporter's /metrics, parsed with prometheus_client's text parser; the
  per-I/O histograms (`lunlat_device_io_latency_seconds`) it may publish give the p99 columns;
- with `--url` and `--exporter.url`, where the goals' host layer is node_exporter's (lunlat runs
  with `--no-collector.diskstats.counters`): node_exporter's per-device counters, joined to lunlat's
  LUNs and roles by `device` as the rules' host layer joins them (`lunlat.promql.layers`).

Locally top reads the kernel's counters itself whatever the goals' host layer: they are the ones
node_exporter reads. windows_exporter's volumes join SQL Server's files only in Prometheus (the
volume's `database` label comes from its scrape config): top says so and names the report.

A frame is the difference of two samples divided by the time measured between them. Latencies are
coloured against each LUN's goal from alerts/goals.yaml (`Goals.tier`): green below, red at or above.

The modules, each needing only those before it: `frames` (samples, counters, rows and their text:
no I/O), `readers` (where the samples come from), `view` (the curses view), `command` (flags, batch
frames, the live view started).
"""
