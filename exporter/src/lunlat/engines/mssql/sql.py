"""The SQL Server source's T-SQL: static text only, no parameters (docs/contract.md §4).

No `?` parameters on purpose: pyodbc sends parameterised statements as RPC `sp_prepexec`, plain
text as a SQL batch; static batches keep the driver path (and the tests' TDS server) simple.
Tests parse every statement with sqlglot's T-SQL dialect.

Units: sys.dm_io_virtual_file_stats stalls are cumulative milliseconds, bytes are bytes;
sys.dm_os_wait_stats times are milliseconds. Both count since the service started.
"""

from __future__ import annotations

from lunlat.engines.dbsource import Query
from lunlat.engines.mssql import waits as mssql_waits

# Waits that are I/O: wait type -> (role, measure), from the table of engines/mssql/waits.py (each
# row with Microsoft's description of the wait type and what one wait is: per_commit, per_latch or
# time_spent). role "other" for waits no LUN role explains.
IO_WAITS: dict[str, tuple[str, str]] = {w.name: (w.role, w.measure) for w in mssql_waits.WAIT_TYPES}

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
# (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-database-files-transact-sql;
# "Requires membership in the public role"). The service always runs the newest engine, so the
# io_stall_queued_* columns are there (Telegraf reads them on Azure SQL Database).
# The rows read, as Telegraf's sqlAzureDBDatabaseIO reads them (azuresqldbqueries.go at influxdata/telegraf
# 67f9a0e, lines 151-215: the DMV with (NULL, NULL), line 214 `vfs.[database_id] IN (DB_ID(),0,2)`, a LEFT
# OUTER JOIN to sys.database_files UNION ALL tempdb.sys.database_files on database_id and file_id):
# - DB_ID(): the connection's database, its data and log files;
# - 2: tempdb, whose files the DMV shows from a user database and whose catalog is
#   tempdb.sys.database_files (role temp in the source). Database ids "are unique within a single
#   database or an elastic pool, but not within a logical server" (sys.dm_io_virtual_file_stats,
#   database_id): the rows are this database's (or its pool's) tempdb, so the filter names the ids;
# - 0: Hyperscale's local RBPEX cache, "a special row" with "the value of 0 for both database_id and
#   file_id" that no catalog lists (Azure SQL Database, "Hyperscale performance diagnostics", "Local
#   RBPEX cache usage", https://learn.microsoft.com/azure/azure-sql/database/hyperscale-performance-diagnostics):
#   an inner join dropped it, the LEFT JOIN keeps it with NULL type and physical_name.
# Joined on database_id too: on file_id alone a tempdb row met the user database's file of that id
# (Telegraf's comment: "Without this had a bug where join was only on file_id").
DB_FILE_STATS = Query(
    "database_file_stats",
    """SELECT vfs.database_id, vfs.file_id, DB_NAME() AS database_name, df.type,
       df.physical_name,
       vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,
       vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms,
       vfs.io_stall_queued_read_ms, vfs.io_stall_queued_write_ms
FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs
LEFT JOIN (
  SELECT DB_ID() AS database_id, file_id, type, physical_name, state FROM sys.database_files
  UNION ALL
  SELECT 2 AS database_id, file_id, type, physical_name, state FROM tempdb.sys.database_files
) AS df ON df.database_id = vfs.database_id AND df.file_id = vfs.file_id
WHERE vfs.database_id IN (DB_ID(), 0, 2)
  AND (vfs.database_id = 0 OR (df.type IN (0, 1) AND df.state = 0))""",
    per_scrape=True,
)
RBPEX_ID = 0  # database_id and file_id of Hyperscale's RBPEX row
TEMPDB_ID = 2
# DATABASEPROPERTYEX(DB_NAME(), 'Edition'), "the database edition or service tier" (DATABASEPROPERTYEX,
# https://learn.microsoft.com/en-us/sql/t-sql/functions/databasepropertyex-transact-sql; on Azure SQL
# Database it "requires the name of the current database"), is 'Hyperscale' on that tier: SMO reads the
# tier so (microsoft/sqlmanagementobjects src/Microsoft/SqlServer/Management/SqlEnum/
# PostProcessDatabaseInsideAttribs.cs, IsHyperscaleEdition: `databasepropertyex(db_name(),'Edition') =
# 'Hyperscale'`), Telegraf from sys.database_service_objectives.edition (azuresqldbqueries.go,
# `slo.[edition] = 'Hyperscale'`), a view that needs dbManager or the database's owner
# (sys.database_service_objectives, "Permissions"); the property reads no view. The engine edition is
# 5 as on every Azure SQL Database tier (SERVERPROPERTY above).
HYPERSCALE = "Hyperscale"
# DATABASEPROPERTYEX(DB_NAME(), 'Updateability'), "whether data can be modified": READ_ONLY or
# READ_WRITE, base type nvarchar(128) (the DATABASEPROPERTYEX page above). Azure SQL names it the way to
# tell a read-only replica: "It will return READ_ONLY when you are connected to a read-only replica"
# ("Read queries on replicas", https://learn.microsoft.com/azure/azure-sql/database/read-scale-out;
# MicrosoftDocs/sql-docs azure-sql/database/read-scale-out.md). On a Hyperscale one, "log writes don't
# actually occur on secondary replicas, any accounting of log IOs on the secondary replicas is for
# tracking purposes only" ("Hyperscale performance diagnostics", "Log writes"). A database set
# READ_ONLY on the primary "supports data reads but not data modifications" (DATABASEPROPERTYEX): no
# commit waits on its log there either.
READ_ONLY = "READ_ONLY"

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
# service tier answers it with the one grant its DMVs need (VIEW DATABASE STATE); the service tier
# (HYPERSCALE above) and whether the database takes writes (READ_ONLY above) from DATABASEPROPERTYEX,
# which reads no view either. No start time: the service's counters restart on a failover anyway ("not
# persisted across SQL Database failover events", sys.dm_db_wait_stats), which Prometheus sees as a
# counter reset.
SERVER_SQL_DATABASE = Query(
    "server_sql_database",
    """SELECT CAST(SERVERPROPERTY('ServerName') AS NVARCHAR(256)) AS server_name,
       CAST(PARSENAME(CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128)), 4) AS INT) AS major_version,
       CAST(DATABASEPROPERTYEX(DB_NAME(), 'Edition') AS NVARCHAR(64)) AS service_tier,
       CAST(DATABASEPROPERTYEX(DB_NAME(), 'Updateability') AS NVARCHAR(128)) AS updateability""",
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
