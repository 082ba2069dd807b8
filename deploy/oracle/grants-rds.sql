-- lunlat: the least-privilege Oracle user on Amazon RDS for Oracle, where nobody has SYSDBA.
--
-- RDS: "you aren't allowed to log in as SYS and SYSTEM, and thus don't have SYSDBA privileges"
-- (Amazon RDS User Guide, "RDS for Oracle users and privileges",
-- https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/Oracle.Concepts.Privileges.html). A SYS
-- object is granted with the RDS procedure rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name,
-- p_grantee, p_privilege), which "grants only privileges that the master user has already been
-- granted through a role or direct grant"; object and user names in upper case, as DBA_OBJECTS
-- spells them (Amazon RDS User Guide, "Granting SELECT or EXECUTE privileges to SYS objects",
-- https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/Appendix.Oracle.CommonDBATasks.TransferPrivileges.html).
--
-- The same grants as grants.sql: CREATE SESSION and SELECT on exactly the views the exporter reads
-- (exporter/src/lunlat/engines/oracle/sql.py, VIEWS; tests/oracle/test_deploy.py keeps the three
-- equal). Run it as the master user (the tenant database's master user on a CDB instance: there
-- the application and this user live in a PDB, "your client application interacts with a PDB
-- rather than the CDB", Amazon RDS User Guide, "Overview of RDS for Oracle CDBs"):
--   SQL> DEFINE lunlat_user = LUNLAT
--   SQL> ACCEPT lunlat_password CHAR PROMPT 'password for the lunlat user: ' HIDE
--   SQL> @deploy/oracle/grants-rds.sql
-- What the exporter then sees is a PDB-local login's (docs/oracle.md, support matrix): no ASM disks,
-- and no LUN for any file (the exporter does not run on the database's host).
-- The password is written between double quotes: it must not contain a double quote or an ampersand.

SET DEFINE ON
SET VERIFY OFF
WHENEVER SQLERROR EXIT FAILURE

CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password";
GRANT CREATE SESSION TO &&lunlat_user;

BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$IOSTAT_FILE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$CON_SYSTEM_EVENT', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$EVENT_HISTOGRAM_MICRO', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$ASM_DISK_STAT', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$ASM_DISK_IOSTAT', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$INSTANCE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$CONTAINERS', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$DATABASE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$DATAFILE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$TEMPFILE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$LOGFILE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$CONTROLFILE', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'V_$ASM_DISKGROUP_STAT', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/

-- On a release without the next view (before 18c) the call fails and the script goes on; the
-- exporter then reads the whole instance's histogram (grants.sql says the same).
WHENEVER SQLERROR CONTINUE
BEGIN
  rdsadmin.rdsadmin_util.grant_sys_object(p_obj_name => 'GV_$CON_EVENT_HISTOGRAM_MICRO', p_grantee => UPPER('&&lunlat_user'), p_privilege => 'SELECT');
END;
/
UNDEFINE lunlat_password
