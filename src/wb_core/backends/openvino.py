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

    def prepare(self, batch_size: int, opts: InputOptions) -> dict:
        shapes = {spec.name: resolve_shape(spec, batch_size, opts) for spec in self.inputs}
        t0 = time.perf_counter()
        try:
            current = {s.name: tuple(s.shape) for s in self.inputs}
            if any(current[n] != shp for n, shp in shapes.items()):
                self.model.reshape({n: ov.PartialShape(list(shp)) for n, shp in shapes.items()})
        except Exception as e:
            raise ConfigError(f"The model cannot take batch size {batch_size}: {first_line(e)}") from None
        props = compile_properties(self.cfg)
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
