"""Errors that reach the user as one plain sentence."""

import re

# Whole escape sequences first (CSI `ESC [ ... final`, OSC/DCS/APC/PM strings ended by BEL or
# `ESC \`, two-byte `ESC X`), so that no `[2J` or `]0;title` is left behind; then any other
# C0/C1 control character but tab and newline, and the lone surrogates of undecodable file names.
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -~]?"
                      r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text) -> str:
    """`text` fit for a terminal: escape sequences and control characters (but newlines and tabs) removed.

    User-given names (studies, hosts, paths) pass here before they are printed, so a name holding
    terminal escape codes cannot recolour, move or rewrite what the user sees. A setting named with
    `setting()` that no face has worded yet is said in its default words.
    """
    return _CONTROL.sub("", worded(text))


def one_line(text) -> str:
    """`text` as one printable line: `printable`, with every line break (newline, carriage return,
    form feed, Unicode line and paragraph separators) said as a space. For user text inside a
    comment or a single-line message, where a line break would end it."""
    return " ".join(printable(text).splitlines())


# A setting named inside a message: field and default words between separators no one types.
_SETTING = re.compile("\x1f([A-Za-z0-9_]+)\x1e([^\x1f]*)\x1f")


def setting(field: str, words: str) -> str:
    """Name a setting inside a message (an error, a note): `field` is its SweepSpec field (the axes
    table) or its entry in the options table (options.py), `words` how the message says it by
    default (the dashboard's label or plain words, never a CLI flag). Each face words it its own way
    (`worded`): the CLI as its flag, the dashboard as its label."""
    return f"\x1f{field}\x1e{words}\x1f"


def worded(text, name_of=None) -> str:
    """`text` (a `Sentence`, or a string holding `setting()` marks) with each setting named as
    `name_of(field)` says (None, or no `name_of`: its default words)."""
    template = str(getattr(text, "template", text))
    return _SETTING.sub(lambda m: (name_of(m.group(1)) if name_of else None) or m.group(2), template)


def settings_named(text) -> list[str]:
    """The fields `text` names with `setting()`, in order."""
    return [m[0] for m in _SETTING.findall(str(getattr(text, "template", text)))]


class Sentence(str):
    """A note or reason that names settings. As a string it says each in its default words, so
    the API, files and reports read plain text; `template` keeps the settings for a face to word
    (the CLI's `said`, the dashboard's `said`). Joining strings loses it: join with `joined`."""

    template: str

    def __new__(cls, template: str):
        obj = super().__new__(cls, worded(template))
        obj.template = str(getattr(template, "template", template))
        return obj

    def __reduce__(self):
        return (Sentence, (self.template,))


def noun(n, word: str, many: str | None = None) -> str:
    """`word` when `n` is 1, else its plural (`many`, or `word` + s)."""
    return word if float(n) == 1 else (many or word + "s")


def counted(n: int, word: str, many: str | None = None) -> str:
    """`1 point`, `3 points`: a whole count and its noun."""
    return f"{n} {noun(n, word, many)}"


def article(word: str) -> str:
    """`a TensorFlow SavedModel`, `an ONNX`: the word after the article its sound takes (by its first letter)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def were(n) -> str:
    """The verb after a count: `1 point was`, `3 points were`."""
    return "was" if float(n) == 1 else "were"


def joined(parts, sep: str = " ") -> Sentence:
    """Strings joined into one Sentence, the settings each names kept."""
    return Sentence(sep.join(str(getattr(p, "template", p)) for p in parts))


class WorkbenchError(Exception):
    """Base class: the message is a complete sentence fit to show a user as is.

    `field` is the setting it is about (a SweepSpec field of the axes table, or an entry of the
    options table) when there is one: given, or the first named in the message with `setting()`.
    `str(e)` says each setting in its default words; `worded(name_of)` in a face's.
    """

    def __init__(self, message="", field: str | None = None):
        self.template = str(message)
        named = settings_named(self.template)
        self.field = field or (named[0] if named else None)
        super().__init__(worded(self.template))

    def __reduce__(self):  # a copy sent between processes (a fleet's hosts) keeps the setting it names
        return (type(self), (self.template, self.field))

    def worded(self, name_of, prefix: bool = False) -> str:
        """The message with each setting named as `name_of(field)` says (None: its default words).

        With `prefix`, a message about a field that names it only in its own words starts with
        `name_of(field)` (the CLI: "--threads: Threads must be at least 1; got 0.")."""
        text = worded(self.template, name_of)
        name = name_of(self.field) if prefix and self.field and not _SETTING.search(self.template) else None
        return f"{name}: {text}" if name else text


class ConfigError(WorkbenchError, ValueError):
    """A setting, spec or flag has a value the workbench cannot use (see WorkbenchError for `field`)."""


class ModelError(WorkbenchError):
    """A model path is missing, unreadable or in a format the workbench cannot run."""


class StoreError(WorkbenchError):
    """The results database cannot be opened or written."""


class WorkerError(WorkbenchError):
    """A child process failed before it could report a result."""


def check_kind(value, kinds, what: str, how: str = "") -> None:
    """Refuse `value` unless it is one of `kinds` (a type or a tuple of types): a ConfigError saying
    "`what` must be a Kind (`how` to get one); got a Other.", before any work reads a field it lacks."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, kinds):
        return
    wanted = " or ".join(article(k.__name__) for k in kinds if k is not type(None))  # None, where taken, unsaid
    got = "None" if value is None else article(type(value).__name__)
    raise ConfigError(f"{what} must be {wanted}{f' ({how})' if how else ''}; got {got}.")
