"""The lab's state directory and the state file that lets `down` undo what `up` did.

The state file is written after every step of `up` (before the next one starts), so a crash at
any point leaves a record of what exists; `down` also scans the kernel for what the record missed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lunlat.files import write_atomic
from lunlat_lab.daemon_engines import DEFAULT_ENGINE

# The live calibration's estimates (lab/daemon/calibration.py), written by the daemon's supervisor
# beside the settings file, read by `lab status`.
LIVE_OVERHEAD_FILE = "overhead.json"


@dataclass(slots=True)
class LabState:
    directory: Path
    config_file: str = ""
    engine: str = DEFAULT_ENGINE  # the FUSE daemon's engine (lab/daemon_engines.py)
    fuse_pid: int | None = None
    loops: dict[str, str] = field(default_factory=dict)  # lab LUN -> /dev/loopN
    fio_pid: int | None = None
    phase: str | None = None
    phase_output: str | None = None
    # pgbench workloads (lab/pgbench.py): where their clusters live, which are made, pgbench's pids.
    pg_base: str | None = None
    pg_clusters: list[str] = field(default_factory=list)
    pgbench_pids: list[int] = field(default_factory=list)

    @property
    def backing(self) -> Path:
        return self.directory / "backing"

    @property
    def mountpoint(self) -> Path:
        return self.directory / "mnt"

    @property
    def settings(self) -> Path:
        return self.directory / "settings.json"

    @property
    def live_overhead(self) -> Path:
        return self.directory / LIVE_OVERHEAD_FILE

    @property
    def exporter_config(self) -> Path:
        """The exporter's config for this lab's LUNs (lab/exporter_config.py), written by `up`."""
        return self.directory / "lunlat.yaml"

    @property
    def path(self) -> Path:
        return self.directory / "state.json"

    @property
    def fio_dir(self) -> Path:
        return self.directory / "fio"

    def save(self) -> None:
        data = asdict(self)
        data["directory"] = str(self.directory)
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True))

    @classmethod
    def load(cls, directory: Path) -> LabState | None:
        """The recorded state, or None when there is none (or it is unreadable: `down` then scans)."""
        try:
            data = json.loads((directory / "state.json").read_text())
        except (OSError, ValueError):
            return None
        data["directory"] = directory
        try:
            return cls(**data)
        except TypeError:
            return None


def stream_key(op: str, size: str | None) -> str:
    """How the live file names a stream of the live calibration: `read` (every size, measured on
    diskstats) or `read.small` (one size class, on the kernel's per-class counters)."""
    return op if size is None else f"{op}.{size}"


def write_live(path: Path, overheads: dict[str, dict[str, float]]) -> None:
    """The live calibration's estimates, ms by LUN and stream (stream_key)."""
    write_atomic(path, json.dumps({"overhead_ms": overheads}, indent=2, sort_keys=True))


def read_live(path: Path) -> dict[str, dict[str, float]]:
    """The live overheads last written by write_live (empty when none yet, or unreadable)."""
    try:
        data = json.loads(path.read_text())
        return {
            str(lun): {str(op): float(v) for op, v in ops.items()} for lun, ops in data["overhead_ms"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
