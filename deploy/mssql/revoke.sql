-- Remove lunlat's monitoring login (deploy/mssql/grants.sql). Run as a sysadmin with sqlcmd -b.
USE master;
GO
IF EXISTS (SELECT 1 FROM sys.server_principals WHERE name = N'lunlat')
    DROP LOGIN [lunlat];
GO
