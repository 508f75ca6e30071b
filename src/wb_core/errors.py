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


# A setting named inside a message: field and default words between separators no one types.
_SETTING = re.compile("\x1f([A-Za-z0-9_]+)\x1e([^\x1f]*)\x1f")


def setting(field: str, words: str) -> str:
    """Name a setting inside a ConfigError message: `field` is its SweepSpec field (the axes table),
    `words` how the message says it by default. Each face words it its own way (`ConfigError.worded`):
    the CLI as its flag, the dashboard as its label."""
    return f"\x1f{field}\x1e{words}\x1f"


class ConfigError(WorkbenchError, ValueError):
    """A setting, spec or flag has a value the workbench cannot use.

    `field` is the setting it is about (a SweepSpec field of the axes table) when there is one: given,
    or the first named in the message with `setting()`. `str(e)` says each setting in its default
    words; `worded(name_of)` in a face's.
    """

    def __init__(self, message="", field: str | None = None):
        self.template = str(message)
        named = _SETTING.findall(self.template)
        self.field = field or (named[0][0] if named else None)
        super().__init__(_SETTING.sub(lambda m: m.group(2), self.template))

    def worded(self, name_of, prefix: bool = False) -> str:
        """The message with each setting named as `name_of(field)` says (None: its default words).

        With `prefix`, a message about a field that names it only in its own words starts with
        `name_of(field)` (the CLI: "--threads: Threads must be at least 1; got 0.")."""
        text = _SETTING.sub(lambda m: name_of(m.group(1)) or m.group(2), self.template)
        name = name_of(self.field) if prefix and self.field and not _SETTING.search(self.template) else None
        return f"{name}: {text}" if name else text


class ModelError(WorkbenchError):
    """A model path is missing, unreadable or in a format the workbench cannot run."""


class StoreError(WorkbenchError):
    """The results database cannot be opened or written."""


class WorkerError(WorkbenchError):
    """A child process failed before it could report a result."""
