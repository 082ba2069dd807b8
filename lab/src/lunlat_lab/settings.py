"""Run-time settings the FUSE daemon follows: per-LUN latency, arrays, the calibrated overhead.

A JSON file in the lab's state directory, replaced atomically (write + rename) by `lunlat-lab
set-latency` and re-read by the daemon when its mtime changes, so delays change without a remount:

    {"overhead_ms": {"read": 0.24, "write": 0.27},
     "arrays": {"array": {"slots": 8, "bandwidth_mib_s": 400.0}},
     "luns": {"sqlserver1_data": {"array": "array", "read_ms": 0.47, "write_ms": 0.2, "jitter": 0.3}}}

`overhead_ms` is what an I/O costs with no injected delay (FUSE round trip, Python, the loop
driver), measured at `lab up`; the daemon sleeps the target minus that, so diskstats shows the target.
The values obey the same bounds as the lab description (lab/config.py), checked when read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from pydantic_core import ErrorDetails

from lunlat.files import write_atomic
from lunlat_lab.config import Bandwidth, DelayMs, Jitter, LabConfig, Slots
from lunlat_lab.errors import LabError

# Read as written, no coercion: a slot count of 8.5 or "8" is refused, not rounded or parsed.
_STRICT = ConfigDict(strict=True)


class SettingsError(LabError):
    """The settings file cannot be used; the message says why."""


@with_config(_STRICT)
@dataclass(frozen=True, slots=True)
class LunSetting:
    array: str
    read_ms: DelayMs
    write_ms: DelayMs
    jitter: Jitter


@with_config(_STRICT)
@dataclass(frozen=True, slots=True)
class ArraySetting:
    slots: Slots
    bandwidth_mib_s: Bandwidth


@with_config(_STRICT)
@dataclass(frozen=True, slots=True)
class Settings:
    luns: dict[str, LunSetting]
    arrays: dict[str, ArraySetting]
    overhead_ms: dict[str, DelayMs] = field(default_factory=lambda: {"read": 0.0, "write": 0.0})

    @classmethod
    def from_config(cls, config: LabConfig) -> Settings:
        return cls(
            luns={
                lun.name: LunSetting(lun.array, lun.latency.read_ms, lun.latency.write_ms, lun.latency.jitter)
                for lun in config.luns
            },
            arrays={name: ArraySetting(a.slots, a.bandwidth_mib_s) for name, a in config.arrays.items()},
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """Settings from JSON text, every value within its bounds and every LUN on a known array;
        SettingsError lists what is wrong."""
        try:
            settings = _VALIDATOR.validate_json(text)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(part) for part in err['loc']) or 'the file'}: {err['msg']}"
                # The value, where it is one (not a section, and not the whole text of bad JSON).
                + (f" (got {err['input']!r})" if _quotable(err) else "")
                for err in exc.errors()
            ]
            raise SettingsError("; ".join(problems)) from None
        unknown = [f"LUN {n}: array {s.array!r} is not in arrays" for n, s in settings.luns.items()
                   if s.array not in settings.arrays]  # fmt: skip
        if unknown:
            raise SettingsError("; ".join(unknown))
        return settings

    def check(self) -> None:
        """SettingsError when these settings would not be accepted by the daemon."""
        Settings.from_json(self.to_json())

    def save(self, path: Path) -> None:
        write_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> Settings:
        return load_settings(path)


_VALIDATOR = TypeAdapter(Settings)


def _quotable(err: ErrorDetails) -> bool:
    return err["type"] != "json_invalid" and not isinstance(err.get("input"), dict | list)


def load_settings(path: Path) -> Settings:
    """The settings in `path`; SettingsError names the file and what is wrong with it."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return Settings.from_json(text)
    except SettingsError as exc:
        raise SettingsError(f"{path} is not a valid settings file: {exc}") from None
