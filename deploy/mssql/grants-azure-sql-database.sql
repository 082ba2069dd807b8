-- lunlat: a least-privilege user for the exporter's mssql source on Azure SQL Database.
--
-- Azure SQL Database serves one database per connection: run this IN THE DATABASE the exporter
-- reads (the target's `database:`), not in master, as its admin or a Microsoft Entra admin:
--   sqlcmd -S myserver.database.windows.net -d sales -U admin -b -i deploy/mssql/grants-azure-sql-database.sql \
--          -v LUNLAT_PASSWORD="$(cat /run/secrets/mssql)"
--
-- What the exporter reads there (exporter/src/lunlat/engines/mssql/sql.py: EDITION, SERVER_SQL_DATABASE,
-- DB_FILE_STATS, DB_WAIT_STATS) and what each needs:
--   SERVERPROPERTY only (the edition, the server's name and version): no grant.
--   Not sys.dm_os_sys_info: on Basic, S0, S1 and elastic pools it needs the server admin, the Azure
--       Active Directory admin or ##MS_ServerStateReader## (its page, "Permissions"), none of which a
--       monitoring user should be; the exporter does not read it here, so every tier needs the same
--       one grant below.
--   sys.dm_io_virtual_file_stats(DB_ID(), NULL), sys.dm_db_wait_stats
--       VIEW DATABASE STATE: "In SQL Database, querying a dynamic management view requires VIEW
--       DATABASE STATE permissions" and they "return information regarding your current logical
--       database only" (https://learn.microsoft.com/en-us/azure/azure-sql/database/monitoring-with-dmvs);
--       Telegraf's sqlserver input asks the same for Azure SQL Database
--       (influxdata/telegraf plugins/inputs/sqlserver/README.md);
--   sys.database_files (file type and physical_name)
--       the catalog view of the database itself: no further grant; Telegraf reads it on Azure SQL
--       Database with VIEW DATABASE STATE alone (azuresqldbqueries.go and its README, above).
-- Nothing else: a contained user with a password (no login in master), no db_datareader.
--
-- Managed Instance is an instance like SQL Server's: use deploy/mssql/grants.sql there.
-- To remove the user: DROP USER [lunlat]; in the same database.

IF NOT EXISTS (SELECT 1 FROM sys.database_principals WHERE name = N'lunlat')
    CREATE USER [lunlat] WITH PASSWORD = N'$(LUNLAT_PASSWORD)';
GO

GRANT VIEW DATABASE STATE TO [lunlat];
GO
