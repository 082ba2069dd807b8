"""The Oracle support matrix: each row of docs/oracle.md's "Support matrix" is a `Variant` here, and the
source runs against the emulation of that variant (tests/oracle/emulation.py: its SQL unchanged on
views modelled from cited facts, docs/emulated-facts.md).

Each variant says what the source must publish (files with roles and LUNs, wait events and their
`db`, histograms and their `db`, ASM disks, replica waits) and what it must say (the capability
series, and each log line once). A test keeps that table's first column equal to VARIANTS.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from lunlat import contract
from lunlat.engines.oracle import metrics as oracle_metrics
from lunlat.engines.oracle.source import OracleSource
from lunlat.sources.base import SourceResult
from tests.oracle.emulation import NON_CDB_UNTIL, EmulatedConnection, OracleEmulation
from tests.oracle.simulator import IO, Commits, Constant, Load
from tests.oracle.test_oracle_source import (
    delta,
    families,
    oracle_host,
    scrape_both,
    source_for,
    values,
)
from tests.support.fake_host import FakeHost

REPO = Path(__file__).resolve().parents[2]
PDBS = ("SALES", "HR")
# Each container's sessions read at their own latency (µs): SALES 425, HR 2 ms (a non-CDB: ORCL).
READS = {"SALES": (300, 425.0), "HR": (100, 2000.0), "ORCL": (300, 425.0)}
LOG_WRITE_US = 300.0
STANDBY_US = {"SYNC": 20_000.0, "ASYNC": 5_000.0}
INSTANCE_WIDE = "histograms are instance-wide"
ASM_LOST = "ASM disks cannot be read"
FS_DATA_LUN = "ora_data"
ASM_DATA_LUN = "asm_data1,asm_data2"


@dataclass(frozen=True, slots=True)
class Variant:
    """One Oracle variant: how the emulation is built and logged into, and what the source must
    publish and say against it."""

    version: str = "19.24.0.0.0"  # python-oracledb's Connection.version of that release
    cdb: bool = True
    instances: int = 1
    login: str | None = None  # a PDB: a PDB-local login; None: the CDB root (common user) or a non-CDB
    remote: bool = False  # the exporter is not on the database's host (a managed service): no file has a LUN
    transports: tuple[Literal["SYNC", "ASYNC"], ...] = ()  # Data Guard standbys the primary sends redo to
    # --- what the source publishes ---
    event_dbs: frozenset[str] = frozenset(PDBS)  # `db` of the 'db file sequential read' counters
    histogram_dbs: frozenset[str] = frozenset(PDBS)  # `db` of its histogram
    data_lun: str = FS_DATA_LUN  # `lun` of every data file
    asm_luns: frozenset[str] = frozenset()  # `lun` of the ASM disk series
    db_instances: frozenset[str] = frozenset({"orcl"})
    replica: tuple[tuple[str, str], ...] = ()  # (event, measure) of the role="replica" waits
    # --- what the source says ---
    asm: int = 1  # lunlat_source_capability{capability="asm"} (files in ASM: asm_files)
    container_histograms: int = 1
    said: tuple[str, ...] = ()  # log lines, each once

    def emulation(self) -> OracleEmulation:
        return OracleEmulation(
            self.instances, cdb=self.cdb, pdbs=PDBS, asm=self.asm_files, version=self.version
        )

    @property
    def asm_files(self) -> bool:
        return bool(self.asm_luns) or (self.data_lun != FS_DATA_LUN and not self.remote)

    def load(self, transport: Literal["SYNC", "ASYNC"] | None = None) -> Load:
        readers = PDBS if self.cdb else ("ORCL",)
        streams = [
            IO("data", "read", READS[db][0], Constant(READS[db][1]), container=db if self.cdb else None)
            for db in readers
        ]
        streams.append(IO("log", "write", 100, Constant(LOG_WRITE_US)))
        standby = Constant(STANDBY_US[transport]) if transport else None
        return Load(
            *streams, commits=Commits(100), background=False, standby=standby, transport=transport or "SYNC"
        )


VARIANTS: dict[str, Variant] = {
    "Oracle 12.2": Variant(
        version="12.2.0.1.0",
        histogram_dbs=frozenset({""}),
        container_histograms=0,
        said=(INSTANCE_WIDE,),
    ),
    "Oracle 19c": Variant(version="19.24.0.0.0"),
    "Oracle 21c": Variant(version="21.3.0.0.0"),
    "Oracle 23ai": Variant(version="23.4.0.24.5"),
    # 12.2: the instance-wide histogram, which in a non-CDB is the database's own (CON_ID 0, like
    # its wait counters): nothing lost.
    "non-CDB": Variant(
        version="12.2.0.1.0",
        cdb=False,
        event_dbs=frozenset({"ORCL"}),
        histogram_dbs=frozenset({"ORCL"}),
    ),
    "CDB root (common user)": Variant(),
    "PDB-local login": Variant(
        login="SALES",
        event_dbs=frozenset({"SALES"}),
        histogram_dbs=frozenset({"SALES"}),
        data_lun="",  # files in ASM, disks unreadable from a PDB
        asm=0,
        said=(ASM_LOST,),
    ),
    # Amazon RDS for Oracle: the application and the monitoring user are in a tenant database (a
    # PDB; Amazon RDS User Guide, "Overview of RDS for Oracle CDBs"), the exporter runs elsewhere,
    # and deploy/oracle/grants-rds.sql creates the user without SYSDBA.
    "Amazon RDS for Oracle": Variant(
        login="SALES",
        remote=True,
        event_dbs=frozenset({"SALES"}),
        histogram_dbs=frozenset({"SALES"}),
        data_lun="",
    ),
    # Oracle Autonomous Database: a PDB too, the exporter off its host (grants-autonomous.sql).
    "Autonomous Database": Variant(
        login="SALES",
        remote=True,
        event_dbs=frozenset({"SALES"}),
        histogram_dbs=frozenset({"SALES"}),
        data_lun="",
    ),
    "RAC": Variant(instances=2, db_instances=frozenset({"orcl1", "orcl2"})),
    "ASM": Variant(data_lun=ASM_DATA_LUN, asm_luns=frozenset({"asm_data1", "asm_data2", "asm_fra1"})),
    "file systems": Variant(),
    "Data Guard primary": Variant(
        transports=("SYNC", "ASYNC"),
        replica=(("ASYNC Remote Write", "time_spent"), ("SYNC Remote Write", "per_io")),
    ),
}


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return oracle_host(tmp_path)


def run(emu: OracleEmulation, variant: Variant, seconds: float) -> None:
    """`seconds` of the variant's load; a Data Guard primary sends to each of its standbys in turn."""
    if not variant.transports:
        emu.advance(seconds, variant.load())
    for transport in variant.transports:
        emu.advance(seconds / len(variant.transports), variant.load(transport))


def source_of(emu: OracleEmulation, variant: Variant, host: FakeHost) -> OracleSource:
    def connect() -> EmulatedConnection:
        return emu.connect(container=variant.login)

    return source_for(emu, None if variant.remote else host, connect=connect)


def histogram_counts(result: SourceResult, event: str) -> dict[str, float]:
    labels = oracle_metrics.ORACLE_EVENT_LABELS
    return {
        s[1].values[labels.index("db")]: s[2]
        for s in families(result)[oracle_metrics.ORACLE_WAIT_DURATION.name].all_samples()
        if s[0] == "_count" and s[1].values[labels.index("event")] == event
    }


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_source_publishes_what_the_variant_has_and_says_what_it_cannot(
    name: str, host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    variant = VARIANTS[name]
    emu = variant.emulation()
    source = source_of(emu, variant, host)
    run(emu, variant, 60)
    first = source.collect()
    run(emu, variant, 60)
    second = source.collect()
    third = source.collect()
    assert not first.errors and not second.errors and not third.errors

    # Files: every role, each data file on its LUN, one series per instance.
    files = oracle_metrics.ORACLE_FILE_LABELS
    reads = values(second, oracle_metrics.ORACLE_FILE_READS)
    assert {k[files.index("role")] for k in reads} == {"data", "temp", "log", "control"}
    assert {k[files.index("db_instance")] for k in reads} == variant.db_instances
    assert {k[files.index("lun")] for k in reads if k[files.index("role")] == "data"} == {variant.data_lun}

    # Wait events: each container's own, at its own latency (µs exact); the log write stays local.
    events = oracle_metrics.ORACLE_EVENT_LABELS
    waits = delta(first, second, oracle_metrics.ORACLE_WAITS)
    waited = delta(first, second, oracle_metrics.ORACLE_WAIT_TIME)
    sequential = {k: n for k, n in waits.items() if k[events.index("event")] == "db file sequential read"}
    assert {k[events.index("db")] for k in sequential} == variant.event_dbs
    for key, n in sequential.items():
        assert n == READS[key[events.index("db")]][0] * 60  # per instance
        assert waited[key] / n == pytest.approx(READS[key[events.index("db")]][1] * 1e-6, rel=1e-9)
    for key, n in waits.items():
        if key[events.index("event")] == "log file parallel write":
            assert waited[key] / n == pytest.approx(LOG_WRITE_US * 1e-6, rel=1e-9)

    # Histograms: at the level the variant has, counting what the counters count.
    counts = histogram_counts(second, "db file sequential read")
    assert set(counts) == variant.histogram_dbs
    if variant.histogram_dbs == variant.event_dbs:
        totals = values(second, oracle_metrics.ORACLE_WAITS)
        for key, n in totals.items():
            if key[events.index("event")] == "db file sequential read":
                assert counts[key[events.index("db")]] == n
    else:  # the whole instance's: every container's reads together
        assert counts[""] == sum(values(second, oracle_metrics.ORACLE_WAITS)[k] for k in sequential)

    # ASM disks.
    asm = oracle_metrics.ORACLE_ASM_LABELS
    assert {k[asm.index("lun")] for k in values(second, oracle_metrics.ORACLE_ASM_READS)} == variant.asm_luns

    # Replica waits: their own role, their own measure; never the log's.
    replica = {
        (k[events.index("event")], k[events.index("measure")])
        for k, n in waits.items()
        if k[events.index("role")] == "replica" and n
    }
    assert replica == set(variant.replica)
    for key, n in waits.items():
        event = key[events.index("event")]
        if event == "SYNC Remote Write":
            assert waited[key] / n == pytest.approx(STANDBY_US["SYNC"] * 1e-6, rel=1e-9)
        if event == "ASYNC Remote Write":  # time spent only: the reference gives no per-wait meaning
            assert waited[key] == pytest.approx(100 * 30 * STANDBY_US["ASYNC"] * 1e-6, rel=1e-9)

    # What it says: the capabilities, and each log line once over three collections.
    for result in (first, second, third):
        assert values(result, contract.SOURCE_CAPABILITY) == {
            (source.name, "asm"): variant.asm,
            (source.name, "container_histograms"): variant.container_histograms,
        }
    messages = [r.getMessage() for r in caplog.records]
    for said in (INSTANCE_WIDE, ASM_LOST):
        expected = 1 if said in variant.said else 0
        assert sum(said in m for m in messages) == expected, (said, messages)


def test_the_docs_oracle_matrix_rows_are_the_variants() -> None:
    text = (REPO / "docs" / "oracle.md").read_text(encoding="utf-8")
    section = text.split("\n## Support matrix\n", 1)[1].split("\n## ", 1)[0]
    header, rule, *rows = [line for line in section.splitlines() if line.startswith("|")]
    assert header == "| variant | what the source reads | what it cannot read, and how it says so | grants |"
    assert set(rule) <= {"|", "-", " "}
    assert [row.split("|")[1].strip() for row in rows] == list(VARIANTS)
    assert all(len(row.split("|")) == 6 for row in rows), "four cells per row"


def test_a_non_cdb_exists_until_19c_and_its_histograms_are_its_own() -> None:
    # The non-CDB architecture is desupported from 21c (emulation.NON_CDB_UNTIL, cited there).
    for version in ("21.3.0.0.0", "23.4.0.24.5"):
        with pytest.raises(ValueError, match="non-CDB"):
            OracleEmulation(cdb=False, version=version)
    assert NON_CDB_UNTIL == 19
    emu = OracleEmulation(cdb=False, version="19.24.0.0.0")
    source = source_for(emu)
    emu.advance(60, VARIANTS["non-CDB"].load())
    result = source.collect()
    assert histogram_counts(result, "db file sequential read") == {"ORCL": 300 * 60}
    assert values(result, contract.SOURCE_CAPABILITY)[(source.name, "container_histograms")] == 1


def test_a_view_that_vanishes_mid_run_is_named_with_both_causes_and_the_rest_is_published(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    # ORA-00942 is both "no grant" and "no such view": a revoke (or a dropped synonym) after a good
    # scrape. The line names the view and both causes, once; files and histograms keep coming; the
    # source is up (its collection ran; the loss shows as no_grant and in the log).
    emu = OracleEmulation(cdb=True, pdbs=PDBS)
    source = source_for(emu, host)
    emu.advance(60, VARIANTS["Oracle 19c"].load())
    assert not source.collect().errors
    emu.revoke("gv$con_system_event")
    emu.advance(60, VARIANTS["Oracle 19c"].load())
    result = source.collect()
    # Two statements read the view: the per-event and the per-wait-class one.
    assert result.errors == {"no_grant": 2}
    assert values(result, oracle_metrics.ORACLE_WAITS) == {}
    assert values(result, oracle_metrics.ORACLE_WAIT_CLASS_WAITS) == {}
    assert values(result, oracle_metrics.ORACLE_FILE_READS) and histogram_counts(
        result, "db file sequential read"
    )
    up, _ = scrape_both(host, source)
    assert up == {"diskstats": True, "oracle:Oracle": True}
    lines = [r.getMessage() for r in caplog.records if "query disabled" in r.getMessage()]
    assert len(lines) == 2, lines  # one per statement
    assert all(
        re.search(r"ORA-00942, GV\$CON_SYSTEM_EVENT does not exist for this login", line) for line in lines
    )
    assert "grant is missing or was revoked" in lines[0] and "synonym" in lines[0]
    assert "deploy/oracle/grants.sql" in lines[0] and "the rest is published" in lines[0]
