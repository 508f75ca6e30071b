"""ipywidgets panels of the dashboard (Voila pages and JupyterLab): Model, Sweep, Explore, Export.

They call the public API only. `dashboard()` puts all four in tabs; each panel also works alone:

    from wb_core.ui import DashboardState, SweepPanel
    SweepPanel(DashboardState("wb.db"))
"""

from wb_core.ui.app import dashboard
from wb_core.ui.state import DashboardState


def __getattr__(name):
    # Panels import lazily: Explore and Export pull in the analysis and export modules.
    import importlib

    modules = {"StartPanel": "start_panel", "ModelPanel": "model_panel", "SweepPanel": "sweep_panel",
               "ExplorePanel": "explore_panel", "ExportPanel": "export_panel"}
    if name in modules:
        return getattr(importlib.import_module(f"wb_core.ui.{modules[name]}"), name)
    raise AttributeError(name)


__all__ = ["dashboard", "DashboardState", "StartPanel", "ModelPanel", "SweepPanel", "ExplorePanel", "ExportPanel"]
