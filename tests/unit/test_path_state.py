"""Multipath path states read where the kernel puts them, an unreadable state kept apart from a failed one.

A path device's directory is reached as `<sysfs>/class/block/<p>` and as `<sysfs>/block/<p>`
(whole devices; torvalds/linux Documentation/admin-guide/sysfs-rules.rst); node_exporter reads the
state only as `/sys/block/<p>/device/state` (prometheus/procfs v0.21.1 blockdevice/dm_multipath.go,
dmMultipathPaths). lunlat reads it under whichever of the two the tree has.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.config import DiskstatsConfig
from lunlat.pathhealth import DEFAULT_INTERVAL
from lunlat.sources.diskstats import DiskstatsSource
from tests.support.device_series import by_device
from tests.support.fake_clock import FakeClock
from tests.support.fake_host import FakeHost

DATA_WWID = "3600a098038303634722b4d59614a6f31"
PATHS = ("sdb", "sdc", "sdd", "sde")


def make_host(root: Path) -> FakeHost:
    h = FakeHost(root)
    for path in PATHS:
        h.add_scsi_disk(path, wwid="naa." + DATA_WWID[1:])
    h.add_multipath("dm-3", alias="ora_data", wwid=DATA_WWID, paths=list(PATHS))
    h.write()
    return h


CLOCK = FakeClock()


def source(host: FakeHost) -> DiskstatsSource:
    return DiskstatsSource(host.procfs, host.sysfs, DiskstatsConfig(), clock=CLOCK)


def paths_and_errors(src: DiskstatsSource) -> tuple[tuple[float, float], int]:
    """((lunlat_lun_paths, lunlat_lun_paths_failed) of dm-3, path_state_unknown errors) of one
    collection, one path state interval after the last (so the states are read again)."""
    CLOCK.now += DEFAULT_INTERVAL
    result = src.collect()
    by_name = {f.spec.name: by_device(f) for f in result.families}
    key = ("ora_data", "dm-3")
    paths = (by_name[contract.LUN_PATHS.name][key], by_name[contract.LUN_PATHS_FAILED.name][key])
    return paths, result.errors["path_state_unknown"]


def test_a_tree_without_class_block_reads_states_under_block(tmp_path: Path) -> None:
    h = make_host(tmp_path)
    shutil.rmtree(h.sysfs / "class")  # only /sys/block, as procfs' fixtures and older kernels lay it out
    src = source(h)
    assert paths_and_errors(src) == ((4, 0), 0)
    h.set_state("sdc", "offline")
    assert paths_and_errors(src) == ((4, 1), 0)


def test_a_tree_without_block_reads_states_under_class_block(tmp_path: Path) -> None:
    h = make_host(tmp_path)
    shutil.rmtree(h.sysfs / "block")
    src = source(h)
    assert paths_and_errors(src) == ((4, 0), 0)
    h.set_state("sdd", "transport-offline")
    assert paths_and_errors(src) == ((4, 1), 0)


def test_a_path_gone_from_both_layouts_is_failed(tmp_path: Path) -> None:
    h = make_host(tmp_path)
    src = source(h)
    paths_and_errors(src)
    h.remove_block_device("sde")  # the map still lists it: a dangling slaves/ link
    h.write()
    assert paths_and_errors(src) == ((4, 1), 0)


@pytest.mark.parametrize("spoil", ["empty", "directory", "unreadable"])
def test_a_state_that_cannot_be_read_is_unknown_not_failed(
    tmp_path: Path, spoil: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = make_host(tmp_path)
    src = source(h)
    assert paths_and_errors(src) == ((4, 0), 0)
    state = h.dir_of("sdc") / "device" / "state"
    if spoil == "empty":
        state.write_text("")
    elif spoil == "directory":
        state.unlink()
        state.mkdir()
    else:
        state.unlink()
        state.symlink_to(state.parent / "no-such-file")  # open() fails as an unreadable attribute does
    with caplog.at_level(logging.WARNING):
        assert paths_and_errors(src) == ((4, 0), 1)
        assert paths_and_errors(src) == ((4, 0), 1)  # counted at every scrape
    warned = [r for r in caplog.records if "path state" in r.getMessage()]
    assert len(warned) == 1  # logged once
    state.unlink() if spoil != "directory" else state.rmdir()
    h.set_state("sdc", "offline")
    assert paths_and_errors(src) == ((4, 1), 0)


def test_a_path_device_without_a_state_attribute_is_neither_failed_nor_an_error(tmp_path: Path) -> None:
    h = FakeHost(tmp_path)
    h.add_virtio("vda")
    h.add_virtio("vdb")
    h.add_multipath("dm-3", alias="ora_data", wwid=DATA_WWID, paths=["vda", "vdb"])
    h.write()
    assert paths_and_errors(source(h)) == ((2, 0), 0)
