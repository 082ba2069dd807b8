"""Real kernel: the issue program takes the request from the argument the kernel's BTF says it is in,
shown on BTFs built for it (tests/integration/custom_btf.py), since no kernel obtainable here still has
block_rq_issue's (request_queue, request) prototype (Debian 11's 5.10 took 5.11's change at 5.10.137).

- This kernel's own BTF: the program reads the first argument, loads, and times the queue.
- A BTF whose block_rq_issue is (request_queue, request): the program reads the second argument. The
  verifier, which checks a BTF tracepoint's arguments against the running kernel's prototype (one
  argument here), refuses it naming that argument: the decision followed the BTF.
- A BTF with a prototype the program does not know: it reads no argument, loads, and counts
  `unknown_issue_prototype` for every issued request of a published device, instead of a silent 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lunlat.config import BiolatencyConfig
from lunlat.sources import biolatency
from lunlat.sources.bpf import libbpf, object_path
from tests.integration import custom_btf
from tests.integration.test_real_kernel import attached_loop
from tests.support.biolatency_counts import by_op

pytestmark = pytest.mark.kernel

VMLINUX = Path("/sys/kernel/btf/vmlinux")


@pytest.fixture(autouse=True)
def _runs_here() -> None:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("needs root on Linux (BPF programs, loop devices)")
    cause = biolatency.unavailable_cause()
    if cause:
        pytest.skip(cause)


def _issue_only(custom: Path | None) -> libbpf.BpfObject:
    obj = libbpf.BpfObject(object_path(), custom)
    obj.set_autoload(biolatency.DONE, False)
    obj.set_autoload(biolatency.COMPLETE, False)
    return obj


def test_the_kernels_own_prototype_loads() -> None:
    obj = _issue_only(None)
    try:
        obj.load()
    finally:
        obj.close()


def test_the_queue_first_prototype_reads_the_second_argument(tmp_path: Path) -> None:
    btf = custom_btf.with_prototype(
        VMLINUX, "block_rq_issue", ["request_queue", "request"], tmp_path / "q_rq.btf"
    )
    obj = _issue_only(btf)
    try:
        with pytest.raises(libbpf.LibbpfError) as refused:
            obj.load()
    finally:
        obj.close()
    # kernel/bpf/btf.c btf_ctx_access: "func '%s' doesn't have %d-th argument".
    assert re.search(r"func 'block_rq_issue' doesn't have \d+-th argument", str(refused.value)), refused.value


def test_an_unknown_prototype_is_counted_not_a_silent_zero(tmp_path: Path) -> None:
    btf = custom_btf.with_prototype(VMLINUX, "block_rq_issue", [None], tmp_path / "int.btf")
    engine = biolatency.Engine(BiolatencyConfig(enabled=True), custom_btf=btf)
    try:
        assert engine.load() is None
        with attached_loop(tmp_path / "lun.img", 16 << 20) as device:
            major, minor = map(int, Path(f"/sys/class/block/{Path(device).name}/dev").read_text().split(":"))
            assert engine.sync([biolatency.kernel_dev(major, minor)]) == []
            subprocess.run(
                ["dd", f"if={device}", "of=/dev/null", "bs=4k", "count=32", "iflag=direct"],
                check=True,
                capture_output=True,
            )
            problems = engine.problems()
            counters = by_op(engine.counters())
    finally:
        engine.close()
    assert problems["unknown_issue_prototype"] >= 32
    read = counters[(biolatency.kernel_dev(major, minor), 0)]
    assert sum(read.buckets) >= 32  # the completions are still timed
    assert read.queue_ns == 0  # no queue time taken, and the count above says why
