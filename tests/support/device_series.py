"""A host source's per-device families as tests read them: by (lun, device)."""

from __future__ import annotations

from lunlat import ground
from lunlat.model import Family


def by_device(family: Family) -> dict[tuple[str, ...], float]:
    """The family's values keyed by (lun, device); a family without those labels by all its label
    values. The kind and roles every device series also carries (ground.DEVICE_ROLE_LABELS) are left
    out of the key: `role_labels` says what they are."""
    values = family.by_labels()
    if family.spec.labels[:2] != ("lun", "device"):
        return values
    keyed = {key[:2]: value for key, value in values.items()}
    assert len(keyed) == len(values), f"{family.spec.name}: a device published twice"
    return keyed


def role_labels(family: Family) -> dict[tuple[str, str], dict[str, str]]:
    """The kind and roles (ground.DEVICE_ROLE_LABELS) each device's series carry, by (lun, device)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for _, labels, _ in family.all_samples():
        named = labels.as_dict()
        found[(named["lun"], named["device"])] = {k: named[k] for k in ground.DEVICE_ROLE_LABELS}
    return found
