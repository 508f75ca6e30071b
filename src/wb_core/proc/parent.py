"""One-shot workers: run one task in a fresh process and get its messages or its result.

Built on `wb_core.proc.supervisor`, which starts workers, multiplexes their channels and says in
one sentence why one ended early (timeout, crash, cancel). Several workers kept in step (multi-
instance groups, pipeline studies) use the supervisor directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from wb_core.errors import WorkerError
from wb_core.proc.supervisor import _ANSI, ChildOutcome, Supervisor, child_env, clean_text

__all__ = ["ChildOutcome", "child_env", "clean_text", "fatal_error", "run_child", "run_task"]


def run_child(task: dict, timeout: float, on_message: Callable[[dict], None] | None = None,
              env: dict | None = None, cancel: threading.Event | None = None,
              memory_limit_mb: int | None = None) -> ChildOutcome:
    """Run one task in a fresh process; call `on_message` for each message as it arrives.

    `timeout`: seconds the worker may stay silent before it is killed. Messages sent before a
    crash, a timeout or a cancel are all passed to `on_message`.
    """
    if memory_limit_mb:
        task = {**task, "memory_limit_mb": memory_limit_mb}
    with Supervisor(timeout=timeout, cancel=cancel) as sup:
        worker = sup.start(task, env=env)
        for _, msg in sup.events():
            if msg is not None and on_message:
                on_message(msg)
    return worker.outcome


def run_task(task: dict, timeout: float, what: str, on_message: Callable[[dict], None] | None = None) -> dict:
    """Run a one-shot task (inspect, convert, demo); return its `result` message or raise WorkerError.

    `on_message`: called with each message as it arrives (a long task's progress)."""
    outcome = run_child(task, timeout=timeout, on_message=on_message)
    results = [m for m in outcome.messages if m.get("type") == "result"]
    if outcome.ok and results:
        return results[-1]
    fatal = [m for m in outcome.messages if m.get("type") == "fatal"]
    if fatal:
        raise fatal_error(fatal[-1], what)
    raise WorkerError(f"Failed while {what}: {outcome.reason()}.{outcome.last_output()}")


def fatal_error(msg: dict, what: str):
    """Rebuild the worker's error in the parent, keeping its class when it is one of ours."""
    from wb_core import errors

    cls = getattr(errors, msg.get("error_type", ""), None)
    text = _ANSI.sub("", str(msg.get("error", "unknown error")))
    if isinstance(cls, type) and issubclass(cls, errors.WorkbenchError):
        return cls(text)
    return WorkerError(f"Failed while {what}: {text}")
