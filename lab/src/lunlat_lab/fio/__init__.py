"""fio workloads for the lab: job files from the lab description (jobs.py), fio runs (process.py),
and fio's own latency per LUN from its report (report.py); jobs are named as names.py says.

fio's completion latency (clat) is the lab's ground truth: the exporter's Δtime/Δops from
/proc/diskstats is checked against it.

fio 3.33 facts this package relies on (checked on this lab's fio, see tests/unit/test_lab_fio.py):
- `rate_iops=N` caps reads and writes *separately* (N each): on `randrw` it lets a job do up to 2N
  IOPS and turns an 80/20 mix into 50/50. A total cap is written as `rate_iops=<reads>,<writes>`
  split by the mix, which also keeps the mix.
- SIGTERM and SIGINT both make fio end its jobs and still write the JSON report; the exit code is
  then 128, and the --output file has the line `fio: terminating on signal N` before the JSON.
- `wait_for=<job>` holds a job until every process of that job is done, without holding the jobs
  defined after it (`stonewall` would hold them all).
- `runtime` counts after `ramp_time`; I/Os during the ramp are not in the report. A run stopped
  during the ramp reports `total_ios` > 0 with no latency samples (`clat_ns.N` = 0).
"""

from __future__ import annotations

from lunlat_lab.errors import LabError


class FioError(LabError):
    """fio failed, did not finish, or wrote a report the lab cannot read; the message says which."""
