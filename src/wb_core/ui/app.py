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


def _panel(session: DashboardState, title: str, module: str, name: str, **options):
    try:
        return panel_class(module, name)(session, **options)
    except ImportError as e:  # a missing optional module must not take the whole page down
        return w.HTML(message_html(f"The {title} tab is unavailable: {e}.", "error"))


class LazyTabs(w.Tab):
    """Tabs whose panels are built on first selection: the page shows its first tab without waiting
    for the others (each pulls in its own analysis, plotting and export modules)."""

    def __init__(self, session: DashboardState, built: dict):
        self.session = session
        self._built = dict(built)
        slots = [w.VBox([built[title]]) if title in built else w.VBox() for title in TAB_TITLES]
        for slot in slots:
            slot.add_class("wb-tab-slot")
        super().__init__(children=slots, titles=TAB_TITLES)

    def panel(self, title: str, **options):
        """The tab's panel, built now (with `options`) if it has not been yet."""
        if title not in self._built:
            module, name = next((m, n) for t, m, n in TABS if t == title)
            self._built[title] = _panel(self.session, title, module, name, **options)
            self.children[TAB_TITLES.index(title)].children = [self._built[title]]
        return self._built[title]

    def panels(self) -> list:
        """Every tab's panel, in order (building those not built yet)."""
        return [self.panel(title) for title in TAB_TITLES]


def dashboard(db: str | Path | None = None, demo: str | None = None) -> LazyTabs:
    """The whole app. `db` defaults to `$WB_DB` (else ./wb.db); `demo` preselects a demo model,
    and the database's latest study (if any) is opened. Only Start is built before the page shows;
    the other tabs are built when first opened (`tabs.panel(title)` builds one on demand)."""
    session = DashboardState(db)
    start = _panel(session, "Start", *TABS[0][1:])
    tabs = LazyTabs(session, {"Start": start})
    tabs.add_class("wb-dashboard")
    last = session.last_opened_study()
    if last:  # the study's settings and model live in the Sweep tab: it is needed now
        sweep = tabs.panel("Sweep", plot_when_shown=True)
        sweep.studies.value = last
        sweep._on_open()
    elif demo:
        start.model.demo.value = demo

    def on_tab(change):
        # A panel with a `shown()` reads and draws only once it is on screen: the page starts fast.
        if change["new"] is None:
            return
        panel = tabs.panel(TAB_TITLES[change["new"]])
        if hasattr(panel, "shown"):
            panel.shown()

    tabs.observe(on_tab, "selected_index")
    if hasattr(start, "goto"):  # the answer's "see every run", "compare", "plan capacity"
        start.goto = lambda title: setattr(tabs, "selected_index", TAB_TITLES.index(title))
    on_tab({"new": tabs.selected_index})
    return tabs
