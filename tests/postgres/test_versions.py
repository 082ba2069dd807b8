"""Which statements the source runs on each release 13-18, and what it publishes from them.

Without a server: a stand-in connection answers each of the source's statements, with the columns
sql.py cites for that release, and refuses the rest, as a server without the view or column would
(42P01 undefined_table, 42703 undefined_column). The same statements run on a real server of each
release in test_matrix.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from lunlat.engines.postgres import metrics as pm
from lunlat.engines.postgres import sql
from lunlat.engines.postgres.config import PostgresTarget
from lunlat.engines.postgres.source import PostgresSource
from lunlat.model import Family
from lunlat.sources.base import SourceResult

DATA_DIR = "/srv/pg/data"
ROLE = pm.POSTGRES_FILE_LABELS.index("role")
DB = pm.POSTGRES_FILE_LABELS.index("db")
KIND = pm.POSTGRES_FILE_LABELS.index("kind")


class RefusedError(Exception):
    sqlstate = "42P01"


class Cursor:
    def __init__(self, answers: dict[str, list[tuple[Any, ...]]], ran: list[str]) -> None:
        self._answers, self._ran, self._rows = answers, ran, list[tuple[Any, ...]]()

    def execute(self, statement: str) -> None:
        name = next(q.name for q in sql.ALL_QUERIES if q.sql == statement)
        self._ran.append(name)
        if name not in self._answers:
            raise RefusedError(f"{name}: not in this release")
        self._rows = self._answers[name]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def close(self) -> None:
        pass


class Connection:
    def __init__(self, answers: dict[str, list[tuple[Any, ...]]]) -> None:
        self.answers, self.ran = answers, list[str]()

    def cursor(self) -> Cursor:
        return Cursor(self.answers, self.ran)

    def close(self) -> None:
        pass


def answers(version: int, wal_timing: str | None = "on") -> dict[str, list[tuple[Any, ...]]]:
    found: dict[str, list[tuple[Any, ...]]] = {
        "settings": [(version, "on", wal_timing, "", "fdatasync", "", 1.7e9)],
        "data_directory": [(DATA_DIR,)],
        "tablespaces": [("pg_default", ""), ("pg_global", "")],
        "stat_database": [("app", 100, 5.5), ("", 3, 0.25)],
    }
    io = [
        ("relation", "client", 100, 5.5, 819200, 50, 1.0, 409600, 0, 0.0),
        ("relation", "bulkread", 300, 30.0, 2457600, 0, 0.0, 0, 0, 0.0),
        ("relation", "checkpointer", 0, 0.0, 0, 70, 2.5, 573440, 9, 4.5),
        ("temp relation", "", 4, 0.5, 32768, 4, 0.25, 32768, 0, 0.0),
        ("wal", "", 0, 0.0, 0, 40, 0.4, 327680, 20, 30.5),
    ]
    if version >= sql.BYTES_AND_WAL_IO_SINCE:
        found["stat_io"] = io
    elif version >= sql.PG_STAT_IO_SINCE:
        found["stat_io_op_bytes"] = io[:4]  # no object wal before 18
    if sql.PG_STAT_WAL_SINCE <= version < sql.BYTES_AND_WAL_IO_SINCE:
        found["stat_wal"] = [(40, 0.4, 20, 30.5)]
    return found


def collect(version: int, wal_timing: str | None = "on") -> tuple[SourceResult, list[str]]:
    conn = Connection(answers(version, wal_timing))
    target = PostgresTarget(name="pg", host="db1", user="lunlat", password_env="PW")  # noqa: S106 - a variable name
    result = PostgresSource(target, lambda: conn).collect()
    return result, conn.ran


def series(result: SourceResult, spec: object) -> dict[tuple[str, ...], float]:
    found: Family = next(f for f in result.families if f.spec is spec)
    return found.by_labels()


@pytest.mark.parametrize(
    ("version", "statements"),
    [
        (130000, ["settings", "data_directory", "tablespaces", "stat_database"]),
        (150000, ["settings", "data_directory", "tablespaces", "stat_database", "stat_wal"]),
        (170000, ["settings", "data_directory", "tablespaces", "stat_io_op_bytes", "stat_wal"]),
        (180000, ["settings", "data_directory", "tablespaces", "stat_io"]),
    ],
)
def test_each_release_gets_only_the_statements_it_answers(version: int, statements: list[str]) -> None:
    result, ran = collect(version, None if version < sql.PG_STAT_WAL_SINCE else "on")
    assert ran == statements
    assert not result.errors, result.errors


def test_before_16_data_reads_are_per_database_and_13_has_no_wal() -> None:
    result, _ = collect(130000, None)
    reads = series(result, pm.POSTGRES_FILE_READS)
    assert {(k[DB], k[ROLE]): v for k, v in reads.items()} == {("app", "data"): 100, ("", "data"): 3}
    assert series(result, pm.POSTGRES_FILE_READ_TIME)[next(k for k in reads if k[DB] == "app")] == 0.0055
    assert series(result, pm.POSTGRES_FILE_SYNCS) == {}
    capabilities = next(f for f in result.families if f.spec.name == "lunlat_source_capability").by_labels()
    assert capabilities == {("postgres:pg", "io_timing"): 1, ("postgres:pg", "wal_io"): 0}


@pytest.mark.parametrize("version", [140000, 170000, 180000])
def test_the_wal_syncs_are_the_layers_write_from_14_on(version: int) -> None:
    result, _ = collect(version)
    [(labels, syncs)] = series(result, pm.POSTGRES_FILE_SYNCS).items()
    assert labels[ROLE] == "log" and labels[pm.POSTGRES_FILE_LABELS.index("file")] == f"{DATA_DIR}/pg_wal"
    assert syncs == 20
    assert series(result, pm.POSTGRES_FILE_SYNC_TIME)[labels] == 0.0305


def test_16_and_17_count_bytes_as_operations_times_op_bytes_in_the_statement() -> None:
    assert "reads * op_bytes" in sql.IO_OP_BYTES.sql and "op_bytes" not in sql.IO.sql


def test_wal_timing_off_publishes_no_wal_times() -> None:
    result, _ = collect(170000, "off")
    assert series(result, pm.POSTGRES_FILE_SYNC_TIME) == {}
    assert series(result, pm.POSTGRES_FILE_SYNCS) != {}


@pytest.mark.parametrize("version", [160000, 180000])
def test_from_16_the_data_series_are_split_by_kind_and_the_rest_are_not(version: int) -> None:
    result, _ = collect(version)
    assert not result.errors, result.errors
    reads = {(k[ROLE], k[KIND]): v for k, v in series(result, pm.POSTGRES_FILE_READS).items()}
    expected = {
        ("data", "client"): 100,
        ("data", "bulkread"): 300,
        ("data", "checkpointer"): 0,
        ("temp", ""): 4,
    }
    assert reads == (expected | {("log", ""): 0} if version >= sql.BYTES_AND_WAL_IO_SINCE else expected)
    writes = {(k[ROLE], k[KIND]): v for k, v in series(result, pm.POSTGRES_FILE_WRITES).items()}
    assert writes[("data", "checkpointer")] == 70
    times = {(k[ROLE], k[KIND]): v for k, v in series(result, pm.POSTGRES_FILE_READ_TIME).items()}
    assert times[("data", "client")] == 0.0055 and times[("data", "bulkread")] == 0.03


@pytest.mark.parametrize("version", [130000, 150000])
def test_before_16_no_series_has_a_kind(version: int) -> None:
    result, _ = collect(version, None if version < sql.PG_STAT_WAL_SINCE else "on")
    for family in result.families:
        if family.spec in pm.POSTGRES_METRICS:
            assert {k[KIND] for k in family.by_labels()} <= {""}


@pytest.mark.parametrize(
    "row",
    [
        ("relation", "sometimes", 1, 0.1, 8192, 0, 0.0, 0, 0, 0.0),  # a kind the statement never gives
        ("wal", "client", 1, 0.1, 8192, 0, 0.0, 0, 0, 0.0),  # only permanent relations are split
        ("relation", "", 1, 0.1, 8192, 0, 0.0, 0, 0, 0.0),  # and every one of their rows is
    ],
)
def test_a_row_of_a_kind_the_statement_never_gives_is_skipped_and_counted(row: tuple[Any, ...]) -> None:
    conn = Connection(answers(180000))
    conn.answers["stat_io"] = [*conn.answers["stat_io"], row]
    target = PostgresTarget(name="pg", host="db1", user="lunlat", password_env="PW")  # noqa: S106 - a variable name
    result = PostgresSource(target, lambda: conn).collect()
    assert result.errors == {"bad_row": 1}
    # Nothing of it is published: the series are the good rows' alone.
    assert {(k[ROLE], k[KIND]) for k in series(result, pm.POSTGRES_FILE_READS)} == {
        ("data", "client"),
        ("data", "bulkread"),
        ("data", "checkpointer"),
        ("temp", ""),
        ("log", ""),
    }
