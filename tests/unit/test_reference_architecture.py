"""The reference's averages (lunlat's reference.csv): consistent with the lab description, read
strictly, compared within 0.03 ms or 5 %; the scenario's and the report's side-by-side tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat import reference_architecture
from lunlat.cli import _parser
from lunlat.reference_architecture import DEFAULT_REFERENCE_FILE
from lunlat.report.collect import Collected, Phase, Row
from lunlat.report.page import cells, render
from tests.support.skip_unless_installed import need

need("lunlat_lab")  # the lab is its own distribution: skipped, saying so, without it
from lunlat_lab import measure, reference_scenario  # noqa: E402
from lunlat_lab.config import LabConfig, Workload  # noqa: E402
from lunlat_lab.defaults import DEFAULT_LAB_FILE  # noqa: E402
from lunlat_lab.settings import Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REFERENCE = DEFAULT_REFERENCE_FILE
LAB = DEFAULT_LAB_FILE


def _ops(workload: Workload) -> set[str]:
    """The ops a workload issues on its LUNs (lab/fio/jobs.py): a snapshot copy writes, then OLTP."""
    if workload.kind in ("oltp", "snapshot_oltp"):
        mixed = {
            op
            for op, share in (("read", workload.read_percent), ("write", 100 - workload.read_percent))
            if share
        }
        return mixed | ({"write"} if workload.kind == "snapshot_oltp" else set())
    return {"write"} if workload.kind == "log" else {"read"}


def test_every_lun_op_of_every_phase_has_exactly_one_reference_value() -> None:
    lab, cells_ = LabConfig.load(LAB), reference_architecture.load(REFERENCE)
    active = {
        (phase, lun, op)
        for phase, members in lab.phases.items()
        for w in members
        for lun in lab.workloads[w].luns
        for op in _ops(lab.workloads[w])
    }
    covered = set()
    for cell in cells_:
        assert cell.phase in lab.phases, cell
        (lun,) = reference_scenario.luns_of(lab, cell)  # the labels map each cell onto one LUN
        assert lun.engine == cell.engine, cell
        covered.add((cell.phase, lun.name, cell.op))
    assert covered == active
    assert len(cells_) == 44  # Tables 12-17: 6 LUNs x 2 ops x 3 phases + 4 snapshot LUNs x 2 ops


def test_the_labs_baselines_are_the_references_oltp_tables() -> None:
    """lab.yaml's own latencies are Tables 12 and 13 (the snapshot copies at their production's)."""
    lab, cells_ = LabConfig.load(LAB), reference_architecture.load(REFERENCE)
    for cell in cells_:
        if cell.phase != "oltp":
            continue
        for lun in lab.luns:
            if (lun.database, lun.role) == (cell.database, cell.role):
                assert getattr(lun.latency, f"{cell.op}_ms") == cell.ms, (lun.name, cell)


def test_the_file_names_its_source() -> None:
    header = [line for line in REFERENCE.read_text().splitlines() if line.startswith("#")]
    text = " ".join(header)
    for words in (
        "Dell EMC",
        "PowerMax 2000",
        "H17744",
        "Tables 12-17",
        "https://infohub.delltechnologies.com/",
    ):
        assert words in text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("a,b\n", "must be table,phase"),
        ("12,oltp,oltp,X,mssql,data,read,fast\n", "not a number"),
        ("12,oltp,oltp,X,mssql,data,scan,0.4\n", "op read or write"),
        ("12,oltp,oltp,X,mssql,data,read,-1\n", "positive ms"),
        ("12,oltp,oltp,X,mssql,data,read,0.4\n13,oltp,oltp,X,mssql,data,read,0.5\n", "given twice"),
    ],
)
def test_a_bad_reference_file_is_refused_by_line(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "reference.csv"
    header = "" if body.startswith("a,b") else ",".join(reference_architecture.COLUMNS) + "\n"
    path.write_text("# source\n" + header + body)
    with pytest.raises(reference_architecture.ReferenceError, match=message):
        reference_architecture.load(path)


@pytest.mark.parametrize(
    ("target", "measured", "ok"),
    [
        (0.20, 0.229, True),  # 0.03 ms, more than 5 %
        (0.20, 0.231, False),
        (1.10, 1.154, True),  # 5 %, more than 0.03 ms
        (1.10, 1.156, False),
        (0.64, 0.60, False),
    ],
)
def test_within_003_ms_or_5_percent(target: float, measured: float, ok: bool) -> None:
    assert reference_architecture.within(target, measured) is ok


def test_targets_and_measured_cells_on_the_lab() -> None:
    lab, cells_ = LabConfig.load(LAB), reference_architecture.load(REFERENCE)
    wanted = reference_scenario.targets(lab, cells_, "oltp+dss+snapshot")
    assert wanted["oracle_log"] == {"read": 0.55, "write": 0.75}
    assert wanted["sqlserver1_snap_data"] == {"read": 1.10, "write": 0.26}
    assert "sqlserver1_snap_data" not in reference_scenario.targets(lab, cells_, "oltp")
    loops = {"oracle_log": "/dev/loop7"}
    before = {"loop7": measure.Counters(10, 1.0, 100, 2.0)}
    after = {"loop7": measure.Counters(110, 1.055, 100, 2.0)}
    got = reference_scenario.measured(lab, loops, "oltp", before, after)
    assert got[("oltp", "oltp", "Oracle", "log", "read")] == pytest.approx(0.55)
    assert got[("oltp", "oltp", "Oracle", "log", "write")] is None  # no write: no average, not 0
    table = reference_architecture.compare([c for c in cells_ if c.phase == "oltp"], got)
    by_key = {c.cell.key: c for c in table}
    assert by_key[("oltp", "oltp", "Oracle", "log", "read")].within is False  # 0.55 against 0.29
    assert by_key[("oltp", "oltp", "SQL Server 1", "data", "read")].measured_ms is None
    text = reference_architecture.format_table(table)
    assert "0 of 12 reference cells within 0.03 ms or 5%" in text
    assert reference_architecture.csv_text(table).splitlines()[0] == ",".join(
        reference_architecture.COMPARISON_COLUMNS
    )


def test_reference_arrays_are_valid_settings() -> None:
    settings = Settings.from_config(LabConfig.load(LAB))
    arrays = dict.fromkeys(settings.arrays, reference_scenario.REFERENCE_ARRAY)
    Settings(settings.luns, arrays).check()


def test_the_reports_cells_beside_the_reference() -> None:
    cells_ = [
        c for c in reference_architecture.load(REFERENCE) if c.phase == "oltp" and c.database == "Oracle"
    ]
    phase = Phase("oltp", 0, 100)
    labels = {"instance": "lab", "database": "Oracle", "role": "log", "workload": "oltp", "lun": "oracle_log"}
    rows = [Row(phase, "host", labels, "write", 0.000645 * 100, 100, None, 0.001, 0)]
    data = Collected([phase], rows, 15, 0, 100, {}, {}, {})
    measured = {key: None if r.avg is None else r.avg * 1000 for key, r in cells(data.rows).items()}
    comparisons = reference_architecture.compare(cells_, measured)
    html = render(data, "t", "http://prometheus", comparisons)
    assert "Against the reference: 1 of 4 cells within 0.03 ms or 5%" in html
    assert "<td>0.64</td>" in html and ">0.645<" in html


def test_the_reference_is_lunlats_package_data_and_the_reports_default() -> None:
    """`lunlat report --reference` without FILE reads the reference shipped beside lunlat/reference_architecture.py,
    from any directory; a FILE still wins."""
    assert Path(reference_architecture.__file__).with_name("reference.csv") == DEFAULT_REFERENCE_FILE
    assert reference_architecture.load(DEFAULT_REFERENCE_FILE)
    required = ["report", "--prometheus.url=http://p", "--from=0", "--to=1", "--output=out"]
    parser = _parser()
    assert parser.parse_args([*required, "--reference"]).reference == DEFAULT_REFERENCE_FILE
    assert parser.parse_args([*required, "--reference", "mine.csv"]).reference == Path("mine.csv")
    assert parser.parse_args(required).reference is None
