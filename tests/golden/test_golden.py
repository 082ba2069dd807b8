"""The golden host: a real `lunlat serve` on the committed fixture host (host/, lunlat.yaml), its
/metrics compared line by line with expected.prom. Every change to what lunlat publishes (a name, a
label, a HELP text, a value, the order) shows as a diff of that file, reviewed like code;
`pytest … tests/golden --update-golden` rewrites it (README.md here).

The shape is node_exporter's end-to-end test (prometheus/node_exporter end-to-end-test.sh: the
exporter run on collector/fixtures, lines matching its skip_re dropped, `diff -u` against
collector/fixtures/e2e-output.txt, `-u` to update it).
"""

from __future__ import annotations

import difflib
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tests.support.exporter_process import LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.support.openmetrics_parser import PROMETHEUS_ACCEPT, openmetrics_families

HERE = Path(__file__).parent
HOST = HERE / "host"
CONFIG = HERE / "lunlat.yaml"
EXPECTED = HERE / "expected.prom"
REFRESH = "pytest -c tests/pytest.ini tests/golden --update-golden"
HEADER = (
    "# What `lunlat serve` publishes on the golden host (tests/golden/README.md), normalised by\n"
    f"# tests/golden/test_golden.py. Do not edit: `{REFRESH}` rewrites it.\n"
)

# --- what may differ between runs and machines: the only lines touched, listed by metric name ---
VARIES = "VARIES"
# Series kept with their labels, their value replaced by VARIES.
MASKED_VALUES: dict[str, str] = {
    "lunlat_source_duration_seconds": "wall time of the collection",
    "lunlat_config_last_reload_success_timestamp_seconds": "the clock when the config was loaded",
    "lunlat_lun_paths_age_seconds": "how long ago the path states were read (pathhealth)",
}
# Series kept, these labels' values replaced by VARIES.
MASKED_LABELS: dict[str, tuple[str, ...]] = {
    # lunlat's own version changes at each release, the Python running it from machine to machine.
    "lunlat_build_info": ("version", "python_version"),
}
# prometheus_client's process and platform collectors (memory, CPU time, fds, gc counts, the
# interpreter's version): samples dropped, their HELP and TYPE lines kept, so a family that
# appears or goes still shows.
DROPPED_SAMPLES: tuple[str, ...] = ("process_", "python_")

# A sample line of the text format: name, optional {labels} (quoted values may hold spaces, braces
# and escaped quotes), value, optional timestamp.
_SAMPLE = re.compile(
    r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?P<labels>\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?'
    r" (?P<value>\S+)(?P<timestamp> \S+)?"
)


def _mask_label(labels: str, label: str) -> str:
    return re.sub(rf'([{{,]){label}="(?:[^"\\]|\\.)*"', rf'\g<1>{label}="{VARIES}"', labels)


def normalise(body: str) -> str:
    """The /metrics body with only the varying parts above masked or dropped; HEADER first."""
    lines = []
    for line in body.splitlines():
        sample = _SAMPLE.fullmatch(line)
        if sample is None:  # HELP, TYPE, or a line that is no sample: kept as it is, so it shows
            lines.append(line)
            continue
        name = sample["name"]
        if name.startswith(DROPPED_SAMPLES):
            continue
        labels = sample["labels"] or ""
        for label in MASKED_LABELS.get(name, ()):
            labels = _mask_label(labels, label)
        value = VARIES if name in MASKED_VALUES else sample["value"]
        lines.append(f"{name}{labels} {value}{sample['timestamp'] or ''}")
    return HEADER + "".join(line + "\n" for line in lines)


def published(host: Path, log: Path) -> str:
    """Normalised /metrics of a `lunlat serve` on `host` (proc/, sys/) with the golden config."""
    flags = (f"--path.procfs={host / 'proc'}", f"--path.sysfs={host / 'sys'}", f"--config.file={CONFIG}")
    with ExporterProcess(lunlat_serve(*flags), log, port_pattern=LUNLAT_PORT) as exporter:
        return normalise(exporter.scrape().text)


def differences(actual: str) -> list[str]:
    """Unified diff from expected.prom to `actual` (empty: they are equal)."""
    expected = EXPECTED.read_text(encoding="utf-8") if EXPECTED.exists() else ""
    return list(
        difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "expected.prom", "lunlat serve", lineterm=""
        )
    )


def changed_lines(diff: list[str]) -> list[str]:
    """The removed and added lines of a unified diff (its --- and +++ headers left out)."""
    return [line for line in diff[2:] if line.startswith(("-", "+"))]


def test_lunlat_publishes_exactly_expected_prom_on_the_golden_host(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    actual = published(HOST, tmp_path / "lunlat.log")
    if request.config.getoption("--update-golden"):
        EXPECTED.write_text(actual, encoding="utf-8")
        pytest.skip("rewrote tests/golden/expected.prom: review it with git diff, commit it with the change")
    diff = differences(actual)
    if diff:
        pytest.fail(
            "lunlat publishes something else than tests/golden/expected.prom on the golden host:\n"
            + "\n".join(diff)
            + f"\nIf the change is meant, rewrite the file with `{REFRESH}` and commit it with the change.",
            pytrace=False,
        )


def test_one_changed_counter_shows_in_the_diff_as_its_series(tmp_path: Path) -> None:
    """The check is live: one more write completed on the multipath map in a copy of the host is
    exactly one series changed, named in the diff. That every other line is still equal also shows
    two separate runs publish the same text."""
    host = tmp_path / "host"
    shutil.copytree(HOST, host, symlinks=True)
    diskstats = host / "proc" / "diskstats"
    rows = [line.split() for line in diskstats.read_text(encoding="utf-8").splitlines()]
    map_row = next(row for row in rows if row[2] == "dm-0")
    writes = int(map_row[3 + 4])  # major, minor, name, then field 5: writes completed
    map_row[3 + 4] = str(writes + 1)
    diskstats.write_text("".join(" ".join(row) + "\n" for row in rows), encoding="utf-8")

    diff = differences(published(host, tmp_path / "lunlat.log"))

    series = 'lunlat_device_writes_completed_total{lun="ora_data",device="dm-0",kind="lun",database="ORCL",role="data",workload=""}'
    assert changed_lines(diff) == [f"-{series} {writes}", f"+{series} {writes + 1}"], "\n".join(diff)


def test_the_golden_host_in_openmetrics_is_what_the_parser_takes_with_the_same_series(tmp_path: Path) -> None:
    """Asked for OpenMetrics 1.0 as Prometheus asks (issue 42), the same `lunlat serve` answers it,
    gzipped, in a page prometheus_client's OpenMetrics parser takes whole, with the series and
    values of the text page (but the wall-clock ones), counters' families named without `_total`."""
    flags = (f"--path.procfs={HOST / 'proc'}", f"--path.sysfs={HOST / 'sys'}", f"--config.file={CONFIG}")
    with ExporterProcess(lunlat_serve(*flags), tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        om = exporter.scrape(gzip_ok=True, accept=PROMETHEUS_ACCEPT)
        text = exporter.scrape()
    assert (
        om.gzipped
        and om.headers["content-type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    )
    assert text.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in openmetrics_families(om.text) if f.name.startswith("lunlat_")}
    assert (
        "lunlat_device_reads_completed" in families and "lunlat_device_reads_completed_total" not in families
    )

    def series(parsed: Iterable[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float | None]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): None if s.name in MASKED_VALUES else s.value
            for f in parsed
            if f.name.startswith("lunlat_")
            for s in f.samples
        }

    assert series(families.values()) == series(text_string_to_metric_families(text.text))


def _cycles(directory: Path, above: tuple[Path, ...] = ()) -> Iterator[Path]:
    """Directories, reached through links, that are one of their own ancestors."""
    real = directory.resolve()
    if real in above:
        yield directory
        return
    for child in sorted(directory.iterdir()):
        if child.is_dir():  # through links too, as mypy, glob("**") and shutil.copytree go
            yield from _cycles(child, (*above, real))


def test_the_fixture_host_links_only_downward_inside_itself() -> None:
    """A real sysfs links back up (a disk's `device`, `holders/`): committed here, such cycles would
    be walked forever by mypy and glob("**") in CI. The host has a directory and empty files there
    (README.md); this says so at once if a link back up is ever added."""
    root = HOST.resolve()
    for path in sorted(HOST.rglob("*")):
        if path.is_symlink():
            assert path.exists(), f"{path.relative_to(HERE)}: dangling link"
            assert path.resolve().is_relative_to(root), f"{path.relative_to(HERE)}: links out of the host"
    cycles = [str(p.relative_to(HERE)) for p in _cycles(HOST)]
    assert not cycles, f"links back up make cycles: {', '.join(cycles[:3])}"
