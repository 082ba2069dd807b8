"""The exporter's config for the lab's LUNs, generated from the lab description.

The exporter does not know the lab: it gets ordinary `diskstats:` and `luns:` entries, one per lab
LUN matching its loop device by backing file (`loop_file: <name>.img`), so it labels each lab LUN
with its database, role, workload and array. `lunlat-lab exporter-config` writes it (deploy/lab/lunlat.yaml
is the committed copy of the shipped description's, kept fresh by CI) and `lab up` writes one into the state directory,
which publishes that lab's loop devices only: every loop device is published by the first (`^loop`), so
another lab's or any other program's (a snap's) would show as an unlabelled LUN, and a second lab of the
same description would match the same `loop_file` names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from lunlat.config import Config
from lunlat.configfile import CONFIG_MODEL
from lunlat_lab import pgbench
from lunlat_lab.config import LabConfig
from lunlat_lab.defaults import DEFAULT_STATE_DIR

HEADER = """\
# The exporter's config for the lab's LUNs: `lunlat serve --config.file THIS_FILE`. Generated from
# the lab description by `lunlat-lab exporter-config [--config LAB_FILE] --output THIS_FILE`; do not
# edit: change the lab description and run that command again.
"""


def exporter_config(
    lab: LabConfig, state_dir: Path = DEFAULT_STATE_DIR, loops: Mapping[str, str] | None = None
) -> Config:
    """The exporter's config publishing the lab's LUNs (the loop devices only; with `loops`, the lab's
    LUN name → device path as `up` attached them, those devices only) with their labels, and a
    `postgres:` target per pgbench workload (its password in the lab in `state_dir`, lab/pgbench.py)."""
    # Each LUN's lab array as its `array` (a loop device's identity names none): the breach alerts
    # name the other LUNs on the same array (docs/alerting.md, "Why: the cause in the alert").
    luns = [
        {"match": {"loop_file": LabConfig.image_name(lun.name)}, "database": lun.database, "role": lun.role,
         "workload": lun.workload, "array": lun.array}
        for lun in lab.luns
    ]  # fmt: skip
    postgres = []
    for name, workload in lab.pgbench_workloads().items():
        data, _ = lab.pgbench_luns(workload)
        postgres.append({
            "name": data.database, "host": "127.0.0.1", "port": workload.port, "user": pgbench.LOGIN,
            "password_file": str(pgbench.password_file(state_dir, name)), "workload": data.workload,
        })  # fmt: skip
    # The lab's LUNs only (^loop), or its own loop devices; validated as the exporter validates its file.
    sections: dict[str, object] = {
        "diskstats": {"include": own_devices(loops) if loops else "^loop"},
        "luns": luns,
    }
    if postgres:
        sections["postgres"] = postgres
    return CONFIG_MODEL.model_validate(sections)


def own_devices(loops: Mapping[str, str]) -> str:
    """`diskstats.include` for exactly these loop devices (a lab's LUN name → device path)."""
    return "^(" + "|".join(re.escape(Path(device).name) for device in sorted(loops.values())) + ")$"


def render(
    lab: LabConfig, state_dir: Path = DEFAULT_STATE_DIR, loops: Mapping[str, str] | None = None
) -> str:
    """exporter_config(lab, state_dir, loops) as the YAML text of a config file."""
    data = exporter_config(lab, state_dir, loops).model_dump(
        mode="json", exclude_defaults=True, exclude_none=True
    )
    return HEADER + "\n" + yaml.safe_dump(data, sort_keys=False, width=100)
