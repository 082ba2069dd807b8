"""The `lab:` section of a lunlat config (deploy/lab/lab.yaml): LUNs, arrays, workloads, phases.

The same file is the exporter's config: every lab LUN implies a `luns:` entry matching its loop
device by backing file, so the exporter labels the lab LUNs with database, role and workload.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from lunlat.contract import Role
from lunlat.yamlmodel import Strict

Engine = Literal["mssql", "oracle"]
WorkloadKind = Literal["oltp", "log", "archive", "dss", "snapshot_oltp"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


class ArrayConfig(Strict):
    """A shared backing store: every LUN on it competes for its service slots and bandwidth."""

    slots: int = Field(
        default=8, ge=1, le=256, description="I/Os the array serves at once; more wait in its queue."
    )
    bandwidth_mib_s: float = Field(default=400.0, gt=0, description="Transfer budget shared by its LUNs.")


class Latency(Strict):
    """Service time of one I/O before queueing: a mean in ms and a spread (lognormal, coefficient of
    variation `jitter`; 0 = every I/O takes exactly the mean)."""

    read_ms: float = Field(ge=0, le=10_000)
    write_ms: float = Field(ge=0, le=10_000)
    jitter: float = Field(default=0.3, ge=0, le=3)


class LabLun(Strict):
    name: str = Field(description="File name on the lab filesystem (<name>.img) and the LUN's id in the lab.")
    database: str
    engine: Engine
    role: Role
    workload: str = Field(description="oltp for production, snapshot_oltp for the test/dev copies.")
    array: str = "array"
    latency: Latency

    @model_validator(mode="after")
    def _name_ok(self) -> LabLun:
        if not _NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r} must be lower-case letters, digits and _ (start with a letter)"
            )
        return self


class Workload(Strict):
    """One fio job per LUN it runs on. Rates keep the lab under what a Python FUSE daemon serves."""

    kind: WorkloadKind
    luns: list[str] = Field(min_length=1)
    block_size: str = Field(default="8k", pattern=r"^\d+[kKmM]?$")
    read_percent: int = Field(default=80, ge=0, le=100)
    jobs: int = Field(default=1, ge=1, le=16)
    iodepth: int = Field(default=1, ge=1, le=64)
    rate_iops: int | None = Field(default=None, ge=1, description="Cap per job; None = as fast as it goes.")


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
        for pname, members in self.phases.items():
            unknown = [w for w in members if w not in self.workloads]
            if unknown:
                raise ValueError(f"phase {pname}: unknown workloads {', '.join(unknown)}")
        return self

    def lun(self, name: str) -> LabLun:
        for lun in self.luns:
            if lun.name == name:
                return lun
        raise KeyError(name)

    @staticmethod
    def image_name(lun: str) -> str:
        return f"{lun}.img"
