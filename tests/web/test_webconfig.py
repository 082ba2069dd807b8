"""The web config file: the toolkit's keys and refusals, each bad file exit 2 naming the key."""

from __future__ import annotations

import base64
import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from lunlat import cli
from lunlat.web import config as webconfig
from lunlat.web.config import TLS12_CIPHERS, WebGate, basic_credentials
from lunlat.yamlmodel import ConfigError
from tests.support.hostile_files import finishes, make_fifo
from tests.web import certs


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> certs.Pki:
    return certs.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture(autouse=True)
def _keep_logging() -> Iterator[None]:
    """`lunlat serve` sets up the `lunlat` logger on this test's captured stderr: put it back, or
    later tests would log to a closed stream."""
    logger = logging.getLogger("lunlat")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def serve_with(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "web.yml"
    path.write_text(text, encoding="utf-8")
    code = cli.main(["serve", "--web.listen-address=127.0.0.1:0", f"--web.config.file={path}"])
    return code, capsys.readouterr().err


def tls(pki: certs.Pki, extra: str = "") -> str:
    return f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.server_key}\n{extra}"


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ("  cert_fil: x\n", "tls_server_config.cert_fil", "unknown key"),
        ("  curve_preferences: [X25519]\n", "tls_server_config.curve_preferences", "not supported by lunlat"),
        ("  client_auth_type: RequireAnyClientCert\n", "tls_server_config.client_auth_type", "not supported"),
        ("  client_auth_type: RequestClientCert\n", "tls_server_config.client_auth_type", "not supported"),
        ("  client_auth_type: Sometimes\n", "tls_server_config.client_auth_type", "invalid ClientAuth"),
        ("  client_ca_file: ca.crt\n", "tls_server_config", "without a Client Auth Policy"),
        ("  min_version: TLS13\n  max_version: TLS12\n", "tls_server_config", "above max_version"),
        ("  min_version: SSL3\n", "tls_server_config.min_version", "TLS10"),
        (
            "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
            "tls_server_config.cipher_suites",
            "unknown cipher",
        ),
        (
            "http_server_config:\n  headers:\n    X-Powered-By: me\n",
            "http_server_config.headers",
            "can not be configured",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "http_server_config.headers",
            "invalid value",
        ),
        ("basic_auth_users:\n  prom: plaintext\n", "basic_auth_users", "not a bcrypt hash"),
        ("rate_limit:\n  burst: 1\n", "rate_limit", "not supported by lunlat"),
    ],
)
def test_bad_web_config_exits_2_naming_the_key(
    tmp_path: Path, pki: certs.Pki, capsys: pytest.CaptureFixture[str], extra: str, key: str, message: str
) -> None:
    code, err = serve_with(tmp_path, tls(pki, extra), capsys)
    assert code == 2
    assert f": {key}: " in err and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("tls_server_config:\n  key_file: k\n", "tls_server_config", "missing one of cert or cert_file"),
        ("tls_server_config:\n  cert_file: c\n", "tls_server_config", "missing one of key or key_file"),
        (
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
            "tls_server_config.cert_file",
            "No such file or directory",
        ),
    ],
)
def test_tls_paths_are_checked_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str, message: str
) -> None:
    code, err = serve_with(tmp_path, text, capsys)
    assert code == 2 and f"{key}: " in err and message in err, err


def test_a_key_that_does_not_match_the_certificate(
    tmp_path: Path, pki: certs.Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"tls_server_config:\n  cert_file: {pki.server_crt}\n  key_file: {pki.client_key}\n"
    code, err = serve_with(tmp_path, text, capsys)
    assert code == 2 and "tls_server_config.cert_file" in err and "X509KeyPair" in err


def test_relative_paths_are_relative_to_the_web_config(tmp_path: Path, pki: certs.Pki) -> None:
    shutil.copy(pki.server_crt, tmp_path / "s.crt")
    shutil.copy(pki.server_key, tmp_path / "s.key")
    path = tmp_path / "web.yml"
    path.write_text("tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n", encoding="utf-8")
    assert webconfig.load(path).tls


def test_every_go_cipher_name_maps_to_openssl_standard_name() -> None:
    """The table against OpenSSL itself: `openssl ciphers -stdname` prints IANA name - OpenSSL name."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (Debian: openssl)")
    listing = subprocess.run(
        ["openssl", "ciphers", "-stdname", "ALL:@SECLEVEL=0"], capture_output=True, text=True, check=True
    ).stdout
    known = {line.split()[0]: line.split()[2] for line in listing.splitlines() if " - " in line}
    for go_name, openssl_name in TLS12_CIPHERS.items():
        if go_name in known:  # 3DES is compiled out of some OpenSSL builds
            assert known[go_name] == openssl_name


def test_basic_credentials_as_go_reads_them() -> None:
    def header(text: str) -> str:
        return "Basic " + base64.b64encode(text.encode()).decode()

    assert basic_credentials(header("u:p:q")) == ("u", "p:q")
    assert basic_credentials("basic " + base64.b64encode(b"u:").decode()) == ("u", "")
    assert basic_credentials(header("nocolon")) is None
    assert basic_credentials("Bearer abc") is None
    assert basic_credentials("Basic !!!") is None
    assert basic_credentials(None) is None


def test_successful_checks_are_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bcrypt at cost 10 takes ~70 ms: a scrape every 15 s must not pay it every time."""
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prom: '{hashed}'\n", encoding="utf-8")
    gate = WebGate.load(path)
    calls: list[bytes] = []
    real = bcrypt.checkpw

    def counting(password: bytes, hashed_password: bytes) -> bool:
        calls.append(password)
        return real(password, hashed_password)

    monkeypatch.setattr(bcrypt, "checkpw", counting)  # webconfig calls bcrypt.checkpw
    good = "Basic " + base64.b64encode(b"prom:pw").decode()
    bad = "Basic " + base64.b64encode(b"prom:nope").decode()
    nobody = "Basic " + base64.b64encode(b"eve:pw").decode()
    config = gate.current()
    assert all(gate.authorized(config, good) for _ in range(50))
    assert not any(gate.authorized(config, bad) for _ in range(5))
    assert not gate.authorized(config, nobody)  # checked against a fake hash: same cost as a user
    assert not gate.authorized(config, None)
    assert calls == [b"pw", b"nope", b"pw"]


def test_a_changed_web_config_is_picked_up_and_a_bad_one_keeps_the_old(
    tmp_path: Path, pki: certs.Pki
) -> None:
    path = tmp_path / "web.yml"
    first = bcrypt.hashpw(b"one", bcrypt.gensalt(4)).decode()
    path.write_text(f"basic_auth_users:\n  prom: '{first}'\n", encoding="utf-8")
    gate = WebGate.load(path)
    one = "Basic " + base64.b64encode(b"prom:one").decode()
    two = "Basic " + base64.b64encode(b"prom:two").decode()
    assert gate.authorized(gate.current(), one)
    second = bcrypt.hashpw(b"two", bcrypt.gensalt(4)).decode()
    path.write_text(f"basic_auth_users:\n  prom: '{second}'\n", encoding="utf-8")
    time.sleep(webconfig.RECHECK_SECONDS + 0.1)
    config = gate.current()
    assert gate.authorized(config, two) and not gate.authorized(config, one)
    for broken in (
        "basic_auth_users:\n  prom: plaintext\n",
        tls(pki),  # TLS cannot be switched on while running
    ):
        path.write_text(broken, encoding="utf-8")
        time.sleep(webconfig.RECHECK_SECONDS + 0.1)
        config = gate.current()
        assert not config.tls and gate.authorized(config, two)


# --- files that are no regular files, or too large ------------------------------------------------


def _tls_files(tmp_path: Path, pki: certs.Pki) -> Path:
    """A web config with TLS and mutual TLS whose files are copies in tmp_path (to be replaced)."""
    for name in ("server.crt", "server.key", "ca.crt"):
        shutil.copy(pki.dir / name, tmp_path / name)
    path = tmp_path / "web.yml"
    path.write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("name", "key"),
    [("server.crt", "cert_file"), ("server.key", "key_file"), ("ca.crt", "client_ca_file")],
)
@pytest.mark.parametrize("kind", ["fifo", "zero", "large"])
def test_a_tls_file_that_is_no_regular_file_or_too_large_is_refused_at_once(
    tmp_path: Path, pki: certs.Pki, name: str, key: str, kind: str
) -> None:
    path = _tls_files(tmp_path, pki)
    file = tmp_path / name
    file.unlink()
    if kind == "fifo":
        make_fifo(file)
    elif kind == "zero":
        file.symlink_to("/dev/zero")
    else:
        with file.open("wb") as out:  # sparse: costs no disk
            out.truncate(64 * 1024 * 1024)
    with pytest.raises(ConfigError) as err:
        finishes(lambda: webconfig.load(path), file)
    (problem,) = err.value.problems
    assert problem.key == f"tls_server_config.{key}", problem
    words = {
        "fifo": "is a FIFO (named pipe), not a regular file",
        "zero": "is a character device, not a regular file",
        "large": "is 67,108,864 bytes, more than the 1 MiB a",
    }
    assert f"({file}): {words[kind]}" in problem.message, problem.message


def test_a_web_config_replaced_by_a_fifo_keeps_the_running_one(tmp_path: Path, pki: certs.Pki) -> None:
    path = _tls_files(tmp_path, pki)
    gate = WebGate.load(path)
    running = gate.current()
    for victim in (tmp_path / "ca.crt", path):  # rotation of the CA, then of the web config itself
        make_fifo(victim)
        time.sleep(webconfig.RECHECK_SECONDS + 0.1)
        assert finishes(gate.current, victim) is running
        victim.unlink()
        if victim == path:
            _tls_files(tmp_path, pki)
        else:
            shutil.copy(pki.ca_crt, victim)
