-- lunlat: a least-privilege Oracle user for the exporter's oracle source.
--
-- Run as SYSDBA (or a user with the ADMIN option on these privileges) in SQL*Plus or SQLcl. The
-- user, password and container clause are substitution variables, never written in this file:
--   SQL> DEFINE lunlat_user = LUNLAT
--   SQL> DEFINE lunlat_container = ''
--   SQL> ACCEPT lunlat_password CHAR PROMPT 'password: ' HIDE
--   SQL> @deploy/oracle/grants.sql
-- (undefined ones are prompted for; deploy/oracle/setup/ does the same non-interactively).
--
-- Where to run it:
--   - non-CDB, or one PDB only: connect to that database/PDB, lunlat_user = LUNLAT. The exporter's
--     dsn names that service; `db` labels then show that PDB.
--   - a whole CDB: connect to CDB$ROOT, lunlat_user = C##LUNLAT (a common user), DEFINE
--     lunlat_container = 'CONTAINER=ALL' (elsewhere '': no clause), and uncomment the
--     CONTAINER_DATA line below: without it the root's V$ views show only the root's own rows.
--
-- Exactly what the exporter reads (exporter/src/lunlat/sources/oracle_sql.py, VIEWS), granted on
-- the SYS views behind the public V$/GV$ synonyms (V$X is SYS.V_$X, GV$X is SYS.GV_$X):
--   GV$IOSTAT_FILE            per-file requests and service times (each scrape)
--   GV$SYSTEM_EVENT           µs wait-event counters (each scrape)
--   GV$EVENT_HISTOGRAM_MICRO  wait-event histograms (each scrape)
--   GV$ASM_DISK_STAT          per ASM disk counters (each scrape; no rows without ASM)
--   GV$INSTANCE               instance names (db_instance label)
--   V$CONTAINERS              PDB names (db label)
--   V$DATAFILE, V$TEMPFILE, V$LOGFILE, V$CONTROLFILE   file names → LUNs
--   V$ASM_DISKGROUP_STAT      disk group names (ASM files → disks)
-- Nothing else: no SELECT ANY DICTIONARY, no SELECT_CATALOG_ROLE, no ASH/AWR (licensed packs).
--
-- A missing grant: that one query fails with ORA-00942; the exporter turns it off for ten minutes,
-- counts lunlat_source_errors_total{reason="no_grant"}, logs one line naming the query, and the
-- rest keeps publishing (a missing V$DATAFILE grant leaves files named file#N without a LUN).

SET VERIFY OFF

CREATE USER &&lunlat_user IDENTIFIED BY "&&lunlat_password" &&lunlat_container;
GRANT CREATE SESSION TO &&lunlat_user &&lunlat_container;

GRANT SELECT ON SYS.GV_$IOSTAT_FILE TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.GV_$SYSTEM_EVENT TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.GV_$EVENT_HISTOGRAM_MICRO TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.GV_$ASM_DISK_STAT TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.GV_$INSTANCE TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.V_$CONTAINERS TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.V_$DATAFILE TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.V_$TEMPFILE TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.V_$LOGFILE TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.V_$CONTROLFILE TO &&lunlat_user &&lunlat_container;
GRANT SELECT ON SYS.V_$ASM_DISKGROUP_STAT TO &&lunlat_user &&lunlat_container;

-- CDB root only (a common user): let it see every container's rows. Harmless to skip elsewhere.
-- ALTER USER &&lunlat_user SET CONTAINER_DATA = ALL CONTAINER = CURRENT;

UNDEFINE lunlat_password
