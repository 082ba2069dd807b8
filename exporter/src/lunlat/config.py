"""The exporter's YAML config (design §6): validated by pydantic, errors named by key and line.

Every key is optional and unknown keys are errors. With no file at all, the embedded default is
used: every LUN of the host, no database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lunlat.lab.config import LabConfig
from lunlat.yamlmodel import ConfigError, ConfigProblem, check_regex, load_model, parse_model

__all__ = ["Config", "ConfigError", "ConfigProblem", "load_config", "parse_config"]

Role = Literal["data", "log", "temp", "control", "other"]

# Devices that are never LUNs: RAM disks, compressed swap, floppies, optical drives.
DEFAULT_EXCLUDE = r"^(ram|zram|fd|sr)\d+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DiskstatsConfig(_Strict):
    include: str | None = Field(default=None, description="Regex on kernel device names to keep.")
    exclude: str | None = Field(default=DEFAULT_EXCLUDE, description="Regex on kernel device names to drop.")
    show_paths: bool = Field(default=False, description="Also publish multipath path devices and partitions.")

    _regex = field_validator("include", "exclude")(check_regex)


MATCH_KEYS = ("alias", "wwid", "device", "mount", "loop_file")


class LunMatch(_Strict):
    alias: str | None = None
    wwid: str | None = None
    device: str | None = None
    mount: str | None = None
    loop_file: str | None = Field(
        default=None,
        description="Backing file of a loop device: a full path, or a file name matching any directory.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> LunMatch:
        given = [k for k in MATCH_KEYS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(MATCH_KEYS)} (got {', '.join(given) or 'none'})"
            )
        for key in given:
            if not str(getattr(self, key)).strip():
                raise ValueError(f"{key} must not be empty")
        if self.mount is not None and not self.mount.startswith("/"):
            raise ValueError(f"mount must be an absolute path, got {self.mount!r}")
        return self

    def describe(self) -> str:
        for key in MATCH_KEYS:
            value = getattr(self, key)
            if value is not None:
                return f"{key}={value}"
        return "?"


class LunEntry(_Strict):
    match: LunMatch
    database: str | None = None
    role: Role | None = None
    workload: str | None = None

    @model_validator(mode="after")
    def _labels_something(self) -> LunEntry:
        if self.database is None and self.role is None and self.workload is None:
            raise ValueError("an entry must set at least one of database, role, workload")
        return self


class Config(_Strict):
    diskstats: DiskstatsConfig = DiskstatsConfig()
    luns: list[LunEntry] = Field(default_factory=list)
    lab: LabConfig | None = Field(
        default=None, description="The lab's LUNs and workloads (deploy/lab/lab.yaml)."
    )

    def lun_entries(self) -> list[LunEntry]:
        """`luns:` entries, then one per lab LUN matching its loop device by backing file (so an
        explicit entry still wins)."""
        derived = [
            LunEntry(
                match=LunMatch(loop_file=LabConfig.image_name(lun.name)),
                database=lun.database,
                role=lun.role,
                workload=lun.workload,
            )
            for lun in (self.lab.luns if self.lab else [])
        ]
        return [*self.luns, *derived]


def parse_config(text: str, source: str = "<config>") -> Config:
    return parse_model(text, source, Config, _explain_extra)


def _explain_extra(loc: tuple[int | str, ...]) -> str:
    if loc in (("oracle",), ("mssql",)):
        return "this lunlat version has no database sources yet; remove the section"
    return "unknown key"


def load_config(path: Path | None) -> Config:
    """The config in `path`, or the embedded default when no path is given."""
    return Config() if path is None else load_model(path, Config, _explain_extra)
