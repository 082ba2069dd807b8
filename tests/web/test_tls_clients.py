"""`lunlat serve --web.config.file` against real clients: curl and `openssl s_client`.

Certificates are made per test module with openssl (tests/web/certs.py); the exporter runs as a child
process on a kernel-picked port, as a user would start it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from tests.support.exporter_process import LOOPBACK, LUNLAT_PORT, ExporterProcess, lunlat_serve
from tests.web import certs

PASSWORD = "s3cret"  # noqa: S105 - a test password for a throw-away exporter
# Cost 4, the lowest bcrypt takes: the tests check behaviour, not bcrypt's slowness.
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (Debian: curl)")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> certs.Pki:
    return certs.make(tmp_path_factory.mktemp("pki"))


def web_config(directory: Path, text: str) -> Path:
    path = directory / "web.yml"
    path.write_text(text, encoding="utf-8")
    return path


def serving(tmp_path: Path, config: Path) -> ExporterProcess:
    return ExporterProcess(
        lunlat_serve(f"--web.config.file={config}", "--log.level=debug"),
        tmp_path / "lunlat.log",
        port_pattern=LUNLAT_PORT,
    )


def curl(port: int, path: str = "/metrics", *args: str, scheme: str = "https") -> tuple[int, str, str]:
    """(HTTP status or 0 when no answer, headers + body, curl's stderr)."""
    done = subprocess.run(
        ["curl", "-sS", "-i", "--max-time", "20", "-o", "-", "-w", "\n%{http_code}", *args,
         f"{scheme}://{LOOPBACK}:{port}{path}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    output, _, code = done.stdout.rpartition("\n")
    return int(code or 0), output, done.stderr


@pytest.fixture
def tls_auth(tmp_path: Path, pki: certs.Pki) -> Iterator[ExporterProcess]:
    config = web_config(
        tmp_path,
        f"""
tls_server_config:
  cert_file: {pki.server_crt}
  key_file: {pki.server_key}
basic_auth_users:
  prometheus: '{HASH}'
http_server_config:
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    Strict-Transport-Security: max-age=31536000
""",
    )
    with serving(tmp_path, config) as exporter:
        yield exporter


def test_every_endpoint_needs_the_password(tls_auth: ExporterProcess, pki: certs.Pki) -> None:
    ca = ("--cacert", str(pki.ca_crt))
    for path in ("/metrics", "/", "/-/healthy", "/-/ready", "/nothing"):
        status, output, _ = curl(tls_auth.port, path, *ca)
        assert status == 401, (path, output)
        assert "www-authenticate: basic" in output.lower()
        status, _, _ = curl(tls_auth.port, path, *ca, "-u", "prometheus:wrong")
        assert status == 401
        status, _, _ = curl(tls_auth.port, path, *ca, "-u", "nobody:" + PASSWORD)
        assert status == 401
    status, output, _ = curl(tls_auth.port, "/metrics", *ca, "-u", f"prometheus:{PASSWORD}")
    assert status == 200 and "lunlat_build_info" in output
    assert curl(tls_auth.port, "/-/healthy", *ca, "-u", f"prometheus:{PASSWORD}")[0] == 200
    # 405 comes after auth, as with the toolkit's handler wrapping the whole mux.
    assert curl(tls_auth.port, "/metrics", *ca, "-X", "POST", "-u", f"prometheus:{PASSWORD}")[0] == 405
    assert curl(tls_auth.port, "/metrics", *ca, "-X", "POST")[0] == 401


def test_configured_headers_on_every_answer(tls_auth: ExporterProcess, pki: certs.Pki) -> None:
    for args in ((), ("-u", f"prometheus:{PASSWORD}")):
        _, output, _ = curl(tls_auth.port, "/", "--cacert", str(pki.ca_crt), *args)
        head = output.lower()
        assert "x-frame-options: deny" in head and "x-content-type-options: nosniff" in head
        assert "strict-transport-security: max-age=31536000" in head


def test_plain_http_to_the_tls_listener_is_refused_as_go_does(tls_auth: ExporterProcess) -> None:
    status, output, _ = curl(tls_auth.port, "/metrics", scheme="http")
    assert status == 400 and "Client sent an HTTP request to an HTTPS server." in output
    assert "lunlat_" not in output


def test_a_silent_client_does_not_hold_up_other_scrapes(tls_auth: ExporterProcess, pki: certs.Pki) -> None:
    """The handshake runs in the connection's thread: connections that never say a word (and one
    that stops after half a ClientHello) leave the accept loop free."""
    silent = [socket.create_connection((LOOPBACK, tls_auth.port)) for _ in range(5)]
    silent[0].sendall(b"\x16\x03\x01")
    try:
        started = time.monotonic()
        status, _, _ = curl(
            tls_auth.port, "/-/healthy", "--cacert", str(pki.ca_crt), "-u", f"prometheus:{PASSWORD}"
        )
        assert status == 200
        assert time.monotonic() - started < 8  # the silent ones hold their threads for 10 s
    finally:
        for sock in silent:
            sock.close()


def s_client(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"{LOOPBACK}:{port}", "-brief", "-ign_eof", *args],
        input="GET /-/healthy HTTP/1.0\r\n\r\n", capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def test_min_version_refuses_older_clients(tmp_path: Path, pki: certs.Pki) -> None:
    config = web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n"
        "  min_version: TLS13\n",
    )
    with serving(tmp_path, config) as exporter:
        refused = s_client(exporter.port, "-tls1_2", f"-CAfile={pki.ca_crt}")
        assert "Healthy" not in refused.stdout
        assert refused.returncode != 0
        accepted = s_client(exporter.port, "-tls1_3", f"-CAfile={pki.ca_crt}")
        assert "Healthy" in accepted.stdout, accepted.stderr
        assert "TLSv1.3" in accepted.stderr


def test_max_version_and_cipher_suites(tmp_path: Path, pki: certs.Pki) -> None:
    config = web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n"
        "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n",
    )
    with serving(tmp_path, config) as exporter:
        assert "Healthy" not in s_client(exporter.port, "-tls1_3", f"-CAfile={pki.ca_crt}").stdout
        other = s_client(exporter.port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
        assert "Healthy" not in other.stdout
        chosen = s_client(exporter.port, "-tls1_2", f"-CAfile={pki.ca_crt}")
        assert "Healthy" in chosen.stdout and "ECDHE-ECDSA-AES256-GCM-SHA384" in chosen.stderr


@pytest.mark.parametrize(
    ("auth", "no_cert", "own_ca", "other_ca"),
    [("RequireAndVerifyClientCert", False, True, False), ("VerifyClientCertIfGiven", True, True, False)],
)
def test_client_certificate_modes(
    tmp_path: Path, pki: certs.Pki, auth: str, no_cert: bool, own_ca: bool, other_ca: bool
) -> None:
    config = web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n"
        f"  client_ca_file: {pki.ca_crt}\n  client_auth_type: {auth}\n",
    )
    ca = ("--cacert", str(pki.ca_crt))
    with serving(tmp_path, config) as exporter:
        assert (curl(exporter.port, "/-/healthy", *ca)[0] == 200) is no_cert
        mine = ("--cert", str(pki.client_crt), "--key", str(pki.client_key))
        assert (curl(exporter.port, "/-/healthy", *ca, *mine)[0] == 200) is own_ca
        stranger = ("--cert", str(pki.stranger_crt), "--key", str(pki.stranger_key))
        assert (curl(exporter.port, "/-/healthy", *ca, *stranger)[0] == 200) is other_ca


@pytest.mark.parametrize(
    ("allowed", "admitted"), [("scraper.example", True), ("::1", True), ("other.example", False)]
)
def test_client_allowed_sans(tmp_path: Path, pki: certs.Pki, allowed: str, admitted: bool) -> None:
    config = web_config(
        tmp_path,
        f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n"
        f"  client_ca_file: {pki.ca_crt}\n  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_allowed_sans: ['{allowed}']\n",
    )
    mine = ("--cert", str(pki.client_crt), "--key", str(pki.client_key))
    with serving(tmp_path, config) as exporter:
        assert (curl(exporter.port, "/-/healthy", "--cacert", str(pki.ca_crt), *mine)[0] == 200) is admitted


def test_certificate_rotation_and_a_bad_new_certificate(tmp_path: Path, pki: certs.Pki) -> None:
    """A renewed certificate is served without a restart; a broken one keeps the previous serving."""
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(pki.server_crt, live / "tls.crt")
    shutil.copy(pki.server_key, live / "tls.key")
    config = web_config(tmp_path, "tls_server_config:\n  cert_file: live/tls.crt\n  key_file: live/tls.key\n")
    with serving(tmp_path, config) as exporter:
        assert curl(exporter.port, "/-/healthy", "--cacert", str(pki.ca_crt))[0] == 200
        certs.sign(pki.dir, "renewed", "otherca", "IP:127.0.0.1")
        shutil.copy(pki.renewed_key, live / "tls.key")
        shutil.copy(pki.renewed_crt, live / "tls.crt")
        deadline = time.monotonic() + 15
        while curl(exporter.port, "/-/healthy", "--cacert", str(pki.otherca_crt))[0] != 200:
            assert time.monotonic() < deadline, exporter.log_tail()
            time.sleep(0.3)
        assert curl(exporter.port, "/-/healthy", "--cacert", str(pki.ca_crt))[0] == 0  # old CA: untrusted now
        (live / "tls.crt").write_text("not a certificate\n", encoding="utf-8")
        time.sleep(1.5)
        assert curl(exporter.port, "/-/healthy", "--cacert", str(pki.otherca_crt))[0] == 200
        assert "web config not reloaded" in exporter.log_text()
