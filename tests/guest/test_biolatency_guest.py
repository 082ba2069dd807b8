"""The biolatency programs on the kernels database hosts run (issue 36): Debian 11's 5.10 and Debian
12's 6.1 under qemu, each against its own /proc/diskstats (biolatency_probe.py says what it runs).

- They load under the kernel's default locked-memory limit (64 KiB on 5.10, which charges BPF maps
  to it: libbpf raises it), as root, with no other help.
- Every read the kernel counted is counted once, in its size class: 8 KiB reads small, 1 MiB reads
  large; the summed latency is at most the kernel's and within 15 % of it (ours ends at
  block_rq_complete, before the bios complete), within its millisecond rounding.
- Queue time: behind mq-deadline, on a device that serves one request at a time in 1 ms, each
  request's latency is its queue time plus that 1 ms: latency - queue time per I/O is 1 ms to within
  the guest's timer slack, and the queue time per I/O is several ms (8 in flight).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.guest import guest

pytestmark = pytest.mark.guest

PROBE = Path(__file__).with_name("biolatency_probe.py")
TIMEOUT = 600.0
DEFAULT_MEMLOCK_5_10 = 64 * 1024  # include/uapi/linux/resource.h MLOCK_LIMIT before 5.16


def _delta(result: dict[str, Any], name: str) -> tuple[int, int, dict[str, dict[str, int]]]:
    """Reads and read ms from diskstats, and the counters per size class, over one phase."""
    (reads0, ms0), (reads1, ms1) = result[name]["diskstats"]
    before, after = result[name]["counters"]
    counters = {size: {k: after[size][k] - before[size][k] for k in after[size]} for size in after}
    return reads1 - reads0, ms1 - ms0, counters


@pytest.fixture(scope="module", params=sorted(guest.KERNELS))
def probed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    kernel = guest.kernel_or_skip(request.param)
    outdir = tmp_path_factory.mktemp(f"biolatency-{request.param}")
    result = guest.run(
        kernel, [sys.executable, str(PROBE), str(outdir / "probe.json")], timeout=TIMEOUT, outdir=outdir
    )
    assert result.returncode == 0, (
        f"the probe failed in the guest:\n{result.output}\n{result.console[-3000:]}"
    )
    probe: dict[str, Any] = json.loads((outdir / "probe.json").read_text())
    probe["kernel"] = kernel
    return probe


def test_the_programs_load_under_the_default_memlock_limit(probed: dict[str, Any]) -> None:
    assert probed["cause"] is None
    assert probed["tracepoints"][-1] == "block_rq_issue"
    if probed["release"].startswith("5.10."):
        assert probed["memlock_before"] == DEFAULT_MEMLOCK_5_10
        assert probed["tracepoints"][0] == "block_rq_complete"  # block_io_done came with 6.5


def test_counts_and_latency_are_the_kernels_by_size_class(probed: dict[str, Any]) -> None:
    for phase, size in (("small", "small"), ("large", "large")):
        reads, read_ms, counters = _delta(probed, phase)
        assert reads > 0
        for each, c in counters.items():
            assert c["count"] == (reads if each == size else 0), (probed["release"], phase, each, c, reads)
        seconds, kernel_seconds = counters[size]["ns"] / 1e9, read_ms / 1000
        # Both clocks start at the request's start_time_ns. On block_rq_complete (both guests: before
        # 6.5) ours stops before the request's bios complete, where diskstats stops: on a loop device
        # in tmpfs under the emulated CPU, 2 to 4 % less (measured: 10 µs of 315 per 8 KiB read on
        # 5.10, 18 µs of 860 per 512 KiB read on 6.1; 11 % less on 6.1 in a loaded CI run), so the
        # bound is the host test's for that hook, 15 %.
        # diskstats shows whole milliseconds (Documentation/admin-guide/iostats.rst): 1 ms either way.
        assert 0.85 * kernel_seconds - 0.001 <= seconds <= kernel_seconds + 0.001, (
            probed["release"],
            phase,
            seconds,
            read_ms,
        )
    assert probed["problems"] == {"unsized_io": 0, "unknown_issue_prototype": 0, "unseen_io": 0}


def test_queue_time_is_the_latency_the_device_did_not_spend(probed: dict[str, Any]) -> None:
    reads, read_ms, counters = _delta(probed, "queued")
    small = counters["small"]
    assert small["count"] == reads > 300  # fio's --number_ios=400, give or take its accounting
    latency, queue = small["ns"] / reads, small["queue_ns"] / reads
    service = latency - queue
    assert 0.9e6 <= service <= 2.0e6, (probed["release"], service)  # ns: the device's 1 ms, plus timer slack
    assert queue >= 3e6, (probed["release"], queue)  # 8 in flight, one served at a time
    # The same end point (block_rq_complete, before the bios complete and diskstats stops): ours is
    # less, by 2.2 % in a loaded CI run on 6.1 (0.26 ms of ~11.9 ms per I/O under emulation), never
    # more; the host test's bound for that hook, 15 %, and diskstats' millisecond rounding.
    assert 0.85 * read_ms - 1 <= small["ns"] / 1e6 <= read_ms + 1, (probed["release"], small, read_ms)
