"""The `wb` command: a thin layer over the public API (wb_core.api).

`app.py` holds the Typer app and the entry point; each sibling module registers its commands.
"""

# Each module registers its commands on `app`; the import order is the order `wb --help` lists them.
from wb_core.cli import (  # noqa: F401
    analysis,
    dashboard,
    fleet,
    planning,
    profiling,
)
from wb_core.cli.app import app, main

__all__ = ["app", "main"]
