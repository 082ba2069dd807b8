"""The ground every layer of lunlat stands on: what a metric is, the roles, the label names, and the
series lunlat publishes whatever its engines (the host layer's, the exporter's own health).

It imports nothing of lunlat's, so any module may read a ground fact without loading the rest
(tests/unit/test_import_layers.py). The metric contract as a whole, with every registered engine's
series, is `contract.py`, which re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

MetricType = Literal["counter", "gauge", "histogram"]

PREFIX = "lunlat_"

# The base units lunlat's names end in (Prometheus' naming practices, "Base units": seconds, bytes).
# A name's unit is declared by that suffix, the one place it is said; OpenMetrics' `# UNIT` line
# repeats it, and OpenMetrics 1.0 requires the unit to be a suffix of the family's name.
BASE_UNITS: tuple[str, ...] = ("seconds", "bytes")


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

    @property
    def unit(self) -> str:
        """The base unit the name ends in, before a counter's `_total` ("" for none): what
        OpenMetrics' `# UNIT` line says."""
        stem = self.name.removesuffix("_total") if self.type == "counter" else self.name
        return next((unit for unit in BASE_UNITS if stem.endswith(f"_{unit}")), "")


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

# What a device is and what it holds, the same values as its lunlat_lun_info's: carried by every
# per-device series as well, so the rules sum a LUN's counters by database and role with no join to
# lunlat_lun_info (issue 41: the join was two thirds of each host-layer record's cost). Empty where
# nothing names them ("" is no label to Prometheus). A change of role starts new series.
DEVICE_ROLE_LABELS: tuple[str, ...] = ("kind", "database", "role", "workload")
DEVICE_LABELS: tuple[str, ...] = ("lun", "device", *DEVICE_ROLE_LABELS)
# lunlat_lun_info's `array` when neither the LUN's `luns:` entry nor its world-wide identifier names
# the array serving it (arrayid.py): one explicit value, so a rule grouping LUNs by array can leave
# these out (`array!="unknown"`) instead of lumping every unidentified LUN into one "array".
ARRAY_UNKNOWN = "unknown"
LUN_INFO_LABELS: tuple[str, ...] = (
    "lun",
    "device",
    "wwid",
    "naa",
    "array",
    "vendor",
    "model",
    "paths",
    "database",
    "role",
    "workload",
    "mountpoint",
    "kind",
)
# The labels of every engine's per-file series. `db_instance` rather than `instance`: Prometheus
# owns `instance` (the scrape target) and would rename an exporter's `instance` to
# `exported_instance` at every scrape. `workload` (from the target's config) is on the file series
# too, so the db-layer recording rules carry it like the host layer's and the goal overrides by
# workload apply to both layers. `db` is the database inside the instance (a PDB, a SQL Server database).
DB_FILE_LABELS: tuple[str, ...] = ("database", "workload", "db", "db_instance", "file", "role", "lun")


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
BIO_LABELS: tuple[str, ...] = (*DEVICE_LABELS, "op", "size")
BIO_OPS: tuple[str, ...] = ("read", "write")
# Size classes of a block request, by its bytes at issue (the biolatency programs class each I/O in the
# kernel): `small` up to BIO_SMALL_MAX, `large` from BIO_LARGE_MIN, `middle` between. The boundaries are
# the project's own, from two facts: a database's single-page I/O is 8 KiB (PostgreSQL's BLCKSZ, SQL
# Server's page, Oracle's default DB_BLOCK_SIZE), so transactional I/O of one or two pages is small;
# the kernel's default read-ahead is 128 KiB (include/linux/mm.h VM_READAHEAD_PAGES, SZ_128K /
# PAGE_SIZE), so a sequential scan's reads are large. docs/metrics.md, "Size classes".
BIO_SIZES: tuple[str, ...] = ("small", "middle", "large")
BIO_SMALL_MAX = 16 * 1024  # bytes, at most (biolatency.bpf.c SMALL_MAX)
BIO_LARGE_MIN = 128 * 1024  # bytes, at least (biolatency.bpf.c LARGE_MIN)
DEFAULT_GOAL_SECONDS = 0.001  # the default goal (alerts/goals.yaml default.goal_ms 1) as a bucket edge
# 1 ms x 2^k for k = -7 … 9: 7.8125 µs … 512 ms (17 bounds and +Inf). Exact binary scalings of one
# double, so the 0.001 bound prints as "0.001" and PromQL's le="0.001" matches it.
BIO_BUCKETS: tuple[float, ...] = tuple(DEFAULT_GOAL_SECONDS * 2.0**k for k in range(-7, 10))
DEVICE_IO_LATENCY = MetricSpec(
    "lunlat_device_io_latency_seconds",
    "histogram",
    "Latency of each completed block request of the LUN, from its insertion into the block layer (or "
    "its issue, when it bypassed the queue) to its completion: the kernel's block "
    "tracepoints through eBPF (--collector.biolatency), by op (read, write) and size class of the request "
    "(small: up to 16 KiB, middle, large: 128 KiB and more). Flushes and discards are not counted.",
    BIO_LABELS,
)
DEVICE_IO_QUEUE_TIME = MetricSpec(
    "lunlat_device_io_queue_time_seconds_total",
    "counter",
    "Time the LUN's issued block requests waited in the host's queue (from the request's start, where "
    "diskstats' time starts, to issue), summed, "
    "by op and size class: the host's share of the latency histogram's sum; the rest is the device's.",
    BIO_LABELS,
)
BIO_METRICS: tuple[MetricSpec, ...] = (DEVICE_IO_LATENCY, DEVICE_IO_QUEUE_TIME)
# The biolatency source's error reasons for an I/O diskstats counted and the histogram lost (the
# kernel ran no program for its completion; sources/biolatency.py says when). The kernel does this
# now and then on a healthy host (6.18: bursts in the block softirq), so the rules judge these by
# their share of the histogram's I/Os, not by any count (lunlat_rules.health).
BIO_LOST_SAMPLE_REASONS: tuple[str, ...] = ("missed_io", "unseen_io")

# The host's queue limits per device, from sysfs, read with the topology (at start, on a device change
# and every --refresh-interval; an admin's change shows at the next read). The breach alerts compare
# the average I/Os in flight (DEVICE_IO_WEIGHTED_TIME's rate) with the smaller of the two to say
# "host queue" (docs/alerting.md, "Why: the cause in the alert"). A device without the attribute has
# no series.
DEVICE_QUEUE_DEPTH = MetricSpec(
    "lunlat_device_queue_depth",
    "gauge",
    "Commands the host sends the device at once: the SCSI device's queue_depth (sysfs "
    "device/queue_depth, the number of commands allowed to be queued to the driver); a multipath "
    "LUN's is the sum over its paths. Absent where the device has none (NVMe, virtio, loop).",
    DEVICE_LABELS,
)
DEVICE_NR_REQUESTS = MetricSpec(
    "lunlat_device_nr_requests",
    "gauge",
    "Requests the block layer may allocate for the device's queue (sysfs queue/nr_requests). "
    "Absent where the device has no request queue of its own (partitions).",
    DEVICE_LABELS,
)
QUEUE_LIMIT_METRICS: tuple[MetricSpec, ...] = (DEVICE_QUEUE_DEPTH, DEVICE_NR_REQUESTS)

LUN_INFO = MetricSpec(
    "lunlat_lun_info",
    "gauge",
    'Identity and role of a block device, and the array serving it (`array`, "unknown" when neither '
    "the config nor its WWID names one): join on (lun, device) with group_left to label its counters.",
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
    "(SCSI) or live (NVMe), or the device is gone. Read on their own cadence "
    "(--collector.diskstats.path-state-interval, default 5 s), not at each scrape: "
    "lunlat_lun_paths_age_seconds says how old the reading is.",
    DEVICE_LABELS,
)
LUN_PATHS_AGE = MetricSpec(
    "lunlat_lun_paths_age_seconds",
    "gauge",
    "Seconds since the path states behind every lunlat_lun_paths_failed series of this scrape were "
    "read; always below --collector.diskstats.path-state-interval.",
    (),
)
PATH_METRICS: tuple[MetricSpec, ...] = (LUN_PATHS, LUN_PATHS_FAILED, LUN_PATHS_AGE)

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


# The file map of a database source: which files the database has and where (their `file` and `lun`
# labels, and the roles the host layer's LUNs get from it). It is read from the database, and when a
# source cannot read it again (a session lost, a grant missing, a timeout) the last one keeps labelling
# the series until it is older than the target's file_map_max_age_seconds (issue 43): its age is
# published like lunlat_lun_paths_age_seconds, and the limit beside it, so a rule can say when a
# database's map is stale or missing (LunLatencyFileMapStale).
DB_FILE_MAP_AGE = MetricSpec(
    "lunlat_database_file_map_age_seconds",
    "gauge",
    "Seconds since the database last answered the source's file lookups: the files, directories and "
    "volumes whose `file` and `lun` label its series, and whose LUNs get the database's roles. Grows "
    "while the source cannot read them again (a missing grant, a lost session) and the last map is "
    "used; absent when the source has no map (never read, or dropped when older than "
    "lunlat_database_file_map_max_age_seconds).",
    ("source",),
)
DB_FILE_MAP_MAX_AGE = MetricSpec(
    "lunlat_database_file_map_max_age_seconds",
    "gauge",
    "The target's file_map_max_age_seconds: a file map older than this is dropped (its series lose "
    "`file` and `lun`, its LUNs their role) until the database answers the lookups again.",
    ("source",),
)
DB_FILE_MAP_METRICS: tuple[MetricSpec, ...] = (DB_FILE_MAP_AGE, DB_FILE_MAP_MAX_AGE)


# What a database in a container needs, whatever its engine; each engine adds its own (its `metrics`).
CONTAINER_CAPABILITY = Capability(
    "container",
    "a database in a container (`container:`): its files followed through the container's mounts to "
    "the host's LUNs (Docker Engine API)",
    fixable=True,
)

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
