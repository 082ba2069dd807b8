"""The FUSE operations: a flat passthrough over the LUN images, each read and write served by the
injector, and the mount through mfusepy on libfuse 3."""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

from lunlat import logs
from lunlat_lab.config import LabConfig
from lunlat_lab.daemon.injector import Injector
from lunlat_lab.daemon.libfuse import mfusepy_on_libfuse3

log = logs.get("lunlat.lab.daemon.filesystem")  # under the `lunlat` logger that logs.setup() configures

# Requests the daemon serves at once (libfuse worker threads, the kernel's background queue). The
# default 10 threads / 12 background requests would queue I/O ahead of the arrays' slots and cap
# every array below its configured size; this is above what the lab's workloads keep in flight.
DEFAULT_MAX_INFLIGHT = 128
_IMAGE_SUFFIX = LabConfig.image_name("")
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2  # <sys/stat.h>


def lun_of(name: str) -> str | None:
    """The LUN a file serves (`<lun>.img`), or None for any other file."""
    if name.endswith(_IMAGE_SUFFIX) and len(name) > len(_IMAGE_SUFFIX):
        return name[: -len(_IMAGE_SUFFIX)]
    return None


def _error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class LabFS:
    """mfusepy operations: the regular files of `backing`, flat, read and written in place.

    Duck-typed rather than subclassing mfusepy.Operations so this module imports without libfuse
    (mfusepy loads it at import); mfusepy registers exactly the methods defined here, and turns an
    OSError into the negative errno libfuse expects. Names cannot change: no create, unlink or rename
    (EPERM); data, sizes and times can.
    """

    use_ns = True  # times in integer ns (mfusepy warns and loses precision otherwise)

    def __init__(self, backing: Path, injector: Injector, max_inflight: int = DEFAULT_MAX_INFLIGHT) -> None:
        self.backing = backing
        self.injector = injector
        self.max_inflight = max_inflight
        self._luns: dict[int, str | None] = {}  # open file handle -> LUN, looked up once per open
        self._thread = threading.local()

    def _path(self, path: str) -> Path:
        name = path.lstrip("/")
        if not name or "/" in name or name in (".", ".."):
            raise _error(errno.ENOENT)
        return self.backing / name

    @staticmethod
    def _attrs(st: os.stat_result) -> dict[str, Any]:
        return {
            "st_mode": st.st_mode,
            "st_nlink": st.st_nlink,
            "st_size": st.st_size,
            "st_uid": st.st_uid,
            "st_gid": st.st_gid,
            "st_blocks": st.st_blocks,
            "st_blksize": st.st_blksize,
            "st_atime": st.st_atime_ns,
            "st_mtime": st.st_mtime_ns,
            "st_ctime": st.st_ctime_ns,
        }

    def _keep_thread_state(self) -> None:
        """Keep this libfuse worker's Python thread state between callbacks.

        ctypes wraps every callback from a thread Python did not create in PyGILState_Ensure /
        Release, which creates and destroys a thread state (and maps and unmaps its frame stack)
        on every call. One extra Ensure, never released, keeps it alive for the thread's life:
        measured here, a quarter less CPU per I/O and about 25 % more IOPS at queue depth 16.
        A threading.local lives in the thread state, so it says whether this one is already kept.
        """
        if not getattr(self._thread, "kept", False):
            ctypes.pythonapi.PyGILState_Ensure()
            self._thread.kept = True

    # lifecycle

    def init_with_config(self, conn: Any, config: Any) -> None:
        # The kernel sends loop's async direct I/O as background requests, 12 at most by default:
        # raise that so the arrays' slots, not the FUSE connection, decide how many run at once.
        if conn is not None:
            conn.max_background = self.max_inflight
            conn.congestion_threshold = self.max_inflight
        log.info("mounted", max_inflight=self.max_inflight)

    # metadata

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if path == "/":
            return self._attrs(self.backing.stat())
        st = os.fstat(fh) if fh is not None else self._path(path).lstat()
        if not stat.S_ISREG(st.st_mode):
            raise _error(errno.ENOENT)  # only regular files are exposed: the tree is flat
        return self._attrs(st)

    def readdir(self, path: str, fh: int) -> list[str]:
        if path != "/":
            raise _error(errno.ENOTDIR)
        names = [".", ".."]
        with os.scandir(self.backing) as entries:
            names.extend(e.name for e in entries if e.is_file(follow_symlinks=False))
        return names

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.backing)
        return {
            "f_bsize": sv.f_bsize, "f_frsize": sv.f_frsize, "f_blocks": sv.f_blocks, "f_bfree": sv.f_bfree,
            "f_bavail": sv.f_bavail, "f_files": sv.f_files, "f_ffree": sv.f_ffree, "f_favail": sv.f_favail,
            "f_namemax": sv.f_namemax,
        }  # fmt: skip

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            target = self._path(path)
            if not stat.S_ISREG(target.lstat().st_mode):
                raise _error(errno.ENOENT)
            os.truncate(target, length)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        target = self._path(path)
        st = target.lstat()
        now = time.time_ns()
        # libfuse passes `touch`'s "now" and "leave as is" as tv_sec 0 with these tv_nsec markers,
        # which mfusepy folds into plain nanoseconds.
        atime, mtime = (
            now if value == UTIME_NOW else current if value == UTIME_OMIT else value
            for value, current in zip(
                times or (UTIME_NOW, UTIME_NOW), (st.st_atime_ns, st.st_mtime_ns), strict=True
            )
        )
        os.utime(target, ns=(atime, mtime), follow_symlinks=False)
        return 0

    # data

    def open(self, path: str, flags: int) -> int:
        target = self._path(path)
        if not stat.S_ISREG(target.lstat().st_mode):
            raise _error(errno.ENOENT)
        # Only the access mode and O_TRUNC (libfuse asks the kernel for atomic O_TRUNC, so it comes
        # here) are passed on: O_DIRECT from the loop driver is about the FUSE file (direct_io
        # already sends every I/O here); on the backing file it would demand aligned buffers and be
        # refused by some filesystems (tmpfs), and the backing is only storage.
        fd = os.open(target, (flags & (os.O_ACCMODE | os.O_TRUNC)) | os.O_CLOEXEC)
        self._luns[fd] = lun_of(target.name)
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._keep_thread_state()
        return self.injector.serve(self._luns.get(fh), "read", size, lambda: os.pread(fh, size, offset))

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._keep_thread_state()
        return self.injector.serve(
            self._luns.get(fh), "write", len(data), lambda: os.pwrite(fh, data, offset)
        )

    def flush(self, path: str, fh: int) -> int:
        return 0  # nothing is buffered here: writes went to the backing file already

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        # Deliberately not passed on: the images are scratch space removed at `lab down`, and a real
        # fsync would add the host disk's latency to the loop device's flushes, which the lab controls.
        return 0

    def release(self, path: str, fh: int) -> int:
        self._luns.pop(fh, None)
        os.close(fh)
        return 0

    # the namespace is fixed: the caller creates the images in the backing directory beforehand

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        raise _error(errno.EPERM)

    def mknod(self, path: str, mode: int, dev: int) -> int:
        raise _error(errno.EPERM)

    def mkdir(self, path: str, mode: int) -> int:
        raise _error(errno.EPERM)

    def unlink(self, path: str) -> int:
        raise _error(errno.EPERM)

    def rmdir(self, path: str) -> int:
        raise _error(errno.EPERM)

    def rename(self, old: str, new: str) -> int:
        raise _error(errno.EPERM)

    def symlink(self, target: str, source: str) -> int:
        raise _error(errno.EPERM)

    def link(self, target: str, source: str) -> int:
        raise _error(errno.EPERM)

    def chmod(self, path: str, mode: int) -> int:
        raise _error(errno.EPERM)

    def chown(self, path: str, uid: int, gid: int) -> int:
        raise _error(errno.EPERM)


def mount(fs: LabFS, mountpoint: Path) -> None:
    """Serve `fs` on `mountpoint` until unmounted or signalled (blocks; libfuse owns the signals)."""
    mfusepy_on_libfuse3().FUSE(
        fs,
        str(mountpoint),
        foreground=True,
        nothreads=False,  # multithreaded: every I/O waits in its own worker thread
        direct_io=True,  # no page cache: every read and write of the loop device reaches `fs`
        fsname="lunlat-lab",
        max_threads=fs.max_inflight,
        # Idle workers are kept: a worker that exits and is re-created costs a thread and a Python
        # thread state, paid on the I/O path.
        max_idle_threads=fs.max_inflight,
    )
