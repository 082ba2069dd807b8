"""The interactive `lunlat top` view (curses, from the standard library: a table, three keys and three
colours need nothing more): judged latencies red above the LUN's goal and green within it, an average
above goal while the judged I/Os are within it yellow (flagged).

q quits, s cycles the sort key, / sets the filter (a regular expression on LUN, database, role and
workload; empty clears it). The screen is redrawn from scratch on every frame and on a resize, so a
LUN appearing or vanishing, or a smaller terminal, only changes what is drawn. curses.wrapper
restores the terminal however the loop ends (q, --count, Ctrl-C, an error).
"""

from __future__ import annotations

import argparse
import contextlib
import curses
import os
import re
import sys
import time
from typing import TYPE_CHECKING

from lunlat.top.frames import (
    SORT_KEYS,
    Frame,
    Mark,
    Snapshot,
    TopError,
    compile_filter,
    frame,
    header_line,
    ordered,
    row_cells,
    title,
)

if TYPE_CHECKING:
    from lunlat.goals import Goals
    from lunlat.top.readers import Reader

KEY_POLL_MS = 100
PROMPT = "filter (regex on LUN/database/role/workload, empty clears): "
GREEN, RED, YELLOW = 1, 2, 3
MARK_COLOURS: dict[Mark, int] = {"above": RED, "within": GREEN, "flagged": YELLOW}


class View:
    def __init__(
        self,
        reader: Reader,
        first: Snapshot,
        goals: Goals,
        args: argparse.Namespace,
        pattern: re.Pattern[str] | None,
    ) -> None:
        self.reader = reader
        self.before = first
        self.goals = goals
        self.interval: float = args.interval
        self.count: int = args.count
        self.sort: str = args.sort
        self.pattern = pattern
        self.frame: Frame | None = None
        self.number = 0
        self.message = ""
        self.colours = False

    def loop(self, screen: curses.window) -> int:
        self._setup(screen)
        next_at = self.before.at + self.interval
        self.resized(screen)
        self.draw(screen)
        while True:
            now = time.monotonic()
            if now >= next_at:
                self.sample()
                next_at = max(next_at + self.interval, now)
                self.draw(screen)
                if self.count and self.number >= self.count:
                    return 0
            key = screen.getch()
            if key in (ord("q"), ord("Q")):
                return 0
            if key == ord("s"):
                self.sort = SORT_KEYS[(SORT_KEYS.index(self.sort) + 1) % len(SORT_KEYS)]
            elif key == ord("/"):
                self.ask_filter(screen)
            elif key == curses.KEY_RESIZE:
                curses.update_lines_cols()
                self.resized(screen)
            elif key == -1 and not self.resized(screen):
                continue
            self.draw(screen)

    def resized(self, screen: curses.window) -> bool:
        """Follow the terminal's size even when a SIGWINCH was missed (one before curses started,
        while the first sample was read): ask the terminal, as ncurses does on KEY_RESIZE."""
        try:
            size = os.get_terminal_size(sys.__stdout__.fileno() if sys.__stdout__ else 1)
        except (OSError, ValueError):
            return False
        if (size.lines, size.columns) == screen.getmaxyx():
            return False
        curses.resizeterm(size.lines, size.columns)
        return True

    def _setup(self, screen: curses.window) -> None:
        screen.timeout(KEY_POLL_MS)
        screen.keypad(True)
        with contextlib.suppress(curses.error):  # a terminal without cursor control
            curses.curs_set(0)
        if curses.has_colors():
            curses.start_color()
            try:
                curses.use_default_colors()
                background = -1
            except curses.error:
                background = curses.COLOR_BLACK
            curses.init_pair(GREEN, curses.COLOR_GREEN, background)
            curses.init_pair(RED, curses.COLOR_RED, background)
            curses.init_pair(YELLOW, curses.COLOR_YELLOW, background)
            self.colours = True

    def sample(self) -> None:
        try:
            after = self.reader.read()
        except TopError as exc:
            self.message = str(exc)  # the exporter went away: say so, keep the last frame, retry
            return
        self.number += 1
        self.frame = frame(self.number, self.before, after, self.goals)
        self.before = after
        self.message = ""

    def ask_filter(self, screen: curses.window) -> None:
        height, width = screen.getmaxyx()
        _put(screen, height - 1, 0, PROMPT, width)
        screen.clrtoeol()
        curses.echo()
        with contextlib.suppress(curses.error):
            curses.curs_set(1)
        screen.timeout(-1)
        try:
            raw = screen.getstr(height - 1, min(len(PROMPT), width - 1), 200)
        except curses.error:
            raw = b""
        finally:
            curses.noecho()
            screen.timeout(KEY_POLL_MS)
            with contextlib.suppress(curses.error):
                curses.curs_set(0)
        text = raw.decode("utf-8", "replace").strip() if isinstance(raw, bytes) else ""
        try:
            self.pattern = compile_filter(text)
            self.message = ""
        except TopError as exc:
            self.message = str(exc).replace("--filter: ", "")

    def draw(self, screen: curses.window) -> None:
        height, width = screen.getmaxyx()
        screen.erase()
        if self.frame is None:
            _put(screen, 0, 0, f"lunlat top {self.reader.where}: first frame in {self.interval:g}s", width)
        else:
            rows = ordered(self.frame.rows, self.sort, self.pattern)
            _put(
                screen, 0, 0, title(self.frame, self.reader.where, self.sort, self.pattern, len(rows)), width
            )
            _put(screen, 1, 0, header_line(), width, curses.A_REVERSE)
            for y, row in enumerate(rows[: max(0, height - 3)], start=2):
                x = 0
                for column, cell in row_cells(row):
                    attribute = curses.A_NORMAL
                    mark = row.mark(column.name)
                    if mark is not None and self.colours:
                        attribute = curses.color_pair(MARK_COLOURS[mark])
                    _put(screen, y, x, cell, width, attribute)
                    x += len(cell) + 1
        keys = f"q quit  s sort ({self.sort})  / filter"
        _put(screen, height - 1, 0, f"{keys}  {self.message}" if self.message else keys, width)
        screen.refresh()


def _put(screen: curses.window, y: int, x: int, text: str, width: int, attribute: int = 0) -> None:
    """Text cut at the screen's edge; curses refuses the bottom-right cell, which is harmless."""
    height, _ = screen.getmaxyx()
    if y < 0 or y >= height or x >= width:
        return
    with contextlib.suppress(curses.error):
        screen.addnstr(y, x, text, width - x, attribute)


def run(
    reader: Reader,
    first: Snapshot,
    goals: Goals,
    args: argparse.Namespace,
    pattern: re.Pattern[str] | None,
) -> int:
    return curses.wrapper(View(reader, first, goals, args, pattern).loop)
