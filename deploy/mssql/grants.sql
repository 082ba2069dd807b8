-- lunlat: a least-privilege SQL Server login for the exporter's mssql source.
--
-- Run as a sysadmin with sqlcmd, the password from a variable (never in this file or a history):
--   sqlcmd -S sql1.example.com,1433 -U sa -i deploy/mssql/grants.sql -v LUNLAT_PASSWORD="$(cat /run/secrets/mssql)"
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
-- denied"); the exporter turns that query off for ten minutes, counts
-- lunlat_source_errors_total{reason="no_grant"}, logs one line and keeps the rest. Without VIEW ANY
-- DEFINITION, sys.master_files shows only master's and tempdb's files: the user databases' files
-- silently vanish from lunlat_mssql_file_* (check that every database appears after granting).

USE master;
GO

IF NOT EXISTS (SELECT 1 FROM sys.server_principals WHERE name = N'lunlat')
    CREATE LOGIN [lunlat] WITH PASSWORD = N'$(LUNLAT_PASSWORD)', CHECK_POLICY = ON, DEFAULT_DATABASE = [master];
GO

IF CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) >= 16
    GRANT VIEW SERVER PERFORMANCE STATE TO [lunlat];
ELSE
    GRANT VIEW SERVER STATE TO [lunlat];
GO

GRANT VIEW ANY DEFINITION TO [lunlat];
GO
