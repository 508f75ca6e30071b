"""The dashboard: the four panels in tabs over one shared DashboardState.

Explore and Export need the analysis and export modules; if those cannot be imported, their
tabs say so and the Model and Sweep tabs still work.
"""

from __future__ import annotations

from pathlib import Path

import ipywidgets as w

from wb_core.ui.state import DashboardState
from wb_core.ui.widgets import message_html

TAB_TITLES = ("Model", "Sweep", "Explore", "Export")


def _panel(factory, session: DashboardState, name: str):
    try:
        return factory(session)
    except ImportError as e:  # a missing optional module must not take the whole page down
        return w.HTML(message_html(f"The {name} tab is unavailable: {e}.", "error"))


def dashboard(db: str | Path | None = None, demo: str | None = None) -> w.Tab:
    """The whole app. `db` defaults to `$WB_DB` (else ./wb.db); `demo` preselects a demo model,
    and the database's latest study (if any) is opened."""
    from wb_core.ui.explore_panel import ExplorePanel
    from wb_core.ui.export_panel import ExportPanel
    from wb_core.ui.model_panel import ModelPanel
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(db)
    model = ModelPanel(session)
    sweep = SweepPanel(session)
    studies = session.studies()
    if studies:
        sweep.studies.value = studies[-1]["name"]
        sweep._on_open()
    elif demo:
        model.demo.value = demo
    explore = _panel(ExplorePanel, session, "Explore")
    export = _panel(ExportPanel, session, "Export")
    tabs = w.Tab(children=[model, sweep, explore, export], titles=TAB_TITLES)
    tabs.add_class("wb-dashboard")
    tabs.session = session
    return tabs
