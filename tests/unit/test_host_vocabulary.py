"""The host layer's shared vocabulary: one device filter and one lun_info shape for both host sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat import contract
from lunlat.config import DEFAULT_EXCLUDE, DiskstatsConfig
from lunlat.sources import diskstats, psutil_disks
from lunlat.sources.host import DeviceFilter, LunInfo


@pytest.mark.parametrize(
    ("include", "exclude", "name", "ignored"),
    [
        (None, DEFAULT_EXCLUDE, "sda", False),
        (None, DEFAULT_EXCLUDE, "ram0", True),
        (None, DEFAULT_EXCLUDE, "zram12", True),
        ("^(sd|dm-)", None, "nvme0n1", True),
        ("^(sd|dm-)", None, "dm-3", False),
        ("^sd", "^sdb$", "sdb", True),  # exclude wins over include
        (None, None, "anything", False),
    ],
)
def test_device_filter(include: str | None, exclude: str | None, name: str, ignored: bool) -> None:
    config = DiskstatsConfig(include=include, exclude=exclude)
    assert DeviceFilter.from_config(config).ignored(name) is ignored


def test_both_host_sources_use_the_one_filter_and_lun_info_shape() -> None:
    # The copies are gone: neither module compiles the regexes or spells the labels itself.
    for module in (diskstats, psutil_disks):
        text = Path(module.__file__ or "").read_text()
        assert "config.include" not in text and "config.exclude" not in text, module.__name__
        assert "LUN_INFO_LABELS" not in text and "LunInfo(" in text, module.__name__


def test_lun_info_names_the_contract_labels() -> None:
    info = LunInfo("lun1", "sdb", database="ORCL", kind="path")
    assert info._fields == contract.LUN_INFO_LABELS
    _, labels, value = info.sample()
    assert value == 1
    assert labels.as_dict() == {
        **dict.fromkeys(contract.LUN_INFO_LABELS, ""),
        "array": contract.ARRAY_UNKNOWN,  # never empty: no array named is said so
        "lun": "lun1",
        "device": "sdb",
        "database": "ORCL",
        "kind": "path",
    }
