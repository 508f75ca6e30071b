"""Inputs that are streams rather than files: standard input (`-`), a pipe (`<(command)`), a FIFO.

A stream can be read once, and a FIFO nobody writes to blocks its reader forever. So a stream is
read here, once, within a time limit, into a file in the cache named by its content; everything
after reads that file like any other.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
from pathlib import Path

from wb_core.errors import ConfigError
from wb_core.paths import cache_dir

STREAM_TIMEOUT_S = 30.0
MAX_STREAM_BYTES = 256 << 20


def kind_of(path: str | Path) -> str | None:
    """'a FIFO', 'a character device', 'a block device', 'a socket' for a special file, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, word in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return None


def is_stream(source) -> bool:
    """`-` (standard input) or a path that is a pipe or FIFO."""
    return str(source) == "-" or kind_of(source) == "a FIFO (named pipe)"


def _read_all(source: str, limit: int) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read(limit + 1)
    with open(source, "rb") as f:  # blocks until a writer opens a named FIFO: hence the thread
        return f.read(limit + 1)


def read_stream(source, what: str, timeout_s: float = STREAM_TIMEOUT_S, limit: int = MAX_STREAM_BYTES) -> bytes:
    """The bytes of a stream, refusing in one sentence one that gives nothing within `timeout_s`."""
    name = "standard input" if str(source) == "-" else f"'{source}'"
    result: dict = {}

    def run():
        try:
            result["data"] = _read_all(str(source), limit)
        except OSError as e:
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)  # a reader that never returns must not keep the process
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise ConfigError(f"{what} {name} is a stream that gave nothing within {timeout_s:g} s (nobody writes to "
                          f"it?); write to it, or give a file.")
    if "error" in result:
        raise ConfigError(f"{what} {name} cannot be read ({result['error'].strerror or result['error']}).")
    data = result["data"]
    if len(data) > limit:
        raise ConfigError(f"{what} {name} holds more than {limit >> 20} MiB; give a file of at most that size.")
    return data


def stream_to_file(source, what: str, suffix: str = ".txt", timeout_s: float = STREAM_TIMEOUT_S) -> Path:
    """A stream's content in a cache file named by its hash (a plain path passes through as is)."""
    if not is_stream(source):
        return Path(source)
    data = read_stream(source, what, timeout_s)
    folder = cache_dir() / "streams"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


def refuse_special(path, what: str, error=ConfigError) -> None:
    """Refuse a FIFO, device or socket where a regular file is read: opening one could wait forever."""
    special = kind_of(path) if str(path) != "-" else None
    if special:
        raise error(f"{what} '{path}' is {special}, not a regular file; give a file.")
