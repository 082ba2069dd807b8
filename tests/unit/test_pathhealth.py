"""Path states read off the scrape path (pathhealth.PathWatcher): the thread keeps the reading
fresh, a scrape never serves one `interval` old, and the interval stays within its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from lunlat import cli, pathhealth
from lunlat.model import LabelSet
from lunlat.pathhealth import PathWatcher
from tests.clock import FakeClock
from tests.waiting import wait_until

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
