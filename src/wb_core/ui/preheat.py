"""What the dashboard's kernel does before it has a page, when `wb dashboard` keeps kernels ready.

`wb dashboard` runs Voila with a pool of preheated kernels: each runs the dashboard notebook ahead of
any page request, up to `await_page()`. There it imports what the page's tabs will need, then waits
for the page that takes it; the widgets are built only then, from the database as it is at that
moment. Anywhere else (a kernel Voila starts for one request, JupyterLab, a script) `await_page()`
returns at once and imports nothing.
"""

from __future__ import annotations

import importlib
import os

# Imported by a pooled kernel while it waits (each tab's module, and the libraries the tabs' tables and
# plots load when first drawn), so that no tab pays for them after the page has asked for it.
AHEAD_OF_THE_PAGE = ("pandas", "plotly.graph_objects", "plotly.io")


def preheated() -> bool:
    """Whether this kernel is one of Voila's preheated kernels (Voila sets VOILA_PREHEAT for them)."""
    return os.environ.get("VOILA_PREHEAT") == "True"


def await_page() -> None:
    """In a preheated kernel: import ahead, then wait until a page request takes this kernel."""
    if not preheated():
        return
    from wb_core import api
    from wb_core.ui.app import TABS

    for module in (*(f"wb_core.ui.{m}" for _, m, _ in TABS), *AHEAD_OF_THE_PAGE):
        importlib.import_module(module)
    api.plots  # noqa: B018  (the plots module loads on first use)
    from voila.utils import wait_for_request

    wait_for_request()
