"""Parent side of the child-process protocol.

A child (`python -m wb_core.worker`) reads one JSON task on stdin and answers with lines
`@@WB {json}` on stdout; anything else it prints (runtime logs) is ignored. The parent enforces an
inactivity timeout (reset by every message), kills the child's whole process group on timeout,
and keeps the tail of stderr to explain a crash.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from wb_core.errors import WorkerError

PREFIX = "@@WB "


@dataclass
class ChildOutcome:
    returncode: int | None
    timed_out: bool
    messages: list[dict] = field(default_factory=list)
    stderr_tail: str = ""
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.cancelled

    def reason(self) -> str:
        """One sentence saying why the child did not finish, with the stderr tail after it."""
        if self.cancelled:
            why = "the sweep was cancelled"
        elif self.timed_out:
            why = "the worker stopped responding and was killed after its timeout"
        elif self.returncode is not None and self.returncode < 0:
            sig = -self.returncode
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            why = f"the worker was killed by signal {name}"
            if sig == signal.SIGKILL:
                why += " (out of memory, or killed from outside)"
        else:
            why = f"the worker exited with code {self.returncode}"
        errors = [m.get("error") for m in self.messages if m.get("type") == "fatal"]
        if errors:
            why += f": {errors[-1]}"
        return why


def child_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    # Keep the child importing the same wb_core as the parent, installed or not.
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if extra:
        env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


def run_child(task: dict, timeout: float, on_message: Callable[[dict], None] | None = None,
              env: dict | None = None, cancel: threading.Event | None = None,
              memory_limit_mb: int | None = None) -> ChildOutcome:
    """Run one task in a fresh process; call `on_message` for each message as it arrives."""
    if memory_limit_mb:
        task = {**task, "memory_limit_mb": memory_limit_mb}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wb_core.worker"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_env(env), start_new_session=True, text=True, bufsize=1,
    )
    tail: collections.deque[str] = collections.deque(maxlen=40)
    t_err = threading.Thread(target=lambda: [tail.append(line.rstrip()) for line in proc.stderr], daemon=True)
    t_err.start()
    outcome = ChildOutcome(returncode=None, timed_out=False)
    last = [time.monotonic()]
    lines: collections.deque = collections.deque()
    done = threading.Event()

    def read_stdout():
        for line in proc.stdout:
            if line.startswith(PREFIX):
                try:
                    lines.append(json.loads(line[len(PREFIX):]))
                except json.JSONDecodeError:
                    tail.append(line.rstrip())
        done.set()

    t_out = threading.Thread(target=read_stdout, daemon=True)
    t_out.start()
    try:
        proc.stdin.write(json.dumps(task) + "\n")
        proc.stdin.close()
    except BrokenPipeError:
        pass

    def drain():
        while lines:
            msg = lines.popleft()
            last[0] = time.monotonic()
            outcome.messages.append(msg)
            if on_message and msg.get("type") != "heartbeat":
                on_message(msg)

    try:
        while not done.is_set() or lines:
            drain()
            if cancel is not None and cancel.is_set():
                outcome.cancelled = True
                _kill(proc)
                break
            if time.monotonic() - last[0] > timeout:
                outcome.timed_out = True
                _kill(proc)
                break
            done.wait(0.05)
        drain()
    finally:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - child ignores SIGKILL?!
            _kill(proc)
            proc.wait()
        t_out.join(timeout=5)
        t_err.join(timeout=5)
    drain()
    outcome.returncode = proc.returncode
    outcome.stderr_tail = "\n".join(list(tail)[-20:])
    return outcome


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_task(task: dict, timeout: float, what: str) -> dict:
    """Run a one-shot task (inspect, convert, demo); return its `result` message or raise WorkerError."""
    outcome = run_child(task, timeout=timeout)
    results = [m for m in outcome.messages if m.get("type") == "result"]
    if outcome.ok and results:
        return results[-1]
    fatal = [m for m in outcome.messages if m.get("type") == "fatal"]
    if fatal:
        raise fatal_error(fatal[-1], what)
    raise WorkerError(f"Failed while {what}: {outcome.reason()}.{_tail_hint(outcome.stderr_tail)}")


def fatal_error(msg: dict, what: str):
    """Rebuild the child's error in the parent, keeping its class when it is one of ours."""
    from wb_core import errors

    cls = getattr(errors, msg.get("error_type", ""), None)
    text = msg.get("error", "unknown error")
    if isinstance(cls, type) and issubclass(cls, errors.WorkbenchError):
        return cls(text)
    return WorkerError(f"Failed while {what}: {text}")


def _tail_hint(tail: str) -> str:
    lines = [line for line in tail.splitlines() if line.strip()]
    return f" Last output: {lines[-1][:300]}" if lines else ""
