"""The docs' hand-written metric tables (docs/metrics.md) and the contract module say the same thing.

The generated reference (docs/reference/metrics.md) is kept fresh by `python docs/gen_reference.py --check`."""

from __future__ import annotations

import re
from pathlib import Path

from lunlat import contract
from lunlat.engines.mssql.source import MssqlSource
from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.engines.oracle.source import OracleSource
from lunlat.sources.biolatency import BiolatencySource
from lunlat.sources.diskstats import DiskstatsSource
from lunlat.sources.psutil_disks import PsutilDisksSource

REPO = Path(__file__).resolve().parents[2]
METRICS_PAGE = REPO / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(lunlat_[a-z_]+)` \| (counter|gauge|histogram) \|(.*)$")


def documented() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in METRICS_PAGE.read_text(encoding="utf-8").splitlines():
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
    oracle_intro = (
        METRICS_PAGE.read_text(encoding="utf-8")
        .split("Oracle layer, per configured database", 1)[1]
        .split("|", 1)[0]
    )
    assert re.findall(r"`([a-z_]+)`", oracle_intro) == list(oracle_metrics.ORACLE_FILE_LABELS)
    for spec in (oracle_metrics.ORACLE_WAITS, oracle_metrics.ORACLE_ASM_READS):
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
        *MssqlSource.error_reasons,
        *BiolatencySource.error_reasons,
        "timeout",
        "internal",
    }


def test_the_lost_sample_reasons_the_rules_judge_by_share_are_the_histograms() -> None:
    # lunlat_rules.health reads them without a source matcher: no other source may count them.
    others = {
        *DiskstatsSource.error_reasons,
        *PsutilDisksSource.error_reasons,
        *OracleSource.error_reasons,
        *MssqlSource.error_reasons,
    }
    assert set(contract.BIO_LOST_SAMPLE_REASONS) <= set(BiolatencySource.error_reasons) - others


def test_counters_end_in_total_and_everything_has_the_prefix() -> None:
    for spec in contract.ALL_METRICS:
        assert spec.name.startswith(contract.PREFIX)
        assert spec.name.endswith("_total") == (spec.type == "counter")


CONTRACT_DOC = REPO / "docs" / "contract.md"
CITATION = re.compile(r"docs/contract\.md §(\d+)")


def _tracked_text_files() -> list[Path]:
    roots = [REPO / d for d in ("exporter", "tests", "bench", "alerts", "dashboards", "deploy", "docs")]
    suffixes = {".py", ".md", ".yml", ".yaml", ".sh", ".sql", ".service"}
    return [p for root in roots for p in root.rglob("*") if p.suffix in suffixes and ".venv" not in p.parts]


def test_every_citation_of_the_contract_names_a_section_it_has() -> None:
    sections = set(re.findall(r"^## §(\d+) ", CONTRACT_DOC.read_text(), flags=re.MULTILINE))
    cited = {
        (str(path.relative_to(REPO)), number)
        for path in _tracked_text_files()
        for number in CITATION.findall(path.read_text(encoding="utf-8", errors="replace"))
    }
    assert cited, "the code cites docs/contract.md"
    assert {(where, n) for where, n in cited if n not in sections} == set()


def test_the_contract_is_cited_from_the_repository_not_from_outside() -> None:
    # The starting design document lived outside the repository; its facts moved to docs/contract.md.
    # (The pattern is built from parts so that this file does not match it.)
    outside = re.compile("design" + r" §|shared/" + "design" + r"\.md")
    assert [
        str(p.relative_to(REPO))
        for p in _tracked_text_files()
        if outside.search(p.read_text(errors="replace"))
    ] == []


def test_recorded_names_in_the_contract_doc_exist() -> None:
    from lunlat.promql import recorded  # noqa: PLC0415 - only this test needs it

    text = CONTRACT_DOC.read_text()
    assert "exporter/src/lunlat/promql/recorded.py" in text
    assert recorded.LATENCY.format(op="read", window=recorded.BREACH_WINDOW) in text


def test_the_capability_runbook_lists_every_capability_and_which_open_a_ticket() -> None:
    runbook = REPO / "alerts" / "runbooks" / "source-capability.md"
    rows = re.findall(r"^\| [^|]+ \| `([a-z_]+)` \| (yes|no) \|", runbook.read_text(), re.MULTILINE)
    assert dict(rows) == {c.name: ("yes" if c.fixable else "no") for c in contract.CAPABILITIES}
