"""Errors that reach the user as one plain sentence."""

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]|\x1b\[[0-?]*[ -/]*[@-~]")


def printable(text) -> str:
    """`text` fit for a terminal: escape sequences and control characters (but newlines and tabs) removed.

    User-given names (studies, hosts, paths) pass here before they are printed, so a name holding
    terminal escape codes cannot recolour, move or rewrite what the user sees.
    """
    return _CONTROL.sub("", str(text)).replace("\x1b", "")


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
