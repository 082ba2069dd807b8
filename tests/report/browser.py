"""The report's page as headless Chromium renders it: its DOM after loading (`--dump-dom`), parsed
into a small tree, and the console messages Chromium logged while loading it."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

VOID = {"meta", "link", "br", "hr", "img", "input", "source", "wbr", "col", "area", "base", "embed", "track"}


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def all_text(self) -> str:
        parts = list(self.text)
        for child in self.children:
            parts.append(child.all_text())
        return "".join(parts)

    def walk(self) -> list[Node]:
        out = [self]
        for child in self.children:
            out += child.walk()
        return out

    def find(self, tag: str, css: str = "") -> list[Node]:
        return [n for n in self.walk() if n.tag == tag and (not css or css in n.classes)]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text.append(data)


@dataclass
class Page:
    root: Node
    console_errors: list[str]

    def count(self, selector: str) -> int:
        tag, _, css = selector.partition(".")
        return len(self.root.find(tag, css))

    @property
    def verdict(self) -> str:
        return next(n for n in self.root.walk() if n.attrs.get("id") == "verdict").all_text()

    @property
    def phase_sections(self) -> list[dict[str, dict[tuple[str, str, str], str]]]:
        """Per phase heading, in order: op -> (workload, database, role) -> the average cell's own
        text (ms, without its "flagged" mark)."""
        return [
            {op: {k: _own_text(td) for k, td in c.items()} for op, c in s.items()} for s in self._cells(False)
        ]

    @property
    def judged_sections(self) -> list[dict[str, dict[tuple[str, str, str], str]]]:
        """Per phase heading, in order: op -> (workload, database, role) -> the judged cell's text (ms)."""
        return [
            {op: {k: _own_text(td) for k, td in c.items()} for op, c in s.items()} for s in self._cells(True)
        ]

    def cell_classes(self, judged: bool) -> list[dict[str, dict[tuple[str, str, str], set[str]]]]:
        """As phase_sections (judged: judged_sections), each cell's CSS classes (within, above,
        flagged, idle)."""
        return [
            {op: {k: td.classes for k, td in c.items()} for op, c in s.items()} for s in self._cells(judged)
        ]

    @property
    def legends(self) -> list[str]:
        return [p.all_text() for p in self.root.find("p", "legend")]

    def _cells(self, judged: bool) -> list[dict[str, dict[tuple[str, str, str], Node]]]:
        """Per phase heading: op -> (workload, database, role) -> the <td> of its average (or, with
        `judged`, of its judged figure); cells without a figure left out."""
        body = self.root.find("body")[0]
        sections: list[dict[str, dict[tuple[str, str, str], Node]]] = []
        for node in body.children:
            if node.tag == "h2":
                if "phase" in node.classes:
                    sections.append({})
                    continue
                if sections and sections[-1]:
                    break
            if sections and node.tag == "table" and "reference" in node.classes:
                op = node.find("caption")[0].all_text().split()[1]
                # Each role's average column, then its judged one (class "judged").
                columns = [(th.all_text().split()[0], "judged" in th.classes) for th in node.find("th")[1:]]
                cells: dict[tuple[str, str, str], Node] = {}
                for tr in node.find("tr")[1:]:
                    tds = tr.find("td")
                    workload, database = tds[0].all_text().split(" · ", 1)
                    for (role, is_judged), td in zip(columns, tds[1:], strict=True):
                        if is_judged == judged and _own_text(td) != "\u2013":
                            cells[(workload, database, role)] = td
                sections[-1][op] = cells
        return sections

    @property
    def first_lun(self) -> str:
        table = self.root.find("table", "luns")[0]
        return table.find("tr")[1].find("td")[0].all_text()


def _own_text(node: Node) -> str:
    """A cell's own text: its number, without the marks in its children (the "flagged" span)."""
    return "".join(node.text).strip()


def open_page(path: Path) -> Page:
    binary = chromium()
    if binary is None:
        pytest.skip("missing chromium (Debian: chromium)")
    done = subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    builder = _Builder()
    builder.feed(done.stdout)
    errors = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return Page(builder.root, errors)


def print_text(path: Path, pdf: Path) -> str:
    """The page printed by headless Chromium (`--print-to-pdf`, print media), as the PDF's text
    (pdftotext, Debian poppler-utils)."""
    binary = chromium()
    if binary is None:
        pytest.skip("missing chromium (Debian: chromium)")
    pdftotext = shutil.which("pdftotext")
    if pdftotext is None:
        pytest.skip("missing pdftotext (Debian: poppler-utils)")
    subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", f"--print-to-pdf={pdf}", path.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return subprocess.run(
        [pdftotext, "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
