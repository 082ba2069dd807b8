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

Role `replica` (never a LUN's role, so not in `contract.Role`, which config files and LUN labels
are checked against; only the wait series' `role` label takes it): the wait is a Data Guard SYNC
standby's network round trip and standby redo write, which commits wait for on top of the local log
write. Keeping it apart keeps a slow standby from reading as a slow log LUN.

The README's Oracle section shows this table with each row's reference; a test keeps them equal.
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
    role: str  # contract.Role, "other", or REPLICA (a standby's wait, never a local LUN's)
    direction: str  # read | write | commit
    measure: Measure
    why: str  # what the reference says one wait is
    reference: str = _REFERENCE


# Data Guard SYNC transport: "used to track the time LGWR spends performing SYNC RFSWRITE operations"
# (Oracle Database Reference 12c Release 1, C.3.156 "SYNC Remote Write"; the Japanese edition is the
# copy found: https://docs.oracle.com/cd/E57425_01/121/REFRN/GUID-4018FC83-BC23-43A2-8E85-29681B04D113.htm).
# One wait is one remote redo write (network plus the standby's write), so time / waits is its latency.
# Older releases' LNS events ('LNS wait on SENDREQ') are left out: no Oracle reference page found.
SYNC_REMOTE_WRITE_REFERENCE: Final = (
    "https://docs.oracle.com/cd/E57425_01/121/REFRN/GUID-4018FC83-BC23-43A2-8E85-29681B04D113.htm"
)
REPLICA: Final = "replica"

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
        "SYNC Remote Write",
        REPLICA,
        "write",
        "per_io",
        "LGWR's SYNC RFSWRITE to a standby: the network and the standby's redo write, not a local LUN",
        SYNC_REMOTE_WRITE_REFERENCE,
    ),
)

BY_NAME: Final[dict[str, WaitEvent]] = {event.name: event for event in EVENTS}
REFERENCE: Final = _REFERENCE


def measure_of(event: str) -> str:
    """`per_io`, `time_spent` or `per_commit` for an event of the table ('' for any other)."""
    found = BY_NAME.get(event)
    return found.measure if found else ""
