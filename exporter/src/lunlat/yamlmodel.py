"""YAML files validated by pydantic models, every problem named by file, line and key.

Shared by the exporter config (`--config.file`), the lab description and the latency goals
(`alerts/goals.yaml`), so all three report mistakes the same way: `file:line: key.path: message`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class Strict(BaseModel):
    """Base of every model read from a YAML file: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
        if part == "[key]":  # pydantic's marker for "the key itself" of a dict entry
            continue
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


def check_regex(value: str | None) -> str | None:
    """A pydantic validator: the value compiles as a regular expression (None passes)."""
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


def _unknown_key(_loc: tuple[int | str, ...]) -> str:
    return "unknown key"


def parse_model(
    text: str,
    source: str,
    model: type[Model],
    explain_extra: Callable[[tuple[int | str, ...]], str] = _unknown_key,
) -> Model:
    """Validate YAML `text` (named `source` in messages) as `model`; raise ConfigError listing
    every problem. `explain_extra` words the message for a key the model does not know."""
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
        raise ConfigError([ConfigProblem(source, 1, "", "the file must be a mapping of sections")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = explain_extra(loc)
            elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
                message += f" (got {err['input']!r})"
            problems.append(ConfigProblem(source, _line_of(root, loc), _key_path(loc), message))
        raise ConfigError(problems) from None


def load_model(
    path: Path,
    model: type[Model],
    explain_extra: Callable[[tuple[int | str, ...]], str] = _unknown_key,
) -> Model:
    """`parse_model` on the file at `path`; an unreadable file is a ConfigError too."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), None, "", f"cannot read: {exc}")]) from None
    return parse_model(text, str(path), model, explain_extra)
