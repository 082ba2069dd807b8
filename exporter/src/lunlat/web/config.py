"""`--web.config.file`: TLS and basic auth in the Prometheus exporter-toolkit's web configuration format.

The keys, defaults and refusals are the toolkit's (prometheus/exporter-toolkit web/tls_config.go,
web/handler.go, docs/web-configuration.md), so a file written for node_exporter works here:

- `tls_server_config`: cert_file/key_file, client_ca_file (or inline client_ca), client_auth_type,
  client_allowed_sans, min_version/max_version (TLS10…TLS13, default TLS12…TLS13), cipher_suites by
  their Go names, prefer_server_cipher_suites (default true). TLS is on when any of cert_file,
  key_file, client_ca_file, client_ca or client_auth_type is set (toolkit `TLSConfig.IsEnabled`).
- `basic_auth_users`: user → bcrypt hash. Checks are cached as in the toolkit (web/cache.go), so a
  scrape every 15 s costs one hash lookup, not a bcrypt run (~70 ms at cost 10). The cache holds
  SHA-256 digests of (user, hash, password), never a password.
- A flood of wrong passwords cannot starve an authenticated scraper. bcrypt runs one at a time, as
  the toolkit's bcryptMtx (web/handler.go): it is CPU-bound. The toolkit keeps one cache of 100 for
  both outcomes, drops ~10% of it at random whenever it is full (web/cache.go makeRoom), and lets
  every uncached request wait on the mutex. Here successes and failures are kept in separate LRUs of
  AUTH_CACHE_SIZE each, so no number of failures evicts a success, and a cached answer never waits
  for bcrypt; at most AUTH_PENDING_MAX uncached checks are in flight in total (one running bcrypt,
  the others waiting for it) and a check past that is refused (401) at once, without bcrypt, with a
  warning at most once a minute. The cost: a client with no cached success (the exporter just
  started, or a new password) may get 401 while a flood lasts; Prometheus retries each scrape.
- Passwords are bytes, as Go's Request.BasicAuth hands them over (any encoding), and only the first
  72 are checked, as the toolkit's x/crypto bcrypt.CompareHashAndPassword does (the most bcrypt
  uses); Python's bcrypt 5 would raise on longer ones instead.
- `http_server_config.headers`: only the toolkit's five security headers (web/handler.go
  `extraHTTPHeaders`), X-Frame-Options and X-Content-Type-Options with their fixed values.

What Python's ssl module cannot do the toolkit's way is refused by name, never silently changed:
`client_auth_type` RequestClientCert and RequireAnyClientCert (Python verifies every client
certificate it asks for: it has no "accept any certificate" callback), `curve_preferences` (Python
3.11 sets one ECDH curve, not a preference list), inline `cert`/`key` (ssl loads a certificate chain
only from files) and `rate_limit`. `http2` is accepted, but the stdlib server speaks HTTP/1.1 only.

The files (the web config itself, the certificate, key and client CA) are re-read when they change:
`WebGate.current()` compares their mtime/size/inode at most once a second, per new connection. A new
file that fails to load keeps the previous configuration serving and logs why, once per change.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import re
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import bcrypt
from pydantic import Field, field_validator, model_validator

from lunlat import logs
from lunlat.files import FileRefusedError, MiB, read_regular
from lunlat.yamlmodel import ConfigError, ConfigProblem, Strict, load_model

log = logs.get(__name__)

# Go names of tls.CipherSuites() (golang/go src/crypto/tls/cipher_suites.go, the list the toolkit's
# `Cipher.UnmarshalYAML` accepts) mapped to OpenSSL's names (`openssl ciphers -stdname`), which
# SSLContext.set_ciphers takes. The three TLS 1.3 suites are accepted and have no effect, as in Go
# (crypto/tls Config.CipherSuites: "TLS 1.3 ciphersuites are not configurable").
TLS12_CIPHERS = {
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
TLS13_CIPHERS = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")

TLSVersionName = Literal["TLS10", "TLS11", "TLS12", "TLS13"]
TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

# The toolkit's ClientAuth policies (web/tls_config.go `ConfigToTLSConfig`): "" means NoClientCert.
# Only the three Python's ssl can honour exactly are accepted; the others are refused by name.
ClientAuth = Literal["", "NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"]
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")

# web/handler.go `extraHTTPHeaders`: the headers a web config may set; a tuple lists the only values.
ALLOWED_HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}

# Toolkit keys lunlat knows but cannot honour: refused with the reason, never ignored.
UNSUPPORTED = {
    ("rate_limit",): "not supported by lunlat (use --web.max-requests, which answers 503 past N scrapes)",
    ("tls_server_config", "curve_preferences"): (
        "not supported by lunlat: Python's ssl sets no curve preference list; OpenSSL's default groups are used"
    ),
    ("tls_server_config", "cert"): "inline certificates are not supported by lunlat: use cert_file",
    ("tls_server_config", "key"): "inline keys are not supported by lunlat: use key_file",
}

# A bcrypt hash as htpasswd -B and Go's x/crypto/bcrypt write it: $2a$/$2b$/$2y$, cost 04-31, 53 chars.
_BCRYPT = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")

# Files of a web config are read whole; past these sizes they are refused unread (files.read_regular).
# The largest real ones are CA bundles: the whole system bundle (Debian's ca-certificates.crt, ~220 KB)
# as client_ca_file, or inline as client_ca. A certificate chain or key is a few KB.
WEB_CONFIG_MAX_BYTES = MiB
CERT_MAX_BYTES = MiB

# How often the files behind the running config are compared with what was loaded.
RECHECK_SECONDS = 1.0
# Distinct (user, hash, password) checks remembered, successes and failures each; web/cache.go keeps
# 100 of both together.
AUTH_CACHE_SIZE = 100
# Uncached password checks in flight at once: one running bcrypt, the others waiting for it. At cost 10
# (~70 ms) the last one waits ~0.3 s; past it a check is refused without bcrypt. The toolkit has no
# such bound (web/handler.go: every request waits on bcryptMtx).
AUTH_PENDING_MAX = 4
# The bytes of a password bcrypt uses: golang/crypto bcrypt/bcrypt.go (v0.54.0, the toolkit's go.mod)
# CompareHashAndPassword passes the whole password to blowfish.ExpandKey, which reads 18 32-bit words
# of it (blowfish/block.go) and never a byte past 72; only GenerateFromPassword refuses longer ones
# (ErrPasswordTooLong, since v0.5.0, commit "bcrypt: reject passwords longer than 72 bytes"). pyca/bcrypt
# 5.0.0 checkpw raises ValueError past 72 bytes (CHANGELOG.rst 5.0.0, src/_bcrypt/src/lib.rs hashpw).
BCRYPT_PASSWORD_BYTES = 72
# The password behind the hash unknown users are checked against (in the source: no secret).
FAKE_PASSWORD = b"lunlat-no-such-user"
# At most one "refused without bcrypt" warning per this many seconds, counting the refusals between.
SHED_LOG_SECONDS = 60.0


class TLSServerConfig(Strict):
    cert_file: str = ""
    key_file: str = ""
    client_ca_file: str = ""
    client_ca: str = ""
    client_auth_type: str = ""
    client_allowed_sans: list[str] | None = None
    min_version: TLSVersionName = "TLS12"
    max_version: TLSVersionName = "TLS13"
    cipher_suites: list[str] = Field(default_factory=list)
    prefer_server_cipher_suites: bool = True

    @field_validator("client_auth_type")
    @classmethod
    def _client_auth(cls, value: str) -> str:
        if value in _UNVERIFIED_CLIENT_AUTH:
            raise ValueError(
                f"{value} is not supported by lunlat: Python's ssl verifies every client certificate it "
                "asks for; use RequireAndVerifyClientCert (or VerifyClientCertIfGiven) with client_ca_file"
            )
        if value not in ClientAuth.__args__:  # type: ignore[attr-defined]
            raise ValueError(
                "invalid ClientAuth: use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            )
        return value

    @field_validator("cipher_suites")
    @classmethod
    def _ciphers(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in TLS12_CIPHERS and name not in TLS13_CIPHERS:
                raise ValueError(f"unknown cipher: {name} (use Go's names, e.g. TLS_AES_128_GCM_SHA256)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> TLSServerConfig:
        # The toolkit's refusals (validateTLSPaths, ConfigToTLSConfig), checked before any file is read.
        if self.enabled:
            if not self.cert_file:
                raise ValueError("missing one of cert or cert_file")
            if not self.key_file:
                raise ValueError("missing one of key or key_file")
        if (self.client_ca_file or self.client_ca) and self.client_auth_type in ("", "NoClientCert"):
            raise ValueError("client CA's have been configured without a Client Auth Policy")
        if self.client_ca_file and self.client_ca:
            raise ValueError("set one of client_ca and client_ca_file, not both")
        if TLS_VERSIONS[self.min_version] > TLS_VERSIONS[self.max_version]:
            raise ValueError(f"min_version {self.min_version} is above max_version {self.max_version}")
        return self

    @property
    def enabled(self) -> bool:
        """toolkit `TLSConfig.IsEnabled`: any TLS key set turns TLS on."""
        return bool(
            self.cert_file or self.key_file or self.client_ca_file or self.client_ca or self.client_auth_type
        )


class HTTPServerConfig(Strict):
    # The toolkit's default; the stdlib server speaks HTTP/1.1 only, so true changes nothing here.
    http2: bool = True
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if name not in ALLOWED_HEADERS:
                raise ValueError(f"HTTP header {name!r} can not be configured")
            allowed = ALLOWED_HEADERS[name]
            if allowed and text not in allowed:
                raise ValueError(
                    f"invalid value for {name}. Expected one of: {list(allowed)}, but got: {text!r}"
                )
            if "\r" in text or "\n" in text:
                raise ValueError(f"{name}: a header value must be one line")
        return value


class WebConfigFile(Strict):
    tls_server_config: TLSServerConfig = Field(default_factory=TLSServerConfig)
    http_server_config: HTTPServerConfig = Field(default_factory=HTTPServerConfig)
    basic_auth_users: dict[str, str] | None = None

    @field_validator("basic_auth_users")
    @classmethod
    def _hashes(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for user, hashed in (value or {}).items():
            if not _BCRYPT.match(hashed):
                raise ValueError(f'user {user!r}: not a bcrypt hash (make one with `htpasswd -nBC 10 ""`)')
        return value


def _explain_extra(loc: tuple[int | str, ...]) -> str:
    return UNSUPPORTED.get(tuple(str(p) for p in loc), "unknown key")


@dataclass(frozen=True, slots=True)
class WebConfig:
    """A loaded web config: its SSL context (None = plain HTTP), users and headers."""

    path: Path
    context: ssl.SSLContext | None
    users: dict[str, bytes]
    headers: dict[str, str]
    allowed_sans: frozenset[str] | None
    watched: tuple[Path, ...]

    @property
    def tls(self) -> bool:
        return self.context is not None


def _resolve(base: Path, name: str) -> Path:
    """Relative paths are relative to the web config's directory (toolkit `SetDirectory`)."""
    path = Path(name)
    return path if path.is_absolute() else base / path


def _problem(path: Path, key: str, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(str(path), None, key, message)])


def _check_file(path: Path, name: str, file: Path) -> None:
    """Refuse a certificate, key or CA file that is no regular file of at most CERT_MAX_BYTES, before
    ssl opens it: OpenSSL would block on a FIFO for good (an open for reading waits for a writer,
    fifo(7)), and that under WebGate's lock, wedging every new connection. The check and ssl's own
    open are two opens: a file swapped for a FIFO in between still blocks, a race that needs write
    access to the files the exporter trusts anyway."""
    try:
        read_regular(file, CERT_MAX_BYTES, "certificate or key file")
    except FileRefusedError as exc:
        raise _problem(
            path, f"tls_server_config.{name}", f"failed to read {name} ({file}): {exc.reason}"
        ) from None


def _context(path: Path, tls: TLSServerConfig) -> tuple[ssl.SSLContext, tuple[Path, ...]]:
    base = path.parent
    cert, key = _resolve(base, tls.cert_file), _resolve(base, tls.key_file)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = TLS_VERSIONS[tls.min_version]
    context.maximum_version = TLS_VERSIONS[tls.max_version]
    # HTTP/1.1 only: a client offering h2 over ALPN is told so in the handshake.
    context.set_alpn_protocols(["http/1.1"])
    _check_file(path, "cert_file", cert)
    _check_file(path, "key_file", key)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise _problem(
            path, "tls_server_config.cert_file", f"failed to load X509KeyPair ({cert}, {key}): {exc}"
        ) from None
    watched = [cert, key, *_client_ca(path, tls, context)]
    tls12 = [TLS12_CIPHERS[name] for name in tls.cipher_suites if name in TLS12_CIPHERS]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise _problem(
                path, "tls_server_config.cipher_suites", f"this OpenSSL supports none of {tls.cipher_suites}"
            ) from None
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    return context, tuple(watched)


def _client_ca(path: Path, tls: TLSServerConfig, context: ssl.SSLContext) -> list[Path]:
    """Client certificate policy and CA; returns the CA file to watch (if any)."""
    if tls.client_auth_type == "RequireAndVerifyClientCert":
        context.verify_mode = ssl.CERT_REQUIRED
    elif tls.client_auth_type == "VerifyClientCertIfGiven":
        context.verify_mode = ssl.CERT_OPTIONAL
    else:
        return []
    try:
        if tls.client_ca_file:
            ca = _resolve(path.parent, tls.client_ca_file)
            _check_file(path, "client_ca_file", ca)
            context.load_verify_locations(cafile=ca)
            return [ca]
        if tls.client_ca:
            context.load_verify_locations(cadata=tls.client_ca)
        else:  # Go verifies against the system roots when no client CA is given
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (ssl.SSLError, OSError) as exc:
        raise _problem(
            path, "tls_server_config.client_ca_file", f"cannot load the client CA: {exc}"
        ) from None
    return []


def load(path: Path) -> WebConfig:
    """Read and check the web config at `path` and every file it names; raise ConfigError."""
    model = load_model(
        path, WebConfigFile, _explain_extra, max_bytes=WEB_CONFIG_MAX_BYTES, what="web config file"
    )
    context: ssl.SSLContext | None = None
    watched: tuple[Path, ...] = (path,)
    if model.tls_server_config.enabled:
        context, files = _context(path, model.tls_server_config)
        watched = (path, *files)
    sans = model.tls_server_config.client_allowed_sans
    return WebConfig(
        path=path,
        context=context,
        users={user: hashed.encode() for user, hashed in (model.basic_auth_users or {}).items()},
        headers=dict(model.http_server_config.headers),
        allowed_sans=frozenset(_normal_san(s) for s in sans) if sans is not None else None,
        watched=watched,
    )


def _normal_san(value: str) -> str:
    """IP addresses in one spelling: Python prints IPv6 SANs uncompressed, Go (and users) compressed."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


def _stamp(paths: tuple[Path, ...]) -> tuple[tuple[int, int, int], ...]:
    stamps = []
    for path in paths:
        try:
            st = path.stat()
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            stamps.append((0, -1, 0))
    return tuple(stamps)


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """User and password of an `Authorization: Basic …` header, as Go's Request.BasicAuth reads it.

    Go keeps the decoded bytes as they are (golang/go src/net/http/request.go parseBasicAuth): bytes
    that are not UTF-8 are kept as surrogate escapes, so `_raw` gives back the exact bytes."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8", "surrogateescape")
    except binascii.Error:
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def _raw(text: str) -> bytes:
    """The bytes `basic_credentials` decoded `text` from."""
    return text.encode("utf-8", "surrogateescape")


def _digest(*parts: bytes) -> bytes:
    """SHA-256 of the parts, each length-prefixed so that no two different tuples collide."""
    sha = hashlib.sha256()
    for part in parts:
        sha.update(len(part).to_bytes(8, "big"))
        sha.update(part)
    return sha.digest()


def _bcrypt_ok(password: bytes, hashed: bytes) -> bool:
    """bcrypt.checkpw for a password already cut to BCRYPT_PASSWORD_BYTES (longer ones raise)."""
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # a hash bcrypt cannot read: refused, as Go's CompareHashAndPassword errors
        return False


class _Verdicts:
    """Digests of checked (user, hash, password), successes and failures in separate LRUs, so that no
    number of failures evicts a success. The caller holds a lock around every call."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kinds: dict[bool, OrderedDict[bytes, None]] = {True: OrderedDict(), False: OrderedDict()}

    def get(self, key: bytes) -> bool | None:
        for verdict, seen in self._kinds.items():
            if key in seen:
                seen.move_to_end(key)
                return verdict
        return None

    def put(self, key: bytes, verdict: bool) -> None:
        seen = self._kinds[verdict]
        seen[key] = None
        seen.move_to_end(key)
        if len(seen) > self._size:
            seen.popitem(last=False)

    def clear(self) -> None:
        for seen in self._kinds.values():
            seen.clear()


class WebGate:
    """The running web config: TLS context, basic auth and headers, re-read when its files change."""

    def __init__(self, config: WebConfig) -> None:
        self._config = config
        self._stamps = _stamp(config.watched)
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self._failed: tuple[tuple[int, int, int], ...] | None = None
        self._auth_lock = threading.Lock()  # one bcrypt at a time: it is CPU-bound (web/handler.go)
        self._pending = threading.BoundedSemaphore(AUTH_PENDING_MAX)
        self._cache = _Verdicts(AUTH_CACHE_SIZE)
        self._cache_lock = threading.Lock()
        self._shed_count = 0
        self._shed_logged = float("-inf")
        # Unknown users are checked against a hash too, so timing does not tell which users exist.
        self._fake = bcrypt.hashpw(FAKE_PASSWORD, bcrypt.gensalt(10)) if config.users else b""

    @classmethod
    def load(cls, path: Path) -> WebGate:
        return cls(load(path))

    @property
    def tls(self) -> bool:
        return self._config.tls

    def current(self) -> WebConfig:
        """The config to use for a new connection, re-loaded first if one of its files changed."""
        now = time.monotonic()
        if now - self._checked < RECHECK_SECONDS:
            return self._config
        with self._lock:
            if now - self._checked < RECHECK_SECONDS:
                return self._config
            self._checked = now
            stamps = _stamp(self._config.watched)
            if stamps in (self._stamps, self._failed):
                return self._config
            try:
                fresh = load(self._config.path)
                if fresh.tls != self._config.tls:
                    raise _problem(
                        self._config.path,
                        "tls_server_config",
                        "TLS cannot be turned on or off without a restart",
                    )
            except ConfigError as exc:
                self._failed = stamps
                log.error("web config not reloaded, the previous one stays", err=str(exc).replace("\n", "; "))
                return self._config
            self._config, self._stamps, self._failed = fresh, _stamp(fresh.watched), None
            if fresh.users and not self._fake:
                self._fake = bcrypt.hashpw(FAKE_PASSWORD, bcrypt.gensalt(10))
            with self._cache_lock:
                self._cache.clear()
            log.info("web config reloaded", file=str(fresh.path), tls=fresh.tls, users=len(fresh.users))
            return fresh

    def authorized(self, config: WebConfig, header: str | None) -> bool:
        """Basic auth as the toolkit's webHandler: no users = open; otherwise a valid user and password.
        A cached answer is given without waiting for bcrypt; see the module docstring for the bounds."""
        if not config.users:
            return True
        credentials = basic_credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = config.users.get(user)
        known = hashed is not None
        hashed = hashed if hashed is not None else self._fake
        # Bytes past the 72nd change nothing in bcrypt, so they are not part of the key either.
        secret = _raw(password)[:BCRYPT_PASSWORD_BYTES]
        key = _digest(_raw(user), hashed, secret)
        with self._cache_lock:
            verdict = self._cache.get(key)
        if verdict is None:
            verdict = self._check(key, secret, hashed, known)
        return verdict

    def _check(self, key: bytes, secret: bytes, hashed: bytes, known: bool) -> bool:
        """Run bcrypt for a check not in the cache, or refuse it at once past AUTH_PENDING_MAX."""
        if not self._pending.acquire(blocking=False):
            self._shed()
            return False
        try:
            with self._auth_lock:
                with self._cache_lock:
                    verdict = self._cache.get(key)  # the same check may have run while this one waited
                if verdict is None:
                    # Unknown users run bcrypt too (against the fake hash) so timing does not tell which
                    # users exist, but never count as a success: the fake's password is no secret.
                    verdict = _bcrypt_ok(secret, hashed) and known
                    with self._cache_lock:
                        self._cache.put(key, verdict)
        finally:
            self._pending.release()
        return verdict

    def _shed(self) -> None:
        """Count a check refused without bcrypt; warn at most once per SHED_LOG_SECONDS."""
        now = time.monotonic()
        with self._cache_lock:
            self._shed_count += 1
            if now - self._shed_logged < SHED_LOG_SECONDS:
                return
            refused, self._shed_count, self._shed_logged = self._shed_count, 0, now
        log.warning(
            "basic auth: password checks refused without bcrypt, too many were waiting for it "
            "(a flood of wrong passwords?)",
            pending=AUTH_PENDING_MAX,
            refused=refused,
        )

    @staticmethod
    def san_allowed(config: WebConfig, peer: Mapping[str, object] | None) -> bool:
        """toolkit `VerifyPeerCertificate`: one of the client certificate's DNS, IP, email or URI SANs
        is in client_allowed_sans. No list configured: any (verified) client passes."""
        if config.allowed_sans is None:
            return True
        names = peer.get("subjectAltName", ()) if peer else ()
        kinds = {"DNS", "IP Address", "email", "URI"}
        for entry in names if isinstance(names, tuple) else ():
            if (
                isinstance(entry, tuple)
                and len(entry) == 2
                and entry[0] in kinds
                and _normal_san(str(entry[1])) in config.allowed_sans
            ):
                return True
        return False
