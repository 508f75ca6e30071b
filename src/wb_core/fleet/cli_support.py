"""Opening a fleet executor for the CLI and the API (nothing to open when there is no cluster)."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def open_executor(cluster: str | None, hosts=None, ship_model: bool = False):
    """A DaskExecutor connected to `cluster` for the duration of the block, or None without one."""
    if not cluster:
        yield None
        return
    from wb_core.fleet.dask_executor import DaskExecutor

    executor = DaskExecutor(cluster, hosts=hosts, ship_model=ship_model)
    try:
        yield executor
    finally:
        executor.close()
