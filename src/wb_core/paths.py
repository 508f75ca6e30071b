"""Where the workbench keeps its cache (converted models, demo models)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$WB_CACHE_DIR`, else `~/.cache/cpu-inference-workbench`; created on first use."""
    d = Path(os.environ.get("WB_CACHE_DIR") or Path.home() / ".cache" / "cpu-inference-workbench")
    d.mkdir(parents=True, exist_ok=True)
    return d


def default_db() -> Path:
    """The default results database: `wb.db` in the working directory, or `$WB_DB`."""
    return Path(os.environ.get("WB_DB") or "wb.db")
