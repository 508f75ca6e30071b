"""Find, start and stop a real `tritonserver`, on loopback only, and read why it failed.

The registries' one Triton build for CPUs is the binary inside nvidia-pytriton (0.7.0 ships
tritonserver 2.51 with the Python backend only). Install it without its dependencies, whose
numpy<2 pin conflicts with this project: `pip install --no-deps nvidia-pytriton==0.7.0`.
A tritonserver of a Triton container (/opt/tritonserver) works too.

The Python backend runs each model instance in a stub process that embeds this Python: the stub
finds the interpreter (and so this environment's site-packages) as `python3` on PATH, and needs
the libpython it was built against on the library path. `TritonServer` sets both.

`TritonServer.stop()` ends the server and its stubs by their process ids, always: SIGTERM, then
SIGKILL for whatever is left after a grace period.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from wb_core.errors import ConfigError, WorkbenchError, setting

GIVEN = setting("tritonserver", "the tritonserver path")
INSTALL_HINT = ("install one with `pip install --no-deps nvidia-pytriton==0.7.0` (a real tritonserver 2.51 with its "
                "Python backend; --no-deps because its numpy<2 pin conflicts with this project), or give its path "
                f"({GIVEN})")
# Triton's error when a model's backend library is not installed (model_lifecycle.cc, 2.51).
MISSING_BACKEND = re.compile(r"unable to find backend library for backend '([^']+)'")


@dataclass
class TritonInstall:
    binary: Path
    backends: Path | None  # a backend directory holding python/ (None: prepared per server from pytriton)
    stub: Path | None  # the Python backend stub for this Python version (pytriton ships one per version)
    python_backend: Path | None  # the folder with libtriton_python.so and triton_python_backend_utils.py
    version: str | None = None


def find_tritonserver(explicit: str | Path | None = None) -> TritonInstall:
    """The tritonserver to use: `explicit`, $WB_TRITONSERVER, `tritonserver` on PATH, or nvidia-pytriton's."""
    candidates = []
    if explicit:
        candidates.append((GIVEN, Path(explicit)))
    elif os.environ.get("WB_TRITONSERVER"):
        candidates.append(("WB_TRITONSERVER", Path(os.environ["WB_TRITONSERVER"])))
    else:
        on_path = shutil.which("tritonserver")
        if on_path:
            candidates.append(("PATH", Path(on_path)))
        spec = importlib.util.find_spec("pytriton")  # finds the package without importing it
        if spec is not None and spec.submodule_search_locations:
            root = Path(list(spec.submodule_search_locations)[0]) / "tritonserver"
            candidates.append(("nvidia-pytriton", root / "bin" / "tritonserver"))
    for source, binary in candidates:
        if source in (GIVEN, "WB_TRITONSERVER") and binary.is_dir():
            raise ConfigError(f"The tritonserver given by {source} ('{binary}') is a folder; give the tritonserver "
                              f"program itself (its bin/tritonserver).")
        if source in (GIVEN, "WB_TRITONSERVER") and not binary.is_file():
            raise ConfigError(f"The tritonserver given by {source} ('{binary}') does not exist.")
        if not binary.is_file() or not os.access(binary, os.X_OK):
            continue
        root = binary.resolve().parent.parent
        pyversion = f"{sys.version_info[0]}.{sys.version_info[1]}"
        stubs = root / "python_backend_stubs"
        if stubs.is_dir():  # nvidia-pytriton's layout: one stub per Python version, linked in per server
            stub = stubs / pyversion / "triton_python_backend_stub"
            if not stub.is_file():
                raise ConfigError(f"The tritonserver in '{root}' has no Python backend stub for Python {pyversion}.")
            return TritonInstall(binary, None, stub, root / "backends" / "python")
        for backends in (root / "backends", Path("/opt/tritonserver/backends")):
            if (backends / "python" / "libtriton_python.so").is_file():
                return TritonInstall(binary, backends, None, backends / "python")
        return TritonInstall(binary, root / "backends", None, None)
    raise ConfigError(f"No tritonserver found: {INSTALL_HINT}.")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port_free(port: int) -> None:
    if not 1 <= int(port) <= 65535:
        raise ConfigError(f"Port {port} is not a port number (1-65535).")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", int(port)))
        except OSError:
            raise ConfigError(f"Port {port} on 127.0.0.1 is in use; choose another ({setting('port', 'Port')}), or "
                              "leave it out to use free ports.") from None


def python_env() -> dict[str, str]:
    """Environment for tritonserver whose Python backend stubs run this Python and its packages."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    libdir = sysconfig.get_config_var("LIBDIR")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir:
        env["LD_LIBRARY_PATH"] = libdir + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.pop("PYTHONHOME", None)
    return env


def first_error(log: str) -> str | None:
    """The most telling error line of a tritonserver log, as a plain phrase."""
    lines = log.splitlines()
    patterns = [r"failed to load '[^']+' version \d+: (.*)", r"Poll failed for model directory '[^']+': (.*)",
                r"Error parsing text-format [^:]*: (.*)", r"(failed to start [A-Za-z]+ service.*)",
                r"(Address already in use.*)", r"error: (.*)", r"^E\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] \"?(.*?)\"?$"]
    for pat in patterns:
        for line in lines:
            m = re.search(pat, line)
            if m:
                text = m.group(1).strip().strip('"').replace("\\n", " ").strip()
                return re.sub(r"\s+", " ", text)[:400]
    return None


class TritonServer:
    """A tritonserver process on 127.0.0.1; use as a context manager, or call start() / stop()."""

    def __init__(self, repository: str | Path, install: TritonInstall | None = None, flags: list[str] = (),
                 http_port: int | None = None, grpc_port: int | None = None, workdir: str | Path | None = None,
                 cpus: list[int] | None = None, strict: bool = True, models: list[str] | None = None):
        """`models`: load only these (explicit model control); None loads the whole repository."""
        self.install = install or find_tritonserver()
        self.models = list(models) if models else None
        self.repository = Path(repository)
        self.flags = list(flags)
        if http_port is not None:
            check_port_free(http_port)
            check_port_free(grpc_port or http_port + 1)
        self.http_port = http_port or free_port()
        self.grpc_port = grpc_port or (http_port + 1 if http_port else free_port())
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="wb-triton-")
            workdir = self._tmp.name
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "tritonserver.log"
        self.cpus = cpus
        self.strict = strict
        self.proc: subprocess.Popen | None = None
        self.pids: dict[int, float] = {}  # the server and its stubs: pid -> start time (to never hit a reused id)
        self.shm_prefix = f"wbtriton{os.getpid()}x{int(time.time() * 1000) % 10**8}"

    # ---- lifecycle
    def _backend_dir(self) -> Path:
        inst = self.install
        if inst.stub is None:
            return inst.backends
        # nvidia-pytriton: a backend folder with the Python backend and this Python's stub, linked
        # (the stub finds its libraries relative to its real location).
        d = self.workdir / "backends" / "python"
        d.mkdir(parents=True, exist_ok=True)
        for src in (inst.python_backend / "libtriton_python.so", inst.python_backend / "triton_python_backend_utils.py",
                    inst.stub):
            link = d / src.name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(src.resolve())
        return d.parent

    def command(self) -> list[str]:
        cmd = [str(self.install.binary), f"--model-repository={self.repository}",
               f"--backend-directory={self._backend_dir()}",
               "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", f"--http-port={self.http_port}",
               f"--grpc-port={self.grpc_port}", "--allow-metrics=false", "--exit-on-error=true",
               "--exit-timeout-secs=5", f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}"]
        if self.strict:
            cmd.append("--disable-auto-complete-config")
        if self.models:
            cmd += ["--model-control-mode=explicit"] + [f"--load-model={m}" for m in self.models]
        return cmd + self.flags

    def start(self) -> TritonServer:
        log = open(self.log_path, "wb")  # noqa: SIM115 - the server writes to it until stop() closes it
        # Fork inherits the calling thread's CPU affinity: set it on this thread only, then restore.
        before = os.sched_getaffinity(0)
        try:
            if self.cpus:
                os.sched_setaffinity(0, self.cpus)
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=python_env(), start_new_session=True, cwd=self.workdir)
        except OSError as e:
            raise WorkbenchError(f"Cannot start tritonserver '{self.install.binary}': {e.strerror or e}.") from None
        finally:
            if self.cpus:
                os.sched_setaffinity(0, before)
            log.close()
        self._remember(self.proc.pid)
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _get(self, path: str, timeout: float = 2.0) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (urllib.error.URLError, OSError):
            return 0

    def metadata(self) -> dict:
        """The server's /v2 metadata (name, version, extensions); {} if it does not answer."""
        import json

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v2", timeout=2.0) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return {}

    def _remember(self, pid: int) -> None:
        import psutil

        try:
            self.pids.setdefault(pid, psutil.Process(pid).create_time())
        except psutil.Error:
            pass

    def _remember_children(self) -> None:
        import psutil

        try:
            for c in psutil.Process(self.proc.pid).children(recursive=True):
                self._remember(c.pid)
        except psutil.Error:
            pass

    def processes(self) -> list:
        """psutil.Process of the server and its stubs that still run."""
        import psutil

        self._remember_children()
        out = []
        for pid, started in self.pids.items():
            try:
                p = psutil.Process(pid)
                if abs(p.create_time() - started) < 0.01:
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def wait_ready(self, model: str | None = None, timeout_s: float = 180.0) -> None:
        """Until the server (and `model`) is ready; a WorkbenchError with the log's reason if it exits first."""
        deadline = time.monotonic() + timeout_s
        path = f"/v2/models/{model}/ready" if model else "/v2/health/ready"
        while time.monotonic() < deadline:
            self._remember_children()
            if not self.alive():
                raise WorkbenchError(self.failure("exited before it was ready"))
            if self._get(path) == 200:
                self._remember_children()
                return
            time.sleep(0.2)
        raise WorkbenchError(self.failure(f"was not ready after {timeout_s:g} s"))

    def failure(self, what: str) -> str:
        """One sentence: what happened to the server, and the log's reason."""
        code = self.proc.poll() if self.proc else None
        reason = first_error(self.log())
        if reason and ("already in use" in reason.lower() or "failed to start" in reason.lower()):
            return (f"tritonserver could not open its ports ({self.http_port}, {self.grpc_port}): {reason}; choose "
                    f"another port ({setting('port', 'Port')}), or leave it out to use free ports.")
        head = f"tritonserver {what}" + (f" (exit code {code})" if code is not None else "")
        return f"{head}: {reason}." if reason else f"{head}; its log is {self.log_path}."

    def stop(self, grace_s: float = 10.0) -> None:
        """End the server and its stub processes by their ids: SIGTERM, then SIGKILL after `grace_s`."""
        if self.proc is None:
            return
        import psutil

        if self.alive():
            self._remember_children()
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        for p in self.processes():  # whatever is left: the server if it ignored SIGTERM, orphaned stubs
            try:
                p.kill()
            except psutil.Error:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for p in Path("/dev/shm").glob(f"{self.shm_prefix}*"):
            try:
                p.unlink()
            except OSError:
                pass

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def load_errors(log: str) -> list[str]:
    """Every model-load failure in a tritonserver log (the text after "failed to load 'M' version N:")."""
    out = []
    for line in log.splitlines():
        m = re.search(r"failed to load '([^']+)' version \d+: (.*?)\"?$", line)
        if m:
            out.append(f"{m.group(1)}: {m.group(2)}")
        m = re.search(r"Poll failed for model directory '([^']+)': (.*?)\"?$", line)
        if m:
            out.append(f"{m.group(1)}: {m.group(2)}")
        m = re.search(r"Error parsing text-format (.*)", line)
        if m:
            out.append(m.group(1))
    return out
