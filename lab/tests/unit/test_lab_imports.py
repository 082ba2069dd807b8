"""The lab's modules import one another without a cycle (issue 40: `native` → `settings` → `system` →
`native` was one, kept open at run time only by a TYPE_CHECKING import).

Every import counts, at module level, under TYPE_CHECKING or inside a function: a cycle that only a
deferred import keeps open still ties the modules together. Importing `a.b.c` runs `a.b`'s
`__init__` first (docs.python.org/3/reference/import.html, "Packages": "importing parent.one will
implicitly execute parent/__init__.py"), so a submodule's import is an edge to its packages too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lunlat_lab
from tests.support.import_cycles import cycles

PACKAGE = Path(lunlat_lab.__file__).resolve().parent


def module_names(package: Path) -> dict[str, Path]:
    """Dotted name → file, for every module of the package rooted at `package`."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _with_parents(name: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules that importing `name` runs: the longest known prefix and its packages."""
    parts = name.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in modules}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module `name` (at `path`) imports, anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= _with_parents(alias.name, modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found |= _with_parents(base, modules)
            for alias in node.names:  # `from pkg import module` imports the module
                found |= _with_parents(f"{base}.{alias.name}", modules)
    found.discard(name)
    # A module's own packages are already running when it runs: not an edge back to them.
    return {m for m in found if not name.startswith(m + ".")}


def lab_graph() -> dict[str, set[str]]:
    modules = module_names(PACKAGE)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_lab_has_no_import_cycle() -> None:
    graph = lab_graph()
    # The graph was read: the edges the old cycle ran along are seen (system checks the host with
    # native, native encodes settings).
    assert "lunlat_lab.native" in graph["lunlat_lab.system"]
    assert "lunlat_lab.settings" in graph["lunlat_lab.native"]
    assert cycles(graph) == []


def test_a_cycle_is_found_through_any_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_deferred_import_and_a_package_import_are_edges(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "leaf.py").write_text("from ..top import X\n")
    (package / "top.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.leaf import Y\n"
        "def f():\n    from pkg import sub\n"
    )
    modules = module_names(package)
    assert imports_of("pkg.top", modules["pkg.top"], modules) == {"pkg.sub", "pkg.sub.leaf"}
    assert imports_of("pkg.sub.leaf", modules["pkg.sub.leaf"], modules) == {"pkg.top"}
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert cycles(graph) == [["pkg.sub.leaf", "pkg.top"]]
