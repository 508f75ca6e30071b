"""A fleet study rehearsed at scale on one machine, with faults, and checked point by point.

A real Dask scheduler and N real worker processes on 127.0.0.1, labelled as four hardware types
(WB_HARDWARE_TYPE), run one study whose backend is the stand-in (tests/standin: a calibrated
sleep whose figures are known in advance). Everything else is the workbench's own path: the
coordinator (`run_sweep(..., executor=DaskExecutor(...))`, in its own process so that it can be
killed), Dask's event topic, the store, its leases, retries, and `wb compare-hosts`.

Faults, each at a seeded random moment of the study (a fraction of the points stored): workers
SIGKILLed (the engine only: its measuring processes must end by themselves), one worker stopped
with SIGSTOP (it hangs), one worker whose stand-in answers garbage, the coordinator's connection
to the scheduler cut for a few seconds (the coordinator reaches the scheduler through a TCP proxy
here), and the coordinator SIGKILLed and started again (it resumes from the store).

`rehearse()` returns what was found: points expected, stored, lost and duplicated, points stored
from a host of another hardware type or with figures other than the stand-in's, orphan processes,
and figures taken from the coordinator's log. Used by tests/test_fleet_scale.py and by
benchmarks/fleet_scale.py.
"""

from __future__ import annotations

import json
import os
import random
import re
import runpy
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STANDIN = HERE / "standin"
TYPES = ("type-a", "type-b", "type-c", "type-d")
MARK_ENV = "WB_REHEARSAL_MARK"  # every process the rehearsal starts carries it: orphans are found by it
# Short measurements: the stand-in's figures do not depend on them.
SETTINGS = {"warmup_s": 0.02, "warmup_iters": 1, "window_s": 0.05, "min_windows": 2, "tolerance": 5.0,
            "max_time_s": 0.3, "min_requests": 5, "pool_size": 2}
# A group's measuring process silent this long is stopped (a point fails), and a host silent 1.5x this
# + 10 s is hung. Generous: fifty measuring processes starting at once on two cores take a while.
WORKER_TIMEOUT_S = 30.0


@contextmanager
def standin_registered():
    """The stand-in backend registered in this process for the block (the processes the rehearsal
    starts get it from tests/standin's sitecustomize)."""
    from wb_core.backends import registry

    if str(STANDIN) not in sys.path:
        sys.path.insert(0, str(STANDIN))
    had = "standin" in registry.names()
    runpy.run_path(str(STANDIN / "sitecustomize.py"))
    try:
        yield
    finally:
        if not had:
            registry._REGISTRY.pop("standin", None)


def python_path() -> str:
    return os.pathsep.join([str(ROOT / "src"), str(STANDIN)] + ([os.environ["PYTHONPATH"]]
                                                                 if os.environ.get("PYTHONPATH") else []))


def spec_for(points: int) -> dict:
    """A grid of threads x batch sizes giving at least `points` points over the four types."""
    batches = 10 if points >= 400 else 5
    threads = max(1, -(-points // (len(TYPES) * batches)))
    return {"backends": "standin", "threads": ",".join(str(t) for t in range(1, threads + 1)),
            "batch_sizes": ",".join(str(b) for b in range(1, batches + 1))}


@dataclass
class Faults:
    kills: int = 0  # workers SIGKILLed at random moments
    hang: bool = False  # one worker stopped (SIGSTOP) while it runs a group
    garbage: bool = False  # one worker answers garbage
    drop_s: float = 0.0  # the coordinator's connection to the scheduler cut for this long (0: never)
    restart: bool = False  # the coordinator SIGKILLed once and started again


@dataclass
class Outcome:
    expected: int = 0
    stored: int = 0  # distinct points stored as ok
    lost: int = 0  # expected but not stored as ok
    duplicated: int = 0  # rows beyond one per point
    wrong_hardware: list = field(default_factory=list)  # stored from a host of another type
    wrong_values: list = field(default_factory=list)  # figures other than the stand-in's
    from_bad_hosts: list = field(default_factory=list)  # stored from the garbage or the hung host
    orphans: list = field(default_factory=list)  # processes left behind
    compare_hosts: str = ""
    compare_mismatch: list = field(default_factory=list)
    coordinator_rc: list = field(default_factory=list)
    noticed: list = field(default_factory=list)  # what the coordinators logged about hosts and the connection
    faults_done: list = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)  # the last coordinator's summary
    plan: dict = field(default_factory=dict)  # the workers: their types, and which the faults hit

    def line(self) -> str:
        return (f"points expected {self.expected}, stored {self.stored}, lost {self.lost}, "
                f"duplicated {self.duplicated}, orphans {len(self.orphans)}")


# ---------------------------------------------------------------- the connection that drops


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of the scheduler; `drop(s)` cuts every connection and
    refuses new ones for `s` seconds, as a network that fails for a moment."""

    def __init__(self, target: str):
        host, port = target.removeprefix("tcp://").rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.open = threading.Event()
        self.open.set()
        self.socks: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                if self.closed:
                    return
                continue
            if not self.open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.socks |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        with self.lock:
            self.socks -= {a, b}
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def drop(self, seconds: float):
        self.open.clear()
        with self.lock:
            socks, self.socks = self.socks, set()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        time.sleep(seconds)
        self.open.set()

    def close(self):
        self.closed = True
        self.listener.close()
        self.drop(0)


# ---------------------------------------------------------------- the coordinator's own process


def coordinator_main(job_file: str) -> int:
    """Run as `python tests/fleet_rehearsal.py JOB.json`: one coordinator, logging to the job's log."""
    import logging

    job = json.loads(Path(job_file).read_text())
    logging.basicConfig(filename=job["log"], level=logging.DEBUG, format="%(created).6f %(name)s %(message)s")
    for noisy in ("distributed", "tornado", "asyncio", "bokeh"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    from wb_core.config import MeasureSettings, SweepSpec
    from wb_core.fleet import DaskExecutor
    from wb_core.sweep.local import run_sweep

    peak = [0.0]
    me = psutil.Process()

    def sample():
        while True:
            peak[0] = max(peak[0], me.memory_info().rss / 2**20)
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    t0 = time.time()
    with DaskExecutor(job["address"], connect_timeout=job.get("connect_timeout", 30)) as ex:
        s = run_sweep(job["model"], SweepSpec(**job["spec"]), job["db"], job["study"],
                      settings=MeasureSettings(**job["settings"]), executor=ex, timeout_s=job["timeout_s"])
    Path(job["out"]).write_text(json.dumps({"ok": s.ok, "failed": s.failed, "skipped_done": s.skipped_done,
                                            "held_elsewhere": s.held_elsewhere, "errors": s.errors,
                                            "notes": s.notes, "wall_s": time.time() - t0,
                                            "peak_rss_mb": peak[0]}))
    return 0


class Coordinator:
    """One coordinator process (restartable: each start gets its own log)."""

    def __init__(self, folder: Path, job: dict, mark: str, name: str = "coordinator"):
        self.folder, self.job, self.mark, self.name = folder, job, mark, name
        self.starts = 0
        self.proc: subprocess.Popen | None = None

    def start(self):
        self.starts += 1
        tag = f"{self.name}-{self.starts}"
        job = {**self.job, "log": str(self.folder / f"{tag}.log"), "out": str(self.folder / f"{tag}.json")}
        path = self.folder / f"{tag}.job.json"
        path.write_text(json.dumps(job))
        env = {**os.environ, "PYTHONPATH": python_path(), MARK_ENV: self.mark}
        with open(self.folder / f"{tag}.out", "w") as out:
            self.proc = subprocess.Popen([sys.executable, str(Path(__file__)), str(path)], env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self):
        """SIGKILL the coordinator alone: processes it started must end by themselves (orphans are counted)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def logs(self) -> list[Path]:
        return [self.folder / f"{self.name}-{i}.log" for i in range(1, self.starts + 1)]

    def result(self) -> dict:
        path = self.folder / f"{self.name}-{self.starts}.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def tail(self) -> str:
        return (self.folder / f"{self.name}-{self.starts}.out").read_text()[-3000:]


# ---------------------------------------------------------------- the rehearsal


def ensure_model() -> Path:
    """The demo LeNet IR (only the coordinator reads it: the stand-in ignores the model)."""
    from wb_core.demo import ensure_demo
    from wb_core.variants.convert import ensure_ir

    return ensure_ir(ensure_demo("lenet-digits") / "saved_model")


def worker_plan(n: int, faults: Faults, rng: random.Random) -> dict:
    """Names and types of the workers, and which of them the faults hit.

    Types are dealt round-robin; the garbage and the hung worker are of different types, and
    kills are chosen so that every type keeps at least one sound worker to the end.
    """
    names = {f"w{i:02d}-{TYPES[i % len(TYPES)]}": TYPES[i % len(TYPES)] for i in range(n)}
    by_type = {t: [w for w, wt in names.items() if wt == t] for t in TYPES}
    garbage = by_type[TYPES[0]][-1] if faults.garbage else None
    hung = by_type[TYPES[1]][-1] if faults.hang else None
    spare = {t: [w for w in ws if w not in (garbage, hung)] for t, ws in by_type.items()}
    candidates = [w for t, ws in spare.items() for w in ws[1:]]  # the first sound worker of each type stays
    rng.shuffle(candidates)
    kills = candidates[:faults.kills]
    if len(kills) < faults.kills:
        raise ValueError(f"{n} workers cannot lose {faults.kills} and keep a sound worker of each of {len(TYPES)} "
                         f"types; use more workers or fewer kills.")
    return {"types": names, "garbage": garbage, "hung": hung, "kills": kills}


def rehearse(folder: Path, workers: int, points: int, faults: Faults, db: str | None = None, seed: int = 0,
             timeout_s: float = 1500, log=lambda *a: None) -> Outcome:
    """Run one fleet study of at least `points` points on `workers` local workers with `faults`;
    check what the store holds. `db`: a SQLite path or a PostgreSQL URL (default: a file in `folder`)."""
    from fleet_cluster import LocalFleet

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    db = db or str(folder / "fleet.db")
    study = f"rehearsal-{uuid.uuid4().hex[:6]}"
    mark = uuid.uuid4().hex
    spec = spec_for(points)
    plan = worker_plan(workers, faults, rng)
    outcome = Outcome()
    cluster = LocalFleet(folder)
    proxy = coordinator = None
    kill_times: dict[str, float] = {}
    outcome.plan = plan
    try:
        common = {"PYTHONPATH": python_path(), MARK_ENV: mark}
        specs = [(name, i, {**common, "WB_HARDWARE_TYPE": t, **({"WB_STANDIN_GARBAGE": "1"}
                                                                 if name == plan["garbage"] else {})})
                 for i, (name, t) in enumerate(plan["types"].items())]
        log(f"starting {workers} workers")
        cluster.start_workers(*specs, timeout=60 + 6 * workers)
        proxy = Proxy(cluster.address)
        job = {"address": proxy.address, "model": str(ensure_model()), "db": db, "study": study, "spec": spec,
               "settings": SETTINGS, "timeout_s": WORKER_TIMEOUT_S}
        coordinator = Coordinator(folder, job, mark)
        coordinator.start()
        log(f"coordinator started; study {study}: {spec}")

        # The faults, each at a seeded random fraction of the points stored.
        events = [(rng.uniform(0.05, 0.85), "kill", w) for w in plan["kills"]]
        if plan["hung"]:
            events.append((rng.uniform(0.05, 0.15), "hang", plan["hung"]))
        if faults.drop_s:
            events.append((rng.uniform(0.45, 0.65), "drop", None))
        if faults.restart:
            events.append((rng.uniform(0.3, 0.45), "restart", None))
        events.sort(key=lambda e: e[0])
        expected = _expected_keys(spec)
        outcome.expected = len(expected)
        deadline = time.time() + timeout_s
        while True:
            rc = coordinator.proc.poll()
            if rc is not None:
                outcome.coordinator_rc.append(rc)
                break
            if time.time() > deadline:
                coordinator.kill()
                outcome.coordinator_rc.append("timed out")
                break
            done = _count_stored(db, study) / outcome.expected
            while events and events[0][0] <= done:
                at, what, who = events.pop(0)
                outcome.faults_done.append((round(at, 3), what, who))
                log(f"{done:.0%} stored: {what} {who or ''}")
                if what == "kill":
                    cluster.signal(who, signal.SIGKILL)
                    kill_times[who] = time.time()
                elif what == "hang":
                    cluster.signal(who, signal.SIGSTOP)
                elif what == "drop":
                    proxy.drop(faults.drop_s)
                elif what == "restart":
                    coordinator.kill()
                    outcome.coordinator_rc.append("killed")
                    coordinator.start()
            time.sleep(0.2)
        outcome.summary = coordinator.result()
        if outcome.coordinator_rc[-1] != 0:
            outcome.summary["output"] = coordinator.tail()
    finally:
        if proxy is not None:
            proxy.close()
        if coordinator is not None and coordinator.proc and coordinator.proc.poll() is None:
            coordinator.kill()
        cluster.close()
    outcome.orphans = _orphans(mark)
    _check_store(outcome, db, study, spec, plan, expected)
    outcome.figures = _figures(coordinator.logs(), kill_times, outcome.summary, db)
    outcome.noticed = [line.split(" wb_core.fleet ", 1)[1] for path in coordinator.logs() if path.exists()
                       for line in path.read_text().splitlines()
                       if " wb_core.fleet " in line and not line.split(" wb_core.fleet ", 1)[1].startswith("stored ")]
    outcome.compare_hosts, outcome.compare_mismatch = _compare_hosts(db, study, spec)
    return outcome


def _expected_keys(spec: dict) -> dict:
    """Every point the study must store: fleet key -> (hardware type, threads, batch size)."""
    from wb_core.config import SweepSpec
    from wb_core.fleet import fleet_key

    with standin_registered():
        configs = SweepSpec(**spec).expand()
    return {fleet_key(c, t): (t, c.threads, c.batch_size) for c in configs for t in TYPES}


def _count_stored(db: str, study: str) -> int:
    from wb_core.errors import StoreError
    from wb_core.store import Store

    try:
        with Store(db, readonly=True) as st:
            if "runs" not in st.db.tables():
                return 0  # the coordinator is creating the store
            rows = st.db.execute("SELECT COUNT(*) AS n FROM runs WHERE study = ? AND status = 'ok'", (study,))
            return int(rows[0]["n"])
    except StoreError:
        return 0  # not created yet


def _orphans(mark: str) -> list[str]:
    """Processes started by the rehearsal (they carry its mark) still alive once everything was closed."""
    time.sleep(1.5)  # a measuring process notices its parent's death within a second
    left = []
    for p in psutil.process_iter(["pid", "name", "status"]):
        try:
            if p.pid != os.getpid() and p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(MARK_ENV) == mark:
                left.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return left


def _check_store(outcome: Outcome, db: str, study: str, spec: dict, plan: dict, expected: dict) -> None:
    import standin_backend

    from wb_core.store import Store

    with Store(db, readonly=True) as st:
        rows = st.db.execute("SELECT key, status, host, hardware_fingerprint, metrics_json FROM runs WHERE study = ?",
                             (study,))
    keys = [r["key"] for r in rows]
    ok = {r["key"]: r for r in rows if r["status"] == "ok"}
    outcome.stored = len(set(ok) & set(expected))
    outcome.lost = len(set(expected) - set(ok))
    outcome.duplicated = len(keys) - len(set(keys)) + len(set(keys) - set(expected))
    for key, r in ok.items():
        if key not in expected:
            continue
        t, threads, batch = expected[key]
        if r["hardware_fingerprint"] != t or plan["types"].get(r["host"]) != t:
            outcome.wrong_hardware.append((key, t, r["host"], r["hardware_fingerprint"]))
        m = json.loads(r["metrics_json"])
        want = standin_backend.known(t, threads, batch)
        if (m.get("throughput"), m.get("latency_ms_p99")) != want:
            outcome.wrong_values.append((key, r["host"], want, (m.get("throughput"), m.get("latency_ms_p99"))))
        if r["host"] == plan["garbage"]:
            outcome.from_bad_hosts.append((key, r["host"]))


def _compare_hosts(db: str, study: str, spec: dict) -> tuple[str, list]:
    """`wb compare-hosts` on the study; each type's best throughput must be the stand-in's best."""
    import standin_backend

    from wb_core.config import SweepSpec

    env = {**os.environ, "PYTHONPATH": python_path()}
    r = subprocess.run([sys.executable, "-m", "wb_core", "compare-hosts", "--study", study, "--db", db],
                       capture_output=True, text=True, timeout=300, env=env)
    text = r.stdout + r.stderr
    mismatch = [] if r.returncode == 0 else [f"exit {r.returncode}"]
    with standin_registered():
        configs = SweepSpec(**spec).expand()
    blocks = re.split(r"^(?=type-)", text, flags=re.M)
    for t in TYPES:
        best = max(standin_backend.known(t, c.threads, c.batch_size)[0] for c in configs)
        block = next((b for b in blocks if b.startswith(t + " ")), "")
        if f": {best:,.0f} samples/s" not in block or f"runs: {len(configs)} ok, 0 failed" not in block:
            mismatch.append(f"{t}: expected best {best:,.0f} samples/s and {len(configs)} ok runs")
    return text, mismatch


def _figures(logs: list[Path], kill_times: dict, summary: dict, db: str) -> dict:
    """Figures from the coordinators' logs: points/s, event latency, time to notice a dead worker."""
    stored_at, latency, noticed = [], [], {}
    line = re.compile(r"^(\d+\.\d+) wb_core\.fleet (.*)$")
    for path in logs:
        if not path.exists():
            continue
        for text in path.read_text().splitlines():
            m = line.match(text)
            if not m:
                continue
            t, msg = float(m.group(1)), m.group(2)
            lat = re.match(r"stored \S+ from \S+ (\d+\.\d+) s after", msg)
            if lat:
                stored_at.append(t)
                latency.append(float(lat.group(1)))
            dropped = re.match(r"host (\S+) dropped out", msg)
            if dropped and dropped.group(1) in kill_times and dropped.group(1) not in noticed:
                noticed[dropped.group(1)] = t - kill_times[dropped.group(1)]
    out = {"points_logged": len(stored_at)}
    if len(stored_at) > 1:
        stored_at.sort()
        # Sustained: the middle 80% of the points (start-up and the last stragglers left out).
        lo, hi = stored_at[len(stored_at) // 10], stored_at[(len(stored_at) * 9) // 10]
        out["points_per_s"] = (len(stored_at) * 8 // 10) / (hi - lo) if hi > lo else None
    if latency:
        qs = statistics.quantiles(latency, n=100, method="inclusive") if len(latency) > 1 else [latency[0]] * 99
        out["latency_p50_ms"], out["latency_p99_ms"] = 1000 * qs[49], 1000 * qs[98]
    if noticed:
        out["notice_dead_s_median"] = statistics.median(noticed.values())
        out["notice_dead_s_max"] = max(noticed.values())
    out["coordinator_peak_rss_mb"] = summary.get("peak_rss_mb")
    out["store_writes_per_s"] = store_writes_per_s(db)
    return out


def store_writes_per_s(db: str, n: int = 400) -> float:
    """Points written one transaction each, as the coordinator writes them, into a scratch study."""
    from wb_core.store import Store

    study = f"writes-{uuid.uuid4().hex[:6]}"
    with Store(db) as st:
        st.ensure_study(study, "m", "openvino", "fp", {}, "hw", {}, {})
        cfg = {"backend": "standin", "cores": None, "batch_size": 1}
        t0 = time.perf_counter()
        for i in range(n):
            st.add_run(study, f"k{i}", cfg, "ok", {"throughput": float(i + 1), "latency_ms_p99": 1.0},
                       host="h", hardware_fingerprint="t", release_owner="writes")
        return n / (time.perf_counter() - t0)


if __name__ == "__main__":
    sys.exit(coordinator_main(sys.argv[1]))
