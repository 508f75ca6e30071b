"""Sweeps: measuring a grid or a search of run configurations on this machine (local.py),
the smart search (search.py).

A sweep given an executor (the hosts of a cluster) is run by the package that made the executor:
`wb_core.fleet` registers its runner here when it loads, so this package never imports the fleet.
"""

from __future__ import annotations

from collections.abc import Callable

EXECUTOR_SWEEPS: list[Callable] = []


def register_executor_sweep(run: Callable) -> None:
    """`run(executor, model, spec, db, study, **options)` runs a sweep on an executor's hosts."""
    if run not in EXECUTOR_SWEEPS:
        EXECUTOR_SWEEPS.append(run)
