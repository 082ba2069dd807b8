"""`lunlat top`'s batch frames read back: a title line, a header line, one line per LUN, a blank line."""

from __future__ import annotations

import dataclasses
import re
from typing import IO


@dataclasses.dataclass
class Frame:
    number: int
    seconds: float
    header: list[str]
    rows: dict[str, dict[str, str]]  # by LUN, column -> text


TITLE = re.compile(r"^lunlat top #(\d+) .* interval ([0-9.]+)s ")


def parse_frame(lines: list[str]) -> Frame:
    title = TITLE.match(lines[0])
    assert title is not None, lines
    header = lines[1].split()
    rows = {}
    for line in lines[2:]:
        cells = line.split()
        assert len(cells) == len(header), line
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return Frame(int(title.group(1)), float(title.group(2)), header, rows)


def read_frame(stream: IO[str]) -> Frame:
    lines: list[str] = []
    while True:
        line = stream.readline()
        assert line, f"top ended after {lines}"
        if line == "\n":
            return parse_frame(lines)
        lines.append(line.rstrip("\n"))
