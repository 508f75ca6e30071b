"""CPU Inference Workbench: profile a model across threads, cores, batch sizes and precisions."""

from wb_core.errors import ConfigError, ModelError, StoreError, WorkbenchError, WorkerError

from wb_core.version import __version__

__all__ = [
    "ConfigError",
    "ModelError",
    "StoreError",
    "WorkbenchError",
    "WorkerError",
    "__version__",
    "load_results",
    "profile",
]


def __getattr__(name):
    # Lazy so that `import wb_core` stays cheap (no pandas/runtime import) for workers.
    if name == "load_results":
        from wb_core.store import load_results

        return load_results
    if name == "profile":
        from wb_core.api import profile

        return profile
    raise AttributeError(name)
