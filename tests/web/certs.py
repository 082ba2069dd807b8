"""Throw-away PKI for the TLS tests, made with the openssl command line: a CA, a server certificate
for 127.0.0.1/localhost, a client certificate the CA signed, and one from an unrelated CA."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key_and_csr(cwd: Path, name: str, subject: str) -> None:
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd,
    )  # fmt: skip


def _ca(cwd: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", f"/CN={name}", cwd=cwd,
    )  # fmt: skip


def sign(cwd: Path, name: str, ca: str, san: str, subject: str | None = None) -> None:
    """`name`.key/.crt signed by `ca`, with subjectAltName `san` (e.g. "IP:127.0.0.1")."""
    _key_and_csr(cwd, name, subject or f"/CN={name}")
    (cwd / f"{name}.ext").write_text(f"subjectAltName={san}\n", encoding="utf-8")
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext", cwd=cwd,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Pki:
    dir: Path

    def __getattr__(self, name: str) -> Path:
        return self.dir / name.replace("_", ".")


def make(directory: Path) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (Debian: openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "otherca")
    sign(directory, "server", "ca", "IP:127.0.0.1,DNS:localhost")
    sign(directory, "client", "ca", "DNS:scraper.example,IP:::1")
    sign(directory, "stranger", "otherca", "DNS:scraper.example")
    return Pki(directory)
