"""The backends the workbench knows, each declared once: what the rest of the code reads.

A backend declares the model formats it runs, the session class a worker opens (imported only
inside the worker, after CPU affinity and thread variables are set), the environment variables
its run settings become before the runtime is imported, the RunConfig fields it reads, its own
sweep settings (`axes`: each an `Axis`, which becomes a SweepSpec and RunConfig field, a CLI option,
a dashboard box and a schema entry), the packages whose versions are stored with a study, how each
serving format runs it (`Serving`), the configurations a user gets without tuning (`defaults`), and
what else it offers (per-layer profiles, the model readers its worker provides).

Adding a backend: write `backends/<name>.py` with a session class (see `base.BackendSession`), then add
one `register(BackendInfo(...))` below. Nothing else needs to know its name: the sweep spec, the
CLI help, the dashboard's choices, the worker, feasibility checks, the study's versions, the
exporters, the defaults a pick is confirmed against, layer profiles and the INT8 variant read this
registry (see docs/architecture.md; tests/test_backend_names.py keeps it so).

This module imports nothing heavy and nothing above the config layer, so that every layer may
read it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from wb_core.axis import Axis, on_off, one_of_or_none, whole_numbers
from wb_core.errors import ConfigError
from wb_core.parsing import MAX_THREADS


@dataclass(frozen=True)
class Serving:
    """How one serving format runs a backend's model: the names that format gives it.

    `runtime` is the format's own name for the runtime (a Triton backend, a KServe model format,
    OpenVINO Model Server, TensorFlow Serving's binary); exporters decide by it, never by our
    backend name. A plain string in `BackendInfo.serving` is a Serving with only `runtime`.
    """

    runtime: str
    platform: str = ""  # Triton: a platform named instead of a backend (e.g. tensorflow_savedmodel)
    model_file: str = ""  # the model's name inside the version folder (Triton's default_model_filename)
    format_version: str = ""  # KServe: the modelFormat version
    server: str = ""  # KServe: the ClusterServingRuntime that serves the format


@dataclass(frozen=True)
class BackendInfo:
    name: str
    description: str
    formats: tuple[str, ...]  # model formats it runs (after the variant step converted what it can)
    session: str  # "module:Class" of its session, imported inside the worker only
    distributions: tuple[str, ...]  # packages whose versions a study records
    # RunConfig field -> environment variables set from it before the runtime is imported (its own
    # axes add theirs: Axis.env).
    env: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # RunConfig fields beyond batch, cores, instances, concurrency it reads (its own axes are added).
    settings: tuple[str, ...] = ()
    # Serving format -> the runtime it names there (a string, or a Serving with the names exporters write).
    serving: dict[str, str | Serving] = field(default_factory=dict)
    # The file its worker loads: "openvino-ir" or "savedmodel" (variants convert to it), or a model format
    # it takes as it is (a model already in that format is given unchanged).
    loads: str = "openvino-ir"
    int8_via: str = ""  # empty: INT8 runs natively; else the sentence saying how INT8 is reached instead
    bf16_note: str = ""  # how a bf16 run is made on this backend (shown beside the variant)
    bf16_via: str = ""  # empty: bf16 runs here; else the sentence saying why not and where instead
    bf16_probe: bool = False  # bf16 needs a measured check that it changes what runs (TensorFlow's AMP)
    title: str = ""  # the runtime's name in sentences and legends ("OpenVINO"); the name itself when empty
    # What a user gets without tuning: (label, RunConfig settings) measured beside a pick.
    defaults: tuple[tuple[str, dict], ...] = ()
    # Settings that measure a pick's own model file under the runtime's own choices (empty: none).
    variant_default: dict = field(default_factory=dict)
    layer_profiling: bool = False  # its workers can read per-layer performance counters
    # RunConfig field -> the runtime's own name for it, for a backend whose runtime reports no properties.
    properties: dict[str, str] = field(default_factory=dict)
    bf16_property: str = ""  # the runtime's option a bf16 run turns on (with `properties`)
    # Model format -> "module:function" that reads a model file's inputs in a worker (imports the runtime).
    readers: dict[str, str] = field(default_factory=dict)
    # Model format -> "module:function" that describes, in a worker, a file the IR backend's reader
    # refuses but this runtime runs as it is (an ONNX model with operators only it knows): such a
    # model runs on this backend only.
    sole_readers: dict[str, str] = field(default_factory=dict)
    # Its own sweep settings (streams, a hint, an execution mode...): each becomes a SweepSpec and a
    # RunConfig field, a CLI option, a dashboard control and a schema entry (wb_core.axes).
    axes: tuple[Axis, ...] = ()
    # Model format -> "module:function" that opens a model file with this backend's own reader, as its
    # worker will (it imports the runtime: called in a worker), raising a ModelError that names the
    # backend. A study checks every backend it asks for this way before anything is stored.
    load_checks: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        own = tuple(a.name for a in self.axes)
        object.__setattr__(self, "settings", tuple(dict.fromkeys((*self.settings, *own))))
        object.__setattr__(self, "env", {**{a.name: a.env for a in self.axes if a.env}, **self.env})

    def process_env(self, config: dict) -> dict[str, str]:
        """The environment a worker sets for `config` (a RunConfig as a dict) before the import."""
        out = {}
        for setting, names in self.env.items():
            value = config.get(setting)
            if value is None:
                continue
            text = ("1" if value else "0") if isinstance(value, bool) else str(value)
            out.update({n: text for n in names})
        return out


_REGISTRY: dict[str, BackendInfo] = {}


def register(info: BackendInfo) -> BackendInfo:
    """Add a backend. Its axes become RunConfig and SweepSpec fields when config.py is first imported,
    so a backend with axes of its own is registered in this module (or before that import)."""
    _REGISTRY[info.name] = info
    return info


def names() -> tuple[str, ...]:
    """Registered backend names, in the order they were registered."""
    return tuple(_REGISTRY)


def get(name: str) -> BackendInfo:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"Unknown backend '{name}'; choose from {', '.join(names())}.") from None


def backend_formats(name: str) -> tuple[str, ...]:
    return get(name).formats


def runtime_distributions() -> tuple[str, ...]:
    return tuple(d for info in _REGISTRY.values() for d in info.distributions)


def _load(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def open_session(model_path: str, cfg):
    """Open a session of `cfg.backend` on a model (in a worker: this imports the runtime)."""
    return _load(get(cfg.backend).session)(model_path, cfg)


def default_backend() -> str:
    """The backend a sweep uses when none is named: the first registered."""
    return names()[0]


def ir_backend() -> str:
    """The backend that runs the OpenVINO IR files the variant step makes (the FP32 IR, the NNCF INT8
    IR): the first registered that loads them and runs the IR format."""
    able = loaders("openvino", "openvino-ir")
    if not able:
        raise ConfigError("No registered backend runs OpenVINO IR files, which the INT8 variant is.")
    return able[0]


def title(name: str) -> str:
    """A backend's name for sentences and legends; an unregistered name (an older store's) as it is."""
    info = _REGISTRY.get(str(name))
    return (info.title or info.name) if info else str(name)


def serving(name: str, fmt: str) -> Serving | None:
    """How serving format `fmt` runs backend `name`'s model, or None when the backend names no runtime there."""
    value = get(name).serving.get(fmt)
    if value is None or isinstance(value, Serving):
        return value
    return Serving(runtime=str(value))


def serving_backends(fmt: str) -> tuple[str, ...]:
    """Backends whose serving map names format `fmt`: the runs that format serves as measured."""
    return tuple(n for n, info in _REGISTRY.items() if fmt in info.serving)


def loaders(fmt: str, loads: str) -> tuple[str, ...]:
    """Backends that run model format `fmt` by loading `loads` (e.g. "savedmodel")."""
    return tuple(n for n, info in _REGISTRY.items() if fmt in info.formats and info.loads == loads)


def runtime_label(name: str, versions: dict) -> str:
    """The runtime a run used and its version as a study recorded it: `tensorflow-cpu 2.21.0`.

    Of the backend's distributions named after it, the most specific one recorded (tensorflow-cpu
    over tensorflow); the backend's name alone when none was.
    """
    own = [d for d in (_REGISTRY[name].distributions if name in _REGISTRY else ()) if d.startswith(str(name))]
    found = sorted((d for d in own if d in versions), key=len, reverse=True)
    if found:
        return f"{found[0]} {versions[found[0]]}"
    return str(name) + (f" {versions[name]}" if name in versions else "")


def named_properties(name: str, run: dict, bool_settings: frozenset[str] = frozenset()) -> dict:
    """A run's settings named as the runtime names them (`properties`), for a backend that declares them.

    `bool_settings`: the settings that are switches (written "1"/"0"); the others are counts,
    written when set.
    """
    import math

    info = get(name)
    out: dict = {}
    for setting, prop in info.properties.items():
        value = run.get(setting)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if setting in bool_settings:
            out[prop] = "1" if value else "0"
        else:
            try:
                count = int(float(value))
            except (TypeError, ValueError):
                continue
            if count:
                out[prop] = count
    if info.bf16_property and run.get("precision") == "bf16":
        out[info.bf16_property] = "true"
    return out


def load_check(name: str, fmt: str) -> str | None:
    """The "module:function" with which backend `name` checks that it can open a `fmt` model, or None."""
    return get(name).load_checks.get(fmt)


def reader(fmt: str):
    """The function a backend declares to read a `fmt` model file's inputs (in a worker), or None."""
    for info in _REGISTRY.values():
        if fmt in info.readers:
            return _load(info.readers[fmt])
    return None


def sole_readers(fmt: str) -> list[tuple[str, object]]:
    """(backend, function) of every backend declaring a reader for `fmt` files the IR backend refuses."""
    return [(info.name, _load(info.sole_readers[fmt])) for info in _REGISTRY.values() if fmt in info.sole_readers]


register(BackendInfo(
    name="openvino",
    description="OpenVINO: an IR (converted once from any format), threads, streams, hint, pinning, precision",
    formats=("openvino", "onnx", "savedmodel", "keras", "tflite", "paddle"),
    session="wb_core.backends.openvino:OpenVINOSession",
    distributions=("openvino",),
    settings=("threads",),
    axes=(
        Axis("hint", "hints", one_of_or_none("performance hint", ("latency", "throughput")),
             "OpenVINO PERFORMANCE_HINT: none, latency, throughput.", "Hint (OpenVINO)", "--hint",
             text_default="none", annotation="str | None", choices=("none", "latency", "throughput"),
             becomes="PERFORMANCE_HINT", unparse=lambda h: h or "none", in_name="{VALUE} hint", header="OpenVINO hint",
             legacy_key=True, guide="OpenVINO's own tuning: latency or throughput, e.g. none,throughput (none: the "
             "settings above decide)."),
        # NUM_STREAMS and PERFORMANCE_HINT are exclusive in OpenVINO; a stream needs a thread of its own.
        Axis("streams", "streams", whole_numbers("Streams", MAX_THREADS), "OpenVINO NUM_STREAMS values.",
             "Streams (OpenVINO)", "--streams", ordered=True, becomes="NUM_STREAMS", unless="hint",
             in_name="{value} stream{s}", name_rank=30, header="Streams", column_rank=5, legacy_key=True,
             guide="OpenVINO streams: requests run side by side on separate groups of cores, e.g. 1,2; auto lets "
             "OpenVINO choose.",
             at_most="threads", fills_auto="concurrency",
             at_most_note="{value} streams with {limit} thread{s} left out: OpenVINO gives each stream a thread of "
                          "its own, so it would run as fewer streams."),
        Axis("cpu_pinning", "cpu_pinning", on_off("CPU pinning"), "OpenVINO ENABLE_CPU_PINNING: on, off, auto.",
             "CPU pinning (OpenVINO)", "--ov-pinning", annotation="bool | None", choices=("on", "off", "auto"),
             becomes="ENABLE_CPU_PINNING", legacy_key=True, guide="Whether OpenVINO ties its threads to cores: on, "
             "off or auto."),
    ),
    serving={"ovms": "openvino",
             "triton": Serving("openvino", model_file="model.xml"),
             "kserve": Serving("openvino", server="kserve-openvino")},
    loads="openvino-ir",
    bf16_note="FP32 IR compiled with INFERENCE_PRECISION_HINT=bf16",
    title="OpenVINO",
    # Untouched: no property set, so it picks the precision (BF16 on BF16 CPUs); the hints keep as
    # many requests in flight as it asks for (OPTIMAL_NUMBER_OF_INFER_REQUESTS).
    defaults=(("OpenVINO untouched", {"untouched": True}),
              ("OpenVINO LATENCY hint", {"hint": "latency", "untouched": True}),
              ("OpenVINO THROUGHPUT hint", {"hint": "throughput", "untouched": True})),
    variant_default={"hint": "throughput", "untouched": True},
    layer_profiling=True,
    # Every file OpenVINO reads as it is is read and compiled before the sweep; an IR converted from a
    # SavedModel or Keras file is read by OpenVINO when it is made.
    load_checks={fmt: "wb_core.backends.openvino:check_loads" for fmt in ("openvino", "onnx", "tflite", "paddle")},
))
register(BackendInfo(
    name="tensorflow",
    description="TensorFlow: the SavedModel signature, intra/inter-op threads, oneDNN on or off",
    formats=("savedmodel", "keras"),
    session="wb_core.backends.tensorflow:TensorFlowSession",
    distributions=("tensorflow", "tensorflow-cpu", "keras"),
    env={"threads": ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS")},
    settings=("threads",),
    axes=(
        Axis("inter_op_threads", "inter_op_threads", whole_numbers("Inter-op threads", MAX_THREADS),
             "Inter-op threads: TensorFlow's, and ONNX Runtime's under parallel execution.",
             "Inter-op threads (TensorFlow)", "--inter-op-threads", ordered=True, becomes="TF_NUM_INTEROP_THREADS",
             in_name="{value} inter-op thread{s}", header="Inter-op threads",
             env=("TF_NUM_INTEROP_THREADS",), column_rank=4, legacy_key=True,
             guide="TensorFlow threads that run independent operations at once, e.g. 1,2."),
        Axis("onednn", "onednn", on_off("oneDNN"), "TensorFlow oneDNN: on, off, auto.", "oneDNN (TensorFlow)",
             "--onednn", annotation="bool | None", choices=("on", "off", "auto"), becomes="TF_ENABLE_ONEDNN_OPTS",
             env=("TF_ENABLE_ONEDNN_OPTS",), legacy_key=True, guide="TensorFlow's oneDNN kernels: on, off or auto."),
    ),
    serving={"tfserving": "tensorflow_model_server",
             "triton": Serving("tensorflow", platform="tensorflow_savedmodel", model_file="model.savedmodel"),
             "kserve": Serving("tensorflow", format_version="2", server="kserve-tensorflow-serving")},
    loads="savedmodel",
    int8_via=("TensorFlow models reach INT8 through the OpenVINO INT8 variant (NNCF post-training "
              "quantization); profile int8 with the OpenVINO backend"),
    bf16_note="SavedModel run with oneDNN bfloat16 auto mixed precision",
    bf16_probe=True,
    title="TensorFlow",
    defaults=(("TensorFlow, default threads", {}),),
    properties={"threads": "intra_op_parallelism_threads", "inter_op_threads": "inter_op_parallelism_threads",
                "onednn": "TF_ENABLE_ONEDNN_OPTS"},
    bf16_property="auto_mixed_precision_onednn_bfloat16",
    readers={"savedmodel": "wb_core.backends.tensorflow:read_inputs"},
))
register(BackendInfo(
    name="onnxruntime",
    description="ONNX Runtime: an ONNX model on the CPU execution provider, intra/inter-op threads, execution mode, "
                "graph optimisation level",
    formats=("onnx",),
    session="wb_core.backends.onnxruntime:OnnxRuntimeSession",
    distributions=("onnxruntime",),
    settings=("threads", "inter_op_threads"),
    axes=(
        Axis("execution_mode", "execution_modes", one_of_or_none("execution mode", ("sequential", "parallel"), "auto"),
             "ONNX Runtime execution mode: sequential, parallel (independent operators at once, on the inter-op "
             "threads; with one inter-op thread it runs sequentially, as column ort_execution_mode shows) or auto.",
             "Execution mode (ONNX Runtime)", "--execution-mode", annotation="str | None",
             choices=("auto", "sequential", "parallel"), becomes="SessionOptions.execution_mode"),
        Axis("graph_optimization", "graph_optimizations",
             one_of_or_none("graph optimisation level", ("disable", "basic", "extended", "all"), "auto"),
             "ONNX Runtime graph optimisation level: disable, basic, extended, all or auto (all).",
             "Graph optimisation (ONNX Runtime)", "--graph-optimization", annotation="str | None",
             choices=("auto", "disable", "basic", "extended", "all"),
             becomes="SessionOptions.graph_optimization_level"),
    ),
    # Triton runs ONNX models on its onnxruntime backend; KServe serves the onnx model format through
    # its Triton runtime (kserve-tritonserver).
    serving={"triton": "onnxruntime", "kserve": "onnx"},
    loads="onnx",
    int8_via=("ONNX Runtime's own INT8 path is not measured here; ONNX models reach INT8 through the OpenVINO INT8 "
              "variant (NNCF post-training quantization): profile int8 with the OpenVINO backend"),
    bf16_via="ONNX Runtime's CPU execution provider has no BF16 mode; profile bf16 with the OpenVINO backend",
    title="ONNX Runtime",
    defaults=(("ONNX Runtime, default threads", {}),),
    load_checks={"onnx": "wb_core.backends.onnxruntime:check_loads"},
    sole_readers={"onnx": "wb_core.backends.onnxruntime:describe_onnx"},
))
