"""The lab description (the lab's lab.yaml): LUNs, arrays, workloads, phases.

The lab's own file: the exporter never reads it. What the exporter needs, a `luns:` entry per lab
LUN matching its loop device by backing file, is generated from it (lab/exporter_config.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from lunlat.contract import Role
from lunlat.engines.registry import ENGINES
from lunlat.yamlmodel import Strict, load_model

WorkloadKind = Literal["oltp", "log", "archive", "dss", "snapshot_oltp", "pgbench"]
# The fio options a pgbench workload has no use for (lab/pgbench.py drives a PostgreSQL server instead).
FIO_ONLY = ("block_size", "read_percent", "iodepth", "rate_iops")

# A lab LUN name: also a file name (<name>.img) and the LUN part of fio job names (fio/names.py),
# so a short lower-case identifier; the one pattern both check (\Z, not $: `$` also matches before a
# trailing newline). The exporter itself takes any LUN name the host gives.
LUN_NAME = re.compile(r"\A[a-z][a-z0-9_]{0,40}\Z")

# What a value may be, stated once for the lab description and the daemon's settings file.
Slots = Annotated[int, Field(ge=1, le=256)]
Bandwidth = Annotated[float, Field(gt=0, allow_inf_nan=False)]
DelayMs = Annotated[float, Field(ge=0, le=10_000)]  # a NaN fails the bounds
Jitter = Annotated[float, Field(ge=0, le=3)]


class ArrayConfig(Strict):
    """A shared backing store: every LUN on it competes for its service slots and bandwidth."""

    slots: Slots = Field(default=8, description="I/Os the array serves at once; more wait in its queue.")
    bandwidth_mib_s: Bandwidth = Field(default=400.0, description="Transfer budget shared by its LUNs.")


class Latency(Strict):
    """Service time of one I/O before queueing: a mean in ms and a spread (lognormal, coefficient of
    variation `jitter`; 0 = every I/O takes exactly the mean)."""

    read_ms: DelayMs
    write_ms: DelayMs
    jitter: Jitter = 0.3


class LabLun(Strict):
    name: str = Field(description="File name on the lab filesystem (<name>.img) and the LUN's id in the lab.")
    database: str
    engine: str = Field(
        description="The database's engine: a section of the exporter's config (oracle, mssql …)."
    )
    role: Role
    workload: str = Field(description="oltp for production, snapshot_oltp for the test/dev copies.")
    array: str = "array"
    latency: Latency

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        # The engines the exporter has (lunlat.engines.registry): a new engine is one in the lab too.
        known = [engine.key for engine in ENGINES]
        if value not in known:
            raise ValueError(f"unknown engine {value!r}: one of {', '.join(known)}")
        return value

    @model_validator(mode="after")
    def _name_ok(self) -> LabLun:
        if not LUN_NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r} must be lower-case letters, digits and _ (start with a letter)"
            )
        return self


class Workload(Strict):
    """One fio job per LUN it runs on. Rates keep the lab under what a Python FUSE daemon serves.

    kind pgbench: a PostgreSQL cluster instead (lab/pgbench.py), its data directory on the workload's
    data LUN and its WAL on its log LUN, loaded by pgbench with `jobs` clients at `rate_tps`."""

    kind: WorkloadKind
    luns: list[str] = Field(min_length=1)
    block_size: str = Field(default="8k", pattern=r"^\d+[kKmM]?$")
    read_percent: int = Field(default=80, ge=0, le=100)
    jobs: int = Field(default=1, ge=1, le=16)
    iodepth: int = Field(default=1, ge=1, le=64)
    rate_iops: int | None = Field(default=None, ge=1, description="Cap per job; None = as fast as it goes.")
    # pgbench only
    rate_tps: int | None = Field(default=None, ge=1, description="pgbench: transactions per second.")
    scale: int = Field(default=2, ge=1, le=100, description="pgbench: scale factor (100,000 accounts each).")
    port: int | None = Field(default=None, gt=1024, lt=65536, description="pgbench: the server's TCP port.")

    @model_validator(mode="after")
    def _kind_fields(self) -> Workload:
        pg_only = [f for f in ("rate_tps", "scale", "port") if f in self.model_fields_set]
        if self.kind != "pgbench" and pg_only:
            raise ValueError(f"{', '.join(pg_only)}: only for kind pgbench")
        if self.kind == "pgbench":
            fio_only = [f for f in FIO_ONLY if f in self.model_fields_set]
            if fio_only:
                raise ValueError(f"{', '.join(fio_only)}: not for kind pgbench (use rate_tps and jobs)")
            if self.port is None:
                raise ValueError("a pgbench workload needs port: its server's TCP port on 127.0.0.1")
        return self


class LabConfig(Strict):
    size_mib: int = Field(default=256, ge=16, le=65536, description="Size of each LUN.")
    arrays: dict[str, ArrayConfig] = Field(default_factory=lambda: {"array": ArrayConfig()})
    luns: list[LabLun] = Field(min_length=1)
    workloads: dict[str, Workload] = Field(default_factory=dict)
    phases: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _references(self) -> LabConfig:
        names = [lun.name for lun in self.luns]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"LUN names must be unique: {', '.join(duplicates)}")
        for lun in self.luns:
            if lun.array not in self.arrays:
                raise ValueError(
                    f"LUN {lun.name}: array {lun.array!r} is not in arrays ({', '.join(self.arrays)})"
                )
        for wname, workload in self.workloads.items():
            unknown = [n for n in workload.luns if n not in names]
            if unknown:
                raise ValueError(f"workload {wname}: unknown LUNs {', '.join(unknown)}")
            if workload.kind == "pgbench":
                self._check_pgbench(wname, workload)
        for pname, members in self.phases.items():
            unknown = [w for w in members if w not in self.workloads]
            if unknown:
                raise ValueError(f"phase {pname}: unknown workloads {', '.join(unknown)}")
        return self

    def _check_pgbench(self, wname: str, workload: Workload) -> None:
        luns = [self.lun(n) for n in workload.luns]
        roles = sorted(lun.role for lun in luns)
        if roles != ["data", "log"] or any(lun.engine != "postgres" for lun in luns):
            raise ValueError(
                f"workload {wname}: a pgbench workload runs on two LUNs of engine postgres, one of role "
                f"data (the data directory) and one of role log (pg_wal)"
            )
        if len({lun.database for lun in luns}) != 1:
            raise ValueError(f"workload {wname}: its two LUNs must be of one database")
        others = [n for n, w in self.workloads.items() if n != wname and w.kind == "pgbench"]
        for other in others:
            if self.workloads[other].port == workload.port:
                raise ValueError(
                    f"workloads {wname} and {other}: two pgbench servers on port {workload.port}"
                )
            if set(self.workloads[other].luns) & set(workload.luns):
                raise ValueError(f"workloads {wname} and {other}: two pgbench servers on one LUN")

    def pgbench_workloads(self, names: list[str] | None = None) -> dict[str, Workload]:
        """The pgbench workloads among `names` (all when None), by name."""
        chosen = self.workloads if names is None else {n: self.workloads[n] for n in names}
        return {n: w for n, w in chosen.items() if w.kind == "pgbench"}

    def pgbench_luns(self, workload: Workload) -> tuple[LabLun, LabLun]:
        """(data LUN, log LUN) of a pgbench workload."""
        luns = [self.lun(n) for n in workload.luns]
        data = next(lun for lun in luns if lun.role == "data")
        log = next(lun for lun in luns if lun.role == "log")
        return data, log

    def lun(self, name: str) -> LabLun:
        for lun in self.luns:
            if lun.name == name:
                return lun
        raise KeyError(name)

    @classmethod
    def load(cls, path: Path) -> LabConfig:
        """The lab description in `path`; ConfigError names each problem by line and key."""
        return load_model(path, cls)

    @staticmethod
    def image_name(lun: str) -> str:
        return f"{lun}.img"
