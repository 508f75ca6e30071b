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
import time

CHANNEL_ENV = "WB_CHANNEL"
PARENT_ENV = "WB_PARENT_PID"  # the parent's pid: a worker whose parent is gone ends itself
PDEATHSIG_ENV = "WB_PDEATHSIG"  # set when the parent started the worker from its main thread
WATCH_INTERVAL_S = 0.2

_channel_in = None
_channel_out = None
_lock = threading.Lock()  # heartbeats and results may come from different threads


def watch_parent() -> None:
    """End this worker (and anything it started) within WATCH_INTERVAL_S of its parent's death.

    Runs before anything heavy is imported, so a worker still loading, compiling, warming up or
    evaluating accuracy never outlives a killed sweep. Linux's parent-death signal is asked for too
    when the parent started us from its main thread (the signal follows the starting thread).
    """
    import signal

    expected = int(os.environ.pop(PARENT_ENV, "0") or 0)
    if not expected:
        return
    if os.environ.pop(PDEATHSIG_ENV, "") == "1":
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def die():
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)  # the worker leads its own session: its children go too
        finally:
            os._exit(137)

    if os.getppid() != expected:
        die()

    def watch():
        while True:
            time.sleep(WATCH_INTERVAL_S)
            if os.getppid() != expected:
                die()

    threading.Thread(target=watch, name="wb-parent-watch", daemon=True).start()


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
