"""Request heads parsed by h11 (lunlat.web.head) against the parser it replaced (email.parser).

    .venv/bin/python bench/request_heads.py [--runs 9] [--min-time 0.2]

Both parsers get the same heads, as `limits.RequestReader.head` hands them over once it has read them
within lunlat's limits: a Prometheus scrape's head, and the largest heads the hardening tests send
that are still parsed (tests/unit/test_server.py: 100 header lines; 1 MiB of request line and
headers, the cap, in lines of up to 64 KiB). For each head and parser: the median over `--runs`
runs of the time per parse (each run repeats the parse for at least `--min-time` seconds), and the
peak memory one parse allocates (tracemalloc, beyond the head itself). Prints a table with the
ratio h11 / before and checks that both parsers read the same method, target and headers; asserts
nothing else. One process, one thread, no network.
"""

from __future__ import annotations

import argparse
import email.parser
import http.client
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

from lunlat.web import head
from lunlat.web.limits import HEADER_TIMEOUT, HTTP_VERSION, MAX_HEADER_BYTES, MAX_HEADERS, MAX_LINE

Parser = Callable[[list[bytes]], tuple[str, str, list[tuple[str, str]]]]

# A head as Prometheus 2.x/3.x sends it for a scrape (its scrape loop's Accept, Accept-Encoding,
# User-Agent and X-Prometheus-Scrape-Timeout-Seconds: prometheus/prometheus scrape/scrape.go).
SCRAPE = [
    b"GET /metrics HTTP/1.1\r\n",
    b"Host: 10.0.0.17:9910\r\n",
    b"User-Agent: Prometheus/3.5.0\r\n",
    b"Accept: application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
    b"version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2\r\n",
    b"Accept-Encoding: gzip\r\n",
    b"X-Prometheus-Scrape-Timeout-Seconds: 10\r\n",
]


def _lines_of(count: int, size: int) -> list[bytes]:
    return [b"X-Pad-%03d: %s\r\n" % (i, b"a" * (size - 13)) for i in range(count)]


# The request line, Host and MAX_HEADERS - 1 short headers: the most lines a head may have.
MOST_LINES = [b"GET /-/healthy HTTP/1.1\r\n", b"Host: x\r\n", *_lines_of(MAX_HEADERS - 1, 20)]
# 1 MiB with the request line and Host, in lines just under MAX_LINE: the largest head lunlat reads.
_BIG = MAX_LINE - 100
LARGEST = [b"GET /-/healthy HTTP/1.1\r\n", b"Host: x\r\n", *_lines_of((MAX_HEADER_BYTES - 200) // _BIG, _BIG)]


def before(lines: list[bytes]) -> tuple[str, str, list[tuple[str, str]]]:
    """The parser h11 replaced (lunlat.server's _parse until issue 40), without its answers: the
    request line split in three, the version by the same pattern, the header lines as
    http.client.parse_headers reads them once it has them (an email message)."""
    words = lines[0].decode("iso-8859-1").rstrip("\r\n").split()
    if len(words) != 3 or HTTP_VERSION.fullmatch(words[2]) is None:
        raise ValueError("malformed request line")
    fields = b"".join([*lines[1:], b"\r\n"]).decode("iso-8859-1")
    message = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(fields)
    return words[0], words[1], [(k.lower(), v) for k, v in message.items()]


def with_h11(lines: list[bytes]) -> tuple[str, str, list[tuple[str, str]]]:
    parsed = head.parse(lines)
    return parsed.method, parsed.target, [(k.lower(), v) for k, v in parsed.headers.items()]


@dataclass(frozen=True, slots=True)
class Measured:
    seconds: float  # median time per parse
    peak: int  # bytes one parse allocates at its peak


def measure(parse: Parser, lines: list[bytes], runs: int, min_time: float) -> Measured:
    per_parse = []
    for _ in range(runs):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < min_time or count == 0:
            parse(lines)
            count += 1
        per_parse.append(elapsed / count)
    tracemalloc.start()
    parse(lines)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return Measured(statistics.median(per_parse), peak)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--min-time", type=float, default=0.2)
    args = parser.parse_args(argv)
    heads = {"Prometheus scrape": SCRAPE, f"{MAX_HEADERS} header lines": MOST_LINES, "1 MiB head": LARGEST}
    print(f"python {sys.version.split()[0]}, h11 {version('h11')}, median of {args.runs} runs")
    print("| head | bytes | before: µs / peak KiB | h11: µs / peak KiB | h11 / before |")
    print("| --- | --- | --- | --- | --- |")
    slowest = 0.0
    for name, lines in heads.items():
        assert before(lines) == with_h11(lines), f"{name}: the parsers disagree"
        old = measure(before, lines, args.runs, args.min_time)
        new = measure(with_h11, lines, args.runs, args.min_time)
        slowest = max(slowest, new.seconds)
        print(
            f"| {name} | {sum(map(len, lines)):,} | {old.seconds * 1e6:,.1f} / {old.peak / 1024:,.0f} "
            f"| {new.seconds * 1e6:,.1f} / {new.peak / 1024:,.0f} | {new.seconds / old.seconds:.2f}x |"
        )
    print(
        f"slowest h11 parse: {slowest * 1e3:.2f} ms, against the {HEADER_TIMEOUT:.0f} s a head may take to arrive"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
