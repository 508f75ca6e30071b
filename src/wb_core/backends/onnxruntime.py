"""ONNX Runtime backend: an InferenceSession on the CPU execution provider, with the intra-op and
inter-op threads, execution mode and graph optimisation level of the run config; read back what the
session really holds."""

from __future__ import annotations

import collections
import re
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort

from wb_core.errors import ConfigError, ModelError
from wb_core.model_inputs import InputSpec, batch_axis_of, first_line, resolve_shape

if TYPE_CHECKING:  # types only: backends/ does not import config at run time
    from wb_core.config import InputOptions, RunConfig

PROVIDER = "CPUExecutionProvider"
EXECUTION_MODES = {"sequential": ort.ExecutionMode.ORT_SEQUENTIAL, "parallel": ort.ExecutionMode.ORT_PARALLEL}
GRAPH_LEVELS = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
# ONNX tensor element types as numpy dtype names (what the workbench generates inputs for).
ONNX_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
               "tensor(bfloat16)": "bfloat16", "tensor(bool)": "bool", "tensor(int8)": "int8",
               "tensor(uint8)": "uint8", "tensor(int16)": "int16", "tensor(uint16)": "uint16",
               "tensor(int32)": "int32", "tensor(uint32)": "uint32", "tensor(int64)": "int64",
               "tensor(uint64)": "uint64"}


# What the heavy math of a node runs in, by its operator in the session's optimized graph: ONNX Runtime
# fuses a QDQ model's DequantizeLinear -> MatMul -> QuantizeLinear into QLinearMatMul (and the like)
# when graph optimisation allows it; otherwise the same model runs its MatMul in f32 between Q/DQ pairs.
INT8_OPS = frozenset({"QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger", "QGemm", "MatMulIntegerToFloat",
                      "DynamicQuantizeMatMul", "QAttention", "DynamicQuantizeLSTM", "QLinearConvTranspose"})
FLOAT_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "FusedConv", "FusedMatMul", "FusedGemm",
                       "NhwcFusedConv", "Attention", "MultiHeadAttention", "LSTM", "GRU", "RNN", "Einsum"})
# Operators that mark a model as quantized: only then is the optimized graph written out and read.
QUANTIZED_OPS = INT8_OPS | {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}


def executed_precision(op_types) -> tuple[str, dict]:
    """The precision most compute nodes of a graph run in ("i8" or "f32"), and the count per precision."""
    counts = collections.Counter("i8" if op in INT8_OPS else "f32" for op in op_types
                                 if op in INT8_OPS or op in FLOAT_OPS)
    if not counts:
        return "f32", {}
    return counts.most_common(1)[0][0], dict(counts)


def _op_types(path) -> list[str]:
    """The operators of an ONNX file's main graph (the weights in external files are not read)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # ONNX Runtime read it; a reader that cannot only leaves the precision unread
        return []
    return [n.op_type for n in model.graph.node]


def session_options(cfg: RunConfig) -> ort.SessionOptions:
    """SessionOptions for a run config; a setting left at None keeps ONNX Runtime's own default."""
    opts = ort.SessionOptions()
    if cfg.threads:
        opts.intra_op_num_threads = int(cfg.threads)
    if cfg.inter_op_threads:
        opts.inter_op_num_threads = int(cfg.inter_op_threads)
    if cfg.execution_mode:
        opts.execution_mode = EXECUTION_MODES[cfg.execution_mode]
    if cfg.graph_optimization:
        opts.graph_optimization_level = GRAPH_LEVELS[cfg.graph_optimization]
    return opts


# ONNX Runtime's messages open with its status code and name C++ source lines and signatures, which
# mean nothing to the person whose model it is: "[ONNXRuntimeError] : 1 : FAIL : ... model.cc:256 f(...) why".
_STATUS = re.compile(r"\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*")
_SOURCE = re.compile(r"[\w./-]*\.(?:cc|cpp|h):\d+\s+(?:[\w:~]+\([^()]*\)\s*)?")


def load_error(model_path, e: BaseException) -> ModelError:
    """ONNX Runtime's refusal to load a model, as one sentence that names it and says why."""
    text = _SOURCE.sub(" ", _STATUS.sub("", str(e)))
    reason = " ".join((first_line(text, 400) if text.strip() else type(e).__name__).split())
    return ModelError(f"ONNX Runtime cannot load the model '{model_path}': {reason.rstrip('.')}.")


def check_loads(model_path: str) -> None:
    """Open the model as a session will (the CPU provider, default options); a ModelError naming ONNX
    Runtime when it cannot."""
    try:
        ort.InferenceSession(str(model_path), providers=[PROVIDER])
    except Exception as e:
        raise load_error(model_path, e) from None


def _spec(arg) -> InputSpec:
    # A scalar input (a sample rate) has shape []; an input of unknown rank has none.
    shape = (-1,) if arg.shape is None else tuple(d if isinstance(d, int) and d > 0 else -1 for d in arg.shape)
    return InputSpec(name=arg.name, shape=shape, dtype=ONNX_DTYPES.get(arg.type, arg.type))


def _word(table: dict, value) -> str:
    return next((k for k, v in table.items() if v == value), str(value))


class OnnxRuntimeSession:
    def __init__(self, model_path: str, cfg: RunConfig):
        self.cfg = cfg
        opts = session_options(cfg)
        # A quantized model's precision is read from the graph the session runs: it writes its optimized
        # graph out once, at load (a float model runs in f32, and is not written out).
        quantized = bool(QUANTIZED_OPS.intersection(_op_types(model_path)))
        with tempfile.TemporaryDirectory(prefix="wb-ort-") as tmp:
            optimized = Path(tmp) / "optimized.onnx"
            if quantized:
                opts.optimized_model_filepath = str(optimized)
                opts.log_severity_level = 3  # not the warning that an optimized graph holds CPU-specific nodes
            t0 = time.perf_counter()
            try:
                self.session = ort.InferenceSession(str(model_path), sess_options=opts, providers=[PROVIDER])
            except Exception as e:
                raise load_error(model_path, e) from None
            self.load_ms = (time.perf_counter() - t0) * 1e3
            self.precision, self.precision_counts = executed_precision(_op_types(optimized) if quantized else ())
        self.inputs = [_spec(a) for a in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.bindings_made = 0  # input batches bound for `make_bound_infer` callables

    def prepare(self, batch_size: int, opts: InputOptions) -> dict:
        # ONNX Runtime takes any shape its dynamic dimensions allow; a fixed batch dimension cannot change.
        for spec in self.inputs:
            resolve_shape(spec, batch_size, opts)
            axis = batch_axis_of(spec, opts)
            if spec.shape and spec.shape[axis] > 0 and spec.shape[axis] != batch_size:
                raise ConfigError(f"The model cannot take batch size {batch_size}: its input '{spec.name}' has a "
                                  f"fixed batch dimension of {spec.shape[axis]} ({spec.describe()}).")
        return {"load_ms": self.load_ms, "compile_ms": 0.0}

    def convert_batches(self, batches: list[dict]) -> list:
        names = [s.name for s in self.inputs]
        return [{n: np.ascontiguousarray(b[n]) for n in names} for b in batches]

    def make_infer(self):
        run, outputs = self.session.run, self.outputs

        def infer(batch):
            return dict(zip(outputs, run(None, batch)))

        return infer

    def make_bound_infer(self):
        """A callable for the timed loop over a fixed input pool, through IO binding: each batch is
        bound once on first use (inputs share its arrays; outputs are allocated by the session, as
        `run` does), so that a call is only `run_with_iobinding`. Each callable keeps bindings of its
        own, so request streams in threads never share one. It returns the binding (`outputs_of`
        reads it); for data seen once (accuracy) use `make_infer`."""
        run, bind = self.session.run_with_iobinding, self._binding
        bound: dict[int, tuple] = {}  # id(batch) -> (binding, batch): the batch is kept so its id stays its own

        def infer(batch):
            entry = bound.get(id(batch))
            if entry is None:
                entry = bound[id(batch)] = (bind(batch), batch)
                self.bindings_made += 1
            run(entry[0])
            return entry[0]

        return infer

    def _binding(self, batch: dict):
        binding = self.session.io_binding()
        for name, array in batch.items():
            binding.bind_cpu_input(name, array)
        for name in self.outputs:
            binding.bind_output(name, "cpu")
        return binding

    def outputs_of(self, binding) -> dict:
        """The outputs of the last run through `binding` (what `infer` returned), as numpy arrays."""
        return dict(zip(self.outputs, binding.copy_outputs_to_cpu()))

    def info(self) -> dict:
        # Read back from the session itself: what it really runs with, not what was asked.
        opts = self.session.get_session_options()
        return {
            "executed_precision": self.precision,
            "precision_counts": self.precision_counts,
            "ort_version": ort.__version__,
            "ort_providers": ",".join(self.session.get_providers()),
            "ort_intra_op_threads": int(opts.intra_op_num_threads),
            "ort_inter_op_threads": int(opts.inter_op_num_threads),
            "ort_execution_mode": _word(EXECUTION_MODES, opts.execution_mode),
            "ort_graph_optimization": _word(GRAPH_LEVELS, opts.graph_optimization_level),
        }


# Operators that only a model quantized beforehand holds (QDQ pairs, integer kernels).
QUANTIZED_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
                 "MatMulInteger", "ConvInteger", "QLinearAdd", "QLinearMul"}


def describe_onnx(path: str) -> dict | None:
    """An ONNX model's description read by the onnx library (inputs, outputs, prior quantization),
    checked by opening it in ONNX Runtime: for a model OpenVINO cannot read (an `ai.onnx.ml`
    operator, an operator its frontend lacks); None for a file the onnx library cannot parse. In a
    worker: imports onnx and ONNX Runtime."""
    import onnx

    try:
        proto = onnx.load(str(path))
    except Exception:
        return None  # not an ONNX model at all: OpenVINO's refusal already says so
    try:  # ONNX Runtime must run it, or no backend can
        ort.InferenceSession(str(path), providers=[PROVIDER])
    except Exception as e:
        raise ModelError(f"ONNX Runtime cannot load '{path}' either: {first_line(e)}") from None
    graph = proto.graph
    weights = {t.name for t in graph.initializer}

    def spec(value) -> InputSpec:
        t = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in t.shape.dim) \
            if t.HasField("shape") else (-1,)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "float32"
        return InputSpec(name=value.name, shape=shape, dtype=dtype)

    kinds = {n.op_type for n in graph.node}
    int8_weights = any(t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8) and len(t.dims) >= 2
                       for t in graph.initializer)
    domains = sorted({n.domain for n in graph.node if n.domain not in ("", "ai.onnx")})
    return {"declared_values": _declared_values(graph, weights),
            "inputs": [spec(v).to_dict() for v in graph.input if v.name not in weights],
            "outputs": [v.name for v in graph.output],
            "quantized": "int8" if kinds & QUANTIZED_OPS or int8_weights else None,
            "domains": domains}


def _declared_values(graph, weights: set[str]) -> dict[str, list]:
    """Integer inputs without a batch (a sample rate) that an Equal-like node compares with a constant:
    name -> [value, why]; the model's metadata entry of the same name wins."""
    import onnx
    from onnx import numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    out: dict[str, list] = {}
    for v in graph.input:
        t = v.type.tensor_type
        if v.name in weights or t.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                                onnx.TensorProto.FLOAT16) or len(t.shape.dim) > 1:
            continue
        for n in graph.node:
            if n.op_type in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual") and v.name in n.input:
                other = n.input[1 - list(n.input).index(v.name)]
                value = consts.get(other)
                if value is not None and value.size == 1:
                    out[v.name] = [int(value.reshape(-1)[0]), f"{int(value.reshape(-1)[0])}, the value the model's "
                                                              f"graph compares it with"]
                    break
    return out
