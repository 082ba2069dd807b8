"""What the Oracle source publishes: its metric names, help texts and labels (docs/reference/metrics.md)."""

from __future__ import annotations

from lunlat.ground import DB_FILE_LABELS, Capability, MetricSpec

ORACLE_FILE_LABELS: tuple[str, ...] = DB_FILE_LABELS
# `measure` says what one wait of the event is (engines/oracle/events.py): `per_io` (time / waits is
# an I/O latency), `time_spent` (a wait covers part of a batch: only the time counts), `per_commit`.
# A wait's `role` is a Role, or `replica` (a synchronous standby's/replica's wait: Data Guard
# 'SYNC Remote Write', SQL Server HADR_SYNC_COMMIT). `replica` is not a Role: no LUN has it, and
# Role is what config files and LUN labels are checked against (so ROLE_PRIORITY needs no place).
ORACLE_EVENT_LABELS: tuple[str, ...] = ("database", "db", "db_instance", "event", "role", "measure")
# Per wait class, the catch-all of the I/O wait events events.py does not list (new releases,
# engineered systems): `wait_class` is 'User I/O' or 'System I/O'.
ORACLE_WAIT_CLASS_LABELS: tuple[str, ...] = ("database", "db", "db_instance", "wait_class")
ORACLE_ASM_LABELS: tuple[str, ...] = ("database", "db_instance", "diskgroup", "disk", "path", "lun")

# The wait histograms' buckets: Oracle's power-of-two bounds from 1 µs to 2^25 µs (33.6 s), bucket b
# holding the waits in [b/2, b): WAIT_TIME_MICRO "represents waits of duration < num that are not
# included in any smaller bucket", buckets "from < 1 us, < 2 us, < 4 us, ..." (Oracle Database
# Reference, V$EVENT_HISTOGRAM_MICRO,
# https://docs.oracle.com/en/database/oracle/oracle-database/23/refrn/V-EVENT_HISTOGRAM_MICRO.html;
# V$CON_EVENT_HISTOGRAM_MICRO the same per container). A fixed set, so every
# series exists from the first scrape and histogram_quantile sees the same buckets always. 512 µs and
# 1024 µs bracket the 1 ms goal; Oracle has no finer bounds to offer.
BUCKET_BOUNDS_MICRO: tuple[int, ...] = tuple(1 << k for k in range(26))


def format_le(bound_micro: int) -> str:
    """`le` label of a bound in µs, in seconds as every other bucket's (exposition.format_value:
    0.000512, 1.048576, and 1e-06 … 6.4e-05 under 100 µs). Prometheus 3 stores a bucket's `le` in
    that float form whatever the exposition wrote ("`le` and `quantile` label values", its migration
    guide, prometheus.io/docs/prometheus/latest/migration/; tests/support/prometheus3.py), so a bound
    spelled so is stored alike by 2.x and 3.x, and no bucket series starts anew across an upgrade.
    repr is what format_value prints for a finite float (the exposition is a layer above the engines)."""
    return repr(bound_micro / 1_000_000)


# Each finite bucket's upper bound in seconds and its `le` label, for the rules (the SLO per I/O of
# the database layer counts the waits at or below a goal from these buckets).
WAIT_BUCKETS: tuple[tuple[float, str], ...] = tuple(
    (b / 1_000_000, format_le(b)) for b in BUCKET_BOUNDS_MICRO
)

ORACLE_FILE_READS = MetricSpec(
    "lunlat_oracle_file_reads_total",
    "counter",
    "Read requests of a database file, small + large, synchronous and asynchronous (V$IOSTAT_FILE). "
    "Redo logs and control files are one row each. Not judged: the goal reads lunlat_oracle_file_sync_reads_total.",
    ORACLE_FILE_LABELS,
)
ORACLE_FILE_WRITES = MetricSpec(
    "lunlat_oracle_file_writes_total",
    "counter",
    "Write requests of a database file, small + large (V$IOSTAT_FILE).",
    ORACLE_FILE_LABELS,
)
ORACLE_FILE_READ_TIME = MetricSpec(
    "lunlat_oracle_file_read_time_seconds_total",
    "counter",
    "Service time summed over the file's reads (V$IOSTAT_FILE small + large read service time, ms): "
    "an asynchronous read's service time is not the full wait. Not judged: the goal reads the synchronous one.",
    ORACLE_FILE_LABELS,
)
ORACLE_FILE_WRITE_TIME = MetricSpec(
    "lunlat_oracle_file_write_time_seconds_total",
    "counter",
    "Service time summed over the file's writes (V$IOSTAT_FILE small + large write service time, ms): "
    "the database layer's write latency (no synchronous write latency per file exists; docs/oracle.md).",
    ORACLE_FILE_LABELS,
)
ORACLE_WAITS = MetricSpec(
    "lunlat_oracle_wait_event_waits_total",
    "counter",
    "Waits for an I/O wait event in a container (V$CON_SYSTEM_EVENT.TOTAL_WAITS).",
    ORACLE_EVENT_LABELS,
)
ORACLE_WAIT_TIME = MetricSpec(
    "lunlat_oracle_wait_event_time_seconds_total",
    "counter",
    "Time waited for an I/O wait event, in µs precision (V$CON_SYSTEM_EVENT.TIME_WAITED_MICRO).",
    ORACLE_EVENT_LABELS,
)
ORACLE_WAIT_DURATION = MetricSpec(
    "lunlat_oracle_wait_event_duration_seconds",
    "histogram",
    "Distribution of an I/O wait event's durations (per container from V$CON_EVENT_HISTOGRAM_MICRO on 18c "
    "and later, else the whole instance's from V$EVENT_HISTOGRAM_MICRO with db empty; power-of-two µs buckets; "
    "le is Oracle's exclusive upper bound). _sum is estimated as 3/4 of each bucket's bound per wait: "
    "for the exact average use the _time_seconds_total and _waits_total counters.",
    ORACLE_EVENT_LABELS,
)
ORACLE_ASM_READS = MetricSpec(
    "lunlat_oracle_asm_disk_reads_total",
    "counter",
    "This database instance's reads of an ASM disk (V$ASM_DISK_IOSTAT.READS, per ASM client).",
    ORACLE_ASM_LABELS,
)
ORACLE_ASM_WRITES = MetricSpec(
    "lunlat_oracle_asm_disk_writes_total",
    "counter",
    "This database instance's writes of an ASM disk (V$ASM_DISK_IOSTAT.WRITES, per ASM client).",
    ORACLE_ASM_LABELS,
)
ORACLE_ASM_READ_TIME = MetricSpec(
    "lunlat_oracle_asm_disk_read_time_seconds_total",
    "counter",
    "Time summed over this instance's reads of an ASM disk (V$ASM_DISK_IOSTAT.READ_TIME, seconds).",
    ORACLE_ASM_LABELS,
)
ORACLE_ASM_WRITE_TIME = MetricSpec(
    "lunlat_oracle_asm_disk_write_time_seconds_total",
    "counter",
    "Time summed over this instance's writes of an ASM disk (V$ASM_DISK_IOSTAT.WRITE_TIME, seconds).",
    ORACLE_ASM_LABELS,
)

# Oracle's tuning guide names the synchronous single-block read latency the best indicator of I/O
# performance: write caches flatter writes, multiblock sizes vary, and an asynchronous I/O's service
# time is not the full wait ("Monitoring I/O", 2 Day + Performance Tuning Guide:
# https://docs.oracle.com/en/database/oracle/oracle-database/23/tdppt/monitoring-i-o.html).
# Columns and units: Oracle Database Reference, V$IOSTAT_FILE
# (https://docs.oracle.com/en/database/oracle/oracle-database/23/refrn/V-IOSTAT_FILE.html).
ORACLE_FILE_SYNC_READS = MetricSpec(
    "lunlat_oracle_file_sync_reads_total",
    "counter",
    "Synchronous single-block read requests of a database file (V$IOSTAT_FILE.SMALL_SYNC_READ_REQS).",
    ORACLE_FILE_LABELS,
)
ORACLE_FILE_SYNC_READ_TIME = MetricSpec(
    "lunlat_oracle_file_sync_read_time_seconds_total",
    "counter",
    "Latency summed over the file's synchronous single-block reads (V$IOSTAT_FILE.SMALL_SYNC_READ_LATENCY, ms): "
    "the full wait, Oracle's best indicator of I/O performance, and the database layer's read latency.",
    ORACLE_FILE_LABELS,
)

# The sum over every event of the class in V$CON_SYSTEM_EVENT (its WAIT_CLASS column), in µs like
# the per-event series: Oracle Database Reference, V$CON_SYSTEM_EVENT and "Classes of Wait Events"
# (User I/O, System I/O). oracle-db-appdev-monitoring publishes the same classes from
# GV$SYSTEM_WAIT_CLASS, in centiseconds and per instance only.
ORACLE_WAIT_CLASS_WAITS = MetricSpec(
    "lunlat_oracle_wait_class_waits_total",
    "counter",
    "Waits for every event of an I/O wait class (User I/O, System I/O) in a container, listed or not "
    "(V$CON_SYSTEM_EVENT.TOTAL_WAITS summed by WAIT_CLASS). Events of different kinds: no latency.",
    ORACLE_WAIT_CLASS_LABELS,
)
ORACLE_WAIT_CLASS_TIME = MetricSpec(
    "lunlat_oracle_wait_class_time_seconds_total",
    "counter",
    "Time waited for every event of an I/O wait class in a container, listed or not, in µs precision "
    "(V$CON_SYSTEM_EVENT.TIME_WAITED_MICRO summed by WAIT_CLASS).",
    ORACLE_WAIT_CLASS_LABELS,
)

ORACLE_METRICS: tuple[MetricSpec, ...] = (
    ORACLE_FILE_READS,
    ORACLE_FILE_WRITES,
    ORACLE_FILE_READ_TIME,
    ORACLE_FILE_WRITE_TIME,
    ORACLE_WAITS,
    ORACLE_WAIT_TIME,
    ORACLE_WAIT_DURATION,
    ORACLE_ASM_READS,
    ORACLE_ASM_WRITES,
    ORACLE_ASM_READ_TIME,
    ORACLE_ASM_WRITE_TIME,
    ORACLE_FILE_SYNC_READS,
    ORACLE_FILE_SYNC_READ_TIME,
    ORACLE_WAIT_CLASS_WAITS,
    ORACLE_WAIT_CLASS_TIME,
)

CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "asm",
        "Oracle: the ASM disks under files named +GROUP/... (GV$ASM_DISK_STAT with GV$ASM_DISK_IOSTAT), and so those files' lun",
        fixable=True,
    ),
    Capability(
        "container_histograms",
        "Oracle: wait histograms per container (GV$CON_EVENT_HISTOGRAM_MICRO, 18c and later); before 18c "
        "the whole instance's histogram is published with db empty",
        fixable=False,
    ),
)
