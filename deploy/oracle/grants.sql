-- lunlat: a least-privilege Oracle user for the exporter's oracle source (Oracle 12.2 or later).
--
-- It gets CREATE SESSION and SELECT on exactly the fourteen V$/GV$ views the exporter reads
-- (exporter/src/lunlat/engines/oracle/sql.py, VIEWS; tests/oracle/test_deploy.py keeps the two
-- equal), nothing else: no SELECT ANY DICTIONARY, no SELECT_CATALOG_ROLE, no ASH/AWR views (those
-- need the Diagnostics Pack licence). V$X is a public synonym of SYS.V_$X and GV$X of SYS.GV_$X:
-- a grant has to name the SYS view, not the synonym.
--
-- Run it as SYSDBA (or a user holding these privileges WITH ADMIN/GRANT OPTION) in SQL*Plus or
-- SQLcl. User name and password are substitution variables, never written in this file:
--   SQL> DEFINE lunlat_user = LUNLAT
--   SQL> ACCEPT lunlat_password CHAR PROMPT 'password for the lunlat user: ' HIDE
--   SQL> @deploy/oracle/grants.sql
-- (a variable left undefined is prompted for; deploy/oracle/setup/ defines both non-interactively).
-- The password is written between double quotes: it must not contain a double quote or an ampersand.
--
-- Where to run it (the script finds out which case it is in by itself):
--   - a non-CDB, or one PDB: connect to that database / PDB (its service, or ALTER SESSION SET
--     CONTAINER = <pdb>) with lunlat_user = LUNLAT: a local user, no CONTAINER clause. The
--     exporter's dsn then names that service and sees that PDB's files only.
--   - a whole CDB: connect to CDB$ROOT with lunlat_user = C##LUNLAT (a common user: without the
--     C## prefix CREATE USER fails with ORA-65096). The user and every grant get CONTAINER=ALL, and
--     ALTER USER ... SET CONTAINER_DATA = ALL CONTAINER = CURRENT lets it see every PDB's rows from
--     the root: without that, the root's V$ views show only the root's own rows. The exporter's dsn
--     names the CDB's service; the `db` label then tells the PDBs apart.
--
-- A missing grant (a view left out, or revoked later): the query reading that view fails with
-- ORA-00942; the exporter switches that one query off and asks it again at its next session or
-- config reload, else after 60 s doubling up to ten minutes; it counts
-- lunlat_source_errors_total{source="oracle:<name>",reason="no_grant"}, logs one line naming the
-- query and this file, and everything else keeps publishing (a file lookup's last answer keeps the
-- files' names and LUNs for up to the target's file_map_max_age_seconds). What each missing grant
-- costs is written above it.
--
-- Stops at the first error (WHENEVER SQLERROR): a user that already exists is not changed; drop it
-- with revoke.sql first, or run only the GRANT lines again (granting twice is harmless).

SET DEFINE ON
SET VERIFY OFF
WHENEVER SQLERROR EXIT FAILURE

-- The container clause: CONTAINER=ALL in CDB$ROOT (a common user), nothing in a PDB or a non-CDB.
COLUMN lunlat_container_clause NEW_VALUE lunlat_container NOPRINT
SELECT CASE WHEN SYS_CONTEXT('USERENV', 'CON_NAME') = 'CDB$ROOT' THEN 'CONTAINER=ALL' ELSE ' ' END
       AS lunlat_container_clause
FROM dual;

CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password" &&lunlat_container;

-- Log in. Without it: ORA-01045 at connect, lunlat_source_up 0 for this database (the host layer
-- keeps working).
GRANT CREATE SESSION TO &&lunlat_user &&lunlat_container;

-- Queries run at every scrape.
-- iostat_file: requests and service times per data/temp file, redo and control files
-- (lunlat_oracle_file_*). Without it those series are missing.
GRANT SELECT ON SYS.GV_$IOSTAT_FILE TO &&lunlat_user &&lunlat_container;
-- system_event: waits and microseconds waited per I/O wait event and container
-- (lunlat_oracle_wait_event_*_total). Without it those counters are missing.
GRANT SELECT ON SYS.GV_$CON_SYSTEM_EVENT TO &&lunlat_user &&lunlat_container;
-- event_histogram_micro: wait duration histograms of the whole instance
-- (lunlat_oracle_wait_event_duration_seconds, db empty), read on releases before 18c (below:
-- con_event_histogram_micro). Without it there the histogram is missing.
GRANT SELECT ON SYS.GV_$EVENT_HISTOGRAM_MICRO TO &&lunlat_user &&lunlat_container;
-- asm_disk_stat: the ASM disks' names and paths (lunlat_oracle_asm_disk_*); no rows without
-- ASM, and none from a PDB (Oracle Database Reference, V$ASM_DISK_STAT): for ASM, log in to CDB$ROOT
-- as C##LUNLAT. Without it (or from a PDB) those series are missing, ASM files get an empty lun and
-- lunlat_source_capability{capability="asm"} is 0.
GRANT SELECT ON SYS.GV_$ASM_DISK_STAT TO &&lunlat_user &&lunlat_container;
-- asm_disk_stat: also this database's own reads, writes and times per ASM disk from
-- V$ASM_DISK_IOSTAT (V$ASM_DISK_STAT's counters are every database's on the disk group). Without
-- it the ASM disk series are missing, as above.
GRANT SELECT ON SYS.GV_$ASM_DISK_IOSTAT TO &&lunlat_user &&lunlat_container;

-- Name lookups, run on connect and every five minutes.
-- instance: instance names. Without it the db_instance label is the INST_ID number.
GRANT SELECT ON SYS.GV_$INSTANCE TO &&lunlat_user &&lunlat_container;
-- containers: CDB root and PDB names. Without it the db label is the CON_ID number.
GRANT SELECT ON SYS.V_$CONTAINERS TO &&lunlat_user &&lunlat_container;
-- database: V$DATABASE.CDB, whether the database is a CDB. Without it the exporter guesses from
-- V$CONTAINERS' rows.
GRANT SELECT ON SYS.V_$DATABASE TO &&lunlat_user &&lunlat_container;
-- datafile: data file paths, mapped to LUNs. Without it data files show as file="file#N", no lun.
GRANT SELECT ON SYS.V_$DATAFILE TO &&lunlat_user &&lunlat_container;
-- tempfile: temp file paths. Without it temp files show as file="file#N", no lun.
GRANT SELECT ON SYS.V_$TEMPFILE TO &&lunlat_user &&lunlat_container;
-- logfile: online redo log members. Without it the "(all redo logs)" row has no lun.
GRANT SELECT ON SYS.V_$LOGFILE TO &&lunlat_user &&lunlat_container;
-- controlfile: control file paths. Without it the "(all control files)" row has no lun.
GRANT SELECT ON SYS.V_$CONTROLFILE TO &&lunlat_user &&lunlat_container;
-- asm_diskgroup_stat: disk group names (+DATA/... files to the group's disks). Without it the
-- diskgroup label is the group number and ASM files get no lun.
GRANT SELECT ON SYS.V_$ASM_DISKGROUP_STAT TO &&lunlat_user &&lunlat_container;

-- On a release without the next view its GRANT fails with ORA-00942 and the script goes on.
WHENEVER SQLERROR CONTINUE
-- con_event_histogram_micro: wait duration histograms per container (18c and later: the Database
-- Reference documents V$CON_EVENT_HISTOGRAM_MICRO from 18c; before, the exporter reads
-- event_histogram_micro, the whole instance's, and does not need this grant). Without it on 18c or
-- later the histogram is missing.
GRANT SELECT ON SYS.GV_$CON_EVENT_HISTOGRAM_MICRO TO &&lunlat_user &&lunlat_container;
WHENEVER SQLERROR EXIT FAILURE

-- CDB root only: let the common user see the rows of every container, not just the root's.
-- (CONTAINER_DATA is a user attribute, not a privilege; in a PDB or a non-CDB nothing is done.)
BEGIN
  IF SYS_CONTEXT('USERENV', 'CON_NAME') = 'CDB$ROOT' THEN
    EXECUTE IMMEDIATE 'ALTER USER &&lunlat_user SET CONTAINER_DATA = ALL CONTAINER = CURRENT';
  END IF;
END;
/

WHENEVER SQLERROR CONTINUE
UNDEFINE lunlat_password
