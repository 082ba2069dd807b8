"""What the SQL Server source publishes: its metric names, help texts and labels (docs/reference/metrics.md)."""

from __future__ import annotations

from lunlat.ground import DB_FILE_LABELS, Capability, MetricSpec

# `db` is the database inside the instance, `db_instance` the server name.
MSSQL_FILE_LABELS: tuple[str, ...] = DB_FILE_LABELS
# `measure`: what one wait of the type is (engines/mssql/waits.py: per_commit, per_latch, time_spent),
# the Oracle events' vocabulary, so no rule or panel divides or adds waits of different measures.
MSSQL_WAIT_LABELS: tuple[str, ...] = ("database", "db_instance", "wait_type", "role", "measure")

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
    "Waits of an I/O wait type (sys.dm_os_wait_stats.waiting_tasks_count); `measure` says what one wait "
    "is: per_commit (WRITELOG, HADR_SYNC_COMMIT), per_latch (PAGEIOLATCH_*), time_spent (never per wait).",
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
    "I/O latency Resource Governor's I/O governance introduced for the file's reads "
    "(io_stall_queued_read_ms, 2014+): throttling, not the device; beside the read stall, never "
    "subtracted from it (no documentation says the stall includes it).",
    MSSQL_FILE_LABELS,
)
MSSQL_FILE_WRITE_QUEUED_STALL = MetricSpec(
    "lunlat_mssql_file_write_queued_stall_seconds_total",
    "counter",
    "I/O latency Resource Governor's I/O governance introduced for the file's writes "
    "(io_stall_queued_write_ms, 2014+), beside the write stall.",
    MSSQL_FILE_LABELS,
)

# Azure SQL Database Hyperscale: a data file other than file_id 0 is a page server, and "these writes are
# simulated, because the compute replicas never write directly to page servers … latency for data files
# other than file_id 0 does not reflect the actual latency of page server writes" (Azure SQL Database,
# "Hyperscale performance diagnostics", "Data writes",
# https://learn.microsoft.com/azure/azure-sql/database/hyperscale-performance-diagnostics). Their
# io_stall_write_ms is published here instead of MSSQL_FILE_WRITE_STALL: the database layer (the
# engine's FileLayer, the rules' goal) never averages it, and nobody reads it as a device's latency.
# Their writes and bytes ("accounted as they occur on the compute replica") stay in the usual series.
# The same for the log file of a Hyperscale read-only replica, where no log write occurs and the
# accounting "is for tracking purposes only" (sql.READ_ONLY).
MSSQL_FILE_SIMULATED_WRITE_STALL = MetricSpec(
    "lunlat_mssql_file_simulated_write_stall_seconds_total",
    "counter",
    "Azure SQL Database Hyperscale: io_stall_write_ms of a data file other than file_id 0 (a page "
    "server), which the service simulates and which does not reflect the page servers' write latency, "
    "and of a read-only replica's log file, accounted for tracking only; published apart from the "
    "write stall and never judged against the goal.",
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
    MSSQL_FILE_SIMULATED_WRITE_STALL,
)

CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "volumes",
        "SQL Server on Windows: the volume of each file (sys.dm_os_volume_stats), the `lun` of files no mount "
        "table leads to; the login's VIEW SERVER STATE (VIEW SERVER PERFORMANCE STATE on 2022+) reads it",
        fixable=True,
    ),
    Capability(
        "engine_edition",
        "the server's SERVERPROPERTY('EngineEdition') is one the source reads (2 Standard, 3 Enterprise, "
        "4 Express, 5 Azure SQL Database, 8 Azure SQL Managed Instance); 0: another service (an Azure "
        "Synapse pool, Azure SQL Edge, a newer one) or not read yet: no statement is sent to it and the log "
        "names the value",
        fixable=False,
    ),
)
