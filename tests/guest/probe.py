"""Run in a guest by test_guest.py (python probe.py RESULT.json): the kernel's release, whether it has
BTF, whether TCP over loopback works, and fio's 4 KiB random direct reads of a loop device against the
device's line of /proc/diskstats.

Only the standard library: the guest runs the host's interpreter from the host's root, read-only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

BACKING_BYTES = 64 << 20
FIO_SECONDS = 3
# Documentation/admin-guide/iostats.rst: a /proc/diskstats line is the major and minor numbers, the
# device name, then its "Field 1 -- # of reads completed".
NAME_FIELD = 2
READS_FIELD = 3


def reads_completed(device: str) -> int:
    name = Path(device).name
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if fields[NAME_FIELD] == name:
            return int(fields[READS_FIELD])
    raise LookupError(f"{name} has no line in /proc/diskstats")


def fio_read_ios(device: str) -> int:
    """fio's count of completed reads (its JSON output: jobs[].read.total_ios)."""
    # fio(1): --direct=1 is O_DIRECT (no page cache: every read reaches the device); --time_based
    # with --runtime runs for that long; psync is one pread at a time.
    argv = [
        "fio",
        "--name=probe",
        f"--filename={device}",
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        "--ioengine=psync",
        f"--runtime={FIO_SECONDS}",
        "--time_based",
        "--output-format=json",
    ]
    report = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    return sum(int(job["read"]["total_ios"]) for job in report["jobs"])


def loopback_works() -> bool:
    """A TCP connection over 127.0.0.1, as the project's tests make (lo must be up)."""
    try:
        with (
            socket.create_server(("127.0.0.1", 0)) as server,
            socket.create_connection(server.getsockname(), timeout=5),
        ):
            return True
    except OSError:
        return False


def main(result: Path) -> None:
    backing = Path(tempfile.mkdtemp()) / "lun.img"
    with backing.open("wb") as handle:
        handle.truncate(BACKING_BYTES)
    # losetup(8): -f the first free device, --show prints its name.
    device = subprocess.run(
        ["losetup", "-f", "--show", str(backing)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        before = reads_completed(device)
        ios = fio_read_ios(device)
        after = reads_completed(device)
    finally:
        subprocess.run(["losetup", "-d", device], check=True)
    summary = {
        "release": os.uname().release,
        "btf": Path("/sys/kernel/btf/vmlinux").is_file(),
        "loopback": loopback_works(),
        "device": device,
        "fio_read_ios": ios,
        "diskstats_reads": after - before,
    }
    result.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
