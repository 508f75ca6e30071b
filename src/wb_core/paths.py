"""Where the workbench keeps its cache (converted models, demo models)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$WB_CACHE_DIR`, else `~/.cache/cpu-inference-workbench`; created on first use."""
    d = Path(os.environ.get("WB_CACHE_DIR") or Path.home() / ".cache" / "cpu-inference-workbench")
    d.mkdir(parents=True, exist_ok=True)
    return d


def given_path(value, what: str) -> Path:
    """`value` as a Path when it is one a user can give (a str or os.PathLike); else a ConfigError naming
    `what` ("The model", "The results database") and what it got, before anything is read or stored."""
    from wb_core.errors import ConfigError, article

    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        return Path(value)
    shown = f" ({value!r})" if isinstance(value, (int, float, bool)) else ""
    raise ConfigError(f"{what} must be a path (a str or pathlib.Path); got {article(type(value).__name__)}{shown}.")


def default_db() -> Path:
    """The default results database: `wb.db` in the working directory, or `$WB_DB`."""
    return Path(os.environ.get("WB_DB") or "wb.db")


def _writable_folder(folder: Path) -> Path | None:
    """The nearest existing folder at or above `folder`, if a file can be created in it (tried, not
    guessed from permission bits: a read-only mount refuses even root); else None."""
    import tempfile

    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".wb-probe-"):
            return probe
    except OSError:
        return None


def _check_name_lengths(p: Path, flag: str) -> None:
    """Refuse a path with a component longer than its file system allows (NAME_MAX: 255 bytes on Linux),
    before any work: the write at the end would fail with "File name too long"."""
    from wb_core.errors import ConfigError

    probe = p
    while probe != probe.parent:
        try:
            if probe.exists():
                break
        except OSError:  # a name too long to look up (ENAMETOOLONG) does not exist either
            pass
        probe = probe.parent
    try:
        limit = int(os.pathconf(probe, "PC_NAME_MAX"))
    except (OSError, ValueError, TypeError):
        limit = 255
    for part in p.parts:
        size = len(os.fsencode(part))
        if size > limit:
            shown = part if len(part) <= 40 else part[:37] + "..."
            raise ConfigError(f"{flag} has a name of {size} bytes ('{shown}'), longer than the {limit} bytes a file or "
                              f"folder name may have there; choose a shorter one.")


def check_output_file(path: str | Path, flag: str | None = None) -> Path:
    """A file the command will write, checked before any work: not a folder, in a place that can be written.

    `flag`: how messages name the setting (default: the `out` setting, which each face words its way)."""
    from wb_core.errors import ConfigError, setting

    flag = flag or setting("out", "The output file")
    p = given_path(path, flag).expanduser()
    _check_name_lengths(p, flag)
    if p.is_dir():
        raise ConfigError(f"{flag} '{p}' is a folder; give a file name, e.g. {p / 'plots.html'}.")
    if p.exists() and not p.is_file():
        raise ConfigError(f"{flag} '{p}' is not a regular file; give a file name.")
    parent = p.parent if str(p.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{flag} '{p}' lies under '{parent}', which is a file; choose another.")
    if _writable_folder(parent) is None or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"{flag} '{p}' is in a place this user cannot write to; choose another.")
    return p


def check_output_folder(path: str | Path, flag: str | None = None) -> Path:
    """A folder the command will write into, checked before any work: not a file, writable."""
    from wb_core.errors import ConfigError, setting

    flag = flag or setting("out", "The output folder")
    p = given_path(path, flag).expanduser()
    _check_name_lengths(p, flag)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} '{p}' is a file; give a folder to write into.")
    if _writable_folder(p) is None:
        raise ConfigError(f"{flag} '{p}' is in a place this user cannot write to; choose another.")
    return p


def write_output_file(path: str | Path, text: str, flag: str | None = None) -> Path:
    """Write `text` to a checked output file, creating its folders; a failure is one sentence."""
    from wb_core.errors import ConfigError, setting

    p = check_output_file(path, flag)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"Cannot write {flag or setting('out', 'the output file')} '{p}': {e.strerror or e}.") from None
    return p



NAME_MAX_BYTES = 255  # the longest file or folder name Linux file systems take (NAME_MAX)


def _name_bytes(text: str) -> int | None:
    try:
        return len(os.fsencode(text))
    except UnicodeError:  # a lone surrogate that no file name decodes to
        return None


def check_path_component(name: str, flag: str, folder: str | None = None, instead: str = "choose another") -> str:
    """`name` (or `folder`, the file or folder name made from it) checked as one name, before any work:
    no '/' or '\\', not '.' or '..', no NUL or other control character, at most 255 bytes. Returns it.

    `flag` names the setting in messages (`setting("study", "The study name")`); `instead` says what
    to do. A name that fails would write outside the folder asked for, or fail only when written."""
    from wb_core.errors import ConfigError, one_line

    text = str(name if folder is None else folder)
    size = _name_bytes(text)
    why = None
    if not text.strip():
        why = "is empty"
    elif text in (".", "..") or "/" in text or "\\" in text:
        why = "must be one file or folder name, without '/', '\\' or '..'"
    elif "\x00" in text:
        why = "holds a NUL byte, which no file name can hold"
    elif any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
        why = "holds control characters (a line break, an escape code), which do not belong in a file name"
    elif size is None:
        why = "holds characters no file name can be written with"
    elif size > NAME_MAX_BYTES:
        why = f"is {size} bytes long, past the {NAME_MAX_BYTES} bytes a file name may have"
    if why:
        made = "" if folder is None else f", which names the folder '{one_line(folder)}',"
        raise ConfigError(f"{flag} '{one_line(name)}'{made} {why}; {instead}.")
    return text
