"""The SQL Server source's T-SQL: static text only, no parameters (docs/contract.md §4).

No `?` parameters on purpose: pyodbc sends parameterised statements as RPC `sp_prepexec`, plain
text as a SQL batch; static batches keep the driver path (and the tests' TDS server) simple.
Tests parse every statement with sqlglot's T-SQL dialect.

Units: sys.dm_io_virtual_file_stats stalls are cumulative milliseconds, bytes are bytes;
sys.dm_os_wait_stats times are milliseconds. Both count since the service started.
"""

from __future__ import annotations

from lunlat.sources.dbsource import Query

# Waits that are I/O: (role, what it measures).
IO_WAITS: dict[str, tuple[str, str]] = {
    "WRITELOG": ("log", "commit"),  # a commit waiting for its log flush
    "PAGEIOLATCH_SH": ("data", "read"),  # a page read for a query
    "PAGEIOLATCH_EX": ("data", "read"),  # a page read for a modification
    "PAGEIOLATCH_UP": ("data", "read"),
    "IO_COMPLETION": ("other", "io"),  # sorts, spills, backups
    "ASYNC_IO_COMPLETION": ("other", "io"),  # backups, file growth
}

_WAIT_LIST = ", ".join(f"N'{w}'" for w in IO_WAITS)


# type 0 = ROWS (data), 1 = LOG; tempdb (database_id 2) is role temp. The DMV answers for every
# file of every database the login may see, offline files excluded by the state filter. The
# io_stall_queued_* columns (Resource Governor, 2014+) are not read, so 2012 answers too.
FILE_STATS = Query(
    "virtual_file_stats",
    """SELECT vfs.database_id, vfs.file_id, DB_NAME(vfs.database_id) AS database_name, mf.type,
       mf.physical_name,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms
FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs
JOIN sys.master_files AS mf ON mf.database_id = vfs.database_id AND mf.file_id = vfs.file_id
WHERE mf.type IN (0, 1) AND mf.state = 0""",
    per_scrape=True,
)

WAIT_STATS = Query(
    "os_wait_stats",
    f"""SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms
FROM sys.dm_os_wait_stats
WHERE wait_type IN ({_WAIT_LIST})""",  # noqa: S608 - a constant list, no input
    per_scrape=True,
)

# Who answers, and since when: a new start time means every counter started again (compared for
# equality only: it is the server's local clock, not Unix time). DATEDIFF_BIG: DATEDIFF is an int
# and would fail after 2038.
SERVER = Query(
    "server",
    """SELECT CAST(SERVERPROPERTY('ServerName') AS NVARCHAR(256)) AS server_name,
       CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) AS major_version,
       DATEDIFF_BIG(SECOND, '1970-01-01', sqlserver_start_time) AS start_time
FROM sys.dm_os_sys_info""",
    per_scrape=False,
)

# The volume of each file, for hosts where paths cannot be followed to a LUN through the mount table
# (Windows: 'D:\', 'C:\MountPoints\Data1\'). On Linux SQL Server returns NULL for both strings.
VOLUMES = Query(
    "os_volume_stats",
    """SELECT mf.database_id, mf.file_id, vs.volume_mount_point, vs.logical_volume_name
FROM sys.master_files AS mf
CROSS APPLY sys.dm_os_volume_stats(mf.database_id, mf.file_id) AS vs
WHERE mf.type IN (0, 1) AND mf.state = 0""",
    per_scrape=False,
)

ALL_QUERIES: tuple[Query, ...] = (FILE_STATS, WAIT_STATS, SERVER, VOLUMES)
