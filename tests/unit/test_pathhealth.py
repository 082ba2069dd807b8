"""Path states read off the scrape path (pathhealth.PathWatcher): the thread keeps the reading
fresh, a scrape never serves one `interval` old, and the interval stays within its bounds."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lunlat import cli, pathhealth
from lunlat.model import LabelSet
from lunlat.pathhealth import PathWatcher
from tests.support.fake_clock import FakeClock
from tests.support.polling import wait_until

LABELS = LabelSet(("lun", "device"), ("ora_data", "dm-3"))


def state_files(tmp_path: Path, *states: str) -> tuple[str, ...]:
    files = []
    for i, state in enumerate(states):
        device = tmp_path / f"sd{i}" / "device"
        device.mkdir(parents=True)
        (device / "state").write_text(state + "\n")
        files.append(str(device / "state"))
    return tuple(files)


def failed(watcher: PathWatcher) -> float:
    reading = watcher.reading()
    (family,) = [f for f in reading.families if f.spec.name == "lunlat_lun_paths_failed"]
    return family.samples[0][2]


def test_the_thread_reads_a_lost_path_without_a_scrape_reading_it(tmp_path: Path) -> None:
    files = state_files(tmp_path, "running", "running")
    clock = FakeClock()  # never moves: a scrape alone would serve its first reading forever
    watcher = PathWatcher(pathhealth.MIN_INTERVAL, clock, background=True)
    watcher.watch([(LABELS, files)])
    try:
        assert failed(watcher) == 0
        Path(files[1]).write_text("offline\n")
        wait_until(lambda: failed(watcher) == 1, "the thread to read the offline path")
    finally:
        watcher.close()


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The clock of every reading of the states, by the thread or a scrape."""
    reads: list[float] = []
    real = pathhealth.read_states

    def counted(multipaths: pathhealth.Multipaths, now: float) -> pathhealth.Reading:
        reads.append(now)
        return real(multipaths, now)

    monkeypatch.setattr(pathhealth, "read_states", counted)
    return reads


def test_a_path_lost_just_after_a_scrape_is_failed_in_the_next_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = state_files(tmp_path, "running", "running")
    clock = FakeClock()
    watcher = PathWatcher(clock=clock, background=False)  # the default cadence, steps driven here
    watcher.watch([(LABELS, files)])
    reads = counting_reads(monkeypatch)
    first = clock.now
    assert failed(watcher) == 0
    clock.now += 0.1
    Path(files[0]).write_text("offline\n")
    # The thread's steps until the next scrape, 15 s (MAX_INTERVAL) later: it keeps reading, since
    # someone scrapes.
    while (pause := watcher.pause()) is not None and clock.now + pause < first + pathhealth.MAX_INTERVAL:
        clock.now += pause
        watcher.refresh()
    by_thread = len(reads)
    clock.now = first + pathhealth.MAX_INTERVAL
    assert failed(watcher) == 1
    assert len(reads) == by_thread  # the scrape served the thread's reading, it read nothing itself


def test_no_one_scraping_the_thread_sleeps_and_a_scrape_wakes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = state_files(tmp_path, "running", "running")
    clock = FakeClock()
    watcher = PathWatcher(pathhealth.MIN_INTERVAL, clock, background=True)
    watcher.watch([(LABELS, files)])
    reads = counting_reads(monkeypatch)
    try:
        assert failed(watcher) == 0  # starts the thread
        wait_until(lambda: len(reads) >= 2, "the thread to read while scraped")
        clock.now += pathhealth.IDLE_AFTER  # no scrape since
        assert watcher.pause() is None
        wait_until(lambda: not watcher._wake.is_set(), "the thread to go to sleep")
        # Asleep: a dozen of its steps (MIN_INTERVAL / 2 each) pass without a reading.
        idle_reads = len(reads)
        threading.Event().wait(12 * pathhealth.MIN_INTERVAL / 2)
        assert len(reads) == idle_reads
        # A scrape wakes it: the reading it served is refreshed by the thread, not by later scrapes.
        failed(watcher)
        Path(files[1]).write_text("offline\n")
        wait_until(lambda: failed(watcher) == 1, "the woken thread to read the offline path")
    finally:
        watcher.close()


def test_a_closed_watcher_starts_no_thread(tmp_path: Path) -> None:
    watcher = PathWatcher(clock=FakeClock(), background=True)
    watcher.close()
    watcher.watch([(LABELS, state_files(tmp_path, "running"))])
    assert failed(watcher) == 0
    assert watcher._thread is None


def test_no_thread_without_multipath_maps() -> None:
    watcher = PathWatcher(clock=FakeClock(), background=True)
    watcher.watch([])
    assert watcher.reading().families == []
    assert watcher._thread is None
    watcher.close()


def test_a_new_set_of_maps_is_read_at_once(tmp_path: Path) -> None:
    clock = FakeClock()
    watcher = PathWatcher(clock=clock, background=False)
    watcher.watch([(LABELS, state_files(tmp_path / "a", "running"))])
    assert failed(watcher) == 0
    watcher.watch([(LABELS, state_files(tmp_path / "b", "offline", "running"))])
    assert failed(watcher) == 1


@pytest.mark.parametrize("interval", [0.1, 0.0, 15.5, 60.0])
def test_an_interval_out_of_bounds_is_refused(interval: float) -> None:
    with pytest.raises(ValueError, match=r"between 0\.5 and 15 s"):
        PathWatcher(interval)


def test_the_flag_refuses_an_interval_above_the_scrape_interval() -> None:
    parser = cli._parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--collector.diskstats.path-state-interval", "30"])
    args = parser.parse_args(["serve", "--collector.diskstats.path-state-interval", "2.5"])
    assert cli.source_settings(args).path_state_interval == 2.5
    assert (
        cli.source_settings(parser.parse_args(["serve"])).path_state_interval == pathhealth.DEFAULT_INTERVAL
    )
