"""TDS wire format ([MS-TDS], TDS 7.4) for the test server: packets, PRELOGIN, LOGIN7, SQL batch
text, and the tokens a login and a result need. Only what the SQL Server source's driver path uses.

Byte order: the packet header is big endian, everything inside a message little endian (except
the PRELOGIN option table and the TDS version in LOGINACK, both big endian). Strings are UCS-2 LE;
B_VARCHAR has a 1-byte, US_VARCHAR a 2-byte length in characters.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Literal

# Packet types
SQL_BATCH = 1
RPC = 3
REPLY = 4  # tabular result: every server message
ATTENTION = 6
TRANSACTION_MANAGER = 14
LOGIN7 = 16
PRELOGIN = 18

STATUS_EOM = 0x01  # last packet of a message

HEADER = struct.Struct(">BBHHBB")  # type, status, length (header included), SPID, packet id, window
MIN_PACKET_SIZE = 512
MAX_PACKET_SIZE = 32767

# Tokens
TOKEN_COLMETADATA = 0x81
TOKEN_ERROR = 0xAA
TOKEN_INFO = 0xAB
TOKEN_LOGINACK = 0xAD
TOKEN_ROW = 0xD1
TOKEN_ENVCHANGE = 0xE3
TOKEN_DONE = 0xFD

# DONE status bits
DONE_FINAL = 0x00
DONE_MORE = 0x01
DONE_ERROR = 0x02
DONE_COUNT = 0x10
DONE_ATTN = 0x20
CMD_SELECT = 0xC1  # DONE's CurCmd for a SELECT

# ENVCHANGE types
ENV_DATABASE = 1
ENV_LANGUAGE = 2
ENV_PACKET_SIZE = 4
ENV_COLLATION = 7

# PRELOGIN options
PL_VERSION = 0
PL_ENCRYPTION = 1
PL_INSTOPT = 2
PL_THREADID = 3
PL_MARS = 4
PL_TERMINATOR = 0xFF
ENCRYPT_OFF = 0
ENCRYPT_ON = 1
ENCRYPT_NOT_SUP = 2
ENCRYPT_REQ = 3

TDS_74 = 0x74000004

# SQL_Latin1_General_CP1_CI_AS: LCID 0x0409 with flags, sort id 52
COLLATION = bytes((0x09, 0x04, 0xD0, 0x00, 0x34))

# Data types
INTN = 0x26
FLTN = 0x6D
NVARCHAR = 0xE7
FLAG_NULLABLE = 0x0001


class ProtocolError(ValueError):
    """The client sent something this server does not understand."""


# --- packets ---------------------------------------------------------------------------------


def packets(kind: int, payload: bytes, packet_size: int, spid: int = 0) -> bytes:
    """`payload` as one message of packets of at most `packet_size` bytes, EOM on the last."""
    room = packet_size - HEADER.size
    chunks = [payload[i : i + room] for i in range(0, len(payload), room)] or [b""]
    out = bytearray()
    for number, chunk in enumerate(chunks, start=1):
        status = STATUS_EOM if number == len(chunks) else 0
        out += HEADER.pack(kind, status, HEADER.size + len(chunk), spid, number % 256, 0)
        out += chunk
    return bytes(out)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


@dataclass(frozen=True, slots=True)
class Packet:
    kind: int
    status: int
    payload: bytes

    @property
    def last(self) -> bool:
        return bool(self.status & STATUS_EOM)


def read_packet(sock: socket.socket) -> Packet | None:
    """One packet, or None when the peer closed the connection."""
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    kind, status, length, _spid, _number, _window = HEADER.unpack(header)
    if length < HEADER.size:
        raise ProtocolError(f"packet length {length} < header size")
    payload = _read_exactly(sock, length - HEADER.size)
    if payload is None:
        return None
    return Packet(kind, status, payload)


# --- PRELOGIN --------------------------------------------------------------------------------


def parse_prelogin(payload: bytes) -> dict[int, bytes]:
    options: dict[int, bytes] = {}
    pos = 0
    while pos < len(payload) and payload[pos] != PL_TERMINATOR:
        if pos + 5 > len(payload):
            raise ProtocolError("truncated PRELOGIN option table")
        token, offset, length = struct.unpack_from(">BHH", payload, pos)
        options[token] = payload[offset : offset + length]
        pos += 5
    return options


def build_prelogin(options: list[tuple[int, bytes]]) -> bytes:
    table_size = 5 * len(options) + 1
    table = bytearray()
    data = bytearray()
    for token, value in options:
        table += struct.pack(">BHH", token, table_size + len(data), len(value))
        data += value
    return bytes(table) + bytes((PL_TERMINATOR,)) + bytes(data)


def prelogin_reply(major: int, minor: int, build: int) -> bytes:
    """The server's PRELOGIN: its version, no encryption support (FreeTDS then logs in in clear;
    ENCRYPT_OFF would make it start TLS for the login), no MARS."""
    return build_prelogin(
        [
            (PL_VERSION, struct.pack(">BBHH", major, minor, build, 0)),
            (PL_ENCRYPTION, bytes((ENCRYPT_NOT_SUP,))),
            (PL_INSTOPT, b"\x00"),
            (PL_THREADID, b""),
            (PL_MARS, b"\x00"),
        ]
    )


# --- LOGIN7 ----------------------------------------------------------------------------------

_LOGIN_FIXED = struct.Struct("<IIIIIIBBBBiI")  # 36 bytes: Length … ClientLCID
_LOGIN_FIELDS = ("host", "user", "password", "app", "server", "extension", "library", "language", "database")


@dataclass(frozen=True, slots=True)
class Login:
    tds_version: int
    packet_size: int
    host: str
    user: str
    password: str
    app: str
    server: str
    library: str
    language: str
    database: str

    def __repr__(self) -> str:  # never show the password
        return f"Login(user={self.user!r}, database={self.database!r}, app={self.app!r})"


def decode_password(raw: bytes) -> str:
    """LOGIN7 obfuscation: every byte nibble-swapped, then XOR 0xA5; undone in reverse order."""
    plain = bytes(((b ^ 0xA5) << 4 & 0xF0) | ((b ^ 0xA5) >> 4) for b in raw)
    return plain.decode("utf-16-le")


def parse_login7(payload: bytes) -> Login:
    if len(payload) < _LOGIN_FIXED.size + 4 * len(_LOGIN_FIELDS):
        raise ProtocolError(f"LOGIN7 of {len(payload)} bytes is too short")
    fixed = _LOGIN_FIXED.unpack_from(payload)
    tds_version, packet_size = fixed[1], fixed[2]
    values: dict[str, str] = {}
    for i, name in enumerate(_LOGIN_FIELDS):
        offset, count = struct.unpack_from("<HH", payload, _LOGIN_FIXED.size + 4 * i)
        if name == "extension":  # a byte count, not characters, and not text
            continue
        raw = payload[offset : offset + 2 * count]
        values[name] = decode_password(raw) if name == "password" else raw.decode("utf-16-le")
    return Login(
        tds_version,
        packet_size,
        values["host"],
        values["user"],
        values["password"],
        values["app"],
        values["server"],
        values["library"],
        values["language"],
        values["database"],
    )


# --- SQL batch -------------------------------------------------------------------------------


def batch_text(payload: bytes) -> str:
    """The text of a SQL batch: ALL_HEADERS (TDS 7.2+: a DWORD total length, itself included)
    skipped, the rest UCS-2 LE."""
    if len(payload) >= 4:
        (total,) = struct.unpack_from("<I", payload)
        if 4 <= total <= len(payload):
            payload = payload[total:]
    if len(payload) % 2:
        raise ProtocolError("odd-length UCS-2 batch text")
    return payload.decode("utf-16-le")


# --- tokens ----------------------------------------------------------------------------------


def b_varchar(text: str) -> bytes:
    data = text.encode("utf-16-le")
    return bytes((len(data) // 2,)) + data


def us_varchar(text: str) -> bytes:
    data = text.encode("utf-16-le")
    return struct.pack("<H", len(data) // 2) + data


def _with_length(token: int, body: bytes) -> bytes:
    return struct.pack("<BH", token, len(body)) + body


def env_change(kind: int, new: str, old: str) -> bytes:
    return _with_length(TOKEN_ENVCHANGE, bytes((kind,)) + b_varchar(new) + b_varchar(old))


def env_change_collation(new: bytes) -> bytes:
    return _with_length(TOKEN_ENVCHANGE, bytes((ENV_COLLATION, len(new))) + new + b"\x00")


def login_ack(program: str, version: tuple[int, int, int], tds_version: int = TDS_74) -> bytes:
    major, minor, build = version
    body = bytes((1,)) + struct.pack(">I", tds_version) + b_varchar(program)
    body += struct.pack(">BBH", major, minor, build)
    return _with_length(TOKEN_LOGINACK, body)


def message(
    number: int,
    text: str,
    *,
    severity: int,
    state: int = 1,
    server: str = "",
    procedure: str = "",
    line: int = 1,
    info: bool = False,
) -> bytes:
    """An ERROR token (severity > 10) or, with `info`, an INFO token."""
    body = struct.pack("<iBB", number, state, severity) + us_varchar(text)
    body += b_varchar(server) + b_varchar(procedure) + struct.pack("<i", line)
    return _with_length(TOKEN_INFO if info else TOKEN_ERROR, body)


def done(status: int = DONE_FINAL, rows: int = 0, command: int = 0) -> bytes:
    return struct.pack("<BHHQ", TOKEN_DONE, status, command, rows)


Kind = Literal["int", "float", "nvarchar"]


@dataclass(frozen=True, slots=True)
class Column:
    """A result column: "int" (INTN of `size` 1, 2, 4 or 8 bytes: tinyint … bigint), "float"
    (FLTN 8) or "nvarchar" (`size` characters). Always nullable."""

    name: str
    kind: Kind
    size: int = 8

    def __post_init__(self) -> None:
        if self.kind == "int" and self.size not in (1, 2, 4, 8):
            raise ValueError(f"{self.name}: INTN size {self.size}")
        if self.kind == "float" and self.size != 8:
            raise ValueError(f"{self.name}: FLTN size {self.size}")
        if self.kind == "nvarchar" and not 1 <= self.size <= 4000:
            raise ValueError(f"{self.name}: nvarchar({self.size})")

    def type_info(self) -> bytes:
        if self.kind == "int":
            return bytes((INTN, self.size))
        if self.kind == "float":
            return bytes((FLTN, self.size))
        return bytes((NVARCHAR,)) + struct.pack("<H", 2 * self.size) + COLLATION

    def value(self, value: object) -> bytes:
        if self.kind == "nvarchar":
            if value is None:
                return b"\xff\xff"
            if not isinstance(value, str):
                raise TypeError(f"{self.name}: {value!r} is not text")
            # Code units as they are: NVARCHAR stores 16-bit values and accepts an unpaired surrogate.
            data = value.encode("utf-16-le", "surrogatepass")
            if len(data) > 2 * self.size:
                raise ValueError(f"{self.name}: {value!r} longer than nvarchar({self.size})")
            return struct.pack("<H", len(data)) + data
        if value is None:
            return b"\x00"
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{self.name}: {value!r} is not a number")
            return b"\x08" + struct.pack("<d", value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.name}: {value!r} is not an integer")
        signed = self.size != 1  # tinyint is unsigned
        return bytes((self.size,)) + value.to_bytes(self.size, "little", signed=signed)


def col_metadata(columns: tuple[Column, ...]) -> bytes:
    out = bytearray(struct.pack("<BH", TOKEN_COLMETADATA, len(columns)))
    for column in columns:
        out += struct.pack("<IH", 0, FLAG_NULLABLE) + column.type_info() + b_varchar(column.name)
    return bytes(out)


def row(columns: tuple[Column, ...], values: tuple[object, ...]) -> bytes:
    if len(values) != len(columns):
        raise ValueError(f"{len(values)} values for {len(columns)} columns")
    return bytes((TOKEN_ROW,)) + b"".join(c.value(v) for c, v in zip(columns, values, strict=True))


def result(columns: tuple[Column, ...], rows: list[tuple[object, ...]]) -> bytes:
    """A whole result set: COLMETADATA, ROWs, DONE with the row count."""
    body = b"".join(row(columns, r) for r in rows)
    return col_metadata(columns) + body + done(DONE_COUNT, len(rows), CMD_SELECT)
