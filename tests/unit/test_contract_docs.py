"""The README's metric reference and the contract module say the same thing."""

from __future__ import annotations

import re
from pathlib import Path

from lunlat import contract
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.oracle import OracleSource
from lunlat.sources.psutil_disks import PsutilDisksSource

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(lunlat_[a-z_]+)` \| (counter|gauge|histogram) \|(.*)$")


def documented() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in README.read_text().splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def test_every_metric_is_documented_with_its_type_and_nothing_else() -> None:
    rows = documented()
    assert {name: kind for name, (kind, _) in rows.items()} == {m.name: m.type for m in contract.ALL_METRICS}


def test_documented_labels_match() -> None:
    rows = documented()
    info_row = rows[contract.LUN_INFO.name][1]
    assert re.findall(r"`([a-z_]+)`", info_row.split("labels", 1)[1])[
        : len(contract.LUN_INFO_LABELS)
    ] == list(contract.LUN_INFO_LABELS)
    for spec in contract.HEALTH_METRICS:
        assert re.findall(r"`([a-z_]+)`", rows[spec.name][1].split("|")[0]) == list(spec.labels)
    oracle_intro = README.read_text().split("Oracle layer, per configured database", 1)[1].split("|", 1)[0]
    assert re.findall(r"`([a-z_]+)`", oracle_intro) == list(contract.ORACLE_FILE_LABELS)
    for spec in (contract.ORACLE_WAITS, contract.ORACLE_ASM_READS):
        assert re.findall(r"labels ((?:`[a-z_]+`(?:, )?)+)", rows[spec.name][1])[0].replace("`", "").split(
            ", "
        ) == list(spec.labels)


def test_documented_error_reasons_are_the_ones_sources_count() -> None:
    row = documented()[contract.SOURCE_ERRORS.name][1]
    reasons = set(re.findall(r"`([a-z_]+)`", row.split("(", 1)[1]))
    assert reasons == {
        *DiskstatsSource.error_reasons,
        *PsutilDisksSource.error_reasons,
        *OracleSource.error_reasons,
        "timeout",
        "internal",
    }


def test_counters_end_in_total_and_everything_has_the_prefix() -> None:
    for spec in contract.ALL_METRICS:
        assert spec.name.startswith(contract.PREFIX)
        assert spec.name.endswith("_total") == (spec.type == "counter")
