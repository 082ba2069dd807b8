"""The page of a thousand LUNs opens fast in headless Chromium."""

from __future__ import annotations

import time
from pathlib import Path

from lunlat.report.page import render
from tests.report.browser import open_page
from tests.unit.test_report_unit import thousand_luns


def test_a_thousand_luns_open_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_text(render(thousand_luns(), "t", "http://prometheus"), encoding="utf-8")
    started = time.monotonic()
    opened = open_page(page)
    # Chromium's own start-up is most of it; a page that rendered every LUN's plots would take far longer.
    assert time.monotonic() - started < 30
    assert opened.console_errors == []
    assert opened.count("details") == 2
    assert opened.count("table.luns") == 2
