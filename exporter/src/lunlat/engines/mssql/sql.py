"""The SQL Server source's T-SQL: static text only, no parameters (docs/contract.md §4).

No `?` parameters on purpose: pyodbc sends parameterised statements as RPC `sp_prepexec`, plain
text as a SQL batch; static batches keep the driver path (and the tests' TDS server) simple.
Tests parse every statement with sqlglot's T-SQL dialect.

Units: sys.dm_io_virtual_file_stats stalls are cumulative milliseconds, bytes are bytes;
sys.dm_os_wait_stats times are milliseconds. Both count since the service started.
"""

from __future__ import annotations

from lunlat.sources.dbsource import Query

# Waits that are I/O: wait type -> (role, kind). The meanings are Microsoft's
# (https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-wait-stats-transact-sql).
# kind "latency": one wait is one I/O (or one commit), so Δ time / Δ waits is a latency the rules and
# dashboards may show; "time": one wait can cover many I/Os or a whole operation (a backup), so only
# the time spent is meaningful, never time / waits. role "other" for waits no LUN role explains.
IO_WAITS: dict[str, tuple[str, str]] = {
    # "waiting for a log flush to complete" (commits, checkpoints)
    "WRITELOG": ("log", "latency"),
    # "waiting for space in the log buffer to store a log record": the log device cannot keep up
    "LOGBUFFER": ("log", "time"),
    # "waiting on a latch for a buffer that is in an I/O request", in Shared/Exclusive/Update/
    # Destroy/Keep mode: a data page read from disk
    "PAGEIOLATCH_SH": ("data", "latency"),
    "PAGEIOLATCH_EX": ("data", "latency"),
    "PAGEIOLATCH_UP": ("data", "latency"),
    "PAGEIOLATCH_DT": ("data", "latency"),
    "PAGEIOLATCH_KP": ("data", "latency"),
    # "waiting for I/O operations to complete ... generally non-data page I/Os"
    "IO_COMPLETION": ("other", "latency"),
    # "a write operation is in progress"
    "WRITE_COMPLETION": ("other", "latency"),
    # "an I/O operation ... fails because of insufficient resources, and is then retried"
    "IO_RETRY": ("other", "time"),
    # sys.dm_os_wait_stats: "Internal use only", SQL Server 2016 (13.x) and later; the Azure SQL Database
    # page of sys.dm_db_wait_stats: "the asynchronous IO queue for the Azure SQL Database has too many IOs
    # pending. Tasks trying to issue another IO are blocked on this wait type until the number of pending
    # IOs drop below the threshold. The threshold is proportional to the DTUs assigned to the database"
    # (MicrosoftDocs/sql-docs docs/relational-databases/system-dynamic-management-views/sys-dm-db-wait-stats-azure-sql-database.md):
    # time spent before an I/O is issued, governance rather than the device, never per I/O
    "IO_QUEUE_LIMIT": ("other", "time"),
    # "waiting for asynchronous non-data I/Os to finish. Examples include I/O involved in warm standby log
    # shipping, database mirroring, some bulk import related operations" (sys.dm_os_wait_stats): one wait
    # covers a set of I/Os, so only its time is meaningful
    "ASYNC_IO_COMPLETION": ("other", "time"),
    # a backup task "waiting for data, or ... for a buffer in which to store data"
    "BACKUPIO": ("other", "time"),
    # Always On: "waiting for transaction commit processing for the synchronized secondary
    # databases to harden the log": the replica's network and log write, part of commit latency
    # but not of any local LUN (role replica, a wait label only, never a LUN's contract.Role: it
    # must never read as a slow log LUN)
    "HADR_SYNC_COMMIT": ("replica", "latency"),
    # Azure SQL transaction log rate governance: "Log rate governor traffic shaping is surfaced via the
    # following wait types" (LOG_RATE_GOVERNOR database limiting, POOL_ pool limiting, INSTANCE_
    # instance-level limiting, HADR_THROTTLE_LOG_RATE_* feedback control: exactly these six; Azure SQL
    # Database "Resource limits", transaction log rate governance,
    # https://learn.microsoft.com/en-us/azure/azure-sql/database/resource-limits-logical-server#transaction-log-rate-governance;
    # MicrosoftDocs/sql-docs azure-sql/database/resource-limits-logical-server.md).
    # HADR_THROTTLE_LOG_RATE_GOVERNOR is not one of them: sys.dm_os_wait_stats calls it "Internal use
    # only", and no Microsoft page says what it waits for, so it is not read.
    # Time the service tier held log generation back, not a device's: role throttle (a wait label only,
    # never a LUN's contract.Role), so a throttled database never reads as a slow log LUN; time only.
    "LOG_RATE_GOVERNOR": ("throttle", "time"),
    "POOL_LOG_RATE_GOVERNOR": ("throttle", "time"),
    "INSTANCE_LOG_RATE_GOVERNOR": ("throttle", "time"),
    "HADR_THROTTLE_LOG_RATE_SEND_RECV_QUEUE_SIZE": ("throttle", "time"),
    "HADR_THROTTLE_LOG_RATE_LOG_SIZE": ("throttle", "time"),
    "HADR_THROTTLE_LOG_RATE_MISMATCHED_SLO": ("throttle", "time"),
    # Hyperscale: "The following wait types (in sys.dm_os_wait_stats) describe the reasons why log rate
    # can be throttled on the primary compute replica": delayed log consumption at the page servers
    # (STORAGE), long-term log storage (DESTAGE), readable secondaries (REPLICA), the geo-secondary
    # (GEOREPLICA), the log service (LOCALDESTAGE) (Azure SQL Database "Hyperscale performance
    # diagnostics", log rate throttling waits,
    # https://learn.microsoft.com/en-us/azure/azure-sql/database/hyperscale-performance-diagnostics;
    # MicrosoftDocs/sql-docs azure-sql/database/hyperscale-performance-diagnostics.md). Throttling, not
    # a device: role throttle, time only, like the governance waits above.
    "RBIO_RG_STORAGE": ("throttle", "time"),
    "RBIO_RG_DESTAGE": ("throttle", "time"),
    "RBIO_RG_REPLICA": ("throttle", "time"),
    "RBIO_RG_GEOREPLICA": ("throttle", "time"),
    "RBIO_RG_LOCALDESTAGE": ("throttle", "time"),
}
LATENCY_WAITS = frozenset(w for w, (_, kind) in IO_WAITS.items() if kind == "latency")

_WAIT_LIST = ", ".join(f"N'{w}'" for w in IO_WAITS)


# The session's settings, sent once after each connect (they hold "for the remainder of the
# connection": SET LOCK_TIMEOUT,
# https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008/ms189470(v=sql.100)), so that a
# monitoring read never costs the workload anything:
# - DEADLOCK_PRIORITY -10, the lowest of -10..10 (LOW is -5): in a deadlock with any session of higher
#   priority this one is the victim (SET DEADLOCK_PRIORITY,
#   https://learn.microsoft.com/sql/t-sql/statements/set-deadlock-priority-transact-sql); Telegraf's
#   sqlserver input opens its statements with the same `SET DEADLOCK_PRIORITY -10;`
#   (influxdata/telegraf plugins/inputs/sqlserver/sqlserverqueries.go, sqlServerDatabaseIO).
# - LOCK_TIMEOUT: by default a statement waits for a lock forever (-1); past the timeout it "is canceled
#   automatically, and error message 1222 … is returned" ("Customizing the Lock Time-Out",
#   https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2005/ms177413(v=sql.90)): a read
#   of sys.master_files queued behind DDL or a RESTORE gives up as query_failed, before the driver's
#   query timeout would drop the whole session. Half the target's timeout, in ms (session_settings).
DEADLOCK_PRIORITY = -10


def session_settings(lock_timeout_ms: int) -> str:
    """The batch sent after each connect."""
    return f"SET DEADLOCK_PRIORITY {DEADLOCK_PRIORITY}; SET LOCK_TIMEOUT {lock_timeout_ms};"


# type 0 = ROWS (data), 1 = LOG; tempdb (database_id 2) is role temp. The DMV answers for every
# file of every database the login may see, offline files excluded by the state filter.
# sys.master_files is read WITH (NOLOCK), as Telegraf reads it (sqlserverqueries.go sqlServerDatabaseIO,
# azuresqlmanagedqueries.go): the catalog rows a database's DDL or RESTORE is changing are not waited for.
_FILE_STATS_SQL = """SELECT vfs.database_id, vfs.file_id, DB_NAME(vfs.database_id) AS database_name, mf.type,
       mf.physical_name,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms{queued}
FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs
JOIN sys.master_files AS mf WITH (NOLOCK) ON mf.database_id = vfs.database_id AND mf.file_id = vfs.file_id
WHERE mf.type IN (0, 1) AND mf.state = 0"""

# Beside io_stall_read_ms / io_stall_write_ms, the Resource Governor columns
# (io_stall_queued_read_ms / io_stall_queued_write_ms: "total IO latency introduced by IO resource
# governance", SQL Server 2014 (12.x) and later; the page does not say whether the stall includes them,
# so neither is subtracted from the other (engines/mssql/__init__.py); sys.dm_io_virtual_file_stats,
# https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-io-virtual-file-stats-transact-sql).
# Read from major version 12 on; 2012 (11) has no such columns (error 207) and gets FILE_STATS_NO_QUEUED.
FILE_STATS = Query(
    "virtual_file_stats",
    _FILE_STATS_SQL.format(queued=",\n       vfs.io_stall_queued_read_ms, vfs.io_stall_queued_write_ms"),
    per_scrape=True,
)
FILE_STATS_NO_QUEUED = Query(
    "virtual_file_stats_no_queued", _FILE_STATS_SQL.format(queued=""), per_scrape=True
)
QUEUED_STALL_SINCE = 12  # the first major version with io_stall_queued_*

WAIT_STATS = Query(
    "os_wait_stats",
    f"""SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms
FROM sys.dm_os_wait_stats
WHERE wait_type IN ({_WAIT_LIST})""",  # noqa: S608 - a constant list, no input
    per_scrape=True,
)

# SERVERPROPERTY('EngineEdition'): 2 Standard, 3 Enterprise, 4 Express, 5 Azure SQL Database,
# 8 Azure SQL Managed Instance (https://learn.microsoft.com/en-us/sql/t-sql/functions/serverproperty-transact-sql,
# and SMO's DatabaseEngineEdition enum that lists the values it returns:
# https://learn.microsoft.com/en-us/dotnet/api/microsoft.sqlserver.management.common.databaseengineedition).
SQL_DATABASE = 5
MANAGED_INSTANCE = 8
AZURE_EDITIONS = frozenset({SQL_DATABASE, MANAGED_INSTANCE})
KNOWN_EDITIONS = frozenset({2, 3, 4}) | AZURE_EDITIONS  # Standard, Enterprise, Express; Azure
# The other values, named in the log line of an edition the source does not read (SMO's Edition enum,
# "the possible values returned by SERVERPROPERTY('EngineEdition')":
# https://learn.microsoft.com/en-us/dotnet/api/microsoft.sqlserver.management.smo.edition). A value
# missing here (a service newer than that list) is named by its number alone.
OTHER_EDITIONS: dict[int, str] = {
    1: "Personal or Desktop Engine",
    6: "Azure Synapse dedicated SQL pool",
    7: "Stretch Database",
    9: "Azure SQL Edge",
    10: "Azure Arc Managed SQL Instance",
    11: "Azure Synapse serverless SQL pool",
}

# Azure SQL Database: one database per connection, and no sys.master_files ("Invalid object name
# 'sys.master_files'", error 208: github.com/olahallengren/sql-server-maintenance-solution issue 67;
# Telegraf's Azure SQL Database file query reads sys.database_files instead,
# influxdata/telegraf plugins/inputs/sqlserver/azuresqldbqueries.go). sys.database_files is the
# per-database view with the same file_id, type (0 ROWS, 1 LOG), physical_name and state
# (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-database-files-transact-sql);
# DB_ID() is the connection's database, so only its files are read. The service always runs the
# newest engine, so the io_stall_queued_* columns are there (Telegraf reads them on Azure SQL Database).
DB_FILE_STATS = Query(
    "database_file_stats",
    """SELECT vfs.database_id, vfs.file_id, DB_NAME() AS database_name, df.type,
       df.physical_name,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms,
       vfs.io_stall_queued_read_ms, vfs.io_stall_queued_write_ms
FROM sys.dm_io_virtual_file_stats(DB_ID(), NULL) AS vfs
JOIN sys.database_files AS df ON df.file_id = vfs.file_id
WHERE df.type IN (0, 1) AND df.state = 0""",
    per_scrape=True,
)

# Azure SQL Database's waits of the connection's database: sys.dm_db_wait_stats, the columns of
# sys.dm_os_wait_stats ("Applies to: Azure SQL Database, Azure SQL Managed Instance";
# https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-db-wait-stats-azure-sql-database).
# It needs VIEW DATABASE STATE, where sys.dm_os_wait_stats needs server state
# (https://learn.microsoft.com/en-us/azure/azure-sql/database/monitoring-with-dmvs, "Permissions").
DB_WAIT_STATS = Query(
    "db_wait_stats",
    f"""SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms
FROM sys.dm_db_wait_stats
WHERE wait_type IN ({_WAIT_LIST})""",  # noqa: S608 - a constant list, no input
    per_scrape=True,
)

# Who answers, and since when: a new start time means every counter started again (compared for
# equality only: it is the server's local clock, not Unix time). Seconds since 1970 as whole days
# (bigint) times 86400 plus the seconds of the day: DATEDIFF returns an int and would overflow on
# seconds after 2038, and DATEDIFF_BIG exists only from SQL Server 2016 (13.x)
# (https://learn.microsoft.com/en-us/sql/t-sql/functions/datediff-big-transact-sql, "Applies to").
# The major version comes from ProductVersion ('major.minor.build.revision', every version;
# PARSENAME's piece 4 is the leftmost): ProductMajorVersion exists in 2012 and 2014 only "in updates
# beginning in late 2015" and is NULL before (SERVERPROPERTY,
# https://learn.microsoft.com/en-us/sql/t-sql/functions/serverproperty-transact-sql).
# The engine edition picks the statements (SQL_DATABASE below) and is read on its own first (EDITION):
# on Azure SQL Database sys.dm_os_sys_info answers on some service tiers only.
# amazon_rds: Amazon RDS for SQL Server has a database `rdsadmin` and renames the sa login (SID 0x01)
# to `rdsa`. Ola Hallengren's Maintenance Solution detects RDS with both
# (olahallengren/sql-server-maintenance-solution DatabaseBackup.sql: "DB_ID('rdsadmin') IS NOT NULL
# AND SUSER_SNAME(0x01) = 'rdsa'"); either alone is taken here, as Erik Darling's PerformanceMonitor
# does, because DB_ID() is NULL for a database the login cannot see (a login without VIEW ANY
# DATABASE) while SUSER_SNAME is not filtered (github.com/erikdarlingdata/PerformanceMonitor issue 2575,
# pull request 2577). The rdsa login: "the Amazon RDS System Administrator (rdsa) login"
# (https://repost.aws/knowledge-center/rds-sql-server-restore-master-user).
# The engine edition, read first and alone: SERVERPROPERTY reads no view, so no grant stands between
# the source and it (Telegraf's sqlserver input opens every statement with SERVERPROPERTY('EngineEdition')
# before any DMV, influxdata/telegraf plugins/inputs/sqlserver/sqlserverqueries.go and
# azuresqldbqueries.go). Read together with sys.dm_os_sys_info it was lost wherever that view is denied:
# on Azure SQL Database Basic, S0, S1 and elastic pools the view needs "the server admin account, the
# Azure Active Directory admin account, or membership in the ##MS_ServerStateReader## server role"
# (sys.dm_os_sys_info, "Permissions", MicrosoftDocs/sql-docs
# docs/relational-databases/system-dynamic-management-views/sys-dm-os-sys-info-transact-sql.md;
# the same loss: erikdarlingdata/PerformanceMonitor issue 1535), the edition stayed unknown and the
# on-premises statements were sent.
EDITION = Query(
    "engine_edition",
    "SELECT CAST(SERVERPROPERTY('EngineEdition') AS INT) AS engine_edition",
    per_scrape=False,
)

# SQL Server's identity, once the edition is known not to be Azure SQL Database. The start time is
# sys.dm_os_sys_info's (VIEW SERVER STATE; VIEW SERVER PERFORMANCE STATE on 2022+, as the other DMVs).
SERVER = Query(
    "server",
    """SELECT CAST(SERVERPROPERTY('ServerName') AS NVARCHAR(256)) AS server_name,
       CAST(PARSENAME(CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128)), 4) AS INT) AS major_version,
       CAST(DATEDIFF(DAY, '19700101', sqlserver_start_time) AS BIGINT) * 86400
         + DATEDIFF(SECOND, CAST(sqlserver_start_time AS DATE), sqlserver_start_time) AS start_time,
       CASE WHEN DB_ID(N'rdsadmin') IS NOT NULL OR SUSER_SNAME(0x01) = N'rdsa' THEN 1 ELSE 0 END AS amazon_rds
FROM sys.dm_os_sys_info""",
    per_scrape=False,
)

# Azure SQL Database's identity: no view at all (see EDITION for why not sys.dm_os_sys_info), so every
# service tier answers it with the one grant its DMVs need (VIEW DATABASE STATE). No start time: the
# service's counters restart on a failover anyway ("not persisted across SQL Database failover events",
# sys.dm_db_wait_stats), which Prometheus sees as a counter reset.
SERVER_SQL_DATABASE = Query(
    "server_sql_database",
    """SELECT CAST(SERVERPROPERTY('ServerName') AS NVARCHAR(256)) AS server_name,
       CAST(PARSENAME(CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128)), 4) AS INT) AS major_version""",
    per_scrape=False,
)

# The operating system: sys.dm_os_host_info's host_platform, "Windows or Linux", exists from SQL
# Server 2017 (14.x) ("Applies to"; SELECT granted to public up to 2019, VIEW SERVER PERFORMANCE STATE
# from 2022: https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-host-info-transact-sql).
# SQL Server before 2017 runs on Windows only: Ola Hallengren's Maintenance Solution reads the view
# from major version 14 and takes 'Windows' before (DatabaseBackup.sql, @HostPlatform).
HOST_INFO = Query("host_info", "SELECT host_platform FROM sys.dm_os_host_info", per_scrape=False)
HOST_INFO_SINCE = 14

# The volume of each file, for hosts where paths cannot be followed to a LUN through the mount table
# (Windows: 'D:\', 'C:\MountPoints\Data1\'). On Linux volume_mount_point and logical_volume_name
# "return null" (sys.dm_os_volume_stats,
# https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-volume-stats-transact-sql,
# the column descriptions), so the source does not ask there. "Applies to: SQL Server" (2008 R2 SP1
# and later: Telegraf reads it from ProductVersion 10.50.2500.0, influxdata/telegraf
# plugins/inputs/sqlserver/sqlserverqueries.go, and not in its Managed Instance queries,
# azuresqlmanagedqueries.go); VIEW SERVER STATE, on 2022 and later VIEW SERVER PERFORMANCE STATE (same page).
VOLUMES = Query(
    "os_volume_stats",
    """SELECT mf.database_id, mf.file_id, vs.volume_mount_point, vs.logical_volume_name
FROM sys.master_files AS mf WITH (NOLOCK)
CROSS APPLY sys.dm_os_volume_stats(mf.database_id, mf.file_id) AS vs
WHERE mf.type IN (0, 1) AND mf.state = 0""",
    per_scrape=False,
)

ALL_QUERIES: tuple[Query, ...] = (
    FILE_STATS,
    FILE_STATS_NO_QUEUED,
    WAIT_STATS,
    SERVER,
    EDITION,
    SERVER_SQL_DATABASE,
    HOST_INFO,
    VOLUMES,
    DB_FILE_STATS,
    DB_WAIT_STATS,
)
