"""YAML files validated by pydantic models, every problem named by file, line and key.

Shared by the exporter config (`--config.file`), the lab description and the latency goals
(`alerts/goals.yaml`), so all three report mistakes the same way: `file:line: key.path: message`.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from lunlat.files import FileRefusedError, MiB, read_regular

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


# Bounds on what one bad file can cost. A problem quotes at most QUOTE_CHARS of what it found and a
# report lists at most MAX_PROBLEMS problems: a validation error once repeated the whole input, so a
# 331-byte alias bomb printed gigabytes.
QUOTE_CHARS = 60
MESSAGE_CHARS = 300
MAX_PROBLEMS = 20
# Aliases may repeat a small block (a few labels), never multiply a file: past MAX_ALIAS_NODES nodes
# reached through aliases, the file is refused before anything expands it.
MAX_ALIAS_NODES = 1_000
# Nesting deeper than this is no config: PyYAML composes and constructs by recursion, so 50,000
# levels end in RecursionError.
MAX_DEPTH = 64
# A file is read whole before it is parsed: past this size it is refused unread (the exporter's
# config says why 1 MiB is plenty: config.CONFIG_MAX_BYTES).
MAX_FILE_BYTES = MiB


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """`text` cut to `limit` characters, the cut marked with "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# reprlib stops early (a few items, the ends of a long string), so a huge value is never printed whole.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxset = 2, 4, 4, 4
_SHORT.maxstring = _SHORT.maxother = QUOTE_CHARS // 2


def quote(value: object) -> str:
    """A short repr of a value found in a file, for an error message."""
    return clip(_SHORT.repr(value))


class ConfigError(Exception):
    def __init__(self, problems: list[ConfigProblem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """A SafeLoader that bounds what a file can cost and refuses what a config has no use for.

    - Aliases: PyYAML's composer returns the anchored node itself for an alias (yaml/pyyaml,
      lib/yaml/composer.py, Composer.compose_node), so the node graph stays small while everything
      walking it (the constructor, pydantic, error reports) visits each alias's subtree again. Here
      each composed node counts its expanded size, and nodes reached through aliases are summed;
      past MAX_ALIAS_NODES the file is refused. A recursive alias (`&a [*a]`) is refused too.
    - Depth: past MAX_DEPTH levels the file is refused instead of recursing until RecursionError.
    - Keys: two equal keys are an error (PyYAML keeps the last silently); a key must be a scalar
      (`? [a, b]` is a list, which no model here takes and a dict cannot hold).
    - Merge keys (`<<: *base`) are refused: they are a draft type of YAML 1.1 only
      (https://yaml.org/type/merge.html), not part of YAML 1.2, and keys merged in from an anchor have
      no line of their own in the entry, so duplicate checks and line numbers would point elsewhere.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> nodes in its subtree, aliases expanded
        self._expanded = 0  # nodes composed so far, aliases expanded
        self._through_aliases = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        mark = cast(yaml.error.Mark, event.start_mark)
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)  # raises for an undefined alias
            size = self._sizes.get(id(node))
            if size is None:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"alias *{clip(str(event.anchor))} refers to a node that contains it",
                    mark,
                )
            self._expanded += size
            self._through_aliases += size
            if self._through_aliases > MAX_ALIAS_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"aliases expand to more than {MAX_ALIAS_NODES} nodes: write the values out",
                    mark,
                )
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        before = self._expanded
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._expanded += 1
        self._sizes[id(node)] = self._expanded - before
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise yaml.constructor.ConstructorError(
                    None, None, "merge keys (<<) are not supported: write the keys out", key_node.start_mark
                )
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"a key must be a plain value, not a {'list' if key_node.id == 'sequence' else 'mapping'}",
                    key_node.start_mark,
                )
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {quote(key)} (first on line {seen[key]})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _compose(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """The data of the single document in `text` and its node tree (for line numbers); a
    ConfigError naming the line of what is wrong."""
    loader = None
    try:
        loader = _Loader(text)  # the reader checks every character here
        root = loader.get_single_node()
        return (loader.construct_document(root) if root is not None else None), root
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = clip(f"invalid YAML: {exc.problem or exc}", MESSAGE_CHARS)
        raise ConfigError([ConfigProblem(source, line, "", message)]) from None
    except yaml.reader.ReaderError as exc:
        # The reader knows only a character position; say where that is.
        line, column = _line_column(text, exc.position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        message = f"invalid YAML: character U+{char:04X} at column {column} is not allowed ({exc.reason})"
        raise ConfigError([ConfigProblem(source, line, "", message)]) from None
    except yaml.YAMLError as exc:
        message = clip(f"invalid YAML: {exc}", MESSAGE_CHARS)
        raise ConfigError([ConfigProblem(source, None, "", message)]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _line_column(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of character `position` in `text`."""
    start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - start + 1


def key_path(loc: tuple[int | str, ...]) -> str:
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


class LocatedError(ValueError):
    """Raised by a model validator to name a deeper key than the model itself: the problem is
    reported at `loc`, and the line of `first` is named as the earlier one it clashes with (both
    key paths relative to the model)."""

    def __init__(
        self, message: str, loc: tuple[int | str, ...], first: tuple[int | str, ...] | None = None
    ) -> None:
        super().__init__(message)
        self.loc = loc
        self.first = first


def _unknown_key(_loc: tuple[int | str, ...]) -> str:
    return "unknown key"


# Checks of a valid model against the world (a file exists, a variable is set): key path, message.
Check = Callable[[Model], list[tuple[tuple[int | str, ...], str]]]


def parse_model(
    text: str,
    source: str,
    model: type[Model],
    explain_extra: Callable[[tuple[int | str, ...]], str] = _unknown_key,
    check: Check[Model] | None = None,
) -> Model:
    """Validate YAML `text` (named `source` in messages) as `model`; raise ConfigError listing
    every problem. `explain_extra` words the message for a key the model does not know; `check`,
    if given, runs on the valid model and its problems are reported like the others."""
    data, root = _compose(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([ConfigProblem(source, 1, "", "the file must be a mapping of sections")])
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        problems = []
        errors = exc.errors()
        for err in errors[:MAX_PROBLEMS]:
            loc = tuple(err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, LocatedError):
                if cause.first is not None:
                    message += f" (first on line {_line_of(root, loc + cause.first)})"
                loc += cause.loc
            if err["type"] == "extra_forbidden":
                message = explain_extra(loc)
            elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
                message += f" (got {quote(err['input'])})"
            path = clip(key_path(loc), MESSAGE_CHARS)
            problems.append(ConfigProblem(source, _line_of(root, loc), path, clip(message, MESSAGE_CHARS)))
        if len(errors) > MAX_PROBLEMS:
            problems.append(
                ConfigProblem(source, None, "", f"{len(errors) - MAX_PROBLEMS} more problems not listed")
            )
        raise ConfigError(problems) from None
    found = check(result) if check is not None else []
    if found:
        raise ConfigError(
            [
                ConfigProblem(source, _line_of(root, loc), key_path(loc), clip(message, MESSAGE_CHARS))
                for loc, message in found[:MAX_PROBLEMS]
            ]
        )
    return result


def load_model(
    path: Path,
    model: type[Model],
    explain_extra: Callable[[tuple[int | str, ...]], str] = _unknown_key,
    check: Check[Model] | None = None,
    max_bytes: int = MAX_FILE_BYTES,
    what: str = "config file",
) -> Model:
    """`parse_model` on the file at `path`; a file that cannot be read, is no regular file or is
    larger than `max_bytes` is a ConfigError too (files.read_regular)."""
    try:
        data = read_regular(path, max_bytes, what)
    except FileRefusedError as exc:
        raise ConfigError([ConfigProblem(str(path), None, "", exc.reason)]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Name the line and column (in bytes) of the first bad byte, as for any other problem.
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"not UTF-8: byte 0x{data[exc.start]:02x} at column {column} ({exc.reason})"
        raise ConfigError([ConfigProblem(str(path), line, "", message)]) from None
    return parse_model(text, str(path), model, explain_extra, check)
