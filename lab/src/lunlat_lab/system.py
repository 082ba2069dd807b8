"""What the lab does to the host: loop devices, the FUSE mount, processes. Each undo step works
from what the kernel says (sysfs, mountinfo, /proc), not only from the state file, so `down`
cleans up after a crash that left the state file behind or half-written."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from lunlat.topology import parse_mountinfo
from lunlat_lab import native
from lunlat_lab.daemon.libfuse import LibfuseError, require_libfuse3
from lunlat_lab.daemon_engines import DEFAULT_ENGINE, Engine
from lunlat_lab.errors import LabError


def require_host(engine: Engine = DEFAULT_ENGINE) -> None:
    """Refuse clearly when this host cannot run the lab (with this FUSE daemon engine)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("must run as root (it attaches loop devices and mounts a FUSE filesystem)")
    if not Path("/dev/fuse").exists():
        problems.append(
            "/dev/fuse is missing (load the fuse module, or give the container --device /dev/fuse)"
        )
    if not Path("/dev/loop-control").exists():
        problems.append("/dev/loop-control is missing: loop devices are not available")
    for tool, package in (("losetup", "util-linux"), ("fusermount3", "fuse3"), ("fio", "fio")):
        if shutil.which(tool) is None:
            problems.append(f"{tool} is not installed (Debian package {package})")
    try:
        require_libfuse3()
    except LibfuseError as exc:
        problems.append(str(exc))
    if engine == "native":
        try:
            native.binary()
        except native.BuildError as exc:
            problems.append(str(exc))
    if problems:
        raise LabError("the lab cannot run here:\n  - " + "\n  - ".join(problems))


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed: {result.stderr.strip() or result.returncode}")
    return result.stdout.strip()


def attach_loop(image: Path) -> str:
    """A loop device on `image` with direct I/O: without it the loop driver serializes every request
    and queue depth would only add queueing, not parallel I/O."""
    device = _run(["losetup", "--find", "--show", "--direct-io=on", str(image)])
    # A loop device says "write back", so a synchronous write (a log writer's O_SYNC) becomes a write
    # plus flushes in diskstats and Δtime/Δops no longer is the latency of the writes fio timed.
    # Write-through makes each write one request, as on an array LUN with a protected cache.
    cache = Path("/sys/block") / Path(device).name / "queue" / "write_cache"
    try:
        cache.write_text("write through")
    except OSError as exc:
        detach_loop(device)
        raise LabError(f"cannot set {cache} to write through: {exc}") from None
    return device


def detach_loop(device: str) -> None:
    subprocess.run(["losetup", "--detach", device], capture_output=True, check=False)


def loops_under(directory: Path, sysfs: Path = Path("/sys")) -> dict[str, str]:
    """Loop devices (/dev/loopN -> backing file) whose backing file lies under `directory`."""
    prefix = str(directory).rstrip("/") + "/"
    found: dict[str, str] = {}
    for entry in sorted((sysfs / "block").glob("loop*")):
        try:
            backing = (entry / "loop" / "backing_file").read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if backing.startswith(prefix):
            found[f"/dev/{entry.name}"] = backing
    return found


def is_mounted(mountpoint: Path) -> bool:
    table = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return any(point == str(mountpoint) for point, _, _ in table.all())


def unmount(mountpoint: Path) -> None:
    """fusermount3 -u; a dead daemon leaves a mount that only a lazy unmount removes."""
    if not is_mounted(mountpoint):
        return
    subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True, check=False)
    if is_mounted(mountpoint):
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)
    if is_mounted(mountpoint):
        raise LabError(f"cannot unmount {mountpoint}")


def processes_mentioning(marker: str) -> list[psutil.Process]:
    """Processes whose command line names `marker` (the lab's state directory)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.pid != os.getpid() and any(marker in part for part in cmdline):
            found.append(proc)
    return found


# Processes the lab starts and leaves running (the FUSE daemon, fio): `down` stops them by pid. The
# Popen objects are kept so Python does not warn that a child it still runs was forgotten.
_DETACHED: list[subprocess.Popen[bytes]] = []


def detach(proc: subprocess.Popen[bytes]) -> int:
    _DETACHED.append(proc)
    return proc.pid


def stop_process(pid: int, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Signal the process (and its group when it leads one), wait, then SIGKILL."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)
    except psutil.NoSuchProcess:
        pass


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise LabError(f"timed out after {timeout:.0f}s waiting for {what}")
