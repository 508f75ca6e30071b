"""Parent side of the child-process protocol.

A child (`python -m wb_core.proc.worker`) talks to its parent on a channel of its own: two pipes
passed to it (their descriptors named in `WB_CHANNEL`), one carrying JSON tasks and start signals
in, one carrying JSON messages out, a line each. Nothing else writes there, so whatever the
runtimes print on stdout and stderr (coloured logs under FORCE_COLOR, progress bars, raw bytes)
cannot corrupt a message; that output is only kept as a tail, decoded with replacement, to
explain a crash. The parent enforces an inactivity timeout (reset by every message), kills the
child's whole process group on timeout, and reports why a child ended in one sentence.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from wb_core.errors import WorkerError
from wb_core.proc.channel import CHANNEL_ENV, PARENT_ENV, PDEATHSIG_ENV

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
_MAX_LINE = 2000  # a progress bar redrawn with \r is one endless "line"


def clean_text(raw: bytes | str) -> str:
    """Printable text from a child's output: bytes decoded with replacement, colour codes removed."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    text = _ANSI.sub("", text).rstrip("\r\n")
    # A line redrawn with carriage returns (a progress bar) reads as its last state.
    return text.rsplit("\r", 1)[-1].rstrip()[-_MAX_LINE:]


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
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if extra:
        env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


class ChildProc:
    """One running child. Messages arrive on a queue; `send` writes a line to its channel.

    Interactive use (several children kept in step, as for multi-instance runs) keeps the
    channel to the child open; one-shot use goes through `run_child`.
    """

    def __init__(self, task: dict, env: dict | None = None, keep_channel_open: bool = False):
        task_r, task_w = os.pipe()  # parent -> child: the task, then start signals
        msg_r, msg_w = os.pipe()    # child -> parent: JSON messages
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "wb_core.proc.worker"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=child_env({**(env or {}), CHANNEL_ENV: f"{task_r},{msg_w}", PARENT_ENV: os.getpid(),
                               PDEATHSIG_ENV: "1" if threading.current_thread() is threading.main_thread() else ""}),
                pass_fds=(task_r, msg_w), start_new_session=True,
            )
        except BaseException:
            os.close(task_w)
            os.close(msg_r)
            raise
        finally:
            # The child holds its own copies; the parent keeping these would hide the child's exit.
            for fd in (task_r, msg_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = os.fdopen(task_w, "wb", buffering=0)
        self._from_child = os.fdopen(msg_r, "rb")
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.queue: collections.deque = collections.deque()
        self.eof = threading.Event()
        self.last_message = time.monotonic()
        self._t_err = threading.Thread(target=self._read_output, daemon=True)
        self._t_out = threading.Thread(target=self._read_channel, daemon=True)
        self._t_err.start()
        self._t_out.start()
        self.send(task)
        if not keep_channel_open:
            self.close_channel()

    def _read_output(self):
        """Whatever the child prints (stdout and stderr): kept only as the tail that explains a crash."""
        try:
            for raw in self.proc.stdout:
                line = clean_text(raw)
                if line:
                    self.tail.append(line)
        except (OSError, ValueError):  # closed by wait() while a grandchild still held the pipe
            pass

    def _read_channel(self):
        try:
            for raw in self._from_child:
                try:
                    self.queue.append(json.loads(raw.decode("utf-8")))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    self.tail.append("unreadable message: " + clean_text(raw))
        except (OSError, ValueError):  # closed by wait()
            pass
        self.eof.set()

    def send(self, msg: dict) -> None:
        try:
            self._to_child.write((json.dumps(msg) + "\n").encode())
        except (BrokenPipeError, ValueError, OSError):
            pass  # the child is gone; its exit status tells why

    def close_channel(self) -> None:
        """Close the channel to the child (it has read its task and needs nothing more)."""
        try:
            self._to_child.close()
        except OSError:
            pass

    def messages(self):
        """Pop the messages that have arrived (heartbeats only refresh the timer)."""
        while self.queue:
            msg = self.queue.popleft()
            self.last_message = time.monotonic()
            if msg.get("type") != "heartbeat":
                yield msg

    def idle_for(self) -> float:
        return time.monotonic() - self.last_message

    @property
    def finished(self) -> bool:
        return self.eof.is_set() and not self.queue

    def kill(self) -> None:
        _kill(self.proc)

    def wait(self) -> int:
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a child that ignores SIGKILL
            self.kill()
            self.proc.wait()
        self._t_out.join(timeout=5)
        self._t_err.join(timeout=5)
        self.close_channel()
        for stream in (self._from_child, self.proc.stdout):
            try:
                stream.close()
            except (OSError, ValueError):  # a reader still blocked on it gets EOF or an error: both end it
                pass
        return self.proc.returncode

    def stderr_tail(self) -> str:
        return "\n".join(list(self.tail)[-20:])


def run_child(task: dict, timeout: float, on_message: Callable[[dict], None] | None = None,
              env: dict | None = None, cancel: threading.Event | None = None,
              memory_limit_mb: int | None = None) -> ChildOutcome:
    """Run one task in a fresh process; call `on_message` for each message as it arrives."""
    if memory_limit_mb:
        task = {**task, "memory_limit_mb": memory_limit_mb}
    child = ChildProc(task, env=env)
    outcome = ChildOutcome(returncode=None, timed_out=False)

    def drain():
        for msg in child.messages():
            outcome.messages.append(msg)
            if on_message:
                on_message(msg)

    try:
        while not child.finished:
            drain()
            if cancel is not None and cancel.is_set():
                outcome.cancelled = True
                child.kill()
                break
            if child.idle_for() > timeout:
                outcome.timed_out = True
                child.kill()
                break
            child.eof.wait(0.05)
    except BaseException:
        child.kill()  # the parent failed (a store error, Ctrl-C): never leave a worker behind
        raise
    finally:
        outcome.returncode = child.wait()
    drain()
    outcome.stderr_tail = child.stderr_tail()
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
    text = _ANSI.sub("", str(msg.get("error", "unknown error")))
    if isinstance(cls, type) and issubclass(cls, errors.WorkbenchError):
        return cls(text)
    return WorkerError(f"Failed while {what}: {text}")


def _tail_hint(tail: str) -> str:
    lines = [line for line in tail.splitlines() if line.strip()]
    return f" Last output: {lines[-1][:300]}" if lines else ""
