"""`triton`: Triton Inference Server config.pbtxt, model repository layout, and --host-policy flags.

OpenVINO runs use Triton's openvino backend (parameters NUM_STREAMS, INFERENCE_NUM_THREADS, ...);
TensorFlow runs use `tensorflow_savedmodel` with TF_NUM_INTRA_THREADS / TF_NUM_INTER_THREADS.
Pinning is a Triton host policy (`--host-policy=NAME,cpu-cores=...`) named by the instance group.
"""

from __future__ import annotations

import json
import shlex

from wb_core.export.common import INPUT_DTYPES_TRITON, ExportResult, comment_block, cpu_list, notes_file, provenance
from wb_core.export.deployment import DeploymentConfig
from wb_core.export.ovms import plugin_config

FORMAT = "triton"
DESCRIPTION = "Triton: model_repository/NAME/config.pbtxt (instance_group, dynamic_batching) and run_triton.sh"
IMAGE = "nvcr.io/nvidia/tritonserver:latest-py3"
HOST_POLICY = "wb_pinned"
# Parameters Triton's openvino backend reads from config.pbtxt.
TRITON_OV_PARAMETERS = ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT", "ENABLE_CPU_PINNING",
                        "INFERENCE_PRECISION_HINT")


def _q(text: str) -> str:
    return json.dumps(str(text))  # protobuf text format accepts JSON-style double-quoted strings


def parameters(dep: DeploymentConfig, notes: list[str]) -> dict[str, str]:
    if dep.backend == "tensorflow":
        out = {}
        if dep.threads:
            out["TF_NUM_INTRA_THREADS"] = str(dep.threads)
        if dep.inter_op_threads:
            out["TF_NUM_INTER_THREADS"] = str(dep.inter_op_threads)
        if dep.onednn is not None:
            notes.append(f"TF_ENABLE_ONEDNN_OPTS={'1' if dep.onednn else '0'} is an environment variable, not a "
                         "model parameter: set it on the tritonserver process (run_triton.sh does).")
        if dep.precision == "bf16":
            notes.append("TensorFlow's oneDNN BF16 auto mixed precision has no Triton model parameter; the "
                         "tensorflow backend runs the SavedModel as exported.")
        return out
    props = plugin_config(dep, [])
    out = {k: v for k, v in props.items() if k in TRITON_OV_PARAMETERS}
    for k in sorted(set(props) - set(out)):
        notes.append(f"OpenVINO property {k}={props[k]} has no parameter in Triton's openvino backend.")
    return out


def config_pbtxt(dep: DeploymentConfig, notes: list[str]) -> str:
    name = dep.serving_name
    lines = [f"name: {_q(name)}"]
    if dep.backend == "tensorflow":
        lines += [f"platform: {_q('tensorflow_savedmodel')}"]
    else:
        lines += [f"backend: {_q('openvino')}", f"default_model_filename: {_q('model.xml')}"]
    lines.append(f"max_batch_size: {dep.batch_size}")
    inputs = []
    for spec in dep.model.inputs:
        dtype = INPUT_DTYPES_TRITON.get(str(spec.get("dtype")))
        if dtype is None:
            notes.append(f"Input {spec.get('name')} has dtype {spec.get('dtype')}, which has no Triton type; "
                         "it is left to Triton's auto-complete.")
            continue
        dims = ", ".join(str(int(d)) for d in list(spec.get("shape") or [])[1:])  # the batch dim is implicit
        inputs.append(f"  {{\n    name: {_q(spec['name'])}\n    data_type: {dtype}\n    dims: [ {dims} ]\n  }}")
    if inputs:
        lines.append("input [\n" + ",\n".join(inputs) + "\n]")
    notes.append("Outputs are not listed: Triton's auto-complete reads them from the model.")
    count = int(dep.capacity["instances_per_machine"]) if dep.capacity else dep.instances
    if dep.capacity:
        notes.append(f"instance_group count {count} per server and {dep.capacity['replicas']} server(s), from the "
                     f"capacity plan for {dep.capacity['target_rate']:g} requests/s at p99 <= "
                     f"{dep.capacity['p99_ms']:g} ms.")
    group = [f"    count: {count}", "    kind: KIND_CPU"]
    if dep.cores:
        group.append(f"    host_policy: {_q(HOST_POLICY)}")
    lines.append("instance_group [\n  {\n" + "\n".join(group) + "\n  }\n]")
    if dep.batch_size > 1:
        # The run was fastest batching requests together, so let Triton form batches of that size.
        delay = _queue_delay_us(dep)
        lines.append(f"dynamic_batching {{\n  preferred_batch_size: [ {dep.batch_size} ]\n"
                     f"  max_queue_delay_microseconds: {delay}\n}}")
    for key, value in parameters(dep, notes).items():
        lines.append(f"parameters {{\n  key: {_q(key)}\n  value {{ string_value: {_q(value)} }}\n}}")
    if dep.concurrency > 1:
        notes.append(f"The run kept {dep.concurrency} requests in flight; Triton takes whatever clients send, so "
                     "drive it with that concurrency (e.g. perf_analyzer --concurrency-range) to see the same numbers.")
    return comment_block(provenance(dep)) + "\n".join(lines) + "\n"


def _queue_delay_us(dep: DeploymentConfig) -> int:
    """Wait at most about half a batch's p50 latency for a batch to fill (bounded to 100 us .. 10 ms)."""
    p50 = dep.expected.latency_ms_p50 or 1.0
    return int(min(10_000, max(100, round(p50 * 1000 / 2))))


def host_policy_flags(dep: DeploymentConfig) -> list[str]:
    if not dep.cores:
        return []
    return [f"--host-policy={HOST_POLICY},cpu-cores={cpu_list(dep.cores)}"]


def render(dep: DeploymentConfig) -> ExportResult:
    result = ExportResult(FORMAT)
    notes = result.notes
    name = dep.serving_name
    pbtxt = config_pbtxt(dep, notes)
    if not dep.cores:
        notes.append("The run was not pinned to cores, so no --host-policy is given.")
    if dep.backend == "tensorflow":
        src = dep.model.savedmodel_path or "saved_model"
        copy = (f"mkdir -p model_repository/{name}/1\n"
                f"cp -r {shlex.quote(src)} model_repository/{name}/1/model.savedmodel\n")
        layout = f"model_repository/{name}/config.pbtxt and model_repository/{name}/1/model.savedmodel/"
    else:
        ir = dep.model.ir_path or "model.xml"
        binf = ir[:-4] + ".bin" if ir.endswith(".xml") else "model.bin"
        copy = (f"mkdir -p model_repository/{name}/1\n"
                f"cp {shlex.quote(ir)} model_repository/{name}/1/model.xml\n"
                f"cp {shlex.quote(binf)} model_repository/{name}/1/model.bin\n")
        layout = f"model_repository/{name}/config.pbtxt and model_repository/{name}/1/model.xml + model.bin"
    env = ""
    if dep.backend == "tensorflow" and dep.onednn is not None:
        env = f"-e TF_ENABLE_ONEDNN_OPTS={'1' if dep.onednn else '0'} "
    cpuset = f"--cpuset-cpus={cpu_list(dep.cores)} " if dep.cores else ""
    flags = " ".join(host_policy_flags(dep))
    docker = (f"docker run -d --rm --name {name}-triton {cpuset}{env}-p 8000:8000 -p 8001:8001 -p 8002:8002 "
              f"-v \"$PWD/model_repository:/models:ro\" {IMAGE} tritonserver --model-repository=/models "
              f"{flags}".rstrip())
    script = ("#!/bin/sh\n" + comment_block(provenance(dep)) + "set -e\n"
              f"# Model repository layout: {layout}\n" + copy + docker + "\n")
    result.files[f"model_repository/{name}/config.pbtxt"] = pbtxt
    result.files["run_triton.sh"] = script
    result.files["NOTES.txt"] = notes_file(dep, result, [
        "sh run_triton.sh   (copies the model into model_repository/ and starts tritonserver)",
        f"Repository layout: {layout}",
        f"Pinning flags: {flags or '(none: the run was not pinned)'}"])
    return result
