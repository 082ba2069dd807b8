"""The devices the host layer publishes, shared with sources that time the same devices.

The diskstats source decides which kernel devices are LUNs worth publishing (its topology and the one
device filter, `host.DeviceFilter`); the biolatency source times block requests of every device the
kernel traces and keeps only these, under the same labels (ground.DEVICE_LABELS). One decision, one
home: the biolatency source never re-reads sysfs itself.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PublishedDevice:
    lun: str
    device: str
    role: str  # "" when no config entry or database gave the LUN a role
    kind: str = "lun"  # ground.KINDS
    database: str = ""
    workload: str = ""

    def label_values(self) -> tuple[str, ...]:
        """The values of ground.DEVICE_LABELS, in its order: the labels every series of the device carries."""
        return (self.lun, self.device, self.kind, self.database, self.role, self.workload)


class PublishedDevices:
    """What the host layer published last: (major, minor) -> device, replaced whole at each change."""

    def __init__(self) -> None:
        self._devices: dict[tuple[int, int], PublishedDevice] = {}
        self._version = 0
        self._ready = threading.Event()

    def publish(self, devices: dict[tuple[int, int], PublishedDevice]) -> None:
        self._devices = devices  # one reference swap: readers see the old or the new dict, whole
        self._version += 1
        self._ready.set()

    def wait(self, timeout: float) -> tuple[int, dict[tuple[int, int], PublishedDevice]]:
        """The version and the devices, waiting up to `timeout` s for the first publication (the host
        layer runs beside the reader in the same scrape)."""
        self._ready.wait(timeout)
        return self._version, self._devices
