-- Remove lunlat's monitoring user (deploy/oracle/grants.sql). Run as SYSDBA where it was created,
-- after DEFINE lunlat_user = LUNLAT (or C##LUNLAT in a CDB root).
SET VERIFY OFF
DROP USER &&lunlat_user CASCADE;
