"""The installed distribution's version, read from its metadata (pyproject.toml is
the one place it is written), so no module needs the package root for it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("strand")
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0+unknown"
