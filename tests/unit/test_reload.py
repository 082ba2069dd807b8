"""Config reload: SIGHUP and POST /-/reload on a real `lunlat serve`, the swap of sources in the
scraper, and the lifecycle API's answers (Prometheus' own: 403 without --web.enable-lifecycle, 405
for GET, 500 with the reason when the new file is bad)."""

from __future__ import annotations

import http.client
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lunlat import reload as reload_module
from lunlat.configfile import load_config
from lunlat.reload import Reloader
from lunlat.scrape import Scraper
from lunlat.sources.base import Source, SourceError, SourceResult
from lunlat.sources.factory import Settings
from lunlat.sources.registry import Built, build_sources
from lunlat.web.server import ListenAddress, Server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.support.exposition_samples import samples
from tests.support.fake_host import FakeHost, Stats
from tests.support.hostile_files import PROMPTLY, finishes, make_fifo, release
from tests.support.polling import wait_until
from tests.support.skip_unless_installed import needs
from tests.unit.test_scrape import FakeSource

DISKSTATS = "".join(
    f"   8 {16 * i:6d} {name} 4245 110 316590 2212 3470 1680 48514 3868 0 2788 6076 0 0 0 0 7 11\n"
    for i, name in enumerate(("sda", "sdb"))
)
ONE_LUN = "luns:\n  - match: {device: sda}\n    database: A\n    role: data\n"
TWO_LUNS = ONE_LUN + "  - match: {device: sdb}\n    database: B\n    role: log\n"
WITH_ORACLE = TWO_LUNS + (
    "oracle:\n  - {name: O, dsn: '127.0.0.1:1/ORCL', user: u, password_env: LUNLAT_TEST_RELOAD_NOT_SET}\n"
)
RELOADED = "lunlat_config_last_reload_successful"
RELOADED_AT = "lunlat_config_last_reload_success_timestamp_seconds"


def post(port: int, path: str = "/-/reload", method: str = "POST", timeout: float = 30) -> tuple[int, str]:
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def lun_db(text: str, lun: str) -> str | None:
    for (name, labels), _ in samples(text).items():
        if name == "lunlat_lun_info" and dict(labels)["lun"] == lun:
            return dict(labels)["database"]
    return None


@pytest.fixture
def exporter_files(tmp_path: Path) -> tuple[Path, list[str]]:
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "diskstats").write_text(DISKSTATS)
    (proc / "1" / "mountinfo").write_text("")
    config = tmp_path / "lunlat.yaml"
    config.write_text(ONE_LUN)
    flags = [f"--path.procfs={proc}", f"--path.sysfs={tmp_path / 'sys'}", f"--config.file={config}"]
    return config, flags


@needs("oracledb")
def test_sighup_and_post_reload_a_running_exporter_and_a_bad_file_keeps_the_old(
    tmp_path: Path, exporter_files: tuple[Path, list[str]]
) -> None:
    config, flags = exporter_files
    argv = lunlat_serve(*flags, "--web.enable-lifecycle")
    with ExporterProcess(argv, tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        first = samples(exporter.scrape().text)
        assert first[(RELOADED, ())] == 1 and first[(RELOADED_AT, ())] > 1e9
        assert lun_db(exporter.scrape().text, "sdb") == ""

        config.write_text(TWO_LUNS)  # SIGHUP: the new entry labels sdb
        os.kill(exporter.pid, signal.SIGHUP)
        wait_until(lambda: lun_db(exporter.scrape().text, "sdb") == "B", "sdb labelled after SIGHUP")

        config.write_text(WITH_ORACLE)  # POST: a new database target, done when the answer comes
        assert post(exporter.port) == (200, "")
        after = exporter.scrape().text
        assert 'lunlat_source_up{source="oracle:O"} 0' in after
        loaded_at = samples(after)[(RELOADED_AT, ())]
        assert samples(after)[(RELOADED, ())] == 1 and loaded_at >= first[(RELOADED_AT, ())]

        # Two problems: a role that does not exist, a target without a password.
        config.write_text(WITH_ORACLE.replace("role: log", "role: lg") + "  - {name: O2, dsn: x, user: u}\n")
        status, body = post(exporter.port)
        assert status == 500 and body.startswith("failed to reload config: ") and str(config) in body
        assert "luns[1].role" in body and "oracle[1]" in body
        refusals = [line for line in exporter.log_text().splitlines() if "config reload failed" in line]
        assert len(refusals) == 2 and "luns[1].role" in refusals[0] and "oracle[1]" in refusals[1]
        bad = exporter.scrape().text
        assert samples(bad)[(RELOADED, ())] == 0
        assert samples(bad)[(RELOADED_AT, ())] == loaded_at
        assert lun_db(bad, "sdb") == "B" and 'lunlat_source_up{source="oracle:O"} 0' in bad
        os.kill(exporter.pid, signal.SIGHUP)  # a bad file by SIGHUP: the same
        wait_until(
            lambda: exporter.log_text().count("config reload failed") == 4, "the refusal by SIGHUP logged"
        )
        assert samples(exporter.scrape().text)[(RELOADED, ())] == 0

        config.write_text(ONE_LUN)  # good again: sdb loses its labels, the Oracle target goes
        assert post(exporter.port, method="PUT") == (200, "")
        good = exporter.scrape().text
        assert samples(good)[(RELOADED, ())] == 1 and lun_db(good, "sdb") == ""
        assert "oracle:O" not in good
        config.write_text(ONE_LUN + "diskstats:\n  exclude: '^sdb$'\n")  # a new device filter
        assert post(exporter.port) == (200, "")
        assert lun_db(exporter.scrape().text, "sdb") is None and lun_db(exporter.scrape().text, "sda") == "A"
        log = exporter.log_text()
    refusals = [line for line in log.splitlines() if "config reload failed" in line]
    assert len(refusals) == 4 and all("err=" in line and str(config) in line for line in refusals)
    assert "Traceback" not in log


def test_without_the_lifecycle_flag_reload_is_forbidden_but_sighup_works(
    tmp_path: Path, exporter_files: tuple[Path, list[str]]
) -> None:
    config, flags = exporter_files
    with ExporterProcess(lunlat_serve(*flags), tmp_path / "l.log", port_pattern=LUNLAT_PORT) as exporter:
        config.write_text(TWO_LUNS)
        assert post(exporter.port) == (403, "Lifecycle API is not enabled.")
        assert post(exporter.port, method="GET") == (405, "Only POST or PUT requests allowed")
        assert lun_db(exporter.scrape().text, "sdb") == ""
        os.kill(exporter.pid, signal.SIGHUP)
        wait_until(lambda: lun_db(exporter.scrape().text, "sdb") == "B", "sdb labelled after SIGHUP")


class Closable(FakeSource):
    def __init__(self, name: str, behaviour: Callable[[], SourceResult] | None = None) -> None:
        super().__init__(name, behaviour)
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


def fail() -> SourceResult:
    raise SourceError("read_failed", "gone")


def test_a_swap_keeps_the_counters_of_sources_that_stay_and_closes_old_ones_after_their_collection() -> None:
    gate = threading.Event()
    stays, goes = Closable("stays", fail), Closable("goes", lambda: (gate.wait(10), SourceResult([]))[1])
    scraper = Scraper([stays, goes])
    scraper.collect(0.2)  # `goes` is still collecting past the deadline
    retired: list[Source] = []

    def retire(source: Source) -> None:
        retired.append(source)
        if isinstance(source, Closable):
            source.close()

    new_stays, added = Closable("stays", fail), Closable("added")
    scraper.replace([new_stays, added], retire)
    assert retired == [stays], "a source must not be closed under its running collection"
    text = scraper.scrape(5)
    counts = samples(text)
    assert counts[("lunlat_source_errors_total", (("reason", "read_failed"), ("source", "stays")))] == 2
    assert counts[("lunlat_source_errors_total", (("reason", "read_failed"), ("source", "added")))] == 0
    assert 'source="goes"' not in text
    assert new_stays.calls == 1 and added.calls == 1 and stays.calls == 1
    gate.set()
    assert goes.closed.wait(5)
    assert 'source="goes"' not in scraper.scrape(5)
    scraper.close()


@pytest.fixture
def server() -> Iterator[tuple[Server, list[str | None]]]:
    answers: list[str | None] = [None, "c.yml:2: bad"]
    srv = Server(ListenAddress(LOOPBACK, 0), Scraper([]), reload=lambda: answers.pop(0))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv, answers
    srv.shutdown()
    srv.server_close()


def test_reload_answers_and_other_methods(server: tuple[Server, list[str | None]]) -> None:
    srv, answers = server
    assert post(srv.port) == (200, "")
    assert post(srv.port, method="PUT") == (500, "failed to reload config: c.yml:2: bad\n")
    assert answers == []
    assert post(srv.port, method="DELETE")[0] == 405
    assert post(srv.port, "/metrics")[0] == 405


def test_a_failing_build_is_a_refused_reload_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(reload_module, "build_sources", broken)
    source = FakeSource("kept")
    scraper = Scraper([source])
    reloader = Reloader(None, Settings(tmp_path, tmp_path), scraper, wall_clock=lambda: 1234.5)
    assert reloader.reload() == "internal: RuntimeError: boom"
    text = scraper.scrape(5)
    assert samples(text)[(RELOADED, ())] == 0 and samples(text)[(RELOADED_AT, ())] == 1234.5
    assert source.calls == 1
    scraper.close()


def test_the_diskstats_wrap_offsets_survive_a_reload(tmp_path: Path) -> None:
    """The kernel prints read ms as 32-bit; a rebuilt source must not forget that it wrapped (a fresh
    one would publish the raw value: a counter reset to Prometheus, and rate() a spike of ~2^32 ms)."""
    host = FakeHost(tmp_path)
    host.add_virtio("vda")
    host.stats["vda"] = Stats(reads=1000, read_ms=2**32 - 500)
    host.write()
    config = tmp_path / "lunlat.yaml"
    config.write_text("diskstats: {include: '^vd'}\n")
    settings = Settings(host.procfs, host.sysfs)
    scraper = Scraper(build_sources(load_config(config), settings).sources)
    reloader = Reloader(config, settings, scraper)
    read_time = (
        "lunlat_device_read_time_seconds_total",
        (
            ("database", ""),
            ("device", "vda"),
            ("kind", "lun"),
            ("lun", "vda"),
            ("role", ""),
            ("workload", ""),
        ),
    )
    try:
        assert samples(scraper.scrape(5))[read_time] == (2**32 - 500) / 1000
        host.stats["vda"] = Stats(reads=2000, read_ms=500)  # 1000 ms later: the field wrapped
        host.write()
        assert samples(scraper.scrape(5))[read_time] == (2**32 + 500) / 1000

        config.write_text("diskstats: {include: '^vd'}\nluns:\n  - {match: {device: vda}, role: data}\n")
        assert reloader.reload() is None
        host.stats["vda"] = Stats(reads=3000, read_ms=1500)
        host.write()
        # The role is a label of the device's series too: the same counter, now labelled data.
        as_data = (read_time[0], tuple((k, "data" if k == "role" else v) for k, v in read_time[1]))
        assert samples(scraper.scrape(5))[as_data] == (2**32 + 1500) / 1000, "the wrap was forgotten"
    finally:
        scraper.close()


# --- a reload that cannot hang -------------------------------------------------------------------


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "lunlat.reload" and r.levelno >= level]


def _fields(record: logging.LogRecord) -> dict[str, object]:
    fields = getattr(record, "kv", {})
    return fields if isinstance(fields, dict) else {}


def test_a_config_replaced_by_a_fifo_is_refused_at_once_and_a_good_file_loads_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    host = FakeHost(tmp_path)
    host.add_virtio("vda")
    host.write()
    config = tmp_path / "lunlat.yaml"
    config.write_text("luns:\n  - {match: {device: vda}, role: data}\n")
    settings = Settings(host.procfs, host.sysfs)
    scraper = Scraper(build_sources(load_config(config), settings).sources)
    reloader = Reloader(config, settings, scraper)
    try:
        make_fifo(config)
        with caplog.at_level(logging.INFO, logger="lunlat"):
            problem = finishes(reloader.reload, config)
        assert (
            problem
            == f"{config}: is a FIFO (named pipe), not a regular file: the config file must be a "
            + ("regular file (a symlink to one is fine)")
        )
        assert samples(scraper.scrape(5))[(RELOADED, ())] == 0
        (logged,) = _records(caplog, logging.WARNING)
        assert _fields(logged)["file"] == str(config) and "FIFO" in str(_fields(logged)["err"])
        config.unlink()
        config.write_text("luns:\n  - {match: {device: vda}, role: log}\n")
        assert finishes(reloader.reload) is None
        text = scraper.scrape(5)
        assert samples(text)[(RELOADED, ())] == 1 and 'role="log"' in text
    finally:
        scraper.close()


def test_a_reload_that_hangs_is_cut_at_its_deadline_and_reloads_do_not_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever blocks (a file on a hung NFS mount, a driver import): the caller gets an answer
    within the deadline, the metric says 0, and the reloads that come meanwhile answer at once."""
    gate = threading.Event()
    built: list[Closable] = []

    def build(*_args: object) -> Built:
        source = Closable(f"new{len(built)}")
        built.append(source)
        if len(built) == 1:
            gate.wait(30)  # the first build hangs until the test lets it go
        return Built(sources=[source])

    monkeypatch.setattr(reload_module, "build_sources", build)
    scraper = Scraper([FakeSource("kept")])
    reloader = Reloader(None, Settings(tmp_path, tmp_path), scraper, deadline_seconds=0.5)
    try:
        with caplog.at_level(logging.INFO, logger="lunlat"):
            problem = finishes(reloader.reload)
            assert problem is not None and "did not finish within 0.5 s" in problem
            assert samples(scraper.scrape(5))[(RELOADED, ())] == 0
            (wedged,) = _records(caplog, logging.WARNING)
            assert _fields(wedged)["file"] == "(embedded default)"
            for _ in range(3):  # no new worker each time: an answer at once
                again = finishes(reloader.reload, timeout=0.4)
                assert again is not None and again.startswith("a reload is still running since ")
            assert len(built) == 1
            gate.set()  # the stuck reload ends: too late, its sources are closed unused
            assert built[0].closed.wait(5)
            assert [s.name for s in scraper.sources] == ["kept"]
            wait_until(lambda: reloader.reload() is None, "a reload works again")
        assert [s.name for s in scraper.sources] == [built[-1].name]
        assert samples(scraper.scrape(5))[(RELOADED, ())] == 1
    finally:
        gate.set()
        scraper.close()


@needs("oracledb")
def test_a_reload_that_drops_database_targets_names_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file cut short (a half-written copy, a bad merge) can still parse: the targets it lost are
    named, so the removal is not silent."""
    host = FakeHost(tmp_path)
    host.write()
    targets = "".join(
        f"  - {{name: {name}, dsn: '127.0.0.1:1/ORCL', user: u, password_env: LUNLAT_TEST_RELOAD_NOT_SET}}\n"
        for name in ("ORCL", "CDB2", "HR")
    )
    config = tmp_path / "lunlat.yaml"
    config.write_text("oracle:\n" + targets)
    settings = Settings(host.procfs, host.sysfs)
    scraper = Scraper(build_sources(load_config(config), settings).sources)
    reloader = Reloader(config, settings, scraper)
    try:
        config.write_text("oracle:\n" + targets.splitlines(keepends=True)[0])  # truncated after one
        with caplog.at_level(logging.INFO, logger="lunlat"):
            assert reloader.reload() is None
        (dropped,) = _records(caplog, logging.WARNING)
        assert dropped.getMessage() == "config reload removes database targets"
        assert _fields(dropped)["targets"] == "oracle:CDB2,oracle:HR"
        assert _fields(dropped)["file"] == str(config)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="lunlat"):  # nothing dropped, nothing said
            assert reloader.reload() is None
        assert _records(caplog, logging.WARNING) == []
    finally:
        scraper.close()


def test_post_reload_of_a_config_that_became_a_fifo_answers_at_once(
    tmp_path: Path, exporter_files: tuple[Path, list[str]]
) -> None:
    config, flags = exporter_files
    argv = lunlat_serve(*flags, "--web.enable-lifecycle")
    with ExporterProcess(argv, tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT) as exporter:
        make_fifo(config)
        try:
            status, body = post(exporter.port, timeout=PROMPTLY)
        finally:
            release(config)
        assert status == 500 and f"{config}: is a FIFO (named pipe)" in body
        assert samples(exporter.scrape().text)[(RELOADED, ())] == 0
        os.kill(exporter.pid, signal.SIGHUP)  # by SIGHUP: the same, and nothing stuck
        wait_until(lambda: exporter.log_text().count("config reload failed") == 2, "the SIGHUP refusal")
        config.unlink()
        config.write_text(TWO_LUNS)
        assert post(exporter.port, timeout=PROMPTLY) == (200, "")
        assert lun_db(exporter.scrape().text, "sdb") == "B"
        log = exporter.log_text()
    refusals = [line for line in log.splitlines() if "config reload failed" in line]
    assert len(refusals) == 2 and all(f"file={config}" in line and "FIFO" in line for line in refusals)


def test_a_second_reload_waits_for_the_one_under_way_then_runs_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two reloads at once (a SIGHUP and a POST): the second reads the file after the first."""
    first_started, gate = threading.Event(), threading.Event()
    built: list[str] = []

    def build(*_args: object) -> Built:
        built.append(f"new{len(built)}")
        if len(built) == 1:
            first_started.set()
            gate.wait(10)
        return Built(sources=[FakeSource(built[-1])])

    monkeypatch.setattr(reload_module, "build_sources", build)
    scraper = Scraper([FakeSource("kept")])
    reloader = Reloader(None, Settings(tmp_path, tmp_path), scraper, deadline_seconds=10)
    answers: list[str | None] = []
    first = threading.Thread(target=lambda: answers.append(reloader.reload()))
    first.start()
    assert first_started.wait(5)
    second = threading.Thread(target=lambda: answers.append(reloader.reload()))
    second.start()
    second.join(0.3)
    assert second.is_alive() and built == ["new0"], "the second must wait, not build alongside"
    gate.set()
    first.join(5)
    second.join(5)
    assert answers == [None, None] and built == ["new0", "new1"]
    assert [s.name for s in scraper.sources] == ["new1"]
    scraper.close()
