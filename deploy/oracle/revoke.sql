-- lunlat: remove the monitoring user deploy/oracle/grants.sql created, with all its grants (and,
-- in a CDB root, its CONTAINER_DATA attribute). Run as SYSDBA where it was created:
--   SQL> DEFINE lunlat_user = LUNLAT        -- C##LUNLAT in a CDB root: dropped from every PDB too
--   SQL> @deploy/oracle/revoke.sql
-- A running exporter then fails to log in (ORA-01017): lunlat_source_up is 0 for that database.
SET DEFINE ON
SET VERIFY OFF
WHENEVER SQLERROR EXIT FAILURE
DROP USER &&lunlat_user CASCADE;
WHENEVER SQLERROR CONTINUE
