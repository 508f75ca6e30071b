"""A real local Dask cluster for the fleet tests: a scheduler and named workers on 127.0.0.1.

Each worker is its own process group, pinned to one CPU, with the repository's src on its
PYTHONPATH; `kill` SIGKILLs a worker and every process under it, as a machine that drops out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
DASK = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]


class LocalFleet:
    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: dict[str, subprocess.Popen] = {}
        self.cpus = sorted(os.sched_getaffinity(0))
        sched_file = folder / "scheduler.json"
        self._start("scheduler", DASK + ["--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                         "--scheduler-file", str(sched_file)], {})
        deadline = time.time() + 60
        while time.time() < deadline and not sched_file.exists():
            self._check("scheduler")
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one go, but give it a moment
        self.address = json.loads(sched_file.read_text())["address"]
        self.scheduler_file = sched_file

    def _start(self, name: str, cmd: list[str], env: dict, cpu: int | None = None):
        full_env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    **env}
        def pin():
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        # The process keeps its own copy of the log's descriptor; ours can close at once.
        with open(self.folder / f"{name}.log", "w") as log:
            self.procs[name] = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True, preexec_fn=pin)

    def _check(self, name):
        if self.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited early:\n" + (self.folder / f"{name}.log").read_text()[-3000:])

    def start_workers(self, *specs: tuple[str, int, dict], timeout: float = 90):
        """Start workers (name, CPU index, extra env) together and wait until the scheduler has them."""
        for name, cpu, env in specs:
            self._start(name, WORKER + ["--scheduler-file", str(self.scheduler_file), "--name", name,
                                        "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                        "--memory-limit", "0", "--death-timeout", "60"],
                        env, cpu=self.cpus[cpu % len(self.cpus)])
        deadline = time.time() + timeout
        while time.time() < deadline:
            logs = {name: (self.folder / f"{name}.log").read_text() for name, _, _ in specs}
            if all("Registered to" in text for text in logs.values()):
                return
            for name, _, _ in specs:
                self._check(name)
            time.sleep(0.1)
        raise RuntimeError("workers did not register in time")

    def signal(self, name: str, sig: int):
        """Send one signal to a worker's own process only (SIGKILL: the machine's engine dies and
        its measuring processes must follow by themselves; SIGSTOP: it hangs)."""
        try:
            os.kill(self.procs[name].pid, sig)
        except ProcessLookupError:
            pass

    def kill(self, name: str):
        """SIGKILL a worker and everything under it (its measuring processes too)."""
        proc = psutil.Process(self.procs[name].pid)
        tree = [proc] + proc.children(recursive=True)
        for p in tree:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(tree, timeout=10)

    def close(self):
        for name in reversed(list(self.procs)):
            try:
                os.kill(self.procs[name].pid, signal.SIGCONT)  # a stopped worker takes its SIGKILL too
                self.kill(name)
            except (psutil.NoSuchProcess, ProcessLookupError):
                pass
            self.procs[name].wait(timeout=10)
