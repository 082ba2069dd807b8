"""Command-line options of the project's tests (pytest reads them only from the root conftest)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/expected.prom from what lunlat serve publishes on the golden host "
        "(tests/golden/README.md), then review it with git diff",
    )
