"""The dashboard: the panels in tabs over one shared DashboardState.

`TABS` lists them in order: (title, module in wb_core.ui, class). A tab whose module cannot be
imported says so in place, and the others still work.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import message_html

TABS = (
    ("Start", "start_panel", "StartPanel"),
    ("Sweep", "sweep_panel", "SweepPanel"),
    ("Explore", "explore_panel", "ExplorePanel"),
    ("Export", "export_panel", "ExportPanel"),
    ("Compare", "compare_panel", "ComparePanel"),
    ("Layers", "layers_panel", "LayersPanel"),
    ("Capacity", "capacity_panel", "CapacityPanel"),
)
TAB_TITLES = tuple(t[0] for t in TABS)


def panel_class(module: str, name: str):
    return getattr(importlib.import_module(f"wb_core.ui.{module}"), name)


def _panel(session: DashboardState, title: str, module: str, name: str):
    try:
        return panel_class(module, name)(session)
    except ImportError as e:  # a missing optional module must not take the whole page down
        return w.HTML(message_html(f"The {title} tab is unavailable: {e}.", "error"))


def dashboard(db: str | Path | None = None, demo: str | None = None) -> w.Tab:
    """The whole app. `db` defaults to `$WB_DB` (else ./wb.db); `demo` preselects a demo model,
    and the database's latest study (if any) is opened."""
    session = DashboardState(db)
    panels = {title: _panel(session, title, module, name) for title, module, name in TABS}
    start, sweep = panels["Start"], panels["Sweep"]
    last = session.last_opened_study()
    if last:
        sweep.studies.value = last
        sweep._on_open()
    elif demo:
        start.model.demo.value = demo
    tabs = w.Tab(children=list(panels.values()), titles=TAB_TITLES)
    tabs.add_class("wb-dashboard")

    def on_tab(change):
        # A panel with a `shown()` reads and draws only once it is on screen: the page starts fast.
        panel = tabs.children[change["new"]] if change["new"] is not None else None
        if hasattr(panel, "shown"):
            panel.shown()

    tabs.observe(on_tab, "selected_index")
    if hasattr(start, "goto"):  # the answer's "see every run", "compare", "plan capacity"
        start.goto = lambda title: setattr(tabs, "selected_index", TAB_TITLES.index(title))
    on_tab({"new": tabs.selected_index})
    tabs.session = session
    return tabs
