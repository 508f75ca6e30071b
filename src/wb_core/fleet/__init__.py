"""Studies across a fleet: one sweep on the hosts of a cluster, compared by hardware type.

`DaskExecutor` reaches the hosts (Dask distributed); `wb_core.sweep.local.run_sweep(..., executor=...)`
runs a study on them (`fleet.sweep`); `fleet.compare` and `fleet.plots` put host types side by
side. See docs/fleet.md.
"""

from wb_core.fleet.hosts import HARDWARE_TYPE_ENV, HOST_LABEL_ENV, Host
from wb_core.sweep import register_executor_sweep


def _run_fleet_sweep(*args, **kw):
    from wb_core.fleet.sweep import run_fleet_sweep

    return run_fleet_sweep(*args, **kw)


register_executor_sweep(_run_fleet_sweep)  # `run_sweep(..., executor=...)` runs here


def __getattr__(name):
    # Lazy: Dask is imported only when a cluster is used.
    if name == "DaskExecutor":
        from wb_core.fleet.dask_executor import DaskExecutor

        return DaskExecutor
    if name in ("run_fleet_sweep", "fleet_key"):
        from wb_core.fleet import sweep

        return getattr(sweep, name)
    raise AttributeError(name)


__all__ = ["DaskExecutor", "HARDWARE_TYPE_ENV", "HOST_LABEL_ENV", "Host", "fleet_key", "run_fleet_sweep"]
