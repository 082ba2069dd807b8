"""docs/architecture.md names real files: every path it gives exists, and every engine is on it.

The page names paths from the repository's root, and the exporter's package's from
`exporter/src/lunlat/` (the page says so); a path is a backticked word, or a word of its diagram,
that ends in `/` or in a file extension. Host paths (`/proc/diskstats`) and URL paths (`/metrics`)
start with `/` and are not the repository's.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "architecture.md"
PACKAGE = REPO / "exporter" / "src" / "lunlat"
# Where a named path may be found: the repository's root, then the exporter's package.
ROOTS = (REPO, PACKAGE)
EXTENSIONS = frozenset({".py", ".c", ".h", ".yaml", ".yml", ".md", ".json", ".toml", ".txt", ".csv", ".sh"})
WORD = re.compile(r"[\w.*-]+(?:/[\w.*-]+)*/?")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`([^`\s]+)`")


def is_path(word: str) -> bool:
    if not WORD.fullmatch(word) or word.startswith("/"):
        return False
    return word.endswith("/") or Path(word).suffix in EXTENSIONS


def named_paths(text: str) -> list[str]:
    """The paths a page names: its backticked words and the words of its fenced blocks, in order."""
    words = [word for block in FENCE.findall(text) for word in WORD.findall(block)]
    words += CODE_SPAN.findall(FENCE.sub("", text))
    return list(dict.fromkeys(word for word in words if is_path(word)))


def exists(path: str) -> bool:
    for root in ROOTS:
        if "*" in path:
            if any(root.glob(path)):
                return True
        elif (root / path).exists() and ((root / path).is_dir() or not path.endswith("/")):
            return True
    return False


def missing(text: str) -> list[str]:
    return [path for path in named_paths(text) if not exists(path)]


def test_every_path_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    paths = named_paths(text)
    # The page was read as meant: its diagram's words and its code spans are both in.
    assert "web/threads.py" in paths and "engines/postgres/source.py" in paths and "lab/" in paths
    assert missing(text) == []


def test_a_path_that_does_not_exist_is_caught() -> None:
    """The old page named sources/oracle.py, which did not exist; the check must say so."""
    text = (
        "The Oracle source (`sources/oracle.py`) and `scrape.py`.\n\n"
        "```text\nweb/server.py ──▶ engines/nothing/source.py\n```\n"
        "Not paths: `/proc/diskstats`, `GET /metrics`, `lunlat_source_up`, `luns:`.\n"
    )
    assert named_paths(text) == [
        "web/server.py",
        "engines/nothing/source.py",
        "sources/oracle.py",
        "scrape.py",
    ]
    assert missing(text) == ["engines/nothing/source.py", "sources/oracle.py"]
    assert missing("`scrape.py/`") == ["scrape.py/"]  # a file named as a directory is no directory


def test_every_engine_package_is_on_the_architecture_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    engines = sorted(p.parent.name for p in (PACKAGE / "engines").glob("*/__init__.py"))
    assert engines, "no engine package found"
    assert [name for name in engines if f"`engines/{name}/`" not in text] == []
