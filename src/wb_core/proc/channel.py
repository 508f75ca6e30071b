"""Worker side of the channel to the parent (see wb_core.proc.parent for the parent side).

The parent passes two pipes and names them in `WB_CHANNEL` ("read_fd,write_fd"). Messages are
JSON lines. Nothing else in the worker writes there: stdout and stderr belong to the runtimes.
This lives apart from `wb_core.proc.worker` because that module runs as `__main__`: task modules that
import `emit` must reach the same open channel.
"""

from __future__ import annotations

import json
import os
import threading

CHANNEL_ENV = "WB_CHANNEL"

_channel_in = None
_channel_out = None
_lock = threading.Lock()  # heartbeats and results may come from different threads


def open_channel() -> None:
    """Open the parent's pipes; later subprocesses of this worker neither see nor inherit them."""
    global _channel_in, _channel_out
    spec = os.environ.pop(CHANNEL_ENV, "")
    if not spec:
        raise SystemExit(f"wb_core.proc.worker is started by the workbench, which passes it a channel ({CHANNEL_ENV})")
    fd_in, fd_out = (int(x) for x in spec.split(","))
    for fd in (fd_in, fd_out):
        os.set_inheritable(fd, False)
    _channel_in = os.fdopen(fd_in, "r", encoding="utf-8")
    _channel_out = os.fdopen(fd_out, "w", encoding="utf-8")


def emit(msg: dict) -> None:
    """Send one message to the parent."""
    line = json.dumps(msg, default=str) + "\n"
    with _lock:
        _channel_out.write(line)
        _channel_out.flush()


def receive() -> dict | None:
    """The next message from the parent, or None once the parent has closed the channel."""
    line = _channel_in.readline()
    return json.loads(line) if line else None


def flush() -> None:
    if _channel_out is not None:
        _channel_out.flush()
