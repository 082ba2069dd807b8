"""A database engine is its package plus one line in the registry, and its rows of the Database I/O
dashboard beside the dashboards' generator (CONTRIBUTING.md, "Adding a source"): no code outside
`lunlat/engines/<engine>/`, `lunlat_dashboards/engine_rows/<engine>.py` and the two registries
(`engines/registry.py`, `engine_rows/__init__.py`) names an engine.

"Names" means code: identifiers and string literals. Comments and docstrings may give an engine as
an example (why a session has its own deadline: python-oracledb's handshake); they change no
behaviour when an engine is added.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from lunlat.engines.registry import ENGINES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "exporter" / "src" / "lunlat"
# Every Python source of the exporter and of the mixin's generators.
SOURCES = (PACKAGE, ROOT / "alerts" / "src", ROOT / "dashboards" / "src")
# The dashboards' rows of each engine (their module is the engine's key) and the map of them by key.
ENGINE_ROWS = ROOT / "dashboards" / "src" / "lunlat_dashboards" / "engine_rows"
REGISTRIES = (PACKAGE / "engines" / "registry.py", ENGINE_ROWS / "__init__.py")


def _words(engine_key: str) -> re.Pattern[str]:
    engine = next(e for e in ENGINES if e.key == engine_key)
    spellings = {engine.key, engine.title, engine.driver_module, engine.extra}
    # Letters on neither side, so `oracle_layer` and `MSSQL_WAITS` count and `oracledb` is its own word.
    alternatives = "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
    return re.compile(rf"(?<![a-z])({alternatives})(?![a-z])", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _code_words(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every identifier, attribute, import and non-docstring string in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.alias):
            yield node.lineno, node.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def _outside(engine_key: str) -> dict[Path, list[str]]:
    """Files outside the engine's own package, its dashboard rows and the registries whose code names
    the engine."""
    own = PACKAGE / "engines" / engine_key
    words = _words(engine_key)
    found: dict[Path, list[str]] = {}
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if path.is_relative_to(own) or path == ENGINE_ROWS / f"{engine_key}.py" or path in REGISTRIES:
                continue
            hits = [f"{line}: {text[:80]!r}" for line, text in _code_words(path) if words.search(text)]
            if hits:
                found[path] = hits
    return found


def test_no_code_outside_an_engines_package_names_it() -> None:
    for engine in ENGINES:
        named = _outside(engine.key)
        assert named == {}, f"{engine.key} is named outside engines/{engine.key}/: {named}"


def test_the_check_sees_an_engine_named_in_code(tmp_path: Path) -> None:
    """The scan itself: an identifier or a string naming an engine is found, a comment is not."""
    sample = tmp_path / "sample.py"
    key = ENGINES[0].key
    sample.write_text(f'"""Docstring: {key}."""\n# {key} in a comment\nx = "{key}"\n{key}_port = 1\n')
    hits = sorted(text for _, text in _code_words(sample) if _words(key).search(text))
    assert hits == sorted([key, f"{key}_port"])
