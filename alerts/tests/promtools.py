"""The promtool binaries the rule tests run under: Debian's (Prometheus 2.x) and Prometheus 3's.

Prometheus 3 is built from source (`go install github.com/prometheus/prometheus/cmd/promtool@…`, the
module's tag of the 3.x release line, tests/support/prometheus_server.py): `.ci/run` installs it into
PROMETHEUS3_DIR, or LUNLAT_PROMTOOL3 names one. Where neither exists, the Prometheus 3 cases skip, saying so.

The unit test files are the same for both. Two differences of Prometheus 3 they meet, each from its
docs (docs/migration.md and docs/configuration/unit_testing_rules.md of the v0.316.0 module):

- Range selectors are "left-open and right-closed": a 1-minute rate over 15 s scrapes sees 4 samples,
  not 5, and its float arithmetic differs from 2.x's in the last bit (99.99999999999999 for 100).
  Prometheus 3's promtool offers `fuzzy_compare: true` for that ("will very slightly weaken floating
  point comparisons": one ULP, cmd/promtool/unittest.go); Prometheus 2.42's refuses the field (its
  test files are read strictly), so each file gets it only when copied for Prometheus 3.
- What a window counts can move by one sample at its left edge: where a test depends on that, its
  comparison says so (alerts/tests/slo.test.yml, the short breach).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.prometheus_server import PROMETHEUS3_DIR, PROMETHEUS3_MODULE_VERSION

PROMTOOLS = (
    pytest.param("2", id="prometheus2"),
    pytest.param("3", id="prometheus3", marks=pytest.mark.prometheus3),
)


def promtool(major: str) -> str:
    """The promtool of Prometheus `major` ("2": Debian's on PATH, "3": the build), or skip."""
    if major == "2":
        path = shutil.which("promtool")
        if path is None:
            pytest.skip("promtool not installed (Debian: prometheus)")
        return path
    named = os.environ.get("LUNLAT_PROMTOOL3")
    built = Path(named) if named else PROMETHEUS3_DIR / "promtool"
    if not built.is_file():
        pytest.skip(
            f"no Prometheus 3 promtool at {built}: .ci/run builds it "
            f"(go install github.com/prometheus/prometheus/cmd/promtool@{PROMETHEUS3_MODULE_VERSION}), "
            "or set LUNLAT_PROMTOOL3"
        )
    return str(built)


def unit_test_files(major: str, files: list[Path], into: Path) -> list[Path]:
    """The unit test files as `major`'s promtool reads them: as they are for 2; for 3, copies in
    `into` with `fuzzy_compare: true` and their rule files made absolute (the copies live elsewhere)."""
    if major == "2":
        return files
    copies = []
    for index, file in enumerate(files):
        test = yaml.safe_load(file.read_text(encoding="utf-8"))
        test["rule_files"] = [str((file.parent / rule).resolve()) for rule in test["rule_files"]]
        test["fuzzy_compare"] = True
        copy = into / f"{index:02d}-{file.name}"
        copy.write_text(yaml.safe_dump(test, sort_keys=False, allow_unicode=True), encoding="utf-8")
        copies.append(copy)
    return copies
