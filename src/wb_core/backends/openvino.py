"""OpenVINO backend: compile an IR with explicit CPU properties; read back what really ran."""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

import openvino as ov

from wb_core.errors import ConfigError
from wb_core.model_inputs import first_line, ov_inputs, ov_read_error, resolve_shape
from wb_core.precisions import ov_hint

if TYPE_CHECKING:  # types only: backends/ does not import config at run time
    from wb_core.config import InputOptions, RunConfig

# Ops whose runtime precision tells what the heavy math ran in.
KEEP_COMPILED = 4  # compiled models a session keeps for reuse
COMPUTE_OPS = ("Convolution", "GroupConvolution", "FullyConnected", "MatMul", "Deconvolution",
               "ConvolutionBackpropData", "BinaryConvolution")


def compile_properties(cfg: RunConfig) -> dict:
    """CPU plugin properties for a run config; precision is explicit unless the config is `untouched`
    (then the runtime chooses it, and under a hint the number of requests too, as a user gets it)."""
    props = {} if cfg.untouched else {"INFERENCE_PRECISION_HINT": ov_hint(cfg.precision)}
    if cfg.threads:
        props["INFERENCE_NUM_THREADS"] = int(cfg.threads)
    if cfg.hint:
        props["PERFORMANCE_HINT"] = cfg.hint.upper()
        if not cfg.untouched:
            props["PERFORMANCE_HINT_NUM_REQUESTS"] = int(cfg.concurrency)
    elif cfg.streams:
        props["NUM_STREAMS"] = int(cfg.streams)
    if cfg.cpu_pinning is not None:
        props["ENABLE_CPU_PINNING"] = bool(cfg.cpu_pinning)
    return props


def executed_precision(compiled) -> tuple[str, dict]:
    """Dominant runtime precision of the compute ops, and counts per precision."""
    counts: collections.Counter = collections.Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        if "layerType" not in rt or "runtimePrecision" not in rt:
            continue
        # rt_info values are OVAny: astype(str) gives the value, str() only the wrapper's name.
        if rt["layerType"].astype(str) in COMPUTE_OPS:
            counts[rt["runtimePrecision"].astype(str)] += 1
    if not counts:
        return "unknown", {}
    return counts.most_common(1)[0][0], dict(counts)


def check_loads(model_path: str) -> None:
    """Read the model as a session will, and compile it for the CPU (on one thread): a ModelError
    naming OpenVINO when it cannot, before any point is measured (a model that reads but holds an
    operation the CPU plugin lacks would otherwise fail every point)."""
    from wb_core.errors import ModelError

    core = ov.Core()
    try:
        model = core.read_model(str(model_path))
    except Exception as e:
        raise ov_read_error(model_path, e) from None
    try:
        core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1})
    except Exception as e:
        if _compiles_static(core, model):
            return  # only its dynamic form does not compile; a sweep compiles it at each point's shapes
        raise ModelError(f"OpenVINO reads the model '{model_path}' but cannot compile it for the CPU: "
                         f"{first_line(e)}. Export it again, or measure it without OpenVINO.") from None


def _compiles_static(core, model) -> bool:
    """Whether the model compiles with each dynamic dimension set to 1 (False if it has none)."""
    shapes = {}
    for port in model.inputs:
        ps = port.get_partial_shape()
        if ps.is_dynamic and ps.rank.is_static:
            shapes[port.get_any_name()] = ov.PartialShape([d.get_length() if d.is_static else 1 for d in ps])
    if not shapes:
        return False
    try:
        model.reshape(shapes)
        core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1})
        return True
    except Exception:
        return False


class OpenVINOSession:
    def __init__(self, model_path: str, cfg: RunConfig):
        self.cfg = cfg
        self.core = ov.Core()
        t0 = time.perf_counter()
        try:
            self.model = self.core.read_model(model_path)
        except Exception as e:
            raise ov_read_error(model_path, e) from None
        self.load_ms = (time.perf_counter() - t0) * 1e3
        self.inputs = ov_inputs(self.model)
        self.compiled = None
        self._info: dict = {}
        self._compiled: dict = {}  # (shapes, properties) -> (compiled model, info, compile ms)

    def prepare(self, batch_size: int, opts: InputOptions) -> dict:
        """Reshape and compile for a batch size; a shape and properties compiled before in this session
        are reused (points that differ only in the requests in flight share one compiled model)."""
        shapes = {spec.name: resolve_shape(spec, batch_size, opts) for spec in self.inputs}
        props = compile_properties(self.cfg)
        key = (tuple(sorted(shapes.items())), tuple(sorted((k, str(v)) for k, v in props.items())))
        if key in self._compiled:
            # compile_ms stays what compiling it took: what this configuration costs to start
            self.compiled, self._info, compile_ms = self._compiled[key]
            return {"load_ms": self.load_ms, "compile_ms": compile_ms}
        t0 = time.perf_counter()
        try:
            current = {s.name: tuple(s.shape) for s in self.inputs}
            if any(current[n] != shp for n, shp in shapes.items()):
                self.model.reshape({n: ov.PartialShape(list(shp)) for n, shp in shapes.items()})
        except Exception as e:
            raise ConfigError(f"The model cannot take batch size {batch_size}: {first_line(e)}") from None
        self.compiled = self.core.compile_model(self.model, "CPU", props)
        compile_ms = (time.perf_counter() - t0) * 1e3
        prec, counts = executed_precision(self.compiled)
        self._info = {
            "executed_precision": prec,
            "precision_counts": counts,
            "ov_properties": {k: str(v) for k, v in props.items()},
            "ov_streams": int(self.compiled.get_property("NUM_STREAMS")),
            "ov_threads": int(self.compiled.get_property("INFERENCE_NUM_THREADS")),
            "ov_optimal_requests": int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")),
            "ov_inference_precision": str(self.compiled.get_property("INFERENCE_PRECISION_HINT")),
        }
        # Compiled models of earlier batch sizes keep their memory; one per distinct key is kept, the
        # last few only, so that a long batch list does not hold every one.
        self._compiled[key] = (self.compiled, self._info, compile_ms)
        while len(self._compiled) > KEEP_COMPILED:
            self._compiled.pop(next(iter(self._compiled)))
        return {"load_ms": self.load_ms, "compile_ms": compile_ms}

    def convert_batches(self, batches: list[dict]) -> list:
        # Feed by input index: names can differ in their ':0' suffix between converters.
        names = [s.name for s in self.inputs]
        return [[b[n] for n in names] for b in batches]

    def make_infer(self):
        req = self.compiled.create_infer_request()

        def infer(batch):
            return req.infer(batch, share_inputs=True)

        return infer

    def make_loop(self, jobs: int, batches: list):
        """Requests with their input tensors set once from the pool (request k gets batch k), run as
        benchmark_app runs them: one request called synchronously for one job, an AsyncInferQueue
        started without inputs for more (see wb_core.measure.RequestLoop)."""
        return _SyncLoop(self.compiled, batches[0]) if jobs == 1 else _QueueLoop(self.compiled, jobs, batches)

    def make_async(self, jobs: int, on_done):
        """An AsyncInferQueue of `jobs` requests; `on_done(start_ns)` runs as each one finishes."""
        return _AsyncQueue(self.compiled, jobs, on_done)

    def info(self) -> dict:
        return dict(self._info)


class _AsyncQueue:
    def __init__(self, compiled, jobs: int, on_done):
        self.queue = ov.AsyncInferQueue(compiled, jobs)
        self.submitted = 0
        self.finished = 0

        def callback(request, start_ns):
            on_done(start_ns)
            self.finished += 1  # only runtime threads holding the GIL write it, one at a time

        self.queue.set_callback(callback)

    def submit(self, batch) -> None:
        # Wait for an idle request first, so that the start time excludes waiting for a slot.
        self.queue.get_idle_request_id()
        inputs = dict(enumerate(batch)) if isinstance(batch, list) else batch
        self.submitted += 1
        self.queue.start_async(inputs, userdata=time.perf_counter_ns(), share_inputs=True)

    def wait_all(self) -> None:
        self.queue.wait_all()
        # wait_all can return before the last Python callback has run. A callback still waiting
        # for the GIL when the compiled model is destroyed deadlocks that destructor, so wait
        # (sleeping, which releases the GIL) until every callback has finished.
        deadline = time.monotonic() + 30
        while self.finished < self.submitted and time.monotonic() < deadline:
            time.sleep(0.0005)


def _set_inputs(request, batch: list) -> None:
    """The batch's arrays as the request's input tensors, sharing their memory (set once, not per call)."""
    for index, array in enumerate(batch):
        request.set_input_tensor(index, ov.Tensor(array, shared_memory=True))


class _SyncLoop:
    """One request called synchronously, its inputs set once; latency timed around each call."""

    def __init__(self, compiled, batch: list):
        self.request = compiled.create_infer_request()
        _set_inputs(self.request, batch)
        self.started = 0
        self._lat: list[int] = []

    def begin(self) -> None:
        self.started = 0
        self._lat = []

    def run_until(self, t_ns: int) -> None:
        perf, infer, append = time.perf_counter_ns, self.request.infer, self._lat.append
        n = 0
        e = perf()
        while e < t_ns:
            s = perf()
            infer()
            e = perf()
            append(e - s)
            n += 1
        self.started += n

    def finish(self) -> tuple[int, list[float]]:
        return time.perf_counter_ns(), [v / 1e6 for v in self._lat]


class _QueueLoop:
    """An AsyncInferQueue of `jobs` requests, each with its own inputs set once; started without
    inputs and without a Python callback, so that completing a request runs no Python at all.
    A request's latency is the runtime's own (`InferRequest.latency`), read when its slot is
    reused and, for the last ones, after the queue is drained."""

    def __init__(self, compiled, jobs: int, batches: list):
        self.queue = ov.AsyncInferQueue(compiled, jobs)
        self.requests = [self.queue[k] for k in range(len(self.queue))]
        for k, request in enumerate(self.requests):
            _set_inputs(request, batches[k % len(batches)])
        self._busy = [False] * len(self.requests)  # started since `begin`, latency not read yet
        self.started = 0
        self._lat: list[float] = []

    def begin(self) -> None:
        self.started = 0
        self._lat = []
        self._busy = [False] * len(self.requests)

    def run_until(self, t_ns: int) -> None:
        perf, idle, start = time.perf_counter_ns, self.queue.get_idle_request_id, self.queue.start_async
        requests, busy, append = self.requests, self._busy, self._lat.append
        n = 0
        while perf() < t_ns:
            i = idle()  # waits (GIL released) until a request is free
            if busy[i]:
                append(requests[i].latency)
            busy[i] = True
            start()  # starts request i: the queue hands out its idle requests in order
            n += 1
        self.started += n

    def finish(self) -> tuple[int, list[float]]:
        self.queue.wait_all()
        end = time.perf_counter_ns()
        for i, was in enumerate(self._busy):
            if was:
                self._lat.append(self.requests[i].latency)
                self._busy[i] = False
        return end, self._lat
