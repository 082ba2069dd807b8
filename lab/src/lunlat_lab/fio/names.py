"""fio job names: `<workload>@<lun>`, and `<workload>-copy@<lun>` for the snapshot copy of a
snapshot_oltp workload. The job file is written with them and the report is grouped by LUN by them."""

from __future__ import annotations

import re

from lunlat_lab.config import LUN_NAME

COPY_SUFFIX = "-copy"
# Job names become INI section headers and fio job names: no brackets, spaces, '@' or '='.
WORKLOAD_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


def job_name(workload: str, lun: str) -> str:
    return f"{workload}@{lun}"


def copy_name(workload: str, lun: str) -> str:
    return job_name(workload + COPY_SUFFIX, lun)


def split_name(name: str) -> tuple[str, str]:
    """(workload, lun) from `<workload>@<lun>`; ValueError says why a name is not of that form."""
    workload, at, lun = name.rpartition("@")
    if not at:
        raise ValueError("not a lab job name: no '@' between workload and LUN")
    if not workload:
        raise ValueError("not a lab job name: empty workload before '@'")
    if not LUN_NAME.match(lun):
        raise ValueError(f"not a lab job name: {lun!r} after '@' is not a LUN name")
    return workload, lun
