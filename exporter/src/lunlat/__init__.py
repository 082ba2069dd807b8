"""lunlat: per-LUN read and write latency for data and log volumes, against a 1 ms goal."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lunlat")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
