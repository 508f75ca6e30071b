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
    "results",
    "profile",
]


def __getattr__(name):
    # Lazy so that `import wb_core` stays cheap (no pandas/runtime import) for workers: the public
    # API (wb_core.api) is re-exported here on first use.
    import importlib
    import importlib.util

    # `from wb_core import hardware` asks for the attribute first: a submodule's name must fall
    # through to the import system, not pull in the API (which imports the submodule itself).
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)
    api = importlib.import_module("wb_core.api")
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'wb_core' has no attribute '{name}'")


def __dir__():
    import importlib

    api = importlib.import_module("wb_core.api")
    return sorted(set(__all__) | set(api.__all__))
