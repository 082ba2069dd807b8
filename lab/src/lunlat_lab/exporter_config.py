"""The exporter's config for the lab's LUNs, generated from the lab description.

The exporter does not know the lab: it gets ordinary `diskstats:` and `luns:` entries, one per lab
LUN matching its loop device by backing file (`loop_file: <name>.img`), so it labels each lab LUN
with its database, role and workload. `lunlat-lab exporter-config` writes it (deploy/lab/lunlat.yaml
is the committed copy of the shipped description's, kept fresh by CI) and `lab up` writes one into the state directory.
"""

from __future__ import annotations

import yaml

from lunlat.config import Config, DiskstatsConfig, LunEntry, LunMatch
from lunlat_lab.config import LabConfig

HEADER = """\
# The exporter's config for the lab's LUNs: `lunlat serve --config.file THIS_FILE`. Generated from
# the lab description by `lunlat-lab exporter-config [--config LAB_FILE] --output THIS_FILE`; do not
# edit: change the lab description and run that command again.
"""


def exporter_config(lab: LabConfig) -> Config:
    """The exporter's config publishing the lab's LUNs (the loop devices only) with their labels."""
    return Config(
        diskstats=DiskstatsConfig(include="^loop"),  # the lab's LUNs only
        luns=[
            LunEntry(
                match=LunMatch(loop_file=LabConfig.image_name(lun.name)),
                database=lun.database,
                role=lun.role,
                workload=lun.workload,
            )
            for lun in lab.luns
        ],
    )


def render(lab: LabConfig) -> str:
    """exporter_config(lab) as the YAML text of a config file."""
    data = exporter_config(lab).model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    return HEADER + "\n" + yaml.safe_dump(data, sort_keys=False, width=100)
