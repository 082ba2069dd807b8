"""The Oracle source's SQL: static text only, nothing built from input (docs/contract.md §4).

Every statement reads GV$ views, which work the same on a single instance (INST_ID 1) and on RAC
(one row per instance), and names every column it reads, so the collector unpacks rows by position.
Tests run these exact strings on an emulation of the views, translated by sqlglot from the Oracle
dialect (whose parser also rejects what Oracle would not accept).

Units: V$IOSTAT_FILE service times are milliseconds, V$CON_SYSTEM_EVENT.TIME_WAITED_MICRO and
V$(CON_)EVENT_HISTOGRAM_MICRO.WAIT_TIME_MICRO microseconds, V$ASM_DISK_IOSTAT.READ_TIME/WRITE_TIME seconds.
The rounded centisecond/millisecond columns (TIME_WAITED, AVERAGE_WAIT, V$FILESTAT) are never read.
"""

from __future__ import annotations

import re

from lunlat.engines.dbsource import Query
from lunlat.engines.oracle import events as oracle_events

# The wait events that are I/O, with the role and direction each one measures (what one wait of
# each means, with its reference: oracle_events).
IO_EVENTS: dict[str, tuple[str, str]] = {e.name: (e.role, e.direction) for e in oracle_events.EVENTS}

_EVENT_LIST = ", ".join(f"'{event}'" for event in IO_EVENTS)


# The FILETYPE_NAME strings are not listed by the Database Reference (it gives "ARCHIVELOG" as an
# example only). 'Data File', 'Temp File', 'Log File' and 'Control File' are among the values a peer's
# integration test accepts from real servers (21c XE, 23ai FREE) for `SELECT filetype_name ... FROM
# v$iostat_file GROUP BY con_id, filetype_name`, which fails on any other string: Checkmk/checkmk
# packages/mk-oracle/tests/test_ora_sql.rs, test_io_stats_query (its check plugin lists the same
# thirteen names). No Oracle page lists them (docs/oracle.md, "Limits of what the views say").
# SMALL_SYNC_READ_REQS / SMALL_SYNC_READ_LATENCY (ms) are the synchronous single-block reads, whose
# latency is the full wait: the other service times of asynchronous I/O are not (Oracle Database
# Reference, V$IOSTAT_FILE; 2 Day + Performance Tuning Guide, "Monitoring I/O").
IOSTAT_FILE = Query(
    "iostat_file",
    """SELECT inst_id, con_id, file_no, filetype_name,
       small_read_reqs + large_read_reqs AS reads,
       small_write_reqs + large_write_reqs AS writes,
       small_read_servicetime + large_read_servicetime AS read_ms,
       small_write_servicetime + large_write_servicetime AS write_ms,
       small_sync_read_reqs AS sync_reads, small_sync_read_latency AS sync_read_ms
FROM gv$iostat_file
WHERE filetype_name IN ('Data File', 'Temp File', 'Log File', 'Control File')""",
    per_scrape=True,
)

# Per container: from a CDB root V$SYSTEM_EVENT is instance-wide (CON_ID 0), V$CON_SYSTEM_EVENT has
# one row per container with its CON_ID (from a PDB: that PDB's; in a non-CDB: CON_ID 0, the
# instance). Oracle Database Reference, V$SYSTEM_EVENT and V$CON_SYSTEM_EVENT (12.1 and later).
SYSTEM_EVENT = Query(
    "system_event",
    f"""SELECT inst_id, con_id, event, total_waits, time_waited_micro
FROM gv$con_system_event
WHERE event IN ({_EVENT_LIST})""",  # noqa: S608 - a constant list, no input
    per_scrape=True,
)

# Every event of the I/O wait classes, summed per class: the catch-all for events IO_EVENTS does
# not list. WAIT_CLASS is a column of V$CON_SYSTEM_EVENT; 'User I/O' and 'System I/O' are the I/O
# classes (Oracle Database Reference, V$CON_SYSTEM_EVENT and "Classes of Wait Events").
WAIT_CLASS = Query(
    "system_wait_class",
    """SELECT inst_id, con_id, wait_class, SUM(total_waits) AS total_waits,
       SUM(time_waited_micro) AS time_waited_micro
FROM gv$con_system_event
WHERE wait_class IN ('User I/O', 'System I/O')
GROUP BY inst_id, con_id, wait_class""",
    per_scrape=True,
)

EVENT_HISTOGRAM = Query(
    "event_histogram_micro",
    f"""SELECT inst_id, con_id, event, wait_time_micro, wait_count
FROM gv$event_histogram_micro
WHERE event IN ({_EVENT_LIST})""",  # noqa: S608 - a constant list, no input
    per_scrape=True,
)

# Per container (CON_ID as in V$CON_SYSTEM_EVENT: 0 in a non-CDB, each container's from the root,
# the PDB's own from a PDB). Oracle Database Reference 18c documents it (7.131,
# https://docs.oracle.com/en/database/oracle/oracle-database/18/refrn/V-CON_EVENT_HISTOGRAM_MICRO.html),
# no 12.2 page for it was found: the source reads it from release CON_HISTOGRAM_SINCE on, and
# EVENT_HISTOGRAM (instance-wide) before.
CON_EVENT_HISTOGRAM = Query(
    "con_event_histogram_micro",
    f"""SELECT inst_id, con_id, event, wait_time_micro, wait_count
FROM gv$con_event_histogram_micro
WHERE event IN ({_EVENT_LIST})""",  # noqa: S608 - a constant list, no input
    per_scrape=True,
)
CON_HISTOGRAM_SINCE = 18

# Per disk, this database's own I/O: V$ASM_DISK_IOSTAT is per ASM client, and "If this view is
# queried from the database instance, only the rows for that instance are shown"; READ_TIME and
# WRITE_TIME in seconds (Oracle Database Reference, V$ASM_DISK_IOSTAT,
# https://docs.oracle.com/en/database/oracle/oracle-database/21/refrn/V-ASM_DISK_IOSTAT.html).
# V$ASM_DISK_STAT's own counters are every client's (every database on the disk group): only its
# disk name and path are read, for the LUN. Disk group 0 holds candidate and former disks, which no
# database file lives on.
ASM_DISK = Query(
    "asm_disk_stat",
    """SELECT d.inst_id, d.group_number, d.disk_number, d.name, d.path,
       i.reads, i.writes, i.read_time, i.write_time
FROM gv$asm_disk_stat d
JOIN gv$asm_disk_iostat i
  ON i.inst_id = d.inst_id AND i.group_number = d.group_number AND i.disk_number = d.disk_number
WHERE d.group_number <> 0""",
    per_scrape=True,
)

INSTANCES = Query("instance", "SELECT inst_id, instance_name FROM gv$instance", per_scrape=False)

# V$CONTAINERS lists the CDB root and its PDBs (a non-CDB shows one row, CON_ID 0): their names.
CONTAINERS = Query("containers", "SELECT con_id, name FROM v$containers", per_scrape=False)

# Whether the database is a CDB: V$DATABASE.CDB is YES in a CDB, NO in a non-CDB (Oracle Database
# Reference, V$DATABASE, 12.1 and later:
# https://docs.oracle.com/en/database/oracle/oracle-database/19/refrn/V-DATABASE.html; the
# OpenTelemetry Collector's oracledb receiver tells the two apart with the same statement,
# open-telemetry/opentelemetry-collector-contrib receiver/oracledbreceiver, instanceCDBSQL).
DATABASE = Query("database", "SELECT cdb FROM v$database", per_scrape=False)

DATAFILES = Query("datafile", "SELECT file# AS file_no, con_id, name FROM v$datafile", per_scrape=False)

TEMPFILES = Query("tempfile", "SELECT file# AS file_no, con_id, name FROM v$tempfile", per_scrape=False)

# Online redo only: standby redo logs (TYPE 'STANDBY') see no LGWR writes on a primary.
LOGFILES = Query(
    "logfile",
    "SELECT group# AS group_no, con_id, member FROM v$logfile WHERE type = 'ONLINE'",
    per_scrape=False,
)

CONTROLFILES = Query("controlfile", "SELECT con_id, name FROM v$controlfile", per_scrape=False)

# ASM datafile names start with the disk group (+DATA/…): this maps them to the group's disks.
# The _STAT view answers from memory; V$ASM_DISKGROUP would rescan every disk.
ASM_DISKGROUPS = Query(
    "asm_diskgroup_stat", "SELECT group_number, name FROM v$asm_diskgroup_stat", per_scrape=False
)

ALL_QUERIES: tuple[Query, ...] = (
    IOSTAT_FILE,
    SYSTEM_EVENT,
    WAIT_CLASS,
    EVENT_HISTOGRAM,
    CON_EVENT_HISTOGRAM,
    ASM_DISK,
    INSTANCES,
    CONTAINERS,
    DATABASE,
    DATAFILES,
    TEMPFILES,
    LOGFILES,
    CONTROLFILES,
    ASM_DISKGROUPS,
)

# Exactly the views the statements read: deploy/oracle/grants.sql grants SELECT on these (a test
# checks both against each other).
VIEWS: tuple[str, ...] = (
    "gv$iostat_file",
    "gv$con_system_event",
    "gv$event_histogram_micro",
    "gv$con_event_histogram_micro",
    "gv$asm_disk_stat",
    "gv$asm_disk_iostat",
    "gv$instance",
    "v$containers",
    "v$database",
    "v$datafile",
    "v$tempfile",
    "v$logfile",
    "v$controlfile",
    "v$asm_diskgroup_stat",
)


def views_of(query: Query) -> tuple[str, ...]:
    """The views of VIEWS a statement reads (its FROM clause), for log lines."""
    return tuple(
        v for v in VIEWS if re.search(rf"\b(?:from|join)\s+{re.escape(v)}\b", query.sql, re.IGNORECASE)
    )
