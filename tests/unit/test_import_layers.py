"""The exporter's import graph: no cycle, and no import from a lower layer up to a higher one.

The graph is drawn from the code, as `test_engine_shape.py` reads engine names: every `import` and
`from … import` of a lunlat module in `exporter/src/lunlat`, wherever it stands (at the top, in a
function, under `if TYPE_CHECKING:`), is an edge to the module it names (`from lunlat.engines.oracle
import sql` names `lunlat.engines.oracle.sql`; `from lunlat.engines.oracle import ENGINE` the package).

The layers are defined here, once, lowest first; `docs/architecture.md` ("The layers") lists the same
table, checked below, so the page says which layer each package and module is in. A module may import
its own layer's modules and lower layers'; a new module must be given a layer.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.support.import_cycles import cycles

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "exporter" / "src"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# (layer, its modules), lowest first. `pkg.*` is a package and everything in it; a name alone is that
# module (or package `__init__`) only. The most specific entry wins: `lunlat.engines.registry` is
# assembly although `lunlat.engines.*` is engines.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Facts and shapes every layer shares: what a metric, a role, a sample is; files, logs, WWIDs.
    ("ground", ("lunlat", "lunlat.ground", "lunlat.model", "lunlat.files", "lunlat.logs", "lunlat.wwid", "lunlat.promql", "lunlat.promql.recorded")),
    # The files lunlat is given, as models: the config (without engines), a database target, the goals.
    ("config", ("lunlat.yamlmodel", "lunlat.config", "lunlat.dbtarget", "lunlat.goals")),
    # The host: its block devices, their names and paths, database files and containers on them.
    ("host", ("lunlat.topology", "lunlat.arrayid", "lunlat.pathhealth", "lunlat.luns", "lunlat.dbfiles", "lunlat.containers")),
    # The source interface, how a source is built, and the host sources.
    ("sources", ("lunlat.sources.*",)),
    # The database engines, on their shared base (dbsource, dbsession, build, engine).
    ("engines", ("lunlat.engines.*",)),
    # Where the engines meet the rest: the registry, the whole contract, the config model, every source,
    # the rules' and dashboards' PromQL built from them.
    ("assembly", ("lunlat.engines.registry", "lunlat.contract", "lunlat.configfile", "lunlat.sources.registry", "lunlat.promql.layers", "lunlat.promql.averages")),
    # The running exporter: scrapes, their text, reloads, the web server.
    ("serving", ("lunlat.scrape", "lunlat.exposition", "lunlat.reload", "lunlat.web.*")),
    # The commands: `lunlat` and its subcommands.
    ("commands", ("lunlat.cli", "lunlat.__main__", "lunlat.argtypes", "lunlat.memtune", "lunlat.reference_architecture", "lunlat.top.*", "lunlat.report.*")),
)  # fmt: skip


def modules(source: Path = SOURCE) -> dict[str, Path]:
    """Every module under `source`, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((source / "lunlat").rglob("*.py")):
        parts = list(path.relative_to(source).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement of `module` names, before they are resolved to modules."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from the module's package, one level up per extra dot
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    yield base
    yield from (f"{base}.{alias.name}" for alias in node.names)


def graph(source: Path = SOURCE) -> dict[str, set[str]]:
    """module -> the lunlat modules it imports."""
    known = modules(source)
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = list(_imported(node, module, path.name == "__init__.py"))
            if isinstance(node, ast.ImportFrom):
                # `from pkg import name`: the submodule pkg.name when there is one, else pkg itself.
                base, members = names[0], names[1:]
                submodules = [name for name in members if name in known]
                names = submodules if len(submodules) == len(members) else [base, *submodules]
            targets.update(name for name in names if name in known)
        targets.discard(module)
        edges[module] = targets
    return edges


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the most specific entry naming `module`, or None."""
    best: tuple[int, int] | None = None  # (specificity, layer)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if entry.endswith(".*"):
                package = entry.removesuffix(".*")
                hit = module == package or module.startswith(f"{package}.")
                specificity = len(package)
            else:
                hit = module == entry
                specificity = len(entry) + 1000  # a module named alone beats any package around it
            if hit and (best is None or specificity > best[0]):
                best = (specificity, index)
    return None if best is None else best[1]


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import from a module to one of a higher layer, said as `a (layer) -> b (layer)`."""
    said: list[str] = []
    for module, targets in sorted(edges.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                said.append(f"{module} ({LAYERS[mine][0]}) -> {target} ({LAYERS[theirs][0]})")
    return said


def test_every_module_is_in_a_layer_and_every_entry_names_one() -> None:
    known = modules()
    assert [module for module in known if layer_of(module) is None] == []
    stale = [
        entry
        for _, entries in LAYERS
        for entry in entries
        if not any(
            module == entry or (entry.endswith(".*") and module.startswith(entry.removesuffix("*")))
            for module in known
        )
    ]
    assert stale == []


def test_the_exporters_imports_have_no_cycle() -> None:
    assert cycles(graph()) == []


def test_no_import_runs_from_a_lower_layer_up() -> None:
    assert upward(graph()) == []


def test_the_ground_module_imports_nothing_of_lunlats() -> None:
    assert graph()["lunlat.ground"] == set()


def test_the_graph_is_drawn_from_every_kind_of_import(tmp_path: Path) -> None:
    """The scan itself: absolute and relative imports, a submodule or a name from a package, imports in
    a function and under TYPE_CHECKING all count; a cycle and an upward import are found."""
    package = tmp_path / "lunlat"
    (package / "engines").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "engines" / "__init__.py").write_text("from lunlat.engines import engine\n")
    (package / "engines" / "engine.py").write_text("from . import build\n")
    (package / "engines" / "build.py").write_text("def f():\n    import lunlat.engines\n")
    (package / "ground.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lunlat.engines import ENGINE\n"
    )
    edges = graph(tmp_path)
    assert edges == {
        "lunlat": set(),
        "lunlat.engines": {"lunlat.engines.engine"},
        "lunlat.engines.engine": {"lunlat.engines.build"},
        "lunlat.engines.build": {"lunlat.engines"},
        "lunlat.ground": {"lunlat.engines"},
    }
    assert cycles(edges) == [["lunlat.engines", "lunlat.engines.build", "lunlat.engines.engine"]]
    assert upward(edges) == ["lunlat.ground (ground) -> lunlat.engines (engines)"]


def _page_layers(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The rows of the architecture page's layer table: | layer | `module`, `pkg/` … |, as LAYERS names
    them (`engines/` is lunlat.engines.*, `config.py` lunlat.config, `lunlat/__init__.py` lunlat)."""
    section = text.split("| Layer |", 1)[1].split("\n\n", 1)[0]
    rows: list[tuple[str, tuple[str, ...]]] = []
    for line in section.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = []
        for path in re.findall(r"`([^`]+)`", cells[1]):
            if path.endswith("__init__.py"):  # a package's own module: `__init__.py` is lunlat's
                names.append(".".join(["lunlat", *path.split("/")[:-1]]))
            elif path.endswith("/"):
                names.append("lunlat." + path.rstrip("/").replace("/", ".") + ".*")
            else:
                names.append("lunlat." + path.removesuffix(".py").replace("/", "."))
        rows.append((cells[0].strip("*"), tuple(names)))
    return rows


def test_the_architecture_page_gives_each_package_its_layer() -> None:
    assert _page_layers(ARCHITECTURE.read_text(encoding="utf-8")) == [
        (name, tuple(entries)) for name, entries in reversed(LAYERS)
    ]
