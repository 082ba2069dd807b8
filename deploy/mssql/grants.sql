-- lunlat: a least-privilege SQL Server login for the exporter's mssql source.
--
-- Run as a sysadmin with sqlcmd, the password from a variable (never in this file or a history), and
-- -b so that a failing batch stops the script with an error instead of being passed over ("-b: on
-- error batch abort", https://learn.microsoft.com/en-us/sql/tools/sqlcmd/sqlcmd-utility):
--   sqlcmd -S sql1.example.com,1433 -U sa -b -i deploy/mssql/grants.sql -v LUNLAT_PASSWORD="$(cat /run/secrets/mssql)"
-- tests/mssql/test_grant_scripts.py runs every batch of it as SQL Server 2012 to 2022 would.
--
-- What the exporter reads (exporter/src/lunlat/engines/mssql/sql.py) and what each needs:
--   sys.dm_io_virtual_file_stats, sys.dm_os_wait_stats, sys.dm_os_sys_info
--       VIEW SERVER STATE (SQL Server 2019 and older) or VIEW SERVER PERFORMANCE STATE (2022+,
--       the narrower permission: performance DMVs without the security-related ones);
--   sys.master_files (file type and physical_name)
--       a row is visible only with CREATE DATABASE, ALTER ANY DATABASE or VIEW ANY DEFINITION:
--       VIEW ANY DEFINITION is the read-only one.
-- Nothing else: no database user, no db_datareader, no sysadmin.
--
-- A missing permission: the DMV query fails with error 300 ("VIEW SERVER STATE permission was
-- denied"); the exporter turns that query off (asked again at its next session or config reload,
-- else after 60 s doubling up to ten minutes), counts lunlat_source_errors_total{reason="no_grant"},
-- logs one line and keeps the rest; the LUNs keep the roles the last answer gave them for up to the
-- target's file_map_max_age_seconds. Without VIEW ANY
-- DEFINITION, sys.master_files shows only master's and tempdb's files: the user databases' files
-- silently vanish from lunlat_mssql_file_* (check that every database appears after granting).

USE master;
GO

IF NOT EXISTS (SELECT 1 FROM sys.server_principals WHERE name = N'lunlat')
    CREATE LOGIN [lunlat] WITH PASSWORD = N'$(LUNLAT_PASSWORD)', CHECK_POLICY = ON, DEFAULT_DATABASE = [master];
GO

-- VIEW SERVER PERFORMANCE STATE is a name only SQL Server 2022 (16.x) and later know: before, it is a
-- syntax error (Msg 102), and a batch with a syntax error runs none of its statements ("Batches",
-- https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms175502(v=sql.105);
-- the same failure on 2016-2019: DataDog/documentation issue 35901). So it is granted through dynamic
-- SQL, a batch of its own that is "not parsed or checked for errors until" it runs ("Using
-- sp_executesql", https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2005/ms175170(v=sql.90)).
-- The major version from ProductVersion, as the exporter reads it (ProductMajorVersion is NULL on
-- 2012 and 2014 before their late-2015 updates: SERVERPROPERTY,
-- https://learn.microsoft.com/en-us/sql/t-sql/functions/serverproperty-transact-sql).
IF CAST(PARSENAME(CAST(SERVERPROPERTY('ProductVersion') AS NVARCHAR(128)), 4) AS INT) >= 16
    EXEC (N'GRANT VIEW SERVER PERFORMANCE STATE TO [lunlat];');
ELSE
    GRANT VIEW SERVER STATE TO [lunlat];
GO

GRANT VIEW ANY DEFINITION TO [lunlat];
GO
