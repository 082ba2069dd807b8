"""The page of a thousand LUNs opens fast in headless Chromium."""

from __future__ import annotations

from pathlib import Path

from lunlat.report.page import render
from tests.report.browser import open_page, print_text
from tests.unit.test_report_unit import thousand_luns


def test_a_thousand_luns_open_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_text(render(thousand_luns(), "t", "http://prometheus"), encoding="utf-8")
    opened = open_page(page)
    assert opened.console_errors == []
    assert opened.count("details") == 2
    assert opened.count("table.luns") == 2


def test_printed_the_collapsed_luns_are_on_paper(tmp_path: Path) -> None:
    """The page is printable: what the screen collapses (the best LUNs' rows) is printed open."""
    page = tmp_path / "index.html"
    page.write_text(render(thousand_luns(), "t", "http://prometheus"), encoding="utf-8")
    text = print_text(page, tmp_path / "index.pdf")
    assert "lun0999" in text  # the worst, open on screen too
    assert "lun0000" in text  # the best: in the collapsed table
    assert "950 more LUNs" not in text  # the summary line itself is not printed
