"""The biolatency source's BPF programs (biolatency.bpf.c, compiled when lunlat is built:
exporter/bpf_build.py) and the thin binding to libbpf that loads them (libbpf.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

OBJECT_NAME = "biolatency.bpf.o"


def object_path() -> Path:
    """Where this installation's compiled object is (it may be missing: built without clang)."""
    return Path(str(resources.files(__name__).joinpath(OBJECT_NAME)))
