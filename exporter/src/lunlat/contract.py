"""The metric contract: every metric name, type, help text and label set lunlat publishes.

This module is the single definition that the exporter, the metric reference
(docs/reference/metrics.md, generated from here), the alert and recording rules and the dashboards
are checked against (docs/contract.md §3). Change a name here and the tests
that compare the docs and rules with this module fail until they follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

MetricType = Literal["counter", "gauge", "histogram"]

PREFIX = "lunlat_"

# Roles a LUN or a database file can have (docs/contract.md, "Model"). Config files, the lab, the
# database sources and the rules all take this one definition.
Role = Literal["data", "log", "temp", "control", "other"]
ROLES: tuple[Role, ...] = get_args(Role)

# When one LUN holds files of several roles, the label says what matters most for latency: a data
# LUN that also holds a control file copy is a data LUN; a redo LUN with a control file copy is a log LUN.
ROLE_PRIORITY: tuple[Role, ...] = ("data", "log", "temp", "other", "control")
assert sorted(ROLE_PRIORITY) == sorted(ROLES), "ROLE_PRIORITY must order every role"

# What a device is in the LUN topology: a LUN proper, a multipath path of one, or a partition of one.
KINDS: tuple[str, ...] = ("lun", "path", "partition")

DEVICE_LABELS: tuple[str, ...] = ("lun", "device")
LUN_INFO_LABELS: tuple[str, ...] = (
    "lun",
    "device",
    "wwid",
    "naa",
    "vendor",
    "model",
    "paths",
    "database",
    "role",
    "workload",
    "mountpoint",
    "kind",
)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.name.startswith(PREFIX):
            raise ValueError(f"metric {self.name} lacks the {PREFIX} prefix")
        if self.type == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"counter {self.name} must end in _total")


# --- host layer (diskstats / psutil), per device -------------------------------------------------
DEVICE_READS = MetricSpec(
    "lunlat_device_reads_completed_total",
    "counter",
    "Reads completed successfully (diskstats field 1).",
    DEVICE_LABELS,
)
DEVICE_WRITES = MetricSpec(
    "lunlat_device_writes_completed_total",
    "counter",
    "Writes completed successfully (diskstats field 5).",
    DEVICE_LABELS,
)
DEVICE_READ_TIME = MetricSpec(
    "lunlat_device_read_time_seconds_total",
    "counter",
    "Total time spent by all reads, summed over reads (diskstats field 4, ms, 32-bit wrap undone). "
    "rate(read_time)/rate(reads) is the average read latency.",
    DEVICE_LABELS,
)
DEVICE_WRITE_TIME = MetricSpec(
    "lunlat_device_write_time_seconds_total",
    "counter",
    "Total time spent by all writes, summed over writes (diskstats field 8, ms, 32-bit wrap undone). "
    "rate(write_time)/rate(writes) is the average write latency.",
    DEVICE_LABELS,
)
DEVICE_READ_BYTES = MetricSpec(
    "lunlat_device_read_bytes_total",
    "counter",
    "Bytes read (diskstats field 3, 512-byte sectors).",
    DEVICE_LABELS,
)
DEVICE_WRITE_BYTES = MetricSpec(
    "lunlat_device_write_bytes_total",
    "counter",
    "Bytes written (diskstats field 7, 512-byte sectors).",
    DEVICE_LABELS,
)
DEVICE_IO_IN_PROGRESS = MetricSpec(
    "lunlat_device_io_in_progress",
    "gauge",
    "I/Os currently in flight (diskstats field 9).",
    DEVICE_LABELS,
)
DEVICE_IO_TIME = MetricSpec(
    "lunlat_device_io_time_seconds_total",
    "counter",
    "Time the device had I/O in flight (diskstats field 10). Not a saturation measure on arrays.",
    DEVICE_LABELS,
)
DEVICE_IO_WEIGHTED_TIME = MetricSpec(
    "lunlat_device_io_weighted_time_seconds_total",
    "counter",
    "I/O time weighted by the number of I/Os in flight (diskstats field 11); its rate is the average queue size.",
    DEVICE_LABELS,
)
# Discards (kernel 4.18+) and flushes (5.5+): published only where the kernel prints them.
DEVICE_DISCARDS = MetricSpec(
    "lunlat_device_discards_completed_total",
    "counter",
    "Discards (TRIM/UNMAP) completed successfully (diskstats field 12, kernel 4.18+).",
    DEVICE_LABELS,
)
DEVICE_DISCARD_TIME = MetricSpec(
    "lunlat_device_discard_time_seconds_total",
    "counter",
    "Total time spent by all discards (diskstats field 15, ms, 32-bit wrap undone).",
    DEVICE_LABELS,
)
DEVICE_DISCARD_BYTES = MetricSpec(
    "lunlat_device_discard_bytes_total",
    "counter",
    "Bytes discarded (diskstats field 14, 512-byte sectors).",
    DEVICE_LABELS,
)
DEVICE_FLUSHES = MetricSpec(
    "lunlat_device_flush_requests_total",
    "counter",
    "Flush requests completed successfully (diskstats field 16, kernel 5.5+): a file system's "
    "fsync (a log writer's commit) reaches the device as a flush.",
    DEVICE_LABELS,
)
DEVICE_FLUSH_TIME = MetricSpec(
    "lunlat_device_flush_time_seconds_total",
    "counter",
    "Total time spent by all flush requests (diskstats field 17, ms, 32-bit wrap undone). "
    "rate(flush_time)/rate(flushes) is the average flush latency.",
    DEVICE_LABELS,
)
# Per-I/O latency from the kernel's block tracepoints (the biolatency source, eBPF; off by default):
# the distribution the averages above hide. Buckets are powers of two around the 1 ms goal, so the
# goal is a bucket edge and the share of I/Os slower than it is exact (BIO_BUCKETS).
BIO_LABELS: tuple[str, ...] = ("lun", "device", "op")
BIO_OPS: tuple[str, ...] = ("read", "write")
DEFAULT_GOAL_SECONDS = 0.001  # the default goal (alerts/goals.yaml default.goal_ms 1) as a bucket edge
# 1 ms x 2^k for k = -7 … 9: 7.8125 µs … 512 ms (17 bounds and +Inf). Exact binary scalings of one
# double, so the 0.001 bound prints as "0.001" and PromQL's le="0.001" matches it.
BIO_BUCKETS: tuple[float, ...] = tuple(DEFAULT_GOAL_SECONDS * 2.0**k for k in range(-7, 10))
DEVICE_IO_LATENCY = MetricSpec(
    "lunlat_device_io_latency_seconds",
    "histogram",
    "Latency of each completed block request of the LUN, from its insertion into the block layer (or "
    "its issue, when it bypassed the queue) to its completion, by op (read, write): the kernel's block "
    "tracepoints through eBPF (--collector.biolatency). Flushes and discards are not counted.",
    BIO_LABELS,
)
DEVICE_IO_QUEUE_TIME = MetricSpec(
    "lunlat_device_io_queue_time_seconds_total",
    "counter",
    "Time the LUN's issued block requests waited in the host's queue (from the request's start, where "
    "diskstats' time starts, to issue), summed, "
    "by op: the host's share of the latency histogram's sum; the rest is the device's.",
    BIO_LABELS,
)
BIO_METRICS: tuple[MetricSpec, ...] = (DEVICE_IO_LATENCY, DEVICE_IO_QUEUE_TIME)

LUN_INFO = MetricSpec(
    "lunlat_lun_info",
    "gauge",
    "Identity and role of a block device: join on (lun, device) with group_left to label its counters.",
    LUN_INFO_LABELS,
)

# --- multipath path health, per multipath LUN (diskstats source) ---------------------------------
# One series per LUN, not per path: a path's name (sdX) changes at every rescan, and the count is
# what an alert judges; which path failed is in the LUN's `paths` label and the host's logs.
LUN_PATHS = MetricSpec(
    "lunlat_lun_paths",
    "gauge",
    "Paths of a multipath LUN: the path devices its device-mapper map is built on (sysfs slaves/).",
    DEVICE_LABELS,
)
LUN_PATHS_FAILED = MetricSpec(
    "lunlat_lun_paths_failed",
    "gauge",
    "Paths of a multipath LUN that cannot carry I/O now: the path device's sysfs state is not running "
    "(SCSI) or live (NVMe), or the device is gone. Read at every scrape.",
    DEVICE_LABELS,
)
PATH_METRICS: tuple[MetricSpec, ...] = (LUN_PATHS, LUN_PATHS_FAILED)

# Order in which the per-device families are exposed.
DEVICE_METRICS: tuple[MetricSpec, ...] = (
    DEVICE_READS,
    DEVICE_WRITES,
    DEVICE_READ_TIME,
    DEVICE_WRITE_TIME,
    DEVICE_READ_BYTES,
    DEVICE_WRITE_BYTES,
    DEVICE_IO_IN_PROGRESS,
    DEVICE_IO_TIME,
    DEVICE_IO_WEIGHTED_TIME,
    DEVICE_DISCARDS,
    DEVICE_DISCARD_TIME,
    DEVICE_DISCARD_BYTES,
    DEVICE_FLUSHES,
    DEVICE_FLUSH_TIME,
)

# --- database layer: Oracle ----------------------------------------------------------------------
# `db_instance` rather than `instance`: Prometheus owns `instance` (the scrape target)
# and would rename an exporter's `instance` to `exported_instance` at every scrape.
# `workload` (from the target's config) is on the file series too, so the db-layer recording rules
# carry it like the host layer's and the goal overrides by workload apply to both layers.
ORACLE_FILE_LABELS: tuple[str, ...] = ("database", "workload", "db", "db_instance", "file", "role", "lun")
# `measure` says what one wait of the event is (sources/oracle_events.py): `per_io` (time / waits is
# an I/O latency), `time_spent` (a wait covers part of a batch: only the time counts), `per_commit`.
# A wait's `role` is a Role, or `replica` (a synchronous standby's/replica's wait: Data Guard
# 'SYNC Remote Write', SQL Server HADR_SYNC_COMMIT). `replica` is not a Role: no LUN has it, and
# Role is what config files and LUN labels are checked against (so ROLE_PRIORITY needs no place).
ORACLE_EVENT_LABELS: tuple[str, ...] = ("database", "db", "db_instance", "event", "role", "measure")
ORACLE_ASM_LABELS: tuple[str, ...] = ("database", "db_instance", "diskgroup", "disk", "path", "lun")

ORACLE_FILE_READS = MetricSpec(
    "lunlat_oracle_file_reads_total",
    "counter",
    "Read requests of a database file, small + large (V$IOSTAT_FILE). Redo logs and control files are one row each.",
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
    "Service time summed over the file's reads (V$IOSTAT_FILE small + large read service time, ms).",
    ORACLE_FILE_LABELS,
)
ORACLE_FILE_WRITE_TIME = MetricSpec(
    "lunlat_oracle_file_write_time_seconds_total",
    "counter",
    "Service time summed over the file's writes (V$IOSTAT_FILE small + large write service time, ms).",
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
    "Reads of an ASM disk (V$ASM_DISK_STAT.READS).",
    ORACLE_ASM_LABELS,
)
ORACLE_ASM_WRITES = MetricSpec(
    "lunlat_oracle_asm_disk_writes_total",
    "counter",
    "Writes of an ASM disk (V$ASM_DISK_STAT.WRITES).",
    ORACLE_ASM_LABELS,
)
ORACLE_ASM_READ_TIME = MetricSpec(
    "lunlat_oracle_asm_disk_read_time_seconds_total",
    "counter",
    "Time summed over an ASM disk's reads (V$ASM_DISK_STAT.READ_TIME, seconds).",
    ORACLE_ASM_LABELS,
)
ORACLE_ASM_WRITE_TIME = MetricSpec(
    "lunlat_oracle_asm_disk_write_time_seconds_total",
    "counter",
    "Time summed over an ASM disk's writes (V$ASM_DISK_STAT.WRITE_TIME, seconds).",
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
    "the full wait, Oracle's best indicator of I/O performance.",
    ORACLE_FILE_LABELS,
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
)

# --- database layer: SQL Server ------------------------------------------------------------------
# Same shape as Oracle's: `db` is the database inside the instance, `db_instance` the server name.
MSSQL_FILE_LABELS: tuple[str, ...] = ORACLE_FILE_LABELS
MSSQL_WAIT_LABELS: tuple[str, ...] = ("database", "db_instance", "wait_type", "role")

MSSQL_FILE_READS = MetricSpec(
    "lunlat_mssql_file_reads_total",
    "counter",
    "Reads of a database file (sys.dm_io_virtual_file_stats.num_of_reads).",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_WRITES = MetricSpec(
    "lunlat_mssql_file_writes_total",
    "counter",
    "Writes of a database file (num_of_writes).",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_READ_STALL = MetricSpec(
    "lunlat_mssql_file_read_stall_seconds_total",
    "counter",
    "Time users waited for reads of the file (io_stall_read_ms).",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_WRITE_STALL = MetricSpec(
    "lunlat_mssql_file_write_stall_seconds_total",
    "counter",
    "Time users waited for writes of the file (io_stall_write_ms).",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_READ_BYTES = MetricSpec(
    "lunlat_mssql_file_read_bytes_total",
    "counter",
    "Bytes read from the file (num_of_bytes_read).",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_WRITE_BYTES = MetricSpec(
    "lunlat_mssql_file_write_bytes_total",
    "counter",
    "Bytes written to the file (num_of_bytes_written).",
    MSSQL_FILE_LABELS,
)
MSSQL_WAITS = MetricSpec(
    "lunlat_mssql_wait_waits_total",
    "counter",
    "Waits of an I/O wait type (sys.dm_os_wait_stats.waiting_tasks_count).",
    MSSQL_WAIT_LABELS,
)
MSSQL_WAIT_TIME = MetricSpec(
    "lunlat_mssql_wait_time_seconds_total",
    "counter",
    "Resource wait of an I/O wait type: wait_time_ms minus signal_wait_time_ms (the I/O itself, "
    "without waiting for a CPU afterwards).",
    MSSQL_WAIT_LABELS,
)
MSSQL_WAIT_SIGNAL_TIME = MetricSpec(
    "lunlat_mssql_wait_signal_seconds_total",
    "counter",
    "Signal wait of an I/O wait type: from the I/O's completion to a CPU running the task again "
    "(signal_wait_time_ms, CPU pressure, not storage).",
    MSSQL_WAIT_LABELS,
)
MSSQL_FILE_READ_QUEUED_STALL = MetricSpec(
    "lunlat_mssql_file_read_queued_stall_seconds_total",
    "counter",
    "Part of the read stall the I/Os spent queued by Resource Governor before being issued "
    "(io_stall_queued_read_ms, 2014+): throttling, not the device.",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_WRITE_QUEUED_STALL = MetricSpec(
    "lunlat_mssql_file_write_queued_stall_seconds_total",
    "counter",
    "Part of the write stall the I/Os spent queued by Resource Governor (io_stall_queued_write_ms, 2014+).",
    MSSQL_FILE_LABELS,
)

MSSQL_METRICS: tuple[MetricSpec, ...] = (
    MSSQL_FILE_READS,
    MSSQL_FILE_WRITES,
    MSSQL_FILE_READ_STALL,
    MSSQL_FILE_WRITE_STALL,
    MSSQL_FILE_READ_BYTES,
    MSSQL_FILE_WRITE_BYTES,
    MSSQL_WAITS,
    MSSQL_WAIT_TIME,
    MSSQL_WAIT_SIGNAL_TIME,
    MSSQL_FILE_READ_QUEUED_STALL,
    MSSQL_FILE_WRITE_QUEUED_STALL,
)

# --- exporter health -----------------------------------------------------------------------------
SOURCE_UP = MetricSpec(
    "lunlat_source_up",
    "gauge",
    "1 when the source's last collection succeeded within its deadline, else 0.",
    ("source",),
)
SOURCE_DURATION = MetricSpec(
    "lunlat_source_duration_seconds",
    "gauge",
    "Wall time the source's last collection took (the deadline when it timed out).",
    ("source",),
)
SOURCE_ERRORS = MetricSpec(
    "lunlat_source_errors_total",
    "counter",
    "Errors met by a source, by reason; a reason counted here never fails the scrape.",
    ("source", "reason"),
)
SOURCE_COLLECTION_AGE = MetricSpec(
    "lunlat_source_collection_age_seconds",
    "gauge",
    "Seconds since the collection this scrape served ended: 0 when the scrape waited for it, "
    "more when a collection younger than the target's min_interval_seconds was served again.",
    ("source",),
)
# A database layer the source cannot read although the database uses it (Oracle: files in ASM, but
# GV$ASM_DISK_STAT has no rows, as from a PDB login) is 0 here and logged once, never silent.
SOURCE_CAPABILITY = MetricSpec(
    "lunlat_source_capability",
    "gauge",
    "1 when the source reads this part of its database (or the database does not use it), "
    "0 when the database uses it but the source cannot read it (the log says why).",
    ("source", "capability"),
)


@dataclass(frozen=True, slots=True)
class Capability:
    """A part of a database a source may be unable to read (`lunlat_source_capability{capability}`).

    `fixable`: the login, grants or exporter config can restore it, so a 0 opens a ticket
    (LunLatencySourceCapabilityMissing); otherwise the server's release or service lacks it, and a 0
    is said once in the log and shown, never ticketed (a ticket no one could close).
    """

    name: str
    meaning: str
    fixable: bool


CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "asm",
        "Oracle: the ASM disks under files named +GROUP/... (GV$ASM_DISK_STAT), and so those files' lun",
        fixable=True,
    ),
    Capability(
        "container",
        "a database in a container (`container:`): its files followed through the container's mounts to "
        "the host's LUNs (Docker Engine API)",
        fixable=True,
    ),
    Capability(
        "container_histograms",
        "Oracle: wait histograms per container (GV$CON_EVENT_HISTOGRAM_MICRO, 18c and later); before 18c "
        "the whole instance's histogram is published with db empty",
        fixable=False,
    ),
    Capability(
        "volumes",
        "SQL Server on Windows: the volume of each file (sys.dm_os_volume_stats), the `lun` of files no mount "
        "table leads to; the login's VIEW SERVER STATE (VIEW SERVER PERFORMANCE STATE on 2022+) reads it",
        fixable=True,
    ),
)
CAPABILITY_NAMES: frozenset[str] = frozenset(c.name for c in CAPABILITIES)
FIXABLE_CAPABILITIES: tuple[str, ...] = tuple(c.name for c in CAPABILITIES if c.fixable)

BUILD_INFO = MetricSpec(
    "lunlat_build_info",
    "gauge",
    "Version of lunlat and of the Python running it.",
    ("version", "python_version"),
)

# As Prometheus publishes prometheus_config_last_reload_successful and
# prometheus_config_last_reload_success_timestamp_seconds (github.com/prometheus/prometheus,
# cmd/prometheus/main.go): set at start once the config is valid, then by each reload.
CONFIG_LAST_RELOAD_SUCCESSFUL = MetricSpec(
    "lunlat_config_last_reload_successful",
    "gauge",
    "Whether the last configuration reload attempt was successful.",
    (),
)
CONFIG_LAST_RELOAD_SUCCESS_TIME = MetricSpec(
    "lunlat_config_last_reload_success_timestamp_seconds",
    "gauge",
    "Timestamp of the last successful configuration reload.",
    (),
)

HEALTH_METRICS: tuple[MetricSpec, ...] = (
    SOURCE_UP,
    SOURCE_DURATION,
    SOURCE_ERRORS,
    BUILD_INFO,
    CONFIG_LAST_RELOAD_SUCCESSFUL,
    CONFIG_LAST_RELOAD_SUCCESS_TIME,
    SOURCE_COLLECTION_AGE,
    SOURCE_CAPABILITY,
)

ALL_METRICS: tuple[MetricSpec, ...] = (
    *DEVICE_METRICS,
    *BIO_METRICS,
    LUN_INFO,
    *PATH_METRICS,
    *ORACLE_METRICS,
    *MSSQL_METRICS,
    *HEALTH_METRICS,
)
