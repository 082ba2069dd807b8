"""An Oracle target of the config (`oracle:`)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from lunlat.dbtarget import DatabaseTarget, Secret, not_blank, one_secret

# Oracle Net's listener port, Easy Connect's default.
ORACLE_DEFAULT_PORT = 1521
_EASY_CONNECT = re.compile(
    r"(?:tcps?://)?(?://)?(?P<host>\[[^\]]+\]|[^:/?\s]+)(?::(?P<port>\d+))?(?P<rest>[/?].*)?", re.IGNORECASE
)


def easy_connect_endpoint(dsn: str) -> tuple[str, int] | None:
    """(host, port) of an Easy Connect string; None for a TNS alias or a full descriptor."""
    text = dsn.strip()
    if text.startswith("("):
        return None  # (DESCRIPTION=…): an address list, not one host
    found = _EASY_CONNECT.fullmatch(text)
    if found is None:
        return None
    # A bare word (no port, no service, no scheme) is a TNS alias, as python-oracledb reads it.
    if found.group("port") is None and found.group("rest") is None and "://" not in text:
        return None
    port = int(found.group("port")) if found.group("port") else ORACLE_DEFAULT_PORT
    return found.group("host").strip("[]"), port


class OracleTarget(DatabaseTarget):
    """One Oracle database (a CDB root, a PDB or a non-CDB; RAC through its GV$ views)."""

    dsn: str = Field(description="Easy Connect (host:port/service, tcps://… for TLS) or a TNS alias.")
    wallet_location: Path | None = Field(
        default=None, description="Directory with ewallet.pem for TLS / mTLS (tcps:// DSNs)."
    )
    wallet_password_env: str | None = None
    wallet_password_file: Path | None = None
    config_dir: Path | None = Field(default=None, description="Directory of tnsnames.ora for TNS aliases.")

    _blank = field_validator("name", "dsn", "user")(not_blank)

    @model_validator(mode="after")
    def _wallet_password_source(self) -> OracleTarget:
        one_secret(self.wallet_password_env, self.wallet_password_file, "wallet_password", required=False)
        return self

    def secrets(self) -> list[tuple[str, Secret]]:
        wallet = self.wallet_password
        return super().secrets() + ([("wallet_password", wallet)] if wallet is not None else [])

    @property
    def wallet_password(self) -> Secret | None:
        return one_secret(self.wallet_password_env, self.wallet_password_file, "wallet_password", False)

    def endpoint(self) -> tuple[str, int] | None:
        """Host and port of an Easy Connect dsn ([tcp[s]://][//]host[:port][/service][?…], port 1521 by
        default); None for a TNS alias (its address is in tnsnames.ora, not read here)."""
        return easy_connect_endpoint(self.dsn)
