"""The `wb` command: a thin layer over the public API (wb_core.api).

`app.py` holds the Typer app and the entry point; each sibling module registers its commands.
"""

from wb_core.cli.app import app, main
# Each module registers its commands on `app`; the import order is the order `wb --help` lists them.
from wb_core.cli import profiling  # noqa: F401, I001
from wb_core.cli import analysis, dashboard, fleet, planning  # noqa: F401, E402

__all__ = ["app", "main"]
