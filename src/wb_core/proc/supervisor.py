"""One supervisor for every worker process: start them, multiplex their channels, say how each ended.

A worker (`python -m wb_core.proc.worker`) gets a channel of its own: two pipes whose descriptors
are named in `WB_CHANNEL`, one carrying JSON tasks and start signals in, one carrying JSON
messages out, a line each. Nothing else writes there, so whatever the runtimes print on stdout and
stderr (coloured logs under FORCE_COLOR, progress bars, raw bytes) cannot corrupt a message; that
output is kept only as a tail, decoded with replacement, to explain a crash.

The `Supervisor` waits on every worker's channel, output and exit (a pidfd) with one `selectors`
selector; the selector's timeout is the next deadline: a worker silent for longer than the idle
timeout (every message, heartbeats included, resets it) or past a deadline set for it is killed
with its whole process group, and a cancel request is looked at every CANCEL_CHECK_S. Whatever a
worker said before it died, hung or was cancelled is still delivered. `StartBarrier` starts N
workers on one common clock once all of them are ready.
"""

from __future__ import annotations

import collections
import json
import os
import re
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from wb_core.proc.channel import CHANNEL_ENV, PARENT_ENV, PDEATHSIG_ENV

CANCEL_CHECK_S = 0.05  # how soon a cancel request is seen (a threading.Event cannot be selected on)
REAP_TIMEOUT_S = 30.0  # a worker whose channel has closed exits by then, or is killed
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
_MAX_LINE = 2000  # a progress bar redrawn with \r is one endless "line"
_MAX_PENDING = 1 << 16  # bytes of printed output kept while waiting for the end of a line (never of a message)
_TAIL_LINES = 40


def clean_text(raw: bytes | str) -> str:
    """Printable text from a worker's output: bytes decoded with replacement, colour codes removed."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    text = _ANSI.sub("", text).rstrip("\r\n")
    # A line redrawn with carriage returns (a progress bar) reads as its last state.
    return text.rsplit("\r", 1)[-1].rstrip()[-_MAX_LINE:]


@dataclass
class ChildOutcome:
    """How a worker ended: its exit status, whether it was killed (timeout, deadline, cancel), its messages."""

    returncode: int | None
    timed_out: bool
    messages: list[dict] = field(default_factory=list)
    stderr_tail: str = ""
    cancelled: bool = False
    past_deadline: bool = False  # killed at a deadline its caller set (see Worker.set_deadline)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.cancelled

    def reason(self) -> str:
        """One sentence saying why the worker did not finish (its fatal error, if it sent one, after it)."""
        if self.cancelled:
            why = "the sweep was cancelled"
        elif self.past_deadline:
            why = "the worker did not finish in the time it was given and was killed"
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

    def last_output(self) -> str:
        """' Last output: LINE' from the output tail, or '' when the worker printed nothing."""
        lines = [line for line in self.stderr_tail.splitlines() if line.strip()]
        return f" Last output: {lines[-1][:300]}" if lines else ""

    def sentence(self) -> str:
        """The reason as a sentence, with the last line the worker printed when it died on its own."""
        reason = self.reason()
        detail = "" if self.timed_out or self.cancelled else self.last_output()
        return f"{reason[0].upper()}{reason[1:]}.{detail}"


def child_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    # Keep the worker importing the same wb_core as the parent, installed or not.
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if extra:
        env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


class Worker:
    """One worker process, started by a `Supervisor`. Read its messages through `Supervisor.events`."""

    def __init__(self, task: dict, env: dict | None, keep_channel_open: bool, name: str):
        self.name = name
        task_r, task_w = os.pipe()  # parent -> worker: the task, then start signals
        msg_r, msg_w = os.pipe()    # worker -> parent: JSON messages
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
            # The worker holds its own copies; the parent keeping these would hide the worker's exit.
            for fd in (task_r, msg_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child: int | None = task_w
        self.channel_fd: int | None = msg_r
        self.output_fd: int | None = os.dup(self.proc.stdout.fileno())
        self.proc.stdout.close()  # read through output_fd only, without Python's buffering
        self.exit_fd: int | None = _pidfd(self.proc.pid)
        for fd in (self.channel_fd, self.output_fd):
            os.set_blocking(fd, False)
        self._pending = {self.channel_fd: bytearray(), self.output_fd: bytearray()}
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self.messages: list[dict] = []  # every message but heartbeats, in order
        self.inbox: collections.deque[dict] = collections.deque()  # messages not yet handed out
        self.last_message = time.monotonic()
        self.deadline: float | None = None
        self.outcome: ChildOutcome | None = None  # set once the worker has ended
        self.announced = False  # its end has been delivered by Supervisor.events
        self.send(task)
        if not keep_channel_open:
            self.close_channel()

    # ---- talking to the worker ----
    def send(self, msg: dict) -> None:
        """Write one line to the worker's channel (ignored once the worker is gone: its exit says why)."""
        if self._to_child is None:
            return
        data = (json.dumps(msg) + "\n").encode()
        try:
            while data:
                data = data[os.write(self._to_child, data):]
        except OSError:
            pass

    def close_channel(self) -> None:
        """Close the channel to the worker (it has read all it needs)."""
        if self._to_child is not None:
            os.close(self._to_child)
            self._to_child = None

    def set_deadline(self, seconds: float) -> None:
        """Kill the worker if it has not ended `seconds` from now, however busy it keeps its channel."""
        self.deadline = time.monotonic() + seconds

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker leads its session: its children go too
        except (ProcessLookupError, PermissionError):
            pass

    @property
    def ended(self) -> bool:
        return self.outcome is not None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def idle_for(self) -> float:
        return time.monotonic() - self.last_message

    def stderr_tail(self) -> str:
        return "\n".join(list(self.tail)[-20:])

    # ---- reading ----
    def _read(self, fd: int) -> bool | None:
        """Read what `fd` holds now: True after data, None when it would block, False at end of file."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        buf = self._pending[fd]
        if not data:
            rest = bytes(buf)
            buf.clear()
            if rest:
                self._take_line(fd, rest)  # the last line, unterminated
            return False
        buf += data
        *lines, rest = bytes(buf).split(b"\n")
        buf.clear()
        # A message is kept whole however long (a multi-instance point carries every latency); only
        # the worker's printed output, where a redrawn progress bar never ends its line, is capped.
        buf += rest if fd == self.channel_fd else rest[-_MAX_PENDING:]
        for line in lines:
            self._take_line(fd, line)
        return True

    def _take_line(self, fd: int, raw: bytes) -> None:
        if fd == self.output_fd:
            line = clean_text(raw)
            if line:
                self.tail.append(line)
            return
        if not raw.strip():
            return
        try:
            msg = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            self.tail.append("unreadable message: " + clean_text(raw))
            return
        self.last_message = time.monotonic()
        if msg.get("type") != "heartbeat":  # a heartbeat only says the worker is alive
            self.messages.append(msg)
            self.inbox.append(msg)

    def _drain(self, fd: int | None) -> None:
        """Read everything `fd` holds, up to end of file or until it would block."""
        while fd is not None and self._read(fd):
            pass

    def _close_fds(self) -> None:
        self.close_channel()
        for name in ("channel_fd", "output_fd", "exit_fd"):
            fd = getattr(self, name)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, None)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when the process exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class Supervisor:
    """Runs workers and delivers what they say, one event at a time.

    `timeout`: seconds a worker may stay silent before it is declared hung and killed.
    `cancel`: when set, every worker is killed and `events` ends with `cancelled` true.
    Use as a context manager: leaving it kills and reaps every worker still running.
    """

    def __init__(self, timeout: float, cancel: threading.Event | None = None):
        self.timeout = float(timeout)
        self.cancel = cancel
        self.cancelled = False
        self.workers: list[Worker] = []
        self._selector = selectors.DefaultSelector()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, task: dict, env: dict | None = None, keep_channel_open: bool = False,
              name: str | None = None) -> Worker:
        """Start a worker on `task`. `keep_channel_open`: the worker will be sent more (a start signal)."""
        worker = Worker(task, env, keep_channel_open, name or f"worker {len(self.workers)}")
        self.workers.append(worker)
        for fd in (worker.channel_fd, worker.output_fd, worker.exit_fd):
            if fd is not None:
                self._selector.register(fd, selectors.EVENT_READ, worker)
        return worker

    def running(self) -> list[Worker]:
        return [w for w in self.workers if not w.ended]

    def events(self, workers: Iterable[Worker] | None = None) -> Iterator[tuple[Worker, dict | None]]:
        """Yield (worker, message) for each message as it arrives, and (worker, None) once a worker has
        ended (its `outcome` says how). Ends when the workers watched (all, by default) have ended,
        or on cancel, once every worker is killed and its last messages delivered.

        A worker silent past the timeout, or past its deadline, is killed; the messages it sent
        before are delivered first.
        """
        watched = list(workers) if workers is not None else None
        while True:
            yield from self._deliver()
            pool = watched if watched is not None else self.workers
            if all(w.ended for w in pool):
                return
            if self.cancel is not None and self.cancel.is_set():
                self.cancelled = True
                for w in self.running():
                    self._finish(w, kill=True, cancelled=True)
                yield from self._deliver()
                return
            now = time.monotonic()
            for w in self.running():
                if w.deadline is not None and now >= w.deadline:
                    self._finish(w, kill=True, timed_out=True, past_deadline=True)
                elif now - w.last_message >= self.timeout:
                    w._drain(w.channel_fd)  # a message waiting in the pipe still counts
                    if time.monotonic() - w.last_message >= self.timeout:
                        self._finish(w, kill=True, timed_out=True)
            if any(w.inbox or (w.ended and not w.announced) for w in self.workers):
                continue
            for key, _ in self._selector.select(self._wait_s()):
                w: Worker = key.data
                if w.ended:
                    continue
                if key.fd == w.exit_fd:
                    self._finish(w)
                elif w._read(key.fd) is False:
                    self._selector.unregister(key.fd)
                    if key.fd == w.channel_fd:
                        self._finish(w)  # nothing more will come: the worker is ending
                    else:
                        os.close(key.fd)
                        w.output_fd = None

    def _wait_s(self) -> float:
        now = time.monotonic()
        due = [w.deadline for w in self.running() if w.deadline is not None]
        due += [w.last_message + self.timeout for w in self.running()]
        wait = max(0.0, min(due) - now) if due else CANCEL_CHECK_S
        return min(wait, CANCEL_CHECK_S) if self.cancel is not None else wait

    def _deliver(self) -> Iterator[tuple[Worker, dict | None]]:
        for w in list(self.workers):
            while w.inbox:
                yield w, w.inbox.popleft()
            if w.ended and not w.announced:
                w.announced = True
                yield w, None

    def _finish(self, w: Worker, kill: bool = False, timed_out: bool = False, cancelled: bool = False,
                past_deadline: bool = False) -> None:
        """Reap a worker (killing it first if asked), read what it left in its pipes, record its outcome."""
        if w.ended:
            return
        if not kill and w.exit_fd is not None:
            # Wait for the exit without reaping: the worker's pid, and so its session, stays ours to name.
            kill = not select.select([w.exit_fd], [], [], REAP_TIMEOUT_S)[0]  # lingering (a runtime's teardown)
        # Anything the worker left behind in its session (a forked helper holding its pipes) goes too.
        w.kill()
        try:
            returncode = w.proc.wait(timeout=REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # no pidfd here, and it lingers
            w.kill()
            returncode = w.proc.wait()
        for fd in (w.channel_fd, w.output_fd, w.exit_fd):
            if fd is not None:
                try:
                    self._selector.unregister(fd)
                except (KeyError, ValueError):
                    pass
        w._drain(w.channel_fd)  # the worker is gone: every message it sent is in the pipe
        w._drain(w.output_fd)   # a grandchild may still hold the output: take what is there
        w._close_fds()
        w.outcome = ChildOutcome(returncode=returncode, timed_out=timed_out, messages=list(w.messages),
                                 stderr_tail=w.stderr_tail(), cancelled=cancelled, past_deadline=past_deadline)

    def close(self) -> None:
        """Kill and reap every worker still running (the caller failed or has all it needs)."""
        for w in self.running():
            self._finish(w, kill=True)
        self._selector.close()


class StartBarrier:
    """N workers start measuring together: each says it is ready; once all have, one start time
    (CLOCK_MONOTONIC, shared by every process on Linux) goes to all of them.

    `lead_s`: how far ahead of now the start is, so every worker has the signal before it.
    `window_s`: also send the end of one common measuring window. `close_after`: close each
    worker's channel after the signal (it will be sent nothing more).
    """

    def __init__(self, workers: list[Worker], lead_s: float, window_s: float | None = None,
                 close_after: bool = False):
        self.workers = list(workers)
        self.lead_s, self.window_s, self.close_after = lead_s, window_s, close_after
        self.arrived: set[int] = set()
        self.signal: dict | None = None

    def ready(self, worker: Worker) -> bool:
        """Note that `worker` is ready; True once the start signal has gone to all."""
        self.arrived.add(id(worker))
        if self.signal is None and self.arrived >= {id(w) for w in self.workers}:
            start = time.perf_counter_ns() + int(self.lead_s * 1e9)
            self.signal = {"start_ns": start}
            if self.window_s is not None:
                self.signal["end_ns"] = start + int(self.window_s * 1e9)
            for w in self.workers:
                w.send(self.signal)
                if self.close_after:
                    w.close_channel()
        return self.signal is not None
