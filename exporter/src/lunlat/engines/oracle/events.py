"""The Oracle wait events the source reads, and what one wait of each means.

Not every event's TIME_WAITED / TOTAL_WAITS is the latency of one I/O. Each row says which, from
the event's "Wait Time" in the Oracle Database Reference, "Descriptions of Wait Events"
(https://docs.oracle.com/database/122/REFRN/descriptions-of-wait-events.htm; the same text in every
release since 12.1):

- `per_io`: one wait is one I/O call (one block, one multiblock read, or one write issued to every
  member or copy at once and done when the last is on disk): time / waits is an I/O latency.
- `time_spent`: one wait covers part of a batch of asynchronous I/Os (the process waits for some or
  all of those outstanding), so time / waits is no I/O's latency; only the time spent counts.
- `per_commit`: what a committing session waits for (the redo write plus LGWR's post and the
  session's wake-up), a commit latency, not one I/O.

Direction `other` (the redo transport's open, close and ping of a standby destination): neither a
read nor a write of data.

Role `replica` (never a LUN's role, so not in `ground.Role`, which config files and LUN labels
are checked against; only the wait series' `role` label takes it): the wait is a Data Guard SYNC
standby's network round trip and standby redo write, which commits wait for on top of the local log
write. Keeping it apart keeps a slow standby from reading as a slow log LUN.

The Oracle page (docs/oracle.md) shows this table with each row's reference; a test keeps them equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Measure = Literal["per_io", "time_spent", "per_commit"]
MEASURES: Final[tuple[Measure, ...]] = ("per_io", "time_spent", "per_commit")

_REFERENCE: Final = "https://docs.oracle.com/database/122/REFRN/descriptions-of-wait-events.htm"


@dataclass(frozen=True, slots=True)
class WaitEvent:
    name: str
    role: str  # ground.Role, "other", or REPLICA (a standby's wait, never a local LUN's)
    direction: str  # read | write | commit | other
    measure: Measure
    why: str  # what the reference says one wait is
    reference: str = _REFERENCE


# Data Guard SYNC transport: "used to track the time LGWR spends performing SYNC RFSWRITE operations"
# (Oracle Database Reference 12c Release 1, C.3.156 "SYNC Remote Write"; the Japanese edition is the
# copy found: https://docs.oracle.com/cd/E57425_01/121/REFRN/GUID-4018FC83-BC23-43A2-8E85-29681B04D113.htm).
# One wait is one remote redo write (network plus the standby's write), so time / waits is its latency.
SYNC_REMOTE_WRITE_REFERENCE: Final = (
    "https://docs.oracle.com/cd/E57425_01/121/REFRN/GUID-4018FC83-BC23-43A2-8E85-29681B04D113.htm"
)
# The other redo transport events an Oracle Database Reference page describes. None has a "Wait
# Time" line: each page says the event tracks the time background processes spend on an operation,
# so only the time spent counts (`time_spent`), never time / waits:
# - 'ASYNC Remote Write' (C.3.3 of the 12.2 Descriptions of Wait Events, _REFERENCE): "the time ...
#   for asynchronous streaming RFSWRITE operations", stall reaps and network submission included,
#   accumulated by the TTnn (Redo Transport Slave) processes. ASYNC transport: commits do not wait.
# - 'Redo Transport Open' (12.1 reference C.3.119): ARCn, NSSn and TTnn doing RFSCREAT and RFSANNCE.
# - 'Redo Transport Close' (12.1 reference C.3.117; the Japanese edition is the copy found): ARCn,
#   NSSn and TTnn doing RFSCLOSE and RFSRGSTR.
# - 'Redo Transport Ping' (12.1 reference C.3.120, Japanese edition): ARCn doing RFSPING.
# Left out, no Oracle reference page found (only third-party copies of a support note):
# 'LGWR-LNS wait on channel', 'LNS wait on SENDREQ' and the 10g/11g 'LGWR wait on SENDREQ',
# 'ARCH wait on SENDREQ' family.
REDO_TRANSPORT_OPEN_REFERENCE: Final = (
    "https://docs.oracle.com/database/121/REFRN/GUID-C585F4F8-23C6-4523-8B17-710B294EF1E9.htm"
)
REDO_TRANSPORT_CLOSE_REFERENCE: Final = (
    "https://docs.oracle.com/cd/E57425_01/121/REFRN/GUID-2A666191-43BB-43D2-9DC9-F31E294C6436.htm"
)
REDO_TRANSPORT_PING_REFERENCE: Final = (
    "https://docs.oracle.com/cd/E57425_01/121/REFRN/GUID-31227DEF-BF98-4202-827B-5B338473A4AD.htm"
)
REPLICA: Final = "replica"
# Exadata: the database reads through the storage cells and waits on cell events instead of the
# 'db file ...' ones (Oracle Exadata System Software User's Guide, 6.3.9.2 "Monitoring Cell Disk I/O
# Using Database Statistics and Wait Events", and 6.3.7.2 "Monitoring Smart I/O Using Database
# Statistics and Wait Events"). The guide's table defines three by their counterparts, in these
# words: 'cell single block physical read' "is equivalent to db file sequential read for a cell",
# 'cell multiblock physical read' "is equivalent to db file scattered read for a cell", 'cell list
# of blocks physical read' "is equivalent to database file parallel read for a cell" (P3: the bytes,
# the total bytes, the number of blocks of that read). No Oracle page gives a cell event its own
# "Wait Time", so each takes its counterpart's from the Descriptions of Wait Events: the I/O's time
# (sequential read: per_io), all the I/Os of one multiblock read (scattered read: per_io), until a
# batch is done (parallel read: time_spent). The smart scans: "the database is waiting for table
# scans to complete on a cell" and "for index or index-organized table (IOT) fast full scans": a
# scan's worth of offloaded I/O per wait, so only their time counts (time_spent). (The guide's text
# as read in a verbatim copy, rammpeter/panorama app/helpers/key_explanation_helper.rb; the Oracle
# pages are cited below.)
EXADATA_REFERENCE: Final = (
    "https://docs.oracle.com/en/engineered-systems/exadata-database-machine/sagug/"
    "monitoring-cell-disk-io-using-db-stats-and-wait-events.html"
)
EXADATA_SMART_IO_REFERENCE: Final = (
    "https://docs.oracle.com/en/engineered-systems/exadata-database-machine/sagug/"
    "monitoring-smart-io-using-db-stats-and-wait-events.html"
)

EVENTS: Final[tuple[WaitEvent, ...]] = (
    WaitEvent(
        "db file sequential read",
        "data",
        "read",
        "per_io",
        "a single-block read (blocks = 1); the wait is the time the I/O takes",
    ),
    WaitEvent(
        "db file scattered read",
        "data",
        "read",
        "per_io",
        "one multiblock read into the buffer cache; the wait is the time for that read",
    ),
    WaitEvent(
        "db file parallel read",
        "data",
        "read",
        "time_spent",
        "a batch of reads issued together (requests); the wait ends when all of them are done",
    ),
    WaitEvent(
        "direct path read",
        "data",
        "read",
        "time_spent",
        "asynchronous reads; the session waits only for outstanding I/Os to complete",
    ),
    WaitEvent(
        "direct path read temp",
        "temp",
        "read",
        "time_spent",
        "asynchronous reads of temp files; the wait is for outstanding I/Os only",
    ),
    WaitEvent(
        "direct path write",
        "data",
        "write",
        "time_spent",
        "asynchronous writes; the session waits only for outstanding I/Os to complete",
    ),
    WaitEvent(
        "direct path write temp",
        "temp",
        "write",
        "time_spent",
        "asynchronous writes of temp files; the wait is for outstanding I/Os only",
    ),
    WaitEvent(
        "db file parallel write",
        "data",
        "write",
        "time_spent",
        "DBWR waits for some of a batch of writes to complete, not for all of them",
    ),
    WaitEvent(
        "db file single write",
        "data",
        "write",
        "per_io",
        "one write of file headers; the wait is the time the write takes",
    ),
    WaitEvent(
        "log file parallel write",
        "log",
        "write",
        "per_io",
        "LGWR's redo write to every member; the wait ends when the last I/O is on disk",
    ),
    WaitEvent(
        "log file sync",
        "log",
        "commit",
        "per_commit",
        "a committing session waits for LGWR to write its redo and post it: a commit, not one I/O",
    ),
    WaitEvent(
        "log file sequential read",
        "log",
        "read",
        "per_io",
        "one read of redo (archiving, recovery); the wait is the time the I/O takes",
    ),
    WaitEvent(
        "control file sequential read",
        "control",
        "read",
        "per_io",
        "one read of a control file; the wait is the time the read takes",
    ),
    WaitEvent(
        "control file parallel write",
        "control",
        "write",
        "per_io",
        "one write to every control file; the wait ends when all copies are written",
    ),
    WaitEvent(
        "cell single block physical read",
        "data",
        "read",
        "per_io",
        "Exadata: one single-block read from a storage cell, the cell's 'db file sequential read'",
        EXADATA_REFERENCE,
    ),
    WaitEvent(
        "cell multiblock physical read",
        "data",
        "read",
        "per_io",
        "Exadata: one multiblock read from a storage cell, the cell's 'db file scattered read'",
        EXADATA_REFERENCE,
    ),
    WaitEvent(
        "cell list of blocks physical read",
        "data",
        "read",
        "time_spent",
        "Exadata: a batch of non-contiguous block reads from the cells, the cell's 'db file parallel read'",
        EXADATA_REFERENCE,
    ),
    WaitEvent(
        "cell smart table scan",
        "data",
        "read",
        "time_spent",
        "Exadata: a session waits for the cells' offloaded table scan results, many I/Os per wait",
        EXADATA_SMART_IO_REFERENCE,
    ),
    WaitEvent(
        "cell smart index scan",
        "data",
        "read",
        "time_spent",
        "Exadata: a session waits for the cells' offloaded fast full index scan results",
        EXADATA_SMART_IO_REFERENCE,
    ),
    WaitEvent(
        "SYNC Remote Write",
        REPLICA,
        "write",
        "per_io",
        "LGWR's SYNC RFSWRITE to a standby: the network and the standby's redo write, not a local LUN",
        SYNC_REMOTE_WRITE_REFERENCE,
    ),
    WaitEvent(
        "ASYNC Remote Write",
        REPLICA,
        "write",
        "time_spent",
        "the TTnn processes' time on asynchronous streaming RFSWRITE to a standby (stall reaps and "
        "network submission included); commits do not wait for it",
    ),
    WaitEvent(
        "Redo Transport Open",
        REPLICA,
        "other",
        "time_spent",
        "the redo transport processes' time opening a standby destination's log (RFSCREAT, RFSANNCE)",
        REDO_TRANSPORT_OPEN_REFERENCE,
    ),
    WaitEvent(
        "Redo Transport Close",
        REPLICA,
        "other",
        "time_spent",
        "the redo transport processes' time closing a standby destination's log (RFSCLOSE, RFSRGSTR)",
        REDO_TRANSPORT_CLOSE_REFERENCE,
    ),
    WaitEvent(
        "Redo Transport Ping",
        REPLICA,
        "other",
        "time_spent",
        "the archiver processes' time pinging a standby destination (RFSPING)",
        REDO_TRANSPORT_PING_REFERENCE,
    ),
)

BY_NAME: Final[dict[str, WaitEvent]] = {event.name: event for event in EVENTS}
REFERENCE: Final = _REFERENCE


def measure_of(event: str) -> str:
    """`per_io`, `time_spent` or `per_commit` for an event of the table ('' for any other)."""
    found = BY_NAME.get(event)
    return found.measure if found else ""
