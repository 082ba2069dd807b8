"""Oracle Database: files (V$IOSTAT_FILE), wait events and their histograms, ASM disks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from lunlat.engines.engine import Engine, FileLayer, WaitLayer
from lunlat.engines.oracle import dashboard
from lunlat.engines.oracle import metrics as m
from lunlat.engines.oracle.config import OracleTarget

if TYPE_CHECKING:
    from lunlat.config import Config
    from lunlat.sources.base import Source
    from lunlat.sources.factory import BuildError, Context

KEY = "oracle"


def targets(config: Config) -> list[OracleTarget]:
    """The config's Oracle targets."""
    return cast("list[OracleTarget]", config.targets(KEY))


def _build(context: Context) -> Sequence[Source] | BuildError:
    from lunlat.engines.oracle import source  # noqa: PLC0415 - the source imports the config, which imports this

    return source.build(context)


ENGINE = Engine(
    key=KEY,
    title="Oracle",
    target=OracleTarget,
    extra="oracle",
    driver_module="oracledb",
    driver_name="python-oracledb",
    metrics=m.ORACLE_METRICS,
    capabilities=m.CAPABILITIES,
    # No bytes: V$IOSTAT_FILE counts whole megabytes, too coarse for a throughput rate.
    files=FileLayer(
        m.ORACLE_FILE_READS, m.ORACLE_FILE_WRITES, m.ORACLE_FILE_READ_TIME, m.ORACLE_FILE_WRITE_TIME
    ),
    # Oracle's per-I/O event of the log write is 'log file parallel write'; 'log file sync' is the
    # commit's wait around it, not one I/O (events.py).
    waits=WaitLayer(
        m.ORACLE_WAITS,
        m.ORACLE_WAIT_TIME,
        label="event",
        log_write="log file parallel write",
        replica="SYNC Remote Write",
        data_read="db file sequential read",
        histogram=m.ORACLE_WAIT_DURATION,
    ),
    build=_build,
    dashboard=dashboard.ROWS,
    hints={
        "data_read": "Oracle 'db file sequential read'",
        "log_write": "Oracle 'log file parallel write', which commits wait for in 'log file sync'",
        "replica": "Oracle 'SYNC Remote Write'",
    },
)
