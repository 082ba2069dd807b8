"""`lunlat serve` as a user runs it, against clients that try to take it down without a password:
oversized request heads, more idle connections than the open-file limit, a low soft limit.

The exporter runs as a child process (tests/support/exporter_process.py); its RLIMIT_NOFILE is set before it starts by a
small exec wrapper, as a unit file or a shell's `ulimit -n` would.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import resource
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from lunlat.scrape import Scraper
from lunlat.web.config import WebGate
from lunlat.web.limits import Limits
from lunlat.web.server import ListenAddress, Server
from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve, scrape
from tests.web import certs

MiB = 1 << 20
# The attack: 100 header lines of 64 KiB (what http.client's parser accepts), 6.5 MB a request.
HUGE_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"".join(
    b"X-Pad-%02d: %s\r\n" % (i, b"a" * 65_000) for i in range(99)
)


def with_nofile(soft: int, hard: int, argv: Sequence[str]) -> list[str]:
    """`argv` run with RLIMIT_NOFILE set to (soft, hard) first."""
    wrapper = (
        "import os, resource, sys; "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2]))); "
        "os.execv(sys.argv[3], sys.argv[3:])"
    )
    return [sys.executable, "-c", wrapper, str(soft), str(hard), *argv]


@contextmanager
def exporter(tmp_path: Path, argv: Sequence[str]) -> Iterator[ExporterProcess]:
    with ExporterProcess(argv, tmp_path / "lunlat.log", port_pattern=LUNLAT_PORT, name="lunlat") as process:
        yield process


def nofile(pid: int) -> tuple[int, int]:
    """The process's (soft, hard) open-file limit, from /proc/PID/limits."""
    text = Path(f"/proc/{pid}/limits").read_text(encoding="utf-8")
    match = re.search(r"^Max open files\s+(\d+)\s+(\d+)", text, re.MULTILINE)
    assert match, text
    return int(match.group(1)), int(match.group(2))


def send_huge_head(port: int, answered: threading.Barrier, release: threading.Event) -> None:
    """One oversized request (the server may hang up while it is still being sent); the connection is
    held open, as the issue's clients did, until `release`."""
    with socket.socket() as sock:
        try:
            sock.settimeout(20)
            sock.connect((LOOPBACK, port))
            sock.sendall(HUGE_HEAD)
            sock.settimeout(5)
            while sock.recv(65536):  # until the server closes, or 5 s of silence (kept alive)
                pass
        except OSError:
            pass
        answered.wait(60)
        release.wait(60)


def test_ten_concurrent_6_mb_heads_leave_memory_where_it_was(tmp_path: Path) -> None:
    """Each cost +47 MiB before the password was even checked; 10 at once took RSS from 40 to 321 MiB,
    and it stayed there after they closed. The head is now cut at 1 MiB (431) and read into at most that."""
    with exporter(tmp_path, lunlat_serve()) as process:
        for _ in range(3):  # warm: lazy imports and the first scrape's buffers
            process.scrape()
        start = peak = process.rss()
        answered, release = threading.Barrier(11), threading.Event()
        senders = [
            threading.Thread(target=send_huge_head, args=(process.port, answered, release)) for _ in range(10)
        ]
        for sender in senders:
            sender.start()
        while answered.n_waiting < 10 and any(sender.is_alive() for sender in senders):
            peak = max(peak, process.rss())
            time.sleep(0.02)
        held = process.rss()
        answered.wait(60)
        release.set()
        for sender in senders:
            sender.join()
        time.sleep(0.5)
        assert process.scrape().status == 200
        end = process.rss()
    for when, rss in (("peak", peak), ("held open", held), ("after", end)):
        assert rss - start < 30 * MiB, f"RSS {start / MiB:.0f} MiB at start, {rss / MiB:.0f} MiB {when}"


def test_a_head_over_1_mib_is_refused_with_431_by_the_running_exporter(tmp_path: Path) -> None:
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * (2 * MiB) + b"\r\n\r\n"
    with exporter(tmp_path, lunlat_serve()) as process:
        with socket.create_connection((LOOPBACK, process.port), timeout=20) as sock:
            sock.sendall(head)
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:200]


def test_serve_raises_the_soft_open_file_limit_to_the_hard_limit(tmp_path: Path) -> None:
    """As Go does at start (golang/go src/syscall/rlimit.go): a 1024 soft limit is a compatibility
    default for select(), which lunlat does not use."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard <= 1024:
        pytest.skip(f"the hard open-file limit here is {hard}: nothing to raise")
    argv = with_nofile(1024, hard, lunlat_serve("--log.level=debug"))
    with exporter(tmp_path, argv) as process:
        assert nofile(process.pid) == (hard, hard)
        assert "open-file limit raised" in process.log_text()


def test_serve_never_lowers_the_open_file_limit(tmp_path: Path) -> None:
    limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 2048)
    with exporter(tmp_path, with_nofile(limit, limit, lunlat_serve())) as process:
        assert nofile(process.pid) == (limit, limit)


@pytest.mark.parametrize("hard", ["above", "1024"])
def test_1100_idle_connections_under_a_1024_soft_limit_do_not_stop_a_scrape(
    tmp_path: Path, hard: str
) -> None:
    """~1,020 idle connections used to make every scrape time out while the accept loop spun. Now the
    limit is raised where the hard limit allows, connections are capped (--web.max-connections) below
    what is left, and past the cap the longest idle connection makes room for the new one."""
    ours_soft, ours_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if ours_soft < 1300:  # this test's own 1,100 sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(ours_hard, 4096), ours_hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1300:
        pytest.skip("this process cannot open 1,100 sockets")
    limit = ours_hard if hard == "above" else 1024
    if hard == "above" and limit <= 1024:
        pytest.skip(f"the hard open-file limit here is {limit}: nothing to raise")
    with exporter(tmp_path, with_nofile(1024, limit, lunlat_serve())) as process, ExitStack() as held:
        for _ in range(1100):
            held.enter_context(socket.create_connection((LOOPBACK, process.port), timeout=10))
        answer = scrape(process.port, timeout=30)
        assert answer.status == 200 and "lunlat_build_info" in answer.text
        assert process.scrape().status == 200


def test_the_connection_cap_flag_is_checked_and_applied(tmp_path: Path) -> None:
    refused = subprocess.run(
        [*lunlat_serve("--web.max-connections=0")], capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode == 2 and "--web.max-connections" in refused.stderr
    assert "Traceback" not in refused.stderr
    with exporter(tmp_path, lunlat_serve("--web.max-connections=2")) as process, ExitStack() as held:
        oldest = held.enter_context(socket.create_connection((LOOPBACK, process.port), timeout=10))
        held.enter_context(socket.create_connection((LOOPBACK, process.port), timeout=10))
        time.sleep(0.2)  # both accepted and counted
        assert process.scrape().status == 200
        oldest.settimeout(5)
        assert oldest.recv(1) == b""  # closed to make room for the scrape


# --- the same limits over TLS (the handshake runs in the connection's thread; the socket changes) ---


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> certs.Pki:
    return certs.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_server(tmp_path: Path, pki: certs.Pki) -> Iterator[Server]:
    config = tmp_path / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n")
    limits = Limits(header_timeout=1.0, max_connections=2)
    srv = Server(ListenAddress(LOOPBACK, 0), Scraper([]), "/metrics", web=WebGate.load(config), limits=limits)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def tls_connect(port: int, pki: certs.Pki) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(pki.ca_crt))
    return context.wrap_socket(
        socket.create_connection((LOOPBACK, port), timeout=5), server_hostname="localhost"
    )


def tls_read_all(sock: ssl.SSLSocket, seconds: float) -> bytes:
    sock.settimeout(seconds)
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (ssl.SSLError, ConnectionError):
        pass
    return b"".join(chunks)


def test_over_tls_a_trickled_head_is_cut_at_the_header_deadline(tls_server: Server, pki: certs.Pki) -> None:
    with tls_connect(tls_server.port, pki) as sock:
        started = time.monotonic()
        with pytest.raises((OSError, AssertionError)):  # a write fails, or the read below sees the close
            for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                sock.send(bytes([byte]))
                sock.settimeout(0.2)
                with contextlib.suppress(TimeoutError):
                    assert sock.recv(1) != b"", "closed"
        assert time.monotonic() - started < 4.0


def test_over_tls_a_get_body_is_not_read_as_a_request(tls_server: Server, pki: certs.Pki) -> None:
    smuggled = b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
    with tls_connect(tls_server.port, pki) as sock:
        sock.sendall(
            b"GET /-/ready HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(smuggled), smuggled)
        )
        sock.sendall(b"GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answers = tls_read_all(sock, 5.0)
    assert answers.count(b"HTTP/1.1 200 OK") == 2 and b"Healthy" not in answers


def test_over_tls_a_head_over_1_mib_is_431(tls_server: Server, pki: certs.Pki) -> None:
    with tls_connect(tls_server.port, pki) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (2 * MiB) + b"\r\n\r\n")
        answer = tls_read_all(sock, 5.0)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]


def test_over_tls_the_longest_idle_connection_makes_room(tls_server: Server, pki: certs.Pki) -> None:
    with tls_connect(tls_server.port, pki) as oldest, tls_connect(tls_server.port, pki) as newer:
        newer.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")  # served, then idle: newer than `oldest`
        response = http.client.HTTPResponse(newer)
        response.begin()
        assert response.read() == b"Healthy\n"
        with tls_connect(tls_server.port, pki) as scraper:
            scraper.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert tls_read_all(scraper, 5.0).startswith(b"HTTP/1.1 200 OK")
        assert tls_read_all(oldest, 1.0) == b""  # closed to make room
