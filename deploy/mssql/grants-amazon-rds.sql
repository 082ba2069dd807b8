-- lunlat: a least-privilege login for the exporter's mssql source on Amazon RDS for SQL Server.
--
-- RDS has no sysadmin: run this as the instance's master user, the password from a variable:
--   sqlcmd -S mydb.xxxx.eu-west-1.rds.amazonaws.com,1433 -U admin -b -i deploy/mssql/grants-amazon-rds.sql \
--          -v LUNLAT_PASSWORD="$(cat /run/secrets/mssql)"
--
-- The master user holds ALTER ANY LOGIN, VIEW SERVER STATE and VIEW ANY DEFINITION ("Master user
-- account privileges", https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/UsingWithRDS.MasterAccounts.html),
-- and a login it creates can be given VIEW SERVER STATE and VIEW ANY DEFINITION: Datadog's setup for
-- SQL Server on RDS (versions 2014 to 2022) runs the same grants as the master user
-- (DataDog/documentation content/en/database_monitoring/setup_sql_server/rds.md, "Grant the Agent access").
--
-- What the exporter reads there (exporter/src/lunlat/engines/mssql/sql.py: EDITION, SERVER, HOST_INFO,
-- FILE_STATS, WAIT_STATS; no volume lookup: the files are on the RDS host, not the exporter's):
--   sys.dm_io_virtual_file_stats, sys.dm_os_wait_stats, sys.dm_os_sys_info, sys.dm_os_host_info
--       VIEW SERVER STATE (on 2022 it covers VIEW SERVER PERFORMANCE STATE, which grants.sql asks
--       for elsewhere; the master user's list above names VIEW SERVER STATE only);
--   sys.master_files (file type and physical_name)
--       VIEW ANY DEFINITION, as in grants.sql: without it only master's and tempdb's files show.
-- Nothing else: no database user, no db_owner.

USE master;
GO

IF NOT EXISTS (SELECT 1 FROM sys.server_principals WHERE name = N'lunlat')
    CREATE LOGIN [lunlat] WITH PASSWORD = N'$(LUNLAT_PASSWORD)', CHECK_POLICY = ON, DEFAULT_DATABASE = [master];
GO

GRANT VIEW SERVER STATE TO [lunlat];
GO

GRANT VIEW ANY DEFINITION TO [lunlat];
GO
