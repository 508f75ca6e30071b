"""`triton`: Triton Inference Server model repository (config.pbtxt), --host-policy flags, run_triton.sh.

Each run uses the Triton runtime its backend declares (the registry's serving map: Triton's
`openvino` backend for OpenVINO runs, the `tensorflow_savedmodel` platform for TensorFlow runs);
a backend that declares none is served as an OpenVINO IR by the `openvino` backend.
`render_python` writes the same instance layout served by Triton's Python backend running
OpenVINO (the variant `wb serve-check` starts, and the one a stock Triton CPU image can run with
exactly the run's OpenVINO properties).

The rules applied here were checked against tritonserver 2.51 (release 24.10, the binary that
nvidia-pytriton 0.7.0 ships) and its backends' sources at branch r24.10:

- Pinning is a host policy, `--host-policy=NAME,cpu-cores=LO-HI`, named by an instance group.
  The value must be one range `LO-HI` (one core is `N-N`); `0`, `0,2` are rejected when the model
  loads. So there is one host policy per contiguous range of CPUs, and instance groups are split
  across the ranges; an instance whose own CPUs are not contiguous gets the range that covers
  them, a note, and the exact set on the process (docker --cpuset-cpus / taskset -c).
- A model instance executes one batch at a time (the openvino and python backends run inference
  synchronously), so OpenVINO streams of one compiled model are not used in parallel. A run that
  kept several requests in flight on S > 1 streams becomes S instances of one stream each, with
  its threads and CPUs divided between them (what OpenVINO's streams are: independent executors).
- The openvino backend reads INFERENCE_NUM_THREADS, COMPILATION_NUM_THREADS, HINT_BF16 (whose
  only accepted value is YES), NUM_STREAMS and PERFORMANCE_HINT as device properties, and the
  flags ENABLE_BATCH_PADDING, RESHAPE_IO_LAYERS, SKIP_OV_DYNAMIC_BATCHSIZE; any other key is
  ignored without a word, so the export never writes one and notes what it cannot carry.
- With max_batch_size > 1 the openvino backend fails every request batch other than
  max_batch_size unless ENABLE_BATCH_PADDING is YES (it then pads to max_batch_size).
- Triton batches on axis 0 only: with max_batch_size > 0 every input and output gets a leading
  batch dimension that `dims` leaves out. A model with an input whose batch is on another axis (a
  recurrent state [layers, batch, hidden]) or with no batch at all (a scalar sample rate) is
  exported with max_batch_size 0, dims holding each tensor's full shape, and no dynamic batching.
- The tensorflow backend reads TF_NUM_INTRA_THREADS and TF_NUM_INTER_THREADS; the onnxruntime
  backend intra_op_thread_count and inter_op_thread_count (its README, r24.10).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from wb_core.analysis.words import p99_limit_words
from wb_core.backends.registry import Serving, get, serving
from wb_core.export.common import (
    HERE,
    INPUT_DTYPES_TRITON,
    ExportResult,
    comment_block,
    copy_unless_there,
    core_ranges,
    cpu_list,
    model_file_name,
    notes_file,
    openvino_run,
    provenance,
    served_file,
    shell_line,
)
from wb_core.export.deployment import DeploymentConfig
from wb_core.export.ovms import plugin_config
from wb_core.precisions import hinted
from wb_core.precisions import precision as declared

FORMAT = "triton"
DESCRIPTION = "Triton: model_repository/NAME/config.pbtxt (instance_group, dynamic_batching) and run_triton.sh"
IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
CHECKED_AGAINST = "tritonserver 2.51 (24.10)"
# Parameters Triton's openvino backend (r24.10) reads; anything else in config.pbtxt is ignored.
OPENVINO_DEVICE_PARAMETERS = ("INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS", "HINT_BF16", "NUM_STREAMS",
                              "PERFORMANCE_HINT")
OPENVINO_FLAG_PARAMETERS = ("ENABLE_BATCH_PADDING", "RESHAPE_IO_LAYERS", "SKIP_OV_DYNAMIC_BATCHSIZE")
TRITON_OV_PARAMETERS = OPENVINO_DEVICE_PARAMETERS + OPENVINO_FLAG_PARAMETERS
# What serves a run whose backend names no Triton runtime: its OpenVINO IR in the openvino backend.
IR_RUNTIME = Serving("openvino", model_file="model.xml")


def served_runtime(dep: DeploymentConfig) -> Serving:
    """The Triton backend or platform that serves the run (from the registry's serving map)."""
    return serving(dep.backend, FORMAT) or IR_RUNTIME


def _q(text: str) -> str:
    """A protobuf text-format string literal: protobuf's own C escaping of the UTF-8 bytes (quotes,
    backslashes, line breaks and every byte outside printable ASCII as escapes), so a tensor name or
    parameter holding a quote or a line break stays one value and cannot add a setting."""
    from google.protobuf import text_encoding

    return '"' + text_encoding.CEscape(str(text).encode("utf-8", "surrogateescape"), as_utf8=False) + '"'


@dataclass
class Group:
    """One instance_group: `count` instances, each on `cores` (exact CPUs; None = not pinned)."""

    count: int
    cores: list[int] | None = None
    policy_range: tuple[int, int] | None = None

    @property
    def policy(self) -> str | None:
        return f"wb_cpus_{self.policy_range[0]}_{self.policy_range[1]}" if self.policy_range else None


@dataclass
class Layout:
    """How the run's instances, streams and threads map onto Triton model instances."""

    groups: list[Group]
    threads: int | None = None  # per model instance
    streams: int | None = None  # per model instance (explicit NUM_STREAMS)
    split_streams: int = 1  # > 1: each measured instance became this many single-stream instances
    properties: dict[str, str] = field(default_factory=dict)  # OpenVINO properties of each instance

    @property
    def count(self) -> int:
        return sum(g.count for g in self.groups)

    def host_policies(self) -> dict[str, tuple[int, int]]:
        return {g.policy: g.policy_range for g in self.groups if g.policy}

    def process_cpus(self) -> list[int] | None:
        """Every CPU an instance runs on: the set to confine the whole server process to."""
        if any(g.cores is None for g in self.groups):
            return None
        return sorted({c for g in self.groups for c in g.cores})


def _split(cores: list[int] | None, parts: int) -> list[list[int] | None]:
    """Divide a CPU list into `parts` contiguous chunks of near-equal size (or share it if too small)."""
    if not cores or len(cores) < parts:
        return [cores] * parts
    ids = sorted(cores)
    size, extra = divmod(len(ids), parts)
    out, i = [], 0
    for p in range(parts):
        n = size + (1 if p < extra else 0)
        out.append(ids[i:i + n])
        i += n
    return out


def _int(v) -> int | None:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def layout(dep: DeploymentConfig, notes: list[str]) -> Layout:
    """Instance groups, host policies and per-instance threads/streams for a run (see the module rules)."""
    ov = openvino_run(dep)
    props = plugin_config(dep, []) if ov else {}
    threads = _int(props.get("INFERENCE_NUM_THREADS")) if ov else dep.threads
    streams = _int(props.get("NUM_STREAMS"))
    effective_streams = streams or _int(dep.runtime_reported.get("ov_streams")) or 1
    if dep.capacity:
        n, k = int(dep.capacity["instances_per_machine"]), int(dep.capacity["cores_per_instance"])
        sets = [list(range(i * k, (i + 1) * k)) for i in range(n)] if dep.cores else [None] * n
        if dep.cores:
            notes.append(f"With the capacity plan each of the {n} instance(s) per server gets {k} CPU(s) of its own: "
                         f"CPUs 0-{n * k - 1} of the serving machine, {k} per instance, as the run measured on "
                         f"CPUs {cpu_list(dep.cores)}.")
    else:
        sets = dep.instance_cores()
    split = 1
    if ov and effective_streams > 1 and dep.concurrency > 1:
        split = effective_streams
        sets = [chunk for cs in sets for chunk in _split(cs, split)]
        per = max(1, threads // split) if threads else (len(sets[0]) if sets[0] else None)
        notes.append(f"The run kept {dep.concurrency} requests in flight on {split} OpenVINO streams of one compiled "
                     f"model; a Triton model instance runs one batch at a time ({CHECKED_AGAINST}), so each measured "
                     f"instance becomes {split} instances of 1 stream and {per or 'auto'} thread(s), each on its share "
                     "of the CPUs.")
        threads, streams = per, 1
        props = {k: v for k, v in props.items() if k not in ("PERFORMANCE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS")}
    if ov:
        if threads:
            props["INFERENCE_NUM_THREADS"] = str(threads)
        if streams:
            props["NUM_STREAMS"] = str(streams)
    groups = _groups(sets, notes)
    return Layout(groups=groups, threads=threads, streams=streams, split_streams=split, properties=props)


def _groups(sets: list[list[int] | None], notes: list[str]) -> list[Group]:
    """Instance groups from each instance's CPUs: one host policy per contiguous range."""
    counts: Counter = Counter(tuple(sorted(s)) if s else None for s in sets)
    groups: list[Group] = []
    for cs, count in counts.items():
        if cs is None:
            groups.append(Group(count))
            continue
        ranges = core_ranges(list(cs))
        if len(ranges) == 1:
            groups.append(Group(count, list(cs), ranges[0]))
        elif count >= len(ranges):
            # Spread the instances that shared these CPUs over the ranges, in proportion to their size.
            sizes = [hi - lo + 1 for lo, hi in ranges]
            share = [max(1, count * s // sum(sizes)) for s in sizes]
            while sum(share) < count:
                share[share.index(min(share))] += 1
            while sum(share) > count:
                share[share.index(max(share))] -= 1
            for (lo, hi), c in zip(ranges, share):
                groups.append(Group(c, list(range(lo, hi + 1)), (lo, hi)))
            notes.append(f"{count} instance(s) shared CPUs {cpu_list(list(cs))}, which are not one range; a Triton "
                         f"host policy takes one range LO-HI ({CHECKED_AGAINST}), so they are spread over "
                         + ", ".join(f"{lo}-{hi} ({c})" for (lo, hi), c in zip(ranges, share)) + ".")
        else:
            lo, hi = ranges[0][0], ranges[-1][1]
            groups.append(Group(count, list(cs), (lo, hi)))
            notes.append(f"An instance ran on CPUs {cpu_list(list(cs))}, which are not one range: a Triton host policy "
                         f"takes one range LO-HI ({CHECKED_AGAINST}), so its policy covers {lo}-{hi}; run_triton.sh "
                         f"keeps the server on exactly {cpu_list(list(cs))} with docker --cpuset-cpus (taskset -c "
                         "for the bare command).")
    # Groups pinned to the same range merge into one.
    merged: dict = {}
    for g in groups:
        key = g.policy_range if g.policy_range else None
        if key in merged:
            merged[key].count += g.count
        else:
            merged[key] = Group(g.count, g.cores, g.policy_range)
    return list(merged.values())


def openvino_parameters(dep: DeploymentConfig, lay: Layout, notes: list[str]) -> dict[str, str]:
    """config.pbtxt parameters for Triton's openvino backend, and notes for what it cannot read."""
    props = lay.properties
    out: dict[str, str] = {}
    if props.get("INFERENCE_NUM_THREADS"):
        out["INFERENCE_NUM_THREADS"] = props["INFERENCE_NUM_THREADS"]
    if props.get("NUM_STREAMS"):
        out["NUM_STREAMS"] = props["NUM_STREAMS"]
    if props.get("PERFORMANCE_HINT"):
        out["PERFORMANCE_HINT"] = props["PERFORMANCE_HINT"].upper()
    precision = str(props.get("INFERENCE_PRECISION_HINT", "")).lower()
    if precision == "bf16":
        out["HINT_BF16"] = "YES"
    elif precision:
        flags = set(dep.measurement.hardware.get("flags") or [])
        if "amx_bf16" in flags:
            notes.append(f"The run asked OpenVINO for {precision}; Triton's openvino backend cannot ask for it (its "
                         "HINT_BF16 accepts only YES), and on this CPU, which has AMX, OpenVINO's default is bf16: "
                         "Triton would serve this run in BF16. Serve it with OVMS or the Python-backend variant "
                         "(wb serve-check) to keep f32.")
        else:
            notes.append(f"The run asked OpenVINO for {precision}; Triton's openvino backend has no parameter for it "
                         "(HINT_BF16 accepts only YES), so OpenVINO's default applies: f32 on CPUs without AMX, "
                         "bf16 on CPUs with AMX.")
    if dep.batch_size > 1 and max_batch_size(dep):
        # Without it the backend fails every batch other than max_batch_size (a partly filled one).
        out["ENABLE_BATCH_PADDING"] = "YES"
        notes.append(f"ENABLE_BATCH_PADDING=YES: smaller batches are padded to {dep.batch_size}, so each one costs a "
                     f"full batch of {dep.batch_size}, as measured.")
    if "ENABLE_CPU_PINNING" in props:
        notes.append(f"OpenVINO's ENABLE_CPU_PINNING={props['ENABLE_CPU_PINNING']} has no parameter in Triton's "
                     "openvino backend; the host policy pins the instance instead.")
    if props.get("PERFORMANCE_HINT_NUM_REQUESTS"):
        notes.append(f"PERFORMANCE_HINT_NUM_REQUESTS={props['PERFORMANCE_HINT_NUM_REQUESTS']} has no parameter in "
                     "Triton's openvino backend.")
    skip = {"INFERENCE_NUM_THREADS", "NUM_STREAMS", "PERFORMANCE_HINT", "INFERENCE_PRECISION_HINT",
            "ENABLE_CPU_PINNING", "PERFORMANCE_HINT_NUM_REQUESTS"}
    for k in sorted(set(props) - skip):
        notes.append(f"OpenVINO property {k}={props[k]} has no parameter in Triton's openvino backend.")
    return out


def tensorflow_parameters(dep: DeploymentConfig, notes: list[str]) -> dict[str, str]:
    out = {}
    if dep.threads:
        out["TF_NUM_INTRA_THREADS"] = str(dep.threads)
    if dep.inter_op_threads:
        out["TF_NUM_INTER_THREADS"] = str(dep.inter_op_threads)
    if dep.onednn is not None:
        notes.append(f"TF_ENABLE_ONEDNN_OPTS={'1' if dep.onednn else '0'} is an environment variable, not a "
                     "model parameter: set it on the tritonserver process (run_triton.sh does).")
    if dep.precision in hinted():
        notes.append(f"TensorFlow's oneDNN {declared(dep.precision).label} auto mixed precision has no Triton model "
                     "parameter; the tensorflow backend runs the SavedModel as exported.")
    if dep.concurrency > 1:
        notes.append(f"The run called one TensorFlow session from {dep.concurrency} threads at once; a Triton model "
                     "instance runs one batch at a time, so the export keeps its instance count and the requests "
                     "queue.")
    return out


def onnxruntime_parameters(dep: DeploymentConfig, notes: list[str]) -> dict[str, str]:
    out = {}
    if dep.threads:
        out["intra_op_thread_count"] = str(dep.threads)
    if dep.inter_op_threads:
        out["inter_op_thread_count"] = str(dep.inter_op_threads)
    return out


# Triton's own runtime names (the words it shares with ours are its, not the registry's) -> their parameters.
RUNTIME_PARAMETERS = {"openvino": openvino_parameters,
                      "tensorflow": lambda dep, lay, notes: tensorflow_parameters(dep, notes),
                      "onnxruntime": lambda dep, lay, notes: onnxruntime_parameters(dep, notes)}


def _parameters(dep: DeploymentConfig, lay: Layout, notes: list[str]) -> dict[str, str]:
    """config.pbtxt parameters in the words of the Triton runtime that serves the run."""
    name = served_runtime(dep).runtime
    if name in RUNTIME_PARAMETERS:
        return RUNTIME_PARAMETERS[name](dep, lay, notes)
    notes.append(f"Triton's {name} backend gets no parameters from this export; set its threads by hand.")
    return {}


def off_axis_inputs(dep: DeploymentConfig) -> dict[str, str]:
    """Inputs Triton cannot batch on axis 0, each with why: its batch on another axis, or no batch at all."""
    out = {}
    for spec in dep.model.inputs:
        shape, axis = list(spec.get("shape") or []), int(spec.get("batch_axis") or 0)
        if not shape:
            out[str(spec.get("name"))] = "has no batch dimension (a scalar)"
        elif axis:
            out[str(spec.get("name"))] = f"carries its batch on axis {axis} (shape {shape})"
    return out


def max_batch_size(dep: DeploymentConfig) -> int:
    """config.pbtxt's max_batch_size: the run's batch, or 0 where Triton cannot batch the inputs on axis 0."""
    return 0 if off_axis_inputs(dep) else dep.batch_size


def _tensors(dep: DeploymentConfig, notes: list[str], shapes: dict | None = None):
    """(inputs, outputs) as (name, triton dtype, dims) lists, dims without the batch (the full shape when
    max_batch_size is 0); outputs may be empty."""
    from wb_core.export.modelio import ir_io

    cut = 1 if max_batch_size(dep) else 0
    io = ir_io(dep.model.ir_path, shapes) if get(dep.backend).loads == "openvino-ir" or shapes else None
    if io is not None:
        ins = [(t.name, t.dtype, t.shape[cut:]) for t in io[0]]
        outs = [(t.name, t.dtype, t.shape[cut:]) for t in io[1]]
    else:
        ins = [(str(s.get("name")), str(s.get("dtype")), list(s.get("shape") or [])[cut:]) for s in dep.model.inputs]
        outs = []
        notes.append("Outputs are not listed (the model file was not at hand to read them): Triton's auto-complete "
                     "reads them from the model, so leave --disable-auto-complete-config off.")
    return ins, outs


def _tensor_block(kind: str, tensors, notes: list[str], batched: bool = True) -> str | None:
    items = []
    for name, dtype, dims in tensors:
        tt = INPUT_DTYPES_TRITON.get(str(dtype))
        if tt is None:
            notes.append(f"{kind.capitalize()} {name} has dtype {dtype}, which has no Triton type; it is left to "
                         "Triton's auto-complete.")
            continue
        if dims:
            shape = f"dims: [ {', '.join(str(int(x)) for x in dims)} ]"
        elif not batched:  # a scalar, whole: Triton takes one value reshaped to nothing
            shape = "dims: [ 1 ]\n    reshape: { shape: [ ] }"
        else:  # only the batch dimension: Triton wants dims [1], reshaped to nothing
            shape = "dims: [ 1 ]\n    reshape: { shape: [ ] }"
        items.append(f"  {{\n    name: {_q(name)}\n    data_type: {tt}\n    {shape}\n  }}")
    return f"{kind} [\n" + ",\n".join(items) + "\n]" if items else None


def config_pbtxt(dep: DeploymentConfig, notes: list[str], lay: Layout | None = None, python: bool = False,
                 extra_parameters: dict[str, str] | None = None, shapes: dict | None = None) -> str:
    """config.pbtxt text for the run (Triton's own backend for it, or the Python backend with `python`)."""
    lay = lay or layout(dep, notes)
    name = dep.serving_name
    lines = [f"name: {_q(name)}"]
    served = served_runtime(dep)
    if python:
        lines += [f"backend: {_q('python')}"]
    elif served.platform:  # a platform implies its model's name (model.savedmodel)
        lines += [f"platform: {_q(served.platform)}"]
    else:
        lines += [f"backend: {_q(served.runtime)}"]
        if served.model_file:
            lines += [f"default_model_filename: {_q(served.model_file)}"]
    limit = max_batch_size(dep)
    lines.append(f"max_batch_size: {limit}")
    if not limit:
        why = "; ".join(f"input '{n}' {w}" for n, w in off_axis_inputs(dep).items())
        notes.append(f"max_batch_size is 0 and dims give each tensor's full shape: Triton batches on axis 0 only, "
                     f"and {why}. Triton does not batch requests for this model, so each request is a whole "
                     f"batch{f' of {dep.batch_size}, as measured' if dep.batch_size > 1 else ''}.")
    ins, outs = _tensors(dep, notes, shapes)
    for kind, tensors in (("input", ins), ("output", outs)):
        block = _tensor_block(kind, tensors, notes, batched=bool(limit))
        if block:
            lines.append(block)
    if dep.capacity:
        notes.append(f"instance_group count {lay.count} per server and {dep.capacity['replicas']} server(s), from the "
                     f"capacity plan for {dep.capacity['target_rate']:g} requests/s "
                     f"{p99_limit_words(dep.capacity.get('p99_ms'))}.")
    groups = []
    for i, g in enumerate(lay.groups):
        body = [f"    name: {_q(f'{name}_{i}')}", f"    count: {g.count}", "    kind: KIND_CPU"]
        if g.policy:
            body.append(f"    host_policy: {_q(g.policy)}")
        groups.append("  {\n" + "\n".join(body) + "\n  }")
    lines.append("instance_group [\n" + ",\n".join(groups) + "\n]")
    if dep.batch_size > 1 and limit:
        # The run was fastest batching requests together, so let Triton form batches of that size.
        lines.append(f"dynamic_batching {{\n  preferred_batch_size: [ {dep.batch_size} ]\n"
                     f"  max_queue_delay_microseconds: {_queue_delay_us(dep)}\n}}")
    params = dict(extra_parameters or {}) if python else _parameters(dep, lay, notes)
    for key, value in params.items():
        lines.append(f"parameters {{\n  key: {_q(key)}\n  value {{ string_value: {_q(value)} }}\n}}")
    if dep.concurrency > 1 or dep.instances > 1:
        notes.append(f"The run kept {dep.concurrency * dep.instances} request(s) in flight; Triton takes whatever "
                     "clients send, so drive it with that concurrency (e.g. perf_analyzer --concurrency-range) to see "
                     "the same numbers.")
    if dep.rate:
        notes.append(f"The run was measured under Poisson arrivals at {dep.rate:g} requests/s (open loop).")
    return comment_block(provenance(dep)) + "\n".join(lines) + "\n"


def _queue_delay_us(dep: DeploymentConfig) -> int:
    """Wait at most about half a batch's p50 latency for a batch to fill (bounded to 100 us .. 10 ms)."""
    p50 = dep.expected.latency_ms_p50 or 1.0
    return int(min(10_000, max(100, round(p50 * 1000 / 2))))


def host_policy_flags(dep_or_layout, notes: list[str] | None = None) -> list[str]:
    """`--host-policy=NAME,cpu-cores=LO-HI`, one per contiguous range the instances run on."""
    lay = dep_or_layout if isinstance(dep_or_layout, Layout) else layout(dep_or_layout, notes if notes is not None
                                                                         else [])
    return [f"--host-policy={name},cpu-cores={lo}-{hi}" for name, (lo, hi) in lay.host_policies().items()]


def _model_copy(dep: DeploymentConfig, name: str) -> tuple[str, str]:
    """Shell lines that put the model files into the repository (skipped when a bundle already did)."""
    kind = served_file(dep, FORMAT)
    if kind not in ("savedmodel", "openvino-ir"):  # a runtime that serves the model file as it is (ONNX)
        dest, file = f"model_repository/{name}/1", model_file_name(dep, FORMAT)
        return (shell_line(["mkdir", "-p", dest]) + "\n" + copy_unless_there(dep.model.path, f"{dest}/{file}"),
                f"model_repository/{name}/config.pbtxt and {dest}/{file}")
    if kind == "savedmodel":
        src = dep.model.savedmodel_path or "saved_model"
        dest = f"model_repository/{name}/1/{served_runtime(dep).model_file or 'model.savedmodel'}"
        return (shell_line(["mkdir", "-p", f"model_repository/{name}/1"]) + "\n"
                + copy_unless_there(src, dest, check=f"{dest}/saved_model.pb", recursive=True),
                f"model_repository/{name}/config.pbtxt and {dest}/")
    ir = dep.model.ir_path or "model.xml"
    binf = ir[:-4] + ".bin" if ir.endswith(".xml") else "model.bin"
    dest = f"model_repository/{name}/1"
    return (shell_line(["mkdir", "-p", dest]) + "\n"
            + copy_unless_there(ir, f"{dest}/model.xml") + copy_unless_there(binf, f"{dest}/model.bin"),
            f"model_repository/{name}/config.pbtxt and {dest}/model.xml + model.bin")


def render(dep: DeploymentConfig) -> ExportResult:
    result = ExportResult(FORMAT)
    notes = result.notes
    name = dep.serving_name
    lay = layout(dep, notes)
    pbtxt = config_pbtxt(dep, notes, lay)
    if not dep.cores:
        notes.append("The run was not pinned to cores, so no --host-policy is given.")
    copy, layout_text = _model_copy(dep, name)
    # oneDNN on or off is an environment variable of the server process, not a model parameter.
    env = [a for k, v in get(dep.backend).process_env({"onednn": dep.onednn}).items() for a in ("-e", f"{k}={v}")]
    cpus = lay.process_cpus()
    flags = host_policy_flags(lay)
    docker = (["docker", "run", "-d", "--rm", "--name", f"{name}-triton"]
              + ([f"--cpuset-cpus={cpu_list(cpus)}"] if cpus else []) + env
              + ["-p", "8000:8000", "-p", "8001:8001", "-p", "8002:8002", "-v", f"{HERE}/model_repository:/models:ro",
                 IMAGE, "tritonserver", "--model-repository=/models", *flags])
    bare = ((["taskset", "-c", cpu_list(cpus)] if cpus else [])
            + ["tritonserver", f"--model-repository={HERE}/model_repository", *flags])
    script = ("#!/bin/sh\n" + comment_block(provenance(dep)) + "set -e\n"
              + comment_block([f"Model repository layout: {layout_text}"]) + copy + shell_line(docker) + "\n"
              + comment_block(["Without docker:", shell_line(bare)]))
    result.files[f"model_repository/{name}/config.pbtxt"] = pbtxt
    result.files["run_triton.sh"] = script
    result.files["NOTES.txt"] = notes_file(dep, result, [
        "sh run_triton.sh   (copies the model into model_repository/ unless it is there, and starts tritonserver)",
        f"Repository layout: {layout_text}",
        f"Pinning flags: {' '.join(flags) or '(none: the run was not pinned)'}",
        f"Rules checked against {CHECKED_AGAINST}; the image tag names that release."])
    return result


# ---- the Python-backend variant (OpenVINO inside Triton's Python backend)

PYTHON_MODEL = '''"""Serves an OpenVINO IR from Triton's Python backend with the properties a measured run used.

Written by CPU Inference Workbench. Parameters (config.pbtxt): WB_OV_PROPERTIES (JSON: OpenVINO
CPU properties), WB_GROUP_CORES (JSON: instance group name -> CPU ids, or null), WB_INPUT_SHAPES
(JSON: input name -> shape at max_batch_size). Each instance pins itself to its group's CPUs
before OpenVINO starts, so it runs on exactly the CPUs the run measured on.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


# Tensors cross the Python backend by DLPack under numpy 2: the backend's numpy bridge (tritonserver
# 2.51) was built for numpy 1 and misreads numpy 2 arrays ("output tensor shape does not match size
# of output").
NUMPY2 = int(np.__version__.split(".")[0]) >= 2


def _array(tensor):
    return np.from_dlpack(tensor) if NUMPY2 else tensor.as_numpy()


def _tensor(name, array):
    return pb_utils.Tensor.from_dlpack(name, np.ascontiguousarray(array)) if NUMPY2 else pb_utils.Tensor(name, array)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in (config.get("parameters") or {}).items()}
        group = args["model_instance_name"].rsplit("_", 1)[0]
        cores = json.loads(params.get("WB_GROUP_CORES") or "{}").get(group)
        if cores:
            os.sched_setaffinity(0, cores)
        import openvino as ov

        core = ov.Core()
        here = os.path.join(args["model_repository"], args["model_version"])
        model = core.read_model(os.path.join(here, "model.xml"))
        shapes = json.loads(params.get("WB_INPUT_SHAPES") or "{}")
        if shapes:
            model.reshape({p.get_any_name(): ov.PartialShape(shapes[p.get_any_name()]) for p in model.inputs
                           if p.get_any_name() in shapes})
        props = json.loads(params.get("WB_OV_PROPERTIES") or "{}")
        self.compiled = core.compile_model(model, "CPU", props)
        self.request = self.compiled.create_infer_request()
        self.batch = int(config.get("max_batch_size") or 0)
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]
        self.dtypes = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}

    def execute(self, requests):
        if not self.batch:  # max_batch_size 0: each request is a whole batch, its tensors full shapes
            return [self._whole(r) for r in requests]
        arrays = [[_array(pb_utils.get_input_tensor_by_name(r, n)) for n in self.inputs] for r in requests]
        sizes = [a[0].shape[0] for a in arrays] if self.batch else [1] * len(arrays)
        feed = []
        for j in range(len(self.inputs)):
            x = np.concatenate([a[j] for a in arrays]) if len(arrays) > 1 else arrays[0][j]
            pad = self.batch - x.shape[0] if self.batch else 0
            if pad > 0:  # as the openvino backend's ENABLE_BATCH_PADDING: run a full batch
                x = np.concatenate([x, np.zeros((pad,) + x.shape[1:], x.dtype)])
            feed.append(np.ascontiguousarray(x))
        self.request.infer(feed)
        results = [self.request.get_output_tensor(i).data for i in range(len(self.outputs))]
        responses, start = [], 0
        for n in sizes:
            tensors = [_tensor(name, np.array(res[start:start + n], dtype=self.dtypes[name], copy=True))
                       for name, res in zip(self.outputs, results)]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += n
        return responses

    def _whole(self, request):
        self.request.infer([np.ascontiguousarray(_array(pb_utils.get_input_tensor_by_name(request, n)))
                            for n in self.inputs])
        tensors = [_tensor(name, np.array(self.request.get_output_tensor(i).data, dtype=self.dtypes[name], copy=True))
                   for i, name in enumerate(self.outputs)]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def finalize(self):
        self.request = None
        self.compiled = None
'''


def render_python(dep: DeploymentConfig, shapes: dict[str, list[int]] | None = None) -> ExportResult:
    """The run as a Triton model served by the Python backend running OpenVINO (for `wb serve-check`).

    Same instance groups, host policies and dynamic batching as `render`; the model compiles the
    IR with exactly the run's OpenVINO properties (f32 included, which the openvino backend cannot
    ask for) and each instance pins itself to its own CPUs. `shapes` gives each input's shape at
    the run's batch size (needed for models with dynamic dimensions).
    """
    from wb_core.errors import ConfigError

    if not openvino_run(dep):
        from wb_core.backends.registry import serving_backends

        raise ConfigError(f"The Python-backend variant serves OpenVINO runs; run {dep.measurement.run_key} ran "
                          f"{dep.backend}. Choose a run on {' or '.join(serving_backends('ovms'))}.")
    result = ExportResult("triton-python")
    notes = result.notes
    name = dep.serving_name
    lay = layout(dep, notes)
    group_cores = {f"{name}_{i}": g.cores for i, g in enumerate(lay.groups)}
    params = {"WB_OV_PROPERTIES": json.dumps(lay.properties, sort_keys=True),
              "WB_GROUP_CORES": json.dumps(group_cores, sort_keys=True),
              "WB_INPUT_SHAPES": json.dumps(shapes or {}, sort_keys=True)}
    pbtxt = config_pbtxt(dep, notes, lay, python=True, extra_parameters=params, shapes=shapes)
    result.files[f"model_repository/{name}/config.pbtxt"] = pbtxt
    result.files[f"model_repository/{name}/1/model.py"] = PYTHON_MODEL
    result.files["NOTES.txt"] = notes_file(dep, result, [
        f"Copy the IR to model_repository/{name}/1/model.xml + model.bin (a bundle already has it there).",
        shell_line(["tritonserver", f"--model-repository={HERE}/model_repository", *host_policy_flags(lay)]),
        "The Python backend's interpreter needs numpy and openvino."])
    return result
