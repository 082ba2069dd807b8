"""Small O_DIRECT reads of a device, each timed around its system call, from a process of their own:
what a database's single-block read waits for, without what the test's own process adds.

A probe thread in the test's process timed its reads with the test's other threads (the webhook
receiver, the Prometheus polls) able to hold the GIL when the read returned, and a thread waiting
for the GIL can wait out its switch interval (5 ms, `sys.getswitchinterval()`); a fresh-clone CI run
on 2026-11-30 read 446 reads at a mean of 1.086 ms with a p99 of 5.7 ms where the LUN serves about
0.7 ms (not reproduced alone here, so not proven to be the GIL). So the reads run in a child process
with one thread, and each is also given the time its thread waited for a CPU while it lasted: field 2 of
/proc/<pid>/schedstat, "time spent waiting on a runqueue (in nanoseconds)"
(Documentation/scheduler/sched-stats.rst). `TimedRead.own` is the read's time less that wait: the time
the device and the I/O path took, which is what the kernel's block-layer counters time too.

    python -m tests.support.timed_reads DEVICE SIZE_BYTES EVERY_S BLOCK_BYTES

prints `START TOOK WAITED` per read (seconds; START on the monotonic clock, which is the same in
every process of the host) until its stdin closes.
"""

from __future__ import annotations

import mmap
import os
import random
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[2]
SCHEDSTAT = "/proc/thread-self/schedstat"


@dataclass(frozen=True, slots=True)
class TimedRead:
    start: float  # monotonic seconds
    took: float  # seconds around the system call
    waited: float  # seconds of it the reading thread waited for a CPU

    @property
    def own(self) -> float:
        return self.took - self.waited


@dataclass
class TimedReads:
    """The child process, started on entry, its reads collected as they come."""

    device: str
    size: int
    every: float
    block: int
    reads: list[TimedRead] = field(default_factory=list)
    _child: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None
    _problems: list[str] = field(default_factory=list)

    def __enter__(self) -> TimedReads:
        argv = [sys.executable, "-m", "tests.support.timed_reads", self.device, str(self.size),
                f"{self.every:g}", str(self.block)]  # fmt: skip
        self._child = subprocess.Popen(
            argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._reader = threading.Thread(target=self._collect, name="timed-reads", daemon=True)
        self._reader.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        child = self._child
        if child is None:
            return
        assert child.stdin is not None
        child.stdin.close()  # the child's signal to stop
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if self._reader is not None:
            self._reader.join(timeout=10)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()

    def _collect(self) -> None:
        child = self._child
        assert child is not None and child.stdout is not None and child.stderr is not None
        for line in child.stdout:
            start, took, waited = (float(x) for x in line.split())
            self.reads.append(TimedRead(start, took, waited))
        if problem := child.stderr.read().strip():
            self._problems.append(problem)

    def between(self, start: float, end: float) -> list[TimedRead]:
        """The reads started in [start, end) (monotonic); a failed child fails here, with its stderr."""
        assert self._child is not None, "not started"
        status = self._child.poll()
        assert status is None or status == 0, f"the reads' process ended with {status}: {self._problems}"
        assert not self._problems, self._problems
        return [read for read in list(self.reads) if start <= read.start < end]


def _waited_ns(schedstat: int) -> int:
    """Field 2 of the thread's schedstat: its time on a runqueue so far, in nanoseconds."""
    return int(os.pread(schedstat, 128, 0).split()[1])


def main(argv: list[str]) -> int:
    device, size, every, block = argv[0], int(argv[1]), float(argv[2]), int(argv[3])
    rng = random.Random(37)  # offsets, not secrets
    buffer = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    schedstat = os.open(SCHEDSTAT, os.O_RDONLY)
    try:
        # Paced by stdin: readable means closed, the parent's signal to stop.
        while not select.select([sys.stdin], [], [], every)[0]:
            offset = rng.randrange(size // block) * block
            # In this order a preemption between two steps counts in `took` and maybe not in
            # `waited`, never the other way round: `own` can come out high, never low.
            start = time.monotonic()
            waited = _waited_ns(schedstat)
            done = os.preadv(fd, [buffer], offset)
            waited = _waited_ns(schedstat) - waited
            took = time.monotonic() - start
            if done != block:
                print(f"short read of {device}: {done} of {block} bytes at {offset}", file=sys.stderr)
                return 1
            print(f"{start:.9f} {took:.9f} {waited / 1e9:.9f}", flush=True)
    finally:
        os.close(schedstat)
        os.close(fd)
        buffer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
