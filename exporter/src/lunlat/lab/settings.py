"""Run-time settings the FUSE daemon follows: per-LUN latency, arrays, the calibrated overhead.

A JSON file in the lab's state directory, replaced atomically (write + rename) by `lunlat lab
set-latency` and re-read by the daemon when its mtime changes, so delays change without a remount:

    {"overhead_ms": {"read": 0.24, "write": 0.27},
     "arrays": {"array": {"slots": 8, "bandwidth_mib_s": 400.0}},
     "luns": {"sqlserver1_data": {"array": "array", "read_ms": 0.47, "write_ms": 0.2, "jitter": 0.3}}}

`overhead_ms` is what an I/O costs with no injected delay (FUSE round trip, Python, the loop
driver), measured at `lab up`; the daemon sleeps the target minus that, so diskstats shows the target.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lunlat.files import write_atomic
from lunlat.lab.config import LabConfig


@dataclass(frozen=True, slots=True)
class LunSetting:
    array: str
    read_ms: float
    write_ms: float
    jitter: float


@dataclass(frozen=True, slots=True)
class ArraySetting:
    slots: int
    bandwidth_mib_s: float


@dataclass(frozen=True, slots=True)
class Settings:
    luns: dict[str, LunSetting]
    arrays: dict[str, ArraySetting]
    overhead_ms: dict[str, float] = field(default_factory=lambda: {"read": 0.0, "write": 0.0})

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
        raw = json.loads(text)
        return cls(
            luns={name: LunSetting(**value) for name, value in raw["luns"].items()},
            arrays={name: ArraySetting(**value) for name, value in raw["arrays"].items()},
            overhead_ms={k: float(v) for k, v in raw.get("overhead_ms", {}).items()},
        )

    def save(self, path: Path) -> None:
        write_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> Settings:
        return cls.from_json(path.read_text())
