"""What the tests share, one module per thing it gives (the tests of each part sit beside it: unit/,
<engine>/, web/, deploy/ …):

- `skip_unless_installed`: a test that needs an extra, the lab or a Debian program skips, naming what
  to install;
- `fake_clock`: a clock a test moves by hand; `polling`: wait for a condition, fail naming it;
- `fake_host`: sysfs and procfs trees laid out as a real host's (`FakeHost`);
- `background`: a loop in a thread for the length of a `with` block;
- `hostile_files`: a FIFO, /dev/zero or a socket where a file should be, run without wedging the test;
- `exporter_process`: `lunlat serve` (or another exporter) as a child process, scraped;
- `stub_exporter`: an HTTP server on loopback answering one path with a given exposition;
- `exposition_samples`: a text exposition read back as samples, and the exporter's health series;
- `openmetrics_parser`: prometheus_client's OpenMetrics parser, typed, and Prometheus' Accept header;
- `prometheus_server`: Debian's Prometheus (or Prometheus 3) as a child process, and its HTTP API;
- `victoria_metrics`: Debian's single-node VictoriaMetrics as a test's central store;
- `prometheus3`: what Prometheus 3 stores differently (a bucket's `le` as it normalises it);
- `top_frames`: `lunlat top`'s batch frames read back;
- `live_database`: two collections of a live database source, both clean;
- `misbehaving_peers`: a port that never answers and one nothing listens on, for the database drivers;
- `lab_host`: whether this host can run the lab; `lab_daemon`: the lab's FUSE daemon as a fixture;
- `compose_config`: `docker-compose config` of the repository's compose file, parsed;
- `podman_stack`: podman, base images from Debian's archive and a compose engine, for the stack test;
- `terminate`: a plugin (tests/pytest.ini) that makes SIGTERM end a run with its fixtures torn down.
"""
