"""The lab's FUSE daemon: a flat passthrough filesystem over the LUN images whose reads and writes
take an injected service time, so a loop device on `<lun>.img` shows that latency in /proc/diskstats.

    python -m lunlat_lab.daemon --backing DIR --mount DIR --settings FILE

Service model of one I/O on LUN L of array A (see lab/settings.py for the settings file):
wait for one of A's `slots` (FIFO, slots.py), then hold it for `sample + bytes / bandwidth -
overhead` (never below 0, latency.py), the real pread/pwrite done inside that time (injector.py).
`sample` is lognormal with the LUN's mean and coefficient of variation `jitter`. Queueing for slots
is how load moves latency: large reads on one LUN hold A's slots and every other LUN of A waits
behind them. Files not in the settings get no delay. The hold ends at a monotonic deadline, with
late wake-ups corrected on average (sleeper.py). Settings changes are polled (watcher.py).

Logs (logfmt, stderr): `msg=starting`, `msg=mounted` (the kernel's INIT is answered: I/O is served
from now on), `msg="settings reloaded"`, `msg="settings rejected, keeping the previous ones"`,
`msg=stopped reason=signal|unmounted`. SIGTERM, SIGINT or SIGHUP make libfuse end its loop (requests
in flight finish first) and unmount, lazily as root: detach the loop devices first, or their I/O
fails from then on. An unmount from outside (fusermount3 -u) also ends the daemon, with status 0.

Only filesystem.py touches mfusepy (on libfuse 3, libfuse.py), so the rest is tested without FUSE.
"""
