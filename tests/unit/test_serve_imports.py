"""`lunlat serve` loads the exporter and nothing else: no report, rules, dashboards or lab module.

The command line is built without importing any command's code (lunlat/cli.py); each command imports
its code when it runs. The check is on a real `lunlat serve` run under `python -X importtime`, which
writes one line per module to stderr when the module is first imported ("-X importtime to show how
long each import takes. It shows module name, cumulative time … and self time", docs.python.org/3/using/
cmdline.html#cmdoption-X), so a module loaded at start or during a scrape shows up in the child's log.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from lunlat import cli
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess
from tests.support.fake_host import FakeHost, Stats

# One line per imported module: "import time: <self us> | <cumulative us> | <indent><module>".
IMPORT_LINE = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|\s+(\S+)\s*$", re.MULTILINE)
# What serve must not load: the report, the rule generator, the dashboards, the lab (in lunlat or in a
# distribution of its own).
NOT_FOR_SERVE = re.compile(
    r"^(lunlat\.report|lunlat\.alerting\.rules|lunlat\.dashboards|lunlat\.lab|lunlat_lab)(\.|$)"
)


def imported(log: str) -> list[str]:
    return IMPORT_LINE.findall(log)


def test_import_lines_are_read_as_python_writes_them() -> None:
    # The format as CPython 3.11 prints it (Python/import.c, import_find_and_load): indented names.
    log = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       201 |        201 |   lunlat.report.api\n"
        "import time:      1334 |       9999 | lunlat.cli\n"
        "ts=2026-01-01 level=info msg=listening port=1\n"
    )
    assert imported(log) == ["lunlat.report.api", "lunlat.cli"]
    assert [m for m in imported(log) if NOT_FOR_SERVE.match(m)] == ["lunlat.report.api"]
    assert not NOT_FOR_SERVE.match("lunlat.reload") and not NOT_FOR_SERVE.match("lunlat.labels")
    assert NOT_FOR_SERVE.match("lunlat_lab.commands") and NOT_FOR_SERVE.match("lunlat.dashboards")


def test_serve_loads_no_report_rules_dashboards_or_lab_module(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host")
    host.add_scsi_disk("sda", wwid="naa.600a098038303053453f463045727a71")
    host.add_partition("sda", 1)
    host.add_nvme("nvme0n1")
    for number, name in enumerate(host.stats):
        host.stats[name] = Stats.distinct(number)
    host.write()
    argv = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "lunlat",
        "serve",
        f"--web.listen-address={LOOPBACK}:0",
        f"--path.procfs={host.procfs}",
        f"--path.sysfs={host.sysfs}",
    ]
    # cwd: a directory without alerts/ or deploy/, as on a database host.
    with ExporterProcess(argv, tmp_path / "serve.log", port_pattern=LUNLAT_PORT, cwd=tmp_path) as exporter:
        text = exporter.scrape().text
        log = exporter.log_text()
    assert 'device="sda"' in text and 'device="nvme0n1"' in text, text[:2000]
    modules = imported(log)
    assert "lunlat.cli" in modules and "lunlat.sources.diskstats" in modules, log[-2000:]
    ours = [m for m in modules if m.startswith("lunlat")]
    unwanted = [m for m in ours if NOT_FOR_SERVE.match(m)]
    assert not unwanted, f"serve loaded {unwanted}; all lunlat modules it loaded: {ours}"


def test_goals_default_is_the_goals_modules() -> None:
    from lunlat.goals import DEFAULT_GOALS_FILE  # noqa: PLC0415 - cli must not import it

    assert cli.DEFAULT_GOALS_FILE == DEFAULT_GOALS_FILE


@pytest.mark.parametrize(("flags", "title"), [((), None), (("--title", "Run 7"), "Run 7")])
def test_report_title_defaults_to_the_reports(
    monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], title: str | None
) -> None:
    from lunlat import report  # noqa: PLC0415

    calls: list[tuple[object, ...]] = []

    def write(*args: object) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(report, "write", write)
    argv = ["report", "--prometheus.url=http://p:9090", "--from=0", "--to=60", "--output=out", *flags]
    assert cli.main(argv) == 0
    assert calls == [("http://p:9090", "0", "60", [], None, Path("out"), title or report.DEFAULT_TITLE, None)]
