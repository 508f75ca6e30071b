"""The `wb` command: a thin layer over the public API (wb_core.api).

`app.py` holds the Typer app and the entry point; each sibling module registers its commands.
"""
# The import order below is the order `wb --help` lists the commands (pyproject exempts it from isort).

from wb_core.cli.app import app, main
from wb_core.cli import profiling  # noqa: F401 - registers hw, demo-model, inspect, profile, results, studies
from wb_core.cli import studies  # noqa: F401 - pipeline, train-profile
from wb_core.cli import generation  # noqa: F401 - generate, generate-recommend, generate-export
from wb_core.cli import analysis  # noqa: F401 - recommend, report, layers, export, serve-check, confirm
from wb_core.cli import planning  # noqa: F401 - plan, capacity
from wb_core.cli import fleet  # noqa: F401 - hosts, compare-hosts
from wb_core.cli import dashboard  # noqa: F401 - dashboard
from wb_core.cli import tune  # noqa: F401 - tune

__all__ = ["app", "main"]
