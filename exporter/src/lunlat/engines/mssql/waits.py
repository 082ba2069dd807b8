"""The SQL Server wait types the source reads, and what one wait of each means.

Not every wait type's wait_time_ms / waiting_tasks_count is the latency of one I/O. Each row says
which from the type's description in Microsoft's "sys.dm_os_wait_stats", Types of Waits
(https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/sys-dm-os-wait-stats-transact-sql),
in the vocabulary of the Oracle events (`engines/oracle/events.py`), so the series of both engines
carry the same `measure` label:

- `per_commit`: what a task waits for around a commit (a log flush, a replica hardening the log): a
  commit's latency, not one I/O's. WRITELOG is SQL Server's counterpart of Oracle's 'log file sync'
  (the Oracle Database Reference, "Descriptions of Wait Events": a committing session posts LGWR and
  waits until it is posted back; "the wait time includes the writing of the log buffer and the
  post"), never of Oracle's per-I/O 'log file parallel write'.
- `per_latch`: one task's wait on the latch of a buffer that is in an I/O request. Several tasks can
  wait on the same page's read, each wait counted, and a wait starts when the task asks for the page,
  not when the read was issued: time / waits is what queries feel per page, not the read's latency.
- `time_spent`: the page names no unit per wait (I/O operations, a backup's data, a throttle): only
  the time spent counts, never time / waits.

SQL Server keeps no wait of one I/O (`per_io`): a file's own I/O time per operation is its stall in
sys.dm_io_virtual_file_stats (the database layer of the rules).

Roles `replica` and `throttle` are never a LUN's (not in `ground.Role`, which config files and
LUN labels are checked against; only the wait series' `role` label takes them): a synchronous
replica's share of a commit, and a service tier holding the log rate back.

docs/mssql.md shows this table with each row's reference; a test keeps them equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Measure = Literal["per_commit", "per_latch", "time_spent"]
MEASURES: Final[tuple[Measure, ...]] = ("per_commit", "per_latch", "time_spent")

REFERENCE: Final = (
    "https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/"
    "sys-dm-os-wait-stats-transact-sql"
)
# IO_QUEUE_LIMIT is "Internal use only" on the sys.dm_os_wait_stats page; the Azure SQL Database page
# of sys.dm_db_wait_stats describes it (MicrosoftDocs/sql-docs
# docs/relational-databases/system-dynamic-management-views/sys-dm-db-wait-stats-azure-sql-database.md).
AZURE_DB_WAITS_REFERENCE: Final = (
    "https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/"
    "sys-dm-db-wait-stats-azure-sql-database"
)
# Azure SQL Database "Resource limits", transaction log rate governance: "Log rate governor traffic
# shaping is surfaced via the following wait types" (LOG_RATE_GOVERNOR database limiting, POOL_ pool
# limiting, INSTANCE_ instance-level limiting, HADR_THROTTLE_LOG_RATE_* feedback control).
LOG_RATE_REFERENCE: Final = (
    "https://learn.microsoft.com/en-us/azure/azure-sql/database/resource-limits-logical-server"
    "#transaction-log-rate-governance"
)
# Azure SQL Database "Hyperscale performance diagnostics", log rate throttling waits: "The following
# wait types (in sys.dm_os_wait_stats) describe the reasons why log rate can be throttled on the
# primary compute replica" (MicrosoftDocs/sql-docs azure-sql/database/hyperscale-performance-diagnostics.md).
HYPERSCALE_REFERENCE: Final = (
    "https://learn.microsoft.com/en-us/azure/azure-sql/database/hyperscale-performance-diagnostics"
)
REPLICA: Final = "replica"
THROTTLE: Final = "throttle"


@dataclass(frozen=True, slots=True)
class WaitType:
    name: str
    role: str  # ground.Role, "other", REPLICA or THROTTLE (never a LUN's)
    measure: Measure
    why: str  # what the reference says one wait is
    reference: str = REFERENCE


_PAGEIOLATCH_WHY = (
    "a task waits on a latch for a buffer that is in an I/O request ({mode} mode; 'Long waits may "
    "indicate problems with the disk subsystem'): one wait per task per page, not one read"
)
_GOVERNED_WHY = "Azure SQL log rate governance ({what}): the service tier holds log generation back"

WAIT_TYPES: Final[tuple[WaitType, ...]] = (
    WaitType(
        "WRITELOG",
        "log",
        "per_commit",
        "a task waits for a log flush to complete ('checkpoints and transaction commits'): a commit's "
        "wait around its log write, not one log write",
    ),
    WaitType(
        "LOGBUFFER",
        "log",
        "time_spent",
        "a task waits for space in the log buffer to store a log record: the log cannot keep up",
    ),
    *(
        WaitType(f"PAGEIOLATCH_{code}", "data", "per_latch", _PAGEIOLATCH_WHY.format(mode=mode))
        for code, mode in (
            ("SH", "Shared"),
            ("EX", "Exclusive"),
            ("UP", "Update"),
            ("DT", "Destroy"),
            ("KP", "Keep"),
        )
    ),
    WaitType(
        "IO_COMPLETION",
        "other",
        "time_spent",
        "waiting for I/O operations to complete, 'generally non-data page I/Os': no unit per wait",
    ),
    WaitType(
        "WRITE_COMPLETION",
        "other",
        "time_spent",
        "'a write operation is in progress': the page does not say one wait is one write",
    ),
    WaitType(
        "IO_RETRY",
        "other",
        "time_spent",
        "an I/O operation failed for insufficient resources and is retried",
    ),
    WaitType(
        "IO_QUEUE_LIMIT",
        "other",
        "time_spent",
        "Azure SQL Database: tasks blocked while the database's asynchronous I/O queue has too many I/Os "
        "pending (a threshold proportional to its DTUs): before an I/O is issued, not the device",
        AZURE_DB_WAITS_REFERENCE,
    ),
    WaitType(
        "ASYNC_IO_COMPLETION",
        "other",
        "time_spent",
        "a task waits for asynchronous non-data I/Os to finish (log shipping, mirroring, bulk import): "
        "one wait covers a set of I/Os",
    ),
    WaitType(
        "BACKUPIO",
        "other",
        "time_spent",
        "a backup task waits for data, or for a buffer in which to store data",
    ),
    WaitType(
        "HADR_SYNC_COMMIT",
        REPLICA,
        "per_commit",
        "commit processing waits for the synchronized secondary databases to harden the log (the time "
        "to send, write and acknowledge it): the replica's share of a commit, not a local LUN",
    ),
    WaitType(
        "LOG_RATE_GOVERNOR",
        THROTTLE,
        "time_spent",
        _GOVERNED_WHY.format(what="the database's limit"),
        LOG_RATE_REFERENCE,
    ),
    WaitType(
        "POOL_LOG_RATE_GOVERNOR",
        THROTTLE,
        "time_spent",
        _GOVERNED_WHY.format(what="the elastic pool's limit"),
        LOG_RATE_REFERENCE,
    ),
    WaitType(
        "INSTANCE_LOG_RATE_GOVERNOR",
        THROTTLE,
        "time_spent",
        _GOVERNED_WHY.format(what="the instance's limit"),
        LOG_RATE_REFERENCE,
    ),
    *(
        WaitType(
            f"HADR_THROTTLE_LOG_RATE_{cause}",
            THROTTLE,
            "time_spent",
            _GOVERNED_WHY.format(what=f"feedback control, {what}"),
            LOG_RATE_REFERENCE,
        )
        for cause, what in (
            ("SEND_RECV_QUEUE_SIZE", "Premium/Business Critical replicas not keeping up"),
            ("LOG_SIZE", "to avoid running out of log space"),
            ("MISMATCHED_SLO", "geo-replication: a geo-secondary falling behind"),
        )
    ),
    *(
        WaitType(
            f"RBIO_RG_{cause}",
            THROTTLE,
            "time_spent",
            f"Hyperscale log rate throttling: {what}; the service holds log generation back",
            HYPERSCALE_REFERENCE,
        )
        for cause, what in (
            ("STORAGE", "delayed log consumption by the page servers"),
            ("DESTAGE", "delayed log consumption by the long-term log storage"),
            ("REPLICA", "delayed log consumption by a readable secondary"),
            ("GEOREPLICA", "delayed log consumption by the geo-secondary"),
            ("LOCALDESTAGE", "delayed log consumption by the log service"),
        )
    ),
)

BY_NAME: Final[dict[str, WaitType]] = {wait.name: wait for wait in WAIT_TYPES}


def measure_of(wait_type: str) -> str:
    """`per_commit`, `per_latch` or `time_spent` for a wait type of the table ('' for any other)."""
    found = BY_NAME.get(wait_type)
    return found.measure if found else ""
