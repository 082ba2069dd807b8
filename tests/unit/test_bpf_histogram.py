"""The BPF programs' arithmetic (sources/bpf/histogram.h), compiled for this host and run: the bucket of
a latency and the size class of a request agree with lunlat's contract at every edge, and the layout
the programs write is the one the source reads."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lunlat import contract
from lunlat.sources import biolatency

HEADER = Path(biolatency.__file__).parent / "bpf" / "histogram.h"
CC = shutil.which("cc")

HARNESS = """
#include <stdio.h>
#include <linux/types.h>
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#include "histogram.h"
int main(void)
{
	unsigned long long ns;
	unsigned int bytes;
	char kind;
	while (scanf(" %c", &kind) == 1) {
		if (kind == 'b' && scanf("%llu", &ns) == 1)
			printf("%u\\n", bucket_of(ns));
		else if (kind == 's' && scanf("%u", &bytes) == 1)
			printf("%u\\n", size_class(bytes));
	}
	return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CC is None:
        pytest.skip("no C compiler (Debian: gcc)")
    tmp = tmp_path_factory.mktemp("histogram")
    (tmp / "main.c").write_text(HARNESS)
    exe = tmp / "histogram"
    subprocess.run(
        [CC, "-O2", "-Wall", "-Werror", "-I", str(HEADER.parent), "-o", str(exe), str(tmp / "main.c")],
        check=True,
    )
    return exe


def _ask(exe: Path, queries: list[str]) -> list[int]:
    out = subprocess.run(
        [str(exe)], input="\n".join(queries), capture_output=True, text=True, check=True
    ).stdout
    return [int(line) for line in out.split()]


def _expected_bucket(ns: int) -> int:
    """The contract's bucket of a latency: the first bound it is below (bounds exclusive), else +Inf,
    with the programs' integer units ns * 1024 // 10^6 (ms/1024)."""
    units = ns * 1024 // 1_000_000
    for i, bound in enumerate(contract.BIO_BUCKETS):
        if units < round(bound * 1_024_000):
            return i
    return len(contract.BIO_BUCKETS)


def test_every_bound_is_an_edge_exactly(harness: Path) -> None:
    latencies = [0, 1, 7812, 7813, 999_999, 1_000_000, 1_000_001, 10**12]
    for bound in contract.BIO_BUCKETS:
        edge = round(bound * 1e9)
        latencies += [edge - 1, edge, edge + 1]
    got = _ask(harness, [f"b {ns}" for ns in latencies])
    assert got == [_expected_bucket(ns) for ns in latencies]
    # The goal: 999,999 ns is at or below 1 ms, 1,000,000 ns above it (le is exclusive).
    goal = contract.BIO_BUCKETS.index(0.001)
    assert got[latencies.index(999_999)] == goal
    assert got[latencies.index(1_000_000)] == goal + 1
    assert got[latencies.index(10**12)] == len(contract.BIO_BUCKETS)  # +Inf


def test_size_classes_have_the_contracts_edges(harness: Path) -> None:
    sizes = [0, 512, 4096, 8192, 16384, 16385, 65536, 131071, 131072, 1 << 20, 1 << 31]
    got = _ask(harness, [f"s {n}" for n in sizes])
    assert [contract.BIO_SIZES[i] for i in got] == [biolatency.size_class(n) for n in sizes]
    assert [contract.BIO_SIZES[i] for i in got[4:6]] == ["small", "middle"]  # 16 KiB is small
    assert [contract.BIO_SIZES[i] for i in got[7:9]] == ["middle", "large"]  # 128 KiB is large


def test_the_layout_is_the_contracts() -> None:
    defines = dict(re.findall(r"^#define (\w+) (\w+)", HEADER.read_text(), re.MULTILINE))
    assert int(defines["BUCKETS"]) == len(contract.BIO_BUCKETS) + 1 == biolatency.BUCKETS
    assert int(defines["OPS"]) == len(contract.BIO_OPS)
    assert int(defines["SIZE_CLASSES"]) == len(contract.BIO_SIZES)
    assert int(defines["SMALL_MAX"]) == contract.BIO_SMALL_MAX
    assert int(defines["LARGE_MIN"]) == contract.BIO_LARGE_MIN
    # The lowest bound is 2^LOWEST_BOUND_LOG2 units of ms/1024, and each next one doubles.
    assert contract.BIO_BUCKETS[0] * 1_024_000 == 1 << int(defines["LOWEST_BOUND_LOG2"])
    assert all(b == a * 2 for a, b in zip(contract.BIO_BUCKETS, contract.BIO_BUCKETS[1:], strict=False))
