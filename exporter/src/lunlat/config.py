"""The exporter's YAML config (design §6): validated by pydantic, errors named by key and line.

Every key is optional and unknown keys are errors. With no file at all, the embedded default is
used: every LUN of the host, no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lunlat.lab.config import LabConfig

Role = Literal["data", "log", "temp", "control", "other"]

# Devices that are never LUNs: RAM disks, compressed swap, floppies, optical drives.
DEFAULT_EXCLUDE = r"^(ram|zram|fd|sr)\d+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class DiskstatsConfig(_Strict):
    include: str | None = Field(default=None, description="Regex on kernel device names to keep.")
    exclude: str | None = Field(default=DEFAULT_EXCLUDE, description="Regex on kernel device names to drop.")
    show_paths: bool = Field(default=False, description="Also publish multipath path devices and partitions.")

    _regex = field_validator("include", "exclude")(_check_regex)


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


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    source: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(Exception):
    def __init__(self, problems: list[ConfigProblem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a config must not."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first on line {seen[key]})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """Line (1-based) of the key or list item deepest along `loc`: where a reader looks first."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def parse_config(text: str, source: str = "<config>") -> Config:
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError([ConfigProblem(source, line, "", f"invalid YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem(source, None, "", f"invalid YAML: {exc}")]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([ConfigProblem(source, 1, "", "the config must be a mapping of sections")])
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = (
                    "this lunlat version has no database sources yet; remove the section"
                    if loc in (("oracle",), ("mssql",))
                    else "unknown key"
                )
            elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
                message += f" (got {err['input']!r})"
            problems.append(ConfigProblem(source, _line_of(root, loc), _key_path(loc), message))
        raise ConfigError(problems) from None


def load_config(path: Path | None) -> Config:
    """The config in `path`, or the embedded default when no path is given."""
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), None, "", f"cannot read: {exc}")]) from None
    return parse_config(text, str(path))
