"""Serve a measured run with a real Triton server and measure it again: served vs predicted.

`serve_check` exports the run as a Triton model repository served by the Python backend running
OpenVINO with the exported properties, instance groups, pinning and dynamic batching
(`triton.render_python`), starts a real `tritonserver` on 127.0.0.1, drives it over gRPC with
the workbench's own generators (a closed loop at the run's requests in flight, or Poisson
arrivals at the run's rate), and stores the served throughput and p50/p99 beside what the run
measured in-process. The ratio is what serving costs: RPC, Triton's scheduler, the Python
backend's shared-memory hand-off.

Triton's `perf_analyzer` is not used: the registries have no build of it that starts here (the
`perf-analyzer` package is a placeholder; the one in tritonclient needs libraries from outside
the registries).

The server runs on the CPUs the run measured on (as the exported `docker --cpuset-cpus` puts it);
the load generator runs on the other CPUs when there are any, and the result says when it had to
share. The server is stopped by its process id on every path out, and a check that fails is
stored as failed with its reason, never as ok.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from wb_core.errors import ConfigError, WorkbenchError, setting
from wb_core.precisions import baseline, ov_hint

SCHEMA = """
CREATE TABLE IF NOT EXISTS serve_checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    study TEXT NOT NULL,
    run_key TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    result_json TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""
LOAD_GENERATOR = "workbench closed loop / Poisson through tritonclient (gRPC)"


@dataclass
class ServeCheckResult:
    study: str
    run_key: str
    status: str  # ok / failed
    error: str | None = None
    mode: str = "closed loop"  # or "poisson"
    requests_in_flight: int | None = None
    rate: float | None = None
    batch_size: int | None = None
    instances: int | None = None  # Triton model instances
    server_cpus: list[int] | None = None
    client_cpus: list[int] | None = None
    client_shared_cpus: bool = False
    predicted: dict = field(default_factory=dict)  # throughput, latency_ms_p50, latency_ms_p99 (in-process)
    served: dict = field(default_factory=dict)  # the same through tritonserver, and more
    ratio: dict = field(default_factory=dict)  # served / predicted
    server: dict = field(default_factory=dict)  # binary, version, flags, ports
    notes: list[str] = field(default_factory=list)
    created_at: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.status != "ok":
            return f"Serve check of run {self.run_key} failed: {self.error}"
        how = (f"Poisson arrivals at {self.rate:g} requests/s" if self.mode == "poisson"
               else f"{self.requests_in_flight} request(s) in flight")
        lines = [f"Run {self.run_key} of study '{self.study}' served by tritonserver {self.server.get('version', '')} "
                 f"(Python backend, OpenVINO, {self.instances} instance(s)), batch {self.batch_size}, {how}.",
                 "", f"{'':18}{'predicted':>12}{'served':>12}{'served/predicted':>18}"]
        rows = (("throughput /s", "throughput"), ("p50 ms", "latency_ms_p50"), ("p99 ms", "latency_ms_p99"))
        for label, key in rows:
            p, s, r = self.predicted.get(key), self.served.get(key), self.ratio.get(key)
            lines.append(f"{label:18}{_fmt(p):>12}{_fmt(s):>12}{(f'{r:.2f}' if r is not None else 'n/a'):>18}")
        t = self.ratio.get("throughput")
        if t is not None:
            lines += ["", f"Serving overhead: the server delivers {t:.0%} of the in-process throughput."]
        extra = []
        if self.served.get("server_cpu_util") is not None:
            extra.append(f"server kept {self.served['server_cpu_util']:.2f} cores busy")
        if self.served.get("client_cpu_util") is not None:
            extra.append(f"load generator {self.served['client_cpu_util']:.2f}")
        if self.served.get("requests") is not None:
            extra.append(f"{self.served['requests']} requests over {self.served.get('measure_s', 0):.1f} s")
        if extra:
            lines.append("Measured: " + ", ".join(extra) + ".")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}"


# ---- the load generators


class _Abort(Exception):
    pass


def _stats(lat_ms: list[float]) -> dict:
    from wb_core.measure import Latency

    return Latency.from_values(lat_ms).as_columns()


def closed_loop(make_infer, batches: list, batch_size: int, streams: int, settings, check) -> dict:
    """`streams` threads each keep one request in flight; windows until the throughput is stable.

    `check()` raises when the server is gone; a failed request stops every stream and re-raises.
    """
    from wb_core.measure import is_stable

    records: list[tuple[int, int]] = []
    stop = threading.Event()
    measuring = threading.Event()
    errors: list[BaseException] = []
    infers = [make_infer() for _ in range(streams)]

    def loop(infer, offset):
        i = offset
        perf = time.perf_counter_ns
        while not stop.is_set():
            s = perf()
            try:
                infer(batches[i % len(batches)])
            except Exception as e:  # the server went away or rejected the request
                errors.append(e)
                stop.set()
                return
            e_ = perf()
            if measuring.is_set():
                records.append((e_, e_ - s))
            i += 1

    threads = [threading.Thread(target=loop, args=(inf, k), daemon=True) for k, inf in enumerate(infers)]
    for t in threads:
        t.start()
    try:
        deadline = time.perf_counter() + max(settings.warmup_s, 0.2)
        while time.perf_counter() < deadline and not stop.is_set():
            time.sleep(0.05)
        _raise_if(errors, check)
        window_s = min(settings.window_s, settings.max_time_s / settings.min_windows)
        wall0 = time.perf_counter_ns()
        measuring.set()
        windows, seen, w_start = [], 0, wall0
        while True:
            end = w_start + int(window_s * 1e9)
            while time.perf_counter_ns() < end and not stop.is_set():
                time.sleep(min(0.05, max(0.0, (end - time.perf_counter_ns()) / 1e9)))
            _raise_if(errors, check)
            now = time.perf_counter_ns()
            total = len(records)
            windows.append((total - seen) * batch_size / ((now - w_start) / 1e9))
            seen, w_start = total, now
            if (is_stable(windows, settings.min_windows, settings.tolerance)
                    or (now - wall0) / 1e9 >= settings.max_time_s):
                break
        measuring.clear()
        end_ns = time.perf_counter_ns()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    lat = [v / 1e6 for e, v in records if e <= end_ns]
    wall = (end_ns - wall0) / 1e9
    last = windows[-settings.min_windows:]
    return {**_stats(lat), "throughput": len(lat) * batch_size / wall, "requests": len(lat), "measure_s": wall,
            "windows": len(windows), "stable": is_stable(windows, settings.min_windows, settings.tolerance),
            "window_spread": (max(last) - min(last)) / (sum(last) / len(last)) if len(last) > 1 and sum(last) else 0.0}


def poisson(make_infer, batches: list, batch_size: int, rate: float, executors: int, settings, check,
            seed: int = 0) -> dict:
    """Open loop: Poisson arrivals at `rate` requests/s served by `executors` threads; latency from arrival.

    As the workbench's own Poisson scenario: a backlog above a few requests per executor means
    saturated, reported with the achieved rate and no latency.
    """
    infers = [make_infer() for _ in range(executors)]
    for i in range(max(settings.warmup_iters, 3)):
        infers[0](batches[i % len(batches)])
    duration = settings.max_time_s
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=int(rate * duration * 1.5) + 10)
    perf = time.perf_counter_ns
    start = perf() + 50_000_000
    end = start + int(duration * 1e9)
    arrivals = start + np.cumsum(gaps * 1e9).astype(np.int64)
    arrivals = arrivals[arrivals < end]
    q: queue.Queue = queue.Queue()
    done: list[tuple[int, int]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def dispatch():
        for t in arrivals:
            if stop.is_set():
                return
            now = perf()
            if t > now:
                time.sleep((t - now) / 1e9)
            q.put(int(t))

    def execute(infer, offset):
        i = offset
        while not stop.is_set():
            try:
                arrival = q.get(timeout=0.05)
            except queue.Empty:
                if perf() > end:
                    return
                continue
            if perf() > end:
                return
            try:
                infer(batches[i % len(batches)])
            except Exception as e:
                errors.append(e)
                stop.set()
                return
            done.append((arrival, perf()))
            i += 1

    threads = [threading.Thread(target=dispatch, daemon=True)]
    threads += [threading.Thread(target=execute, args=(inf, k), daemon=True) for k, inf in enumerate(infers)]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            _raise_if(errors, check)
            time.sleep(0.1)
        _raise_if(errors, check)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    finished = [(a, e) for a, e in done if e <= end]
    backlog = len(arrivals) - len(finished)
    saturated = backlog > max(3 * executors, 0.02 * len(arrivals))
    cols = _stats([(e - a) / 1e6 for a, e in finished])
    if saturated:
        cols = {k: None for k in cols}
    achieved = len(finished) / duration
    return {**cols, "throughput": achieved * batch_size, "achieved_rate": achieved, "target_rate": rate,
            "backlog": backlog, "saturated": saturated, "requests": len(finished), "measure_s": duration,
            "stable": not saturated}


def _raise_if(errors, check) -> None:
    check()
    if errors:
        from wb_core.models import first_line

        raise WorkbenchError(f"A request to tritonserver failed: {first_line(errors[0])}.")


# ---- the check


def _client_factory(url: str, model: str, specs, dtype_of):
    """make_infer() for the generators: each stream gets its own gRPC client and prepared inputs."""
    import tritonclient.grpc as grpcclient

    def make_infer():
        client = grpcclient.InferenceServerClient(url)
        cache: dict[int, list] = {}

        def infer(batch):
            key = id(batch)
            inputs = cache.get(key)
            if inputs is None:
                inputs = []
                for s in specs:
                    arr = batch[s.name]
                    inp = grpcclient.InferInput(s.name, list(arr.shape), dtype_of(arr.dtype))
                    inp.set_data_from_numpy(arr)
                    inputs.append(inp)
                cache[key] = inputs
            return client.infer(model, inputs)

        return infer

    return make_infer


def _settings(info: dict, max_time: float | None):
    from wb_core.config import MeasureSettings

    raw = dict((info.get("spec") or {}).get("settings") or {})
    known = set(MeasureSettings.__dataclass_fields__)
    s = MeasureSettings(**{k: v for k, v in raw.items() if k in known})
    if max_time is not None:
        if not (isinstance(max_time, (int, float)) and max_time > 0 and max_time == max_time):
            raise ConfigError(f"{setting('max_time_s', 'The measuring time')} must be a positive number of seconds; "
                              f"got {max_time!r}.")
        s = MeasureSettings(**{**s.__dict__, "max_time_s": float(max_time)})
    return s


def serve_check(db: str | Path, study: str, run_key: str, *, max_time: float | None = None, port: int | None = None,
                tritonserver: str | Path | None = None, out: str | Path | None = None, store: bool = True,
                ready_timeout_s: float = 300.0) -> ServeCheckResult:
    """Serve run `run_key` of `study` with tritonserver, measure it, store and return served vs predicted.

    Raises a WorkbenchError (after storing the check as failed) when the server does not start,
    dies, or a request fails; the server is stopped by its process id in every case.
    """
    import tempfile

    from wb_core.config import InputOptions, available_cpus, with_point_shapes
    from wb_core.export import deployment_for_study
    from wb_core.export.bundle import write_model_files
    from wb_core.export.common import openvino_run, requests_in_flight
    from wb_core.export.triton import CHECKED_AGAINST, host_policy_flags, layout, render_python
    from wb_core.export.tritonserver import TritonServer, find_tritonserver
    from wb_core.models import make_batches, ov_inputs, read_ov_model, resolve_shape
    from wb_core.store import Store

    if port is not None and not (isinstance(port, int) and 1 <= port <= 65534):
        raise ConfigError(f"{setting('port', 'The port')} must be a port number from 1 to 65534 (gRPC takes the next "
                          f"one); got {port}.")
    if max_time is not None and not (isinstance(max_time, (int, float)) and not isinstance(max_time, bool)
                                     and 0 < max_time <= 86400):
        raise ConfigError(f"{setting('max_time_s', 'The measuring time')} must be a positive number of seconds, at "
                          f"most 86400 (a day); got {max_time!r}.")
    find_tritonserver(tritonserver)  # a missing or wrong server binary is one sentence before the study is read
    dep = deployment_for_study(db, study, run_key=run_key)
    if not openvino_run(dep):
        from wb_core.backends.registry import serving_backends

        raise ConfigError(f"The serve check replays OpenVINO runs (Triton's Python backend running OpenVINO); run "
                          f"{dep.measurement.run_key} ran {dep.backend}. Choose a run of this study on "
                          f"{' or '.join(serving_backends('ovms'))}.")
    if not dep.model.ir_path or not Path(dep.model.ir_path).is_file():
        raise WorkbenchError(f"The OpenVINO IR run {dep.measurement.run_key} measured is not on disk "
                             f"({dep.model.ir_path or 'the model has moved'}); profile the study again to rebuild it.")
    from wb_core.models import check_measured, own_files

    if own_files([dep.model.ir_path], dep.model.path):  # the user's own IR: still what was measured?
        check_measured(dep.model.path, dep.model.fingerprint)
    with Store(db, readonly=True) as s:
        info = s.get_study(study)
        cfg = s.run_config(study, dep.measurement.run_key)
    settings = _settings(info, max_time)
    install = find_tritonserver(tritonserver)  # before any work: a missing server is one sentence
    if importlib.util.find_spec("tritonclient") is None:
        raise ConfigError("The serve check drives the server with tritonclient, which is not installed: "
                          "pip install 'tritonclient[grpc]>=2.50,<3'.")
    here = set(available_cpus())
    lay = layout(dep, [])
    server_cpus = lay.process_cpus()
    if server_cpus and not set(server_cpus) <= here:
        raise ConfigError(f"Run {dep.measurement.run_key} ran on CPUs {server_cpus}, and this process may use only "
                          f"{sorted(here)}; serve-check it on the machine it was measured on.")
    client_cpus = sorted(here - set(server_cpus or [])) or sorted(here)
    shared = bool(server_cpus) and not (here - set(server_cpus)) or not server_cpus

    # The study's input options at the run's own length and shape (a sweep over lengths stores none).
    opts = with_point_shapes(InputOptions.from_dict((info.get("spec") or {}).get("inputs") or {}), cfg)
    specs = ov_inputs(read_ov_model(dep.model.ir_path))
    shapes = {sp.name: list(resolve_shape(sp, dep.batch_size, opts)) for sp in specs}
    batches = make_batches(specs, dep.batch_size, opts, pool_size=settings.pool_size, seed=settings.seed)

    result = ServeCheckResult(study=study, run_key=dep.measurement.run_key, status="failed",
                              batch_size=dep.batch_size, instances=lay.count, server_cpus=server_cpus,
                              client_cpus=client_cpus, client_shared_cpus=shared,
                              predicted={"throughput": dep.expected.throughput,
                                         "latency_ms_p50": dep.expected.latency_ms_p50,
                                         "latency_ms_p99": dep.expected.latency_ms_p99})
    if dep.rate:
        result.mode, result.rate = "poisson", dep.rate
    result.requests_in_flight = requests_in_flight(dep)
    tmp = None
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="wb-serve-check-")
        work = Path(tmp.name)
    else:
        work = Path(out)
    server = None
    try:
        exported = render_python(dep, shapes)
        result.notes += [n for n in exported.notes if "drive it with that concurrency" not in n]
        for rel, text in exported.files.items():
            path = work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        write_model_files(dep, "triton", work, result.notes)
        flags = host_policy_flags(lay)
        server = TritonServer(work / "model_repository", install, flags, http_port=port,
                              grpc_port=port + 1 if port else None, workdir=work / "server", cpus=server_cpus,
                              models=[dep.serving_name])
        result.server = {"binary": str(install.binary), "flags": flags, "http_port": server.http_port,
                         "grpc_port": server.grpc_port,
                         "rules": CHECKED_AGAINST, "load_generator": LOAD_GENERATOR}
        if not server_cpus:
            result.notes.append("The run was not pinned, so the server and the load generator share every CPU; the "
                                "served figures include the load generator's cost.")
        elif shared:
            result.notes.append("The load generator shared the server's CPUs (no other CPU was free), so the served "
                                "figures include its cost.")
        server.start()
        server.wait_ready(dep.serving_name, timeout_s=ready_timeout_s)
        result.server["version"] = server.metadata().get("version", "unknown")
        match = _same_outputs(server, dep, specs, batches[0], lay.properties)
        served = _drive(server, dep, specs, batches, settings, client_cpus, result)
        served["outputs_match"] = match
        result.served = served
        for key in ("throughput", "latency_ms_p50", "latency_ms_p99"):
            p, s_ = result.predicted.get(key), served.get(key)
            result.ratio[key] = (s_ / p) if p and s_ is not None and not math.isnan(s_) else None
        if served.get("saturated"):
            result.notes.append(f"The server could not keep up with {dep.rate:g} requests/s (backlog "
                                f"{served.get('backlog')}): no latency is reported for a growing queue.")
        result.status = "ok"
    except WorkbenchError as e:
        result.error = str(e)
        raise
    except KeyboardInterrupt:
        result.error = "Interrupted before the check finished."
        raise
    except Exception as e:  # anything else is still one sentence, and the check is stored as failed
        from wb_core.models import first_line

        result.error = f"The serve check failed: {first_line(e)}."
        raise WorkbenchError(result.error) from None
    finally:
        if server is not None:
            server.stop()
            result.server["log"] = str(server.log_path) if out is not None else None
        if tmp is not None:
            tmp.cleanup()
        if store:
            _store(db, result)
    return result


def _drive(server, dep, specs, batches, settings, client_cpus, result) -> dict:
    """Run the generator in a thread pinned to the client CPUs; server CPU use over the same time."""
    from tritonclient.utils import np_to_triton_dtype

    from wb_core.export.common import requests_in_flight

    url = f"127.0.0.1:{server.grpc_port}"
    make_infer = _client_factory(url, dep.serving_name, specs, np_to_triton_dtype)

    def check():
        if not server.alive():
            raise WorkbenchError(server.failure("died during the measurement"))

    box: dict = {}

    def run():
        try:
            os.sched_setaffinity(0, client_cpus)  # this thread and the ones it starts
            procs = server.processes()
            t0 = {p.pid: _cpu(p) for p in procs}
            import psutil

            me = psutil.Process()
            c0, w0 = me.cpu_times(), time.perf_counter()
            if dep.rate:
                out = poisson(make_infer, batches, dep.batch_size, dep.rate, requests_in_flight(dep), settings, check)
            else:
                out = closed_loop(make_infer, batches, dep.batch_size, requests_in_flight(dep), settings, check)
            wall = time.perf_counter() - w0
            c1 = me.cpu_times()
            busy = sum(max(0.0, _cpu(p) - t0.get(p.pid, 0.0)) for p in server.processes() if p.pid in t0)
            out["server_cpu_util"] = busy / wall if wall > 0 else None
            out["client_cpu_util"] = ((c1.user - c0.user) + (c1.system - c0.system)) / wall if wall > 0 else None
            box["out"] = out
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name="wb-serve-check-load", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["out"]


def _same_outputs(server, dep, specs, batch, properties: dict) -> bool:
    """One request through the server against OpenVINO in this process, same IR, input and properties.

    Raises when the served model answers differently: a throughput of wrong answers is no check.
    """
    import openvino as ov
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import np_to_triton_dtype

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    inputs = []
    for s in specs:
        inp = grpcclient.InferInput(s.name, list(batch[s.name].shape), np_to_triton_dtype(batch[s.name].dtype))
        inp.set_data_from_numpy(batch[s.name])
        inputs.append(inp)
    try:
        served = client.infer(dep.serving_name, inputs)
    except Exception as e:
        from wb_core.models import first_line

        raise WorkbenchError(f"The served model did not answer a request: {first_line(e)}.") from None
    model = ov.Core().read_model(dep.model.ir_path)
    model.reshape({s.name: ov.PartialShape(list(batch[s.name].shape)) for s in specs})
    compiled = ov.Core().compile_model(model, "CPU", {k: v for k, v in properties.items()
                                                       if k != "ENABLE_CPU_PINNING"})
    local = compiled([batch[s.name] for s in specs])
    hint = str(properties.get("INFERENCE_PRECISION_HINT", "")).lower()
    # Activations below f32 (a hint other than the baseline's), or a reduced-precision model file.
    low = bool(hint and hint != ov_hint(baseline())) or dep.precision != baseline()
    tol = 5e-2 if low else 1e-3
    for i, port in enumerate(compiled.outputs):
        name = port.get_any_name()
        got = served.as_numpy(name)
        want = np.asarray(local[i])
        if got is None or got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
            diff = (float(np.max(np.abs(got.astype(np.float64) - want))) if got is not None and got.shape == want.shape
                    else f"shape {None if got is None else got.shape} vs {want.shape}")
            raise WorkbenchError(f"The served model's output '{name}' differs from OpenVINO's on the same input "
                                 f"({diff}); the served figures would not be of the same model.")
    return True


def _cpu(p) -> float:
    try:
        t = p.cpu_times()
        return t.user + t.system
    except Exception:
        return 0.0


def _store(db, result: ServeCheckResult) -> None:
    import datetime as dt

    from wb_core.errors import StoreError
    from wb_core.store import Store

    result.created_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    try:
        with Store(db) as s:
            try:
                s.db.script(SCHEMA)
                with s.db.transaction() as c:
                    c.execute_count("INSERT INTO serve_checks (study, run_key, status, error, result_json, created_at) "
                                "VALUES (?, ?, ?, ?, ?, ?)",
                                    (result.study, result.run_key, result.status, result.error,
                                     json.dumps(result.to_dict(), default=str), result.created_at))
            except s.db.errors as e:
                raise StoreError(f"Cannot store the serve check in '{s.path}': {e}.") from None
    except WorkbenchError:
        if result.status == "ok":
            raise


def load_serve_checks(db: str | Path, study: str | None = None) -> list[dict]:
    """Stored serve checks, newest first (each the ServeCheckResult dict, with `status` and `error`)."""
    from wb_core.store import Store

    with Store(db, readonly=True) as s:
        return s.serve_checks(study)
