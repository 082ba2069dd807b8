-- lunlat: the Oracle user for the exporter on Oracle Autonomous Database, where nobody has SYSDBA.
--
-- "the privilege SYSDBA is not granted to the ADMIN user", and its GRANT ANY OBJECT PRIVILEGE "can't
-- be exercised against Oracle maintained schema such as SYSTEM or SYS": the per-view grants of
-- grants.sql fail there with ORA-01031/ORA-00942. What ADMIN may grant instead is the role that
-- gives "SELECT privileges on all data dictionary views", SELECT_CATALOG_ROLE (Oracle Autonomous
-- Database Serverless, "ADMIN User Roles and Privileges",
-- https://docs.oracle.com/en-us/iaas/autonomous-database-serverless/doc/autonomous-admin-user-roles.html).
-- That is more than the exporter reads (every catalog view, not the fourteen of sql.VIEWS): on
-- Autonomous Database no narrower grant is documented.
--
-- Run it as ADMIN in SQL*Plus or SQLcl, connected to the database's service:
--   SQL> DEFINE lunlat_user = LUNLAT
--   SQL> ACCEPT lunlat_password CHAR PROMPT 'password for the lunlat user: ' HIDE
--   SQL> @deploy/oracle/grants-autonomous.sql
-- An Autonomous Database is a PDB and the exporter runs off its host: what the exporter sees is
-- at most a PDB-local login's (docs/oracle.md, support matrix): no ASM disks, no file's LUN.
-- The password is written between double quotes: it must not contain a double quote or an ampersand.

SET DEFINE ON
SET VERIFY OFF
WHENEVER SQLERROR EXIT FAILURE

CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password";
GRANT CREATE SESSION TO &&lunlat_user;
GRANT SELECT_CATALOG_ROLE TO &&lunlat_user;

WHENEVER SQLERROR CONTINUE
UNDEFINE lunlat_password
