"""The one lab LUN-name pattern (lab.config.LUN_NAME) the lab's config and fio job names are checked against."""

from __future__ import annotations

import pytest

from lunlat_lab.config import LUN_NAME


@pytest.mark.parametrize("name", ["ora_data1", "a", "x" * 41, "mssql_log"])
def test_plain_lower_case_identifiers_are_lun_names(name: str) -> None:
    assert LUN_NAME.match(name)


@pytest.mark.parametrize(
    "name", ["", "1data", "Data", "ora-data", "ora data", "x" * 42, "../etc", "a.img", "ora\n"]
)
def test_anything_else_is_not(name: str) -> None:
    assert not LUN_NAME.match(name)
