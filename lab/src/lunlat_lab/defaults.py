"""The lab's defaults, shipped with the package so that every command works from any directory."""

from __future__ import annotations

from pathlib import Path

# The lab description `up` and `exporter-config` read without --config: package data, beside this.
DEFAULT_LAB_FILE = Path(__file__).with_name("lab.yaml")
# Where the lab keeps its files and state (tmpfs: see the lab's documentation).
DEFAULT_STATE_DIR = Path("/run/lunlat-lab")
