"""Errors that reach the user as one plain sentence."""


class WorkbenchError(Exception):
    """Base class: the message is a complete sentence fit to show a user as is."""


class ConfigError(WorkbenchError, ValueError):
    """A setting, spec or flag has a value the workbench cannot use."""


class ModelError(WorkbenchError):
    """A model path is missing, unreadable or in a format the workbench cannot run."""


class StoreError(WorkbenchError):
    """The results database cannot be opened or written."""


class WorkerError(WorkbenchError):
    """A child process failed before it could report a result."""
