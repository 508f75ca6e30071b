"""ipywidgets panels of the dashboard (Voila pages and JupyterLab): Model, Sweep, Explore, Export.

They call the public API only. `dashboard()` puts all four in tabs; each panel also works alone:

    from wb_core.ui import DashboardState, SweepPanel
    SweepPanel(DashboardState("wb.db"))
"""



def __getattr__(name):
    # Everything imports lazily: Explore and Export pull in the analysis and export modules, and
    # Voila's server imports `wb_core.ui.page_lifetime` without any widget.
    import importlib

    modules = {"dashboard": "app", "await_page": "preheat", "DashboardState": "state",
               "StartPanel": "start_panel", "ModelPanel": "model_panel", "SweepPanel": "sweep_panel",
               "ExplorePanel": "explore_panel", "ExportPanel": "export_panel"}
    if name in modules:
        return getattr(importlib.import_module(f"wb_core.ui.{modules[name]}"), name)
    raise AttributeError(name)


__all__ = ["dashboard", "await_page", "DashboardState", "StartPanel", "ModelPanel", "SweepPanel", "ExplorePanel", "ExportPanel"]
