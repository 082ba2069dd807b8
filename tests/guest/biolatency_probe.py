"""Run in a guest by test_biolatency_guest.py (python biolatency_probe.py RESULT.json): lunlat's
biolatency engine on the guest's kernel, against that kernel's own /proc/diskstats.

- The locked-memory limit before the load (the kernel's default for init) and after it, and what
  the engine attached to.
- A loop device on a file in the guest's tmpfs: 8 KiB random direct reads by fio, then 1 MiB direct
  reads by dd, each phase's diskstats read count and time beside the engine's counters per size
  class. A loop device takes 1 MiB requests whole (max_sectors_kb 1280 on both guests); null_blk's
  default device splits them at 127.5 KiB (measured), and the classes are the requests' sizes.
- A null_blk device made through configfs (Documentation/block/null_blk.rst, "configfs"; null_blk is
  loaded by the guest's init): one request at a time on the
  device (hw_queue_depth 1), each completed 1 ms after it is issued (irqmode 2, a timer;
  completion_nsec), behind mq-deadline (Documentation/block/deadline-iosched.rst), which keeps the
  requests fio queues 8 deep until the device takes them: the queue time is the rest of each
  request's latency.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from lunlat.config import BiolatencyConfig
from lunlat.sources import biolatency

NULLB_CONFIG = Path("/sys/kernel/config/nullb")
SERVICE_NS = 1_000_000
# Documentation/admin-guide/iostats.rst: after major, minor and name, field 1 is reads completed and
# field 4 the milliseconds spent reading.
READS, READ_MS = 3, 6


def diskstats(name: str) -> tuple[int, int]:
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if fields[2] == name:
            return int(fields[READS]), int(fields[READ_MS])
    raise LookupError(f"{name} has no line in /proc/diskstats")


def dev_t(name: str) -> int:
    major, minor = Path(f"/sys/class/block/{name}/dev").read_text().split(":")
    return biolatency.kernel_dev(int(major), int(minor))


def read_counters(engine: biolatency.Engine, name: str) -> dict[str, dict[str, int]]:
    """size class -> the reads' count, summed latency and queue time (ns) of device `name`."""
    dev = dev_t(name)
    out = {}
    for (d, op, size), c in engine.counters().items():
        if d == dev and op == 0:
            out[biolatency.SIZES[size]] = {"count": sum(c.buckets), "ns": c.ns, "queue_ns": c.queue_ns}
    return out


def phase(engine: biolatency.Engine, name: str, argv: list[str]) -> dict[str, object]:
    """Run `argv`; the device's diskstats and the engine's counters on both sides."""
    before = (diskstats(name), read_counters(engine, name))
    subprocess.run(argv, check=True, capture_output=True)
    time.sleep(0.2)
    after = (diskstats(name), read_counters(engine, name))
    return {"diskstats": [before[0], after[0]], "counters": [before[1], after[1]]}


def fio(device: str, block: str, depth: int, ios: int) -> list[str]:
    # fio(1): --direct=1 (O_DIRECT), libaio keeps --iodepth requests in flight, --number_ios stops
    # after that many.
    return [
        "fio", "--name=probe", f"--filename={device}", "--rw=randread", f"--bs={block}", "--direct=1",
        "--ioengine=libaio", f"--iodepth={depth}", "--size=256m", f"--number_ios={ios}", "--output-format=json",
    ]  # fmt: skip


def slow_nullb() -> str:
    """A null_blk device through configfs; its disk's name, found as the disk that appears (nullb<index>
    on 5.10, the configfs name on later kernels)."""
    disks = set(Path("/sys/block").iterdir())
    device = NULLB_CONFIG / "lunlat"
    device.mkdir()
    for attribute, value in (
        ("size", "1024"),  # MiB
        ("irqmode", "2"),
        ("completion_nsec", str(SERVICE_NS)),
        ("hw_queue_depth", "1"),
        ("submit_queues", "1"),
        ("power", "1"),
    ):
        (device / attribute).write_text(value)
    (disk,) = set(Path("/sys/block").iterdir()) - disks
    (disk / "queue" / "scheduler").write_text("mq-deadline")
    # With a scheduler a request is allocated (and its start_time_ns taken) against nr_requests, by
    # default twice the device's depth (block/blk-mq-sched.c, blk_mq_init_sched): raised, so that all
    # of fio's 8 are started and wait in the scheduler for the device's one tag.
    (disk / "queue" / "nr_requests").write_text("64")
    return disk.name


def main() -> None:
    out: dict[str, object] = {"release": Path("/proc/sys/kernel/osrelease").read_text().strip()}
    out["memlock_before"] = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    engine = biolatency.Engine(BiolatencyConfig(enabled=True, max_devices=8))
    out["cause"] = engine.load()
    out["memlock_after"] = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    out["tracepoints"] = engine.tracepoints
    if out["cause"] is None:
        slow = slow_nullb()
        backing = Path("/tmp/lun.img")  # noqa: S108 - the guest's own tmpfs
        with backing.open("wb") as f:
            f.truncate(256 << 20)
        loop = subprocess.run(
            ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=True
        ).stdout.strip()
        name = Path(loop).name
        engine.sync([dev_t(name), dev_t(slow)])
        time.sleep(0.2)
        out["small"] = phase(engine, name, fio(loop, "8k", 4, 4000))
        out["large"] = phase(
            engine, name, ["dd", f"if={loop}", "of=/dev/null", "bs=1M", "count=64", "iflag=direct"]
        )
        out["queued"] = phase(engine, slow, fio(f"/dev/{slow}", "4k", 8, 400))
        out["problems"] = engine.problems()
        out["missed"] = engine.missed()
        engine.close()
    Path(sys.argv[1]).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
