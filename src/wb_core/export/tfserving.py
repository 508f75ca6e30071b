"""`tfserving`: the TensorFlow Serving command line, and batching_parameters.txt when batch size > 1.

The batching file is a `BatchingParameters` protobuf in text format: allowed batch sizes must
increase and the last must equal max_batch_size, which `allowed_batch_sizes` guarantees.
"""

from __future__ import annotations

from wb_core.backends.registry import title
from wb_core.export.common import (
    HERE,
    ExportResult,
    comment_block,
    copy_unless_there,
    cpu_list,
    notes_file,
    provenance,
    requests_in_flight,
    serving_note,
    shell_line,
)
from wb_core.export.deployment import DeploymentConfig
from wb_core.precisions import baseline, hinted, precision

FORMAT = "tfserving"
DESCRIPTION = "TensorFlow Serving: run_tfserving.sh (intra/inter-op parallelism, docker run) and batching_parameters.txt"
IMAGE = "tensorflow/serving:latest"


def allowed_batch_sizes(batch_size: int) -> list[int]:
    """Powers of two below the batch size, then the batch size: small bursts pad to a near size."""
    sizes = []
    b = 1
    while b < batch_size:
        sizes.append(b)
        b *= 2
    return sizes + [batch_size]


def batching_parameters(dep: DeploymentConfig) -> str:
    timeout = int(min(10_000, max(100, round((dep.expected.latency_ms_p50 or 1.0) * 1000 / 2))))
    lines = [f"max_batch_size {{ value: {dep.batch_size} }}",
             f"batch_timeout_micros {{ value: {timeout} }}",
             f"max_enqueued_batches {{ value: {max(16, 4 * requests_in_flight(dep))} }}",
             f"num_batch_threads {{ value: {requests_in_flight(dep)} }}"]
    lines += [f"allowed_batch_sizes: {b}" for b in allowed_batch_sizes(dep.batch_size)]
    return comment_block(provenance(dep) + [
        f"batch_timeout_micros is about half the measured p50 latency of a batch of {dep.batch_size}."]) \
        + "\n".join(lines) + "\n"


def server_args(dep: DeploymentConfig, config_dir: str = "/config", models_dir: str = "/models") -> list[str]:
    """tensorflow_model_server flags; `models_dir` is where the models/ folder is seen by the server."""
    name = dep.serving_name
    args = ["--port=8500", "--rest_api_port=8501", f"--model_name={name}", f"--model_base_path={models_dir}/{name}",
            f"--tensorflow_intra_op_parallelism={dep.threads or 0}",
            f"--tensorflow_inter_op_parallelism={dep.inter_op_threads or 0}"]
    if dep.batch_size > 1:
        args += ["--enable_batching=true", f"--batching_parameters_file={config_dir}/batching_parameters.txt"]
    return args


def render(dep: DeploymentConfig) -> ExportResult:
    result = ExportResult(FORMAT)
    notes = result.notes
    name = dep.serving_name
    other = serving_note(dep, FORMAT, "TensorFlow Serving runs the SavedModel with TensorFlow")
    if other:
        notes.append(other)
        extra = sorted(set(dep.runtime_properties) - {"INFERENCE_NUM_THREADS"})
        if extra:
            notes.append(f"{title(dep.backend)} properties {', '.join(extra)} have no TensorFlow Serving equivalent.")
    if dep.streams:
        notes.append(f"OpenVINO streams ({dep.streams}) have no TensorFlow Serving equivalent.")
    if not dep.threads:
        notes.append("Threads were left to the runtime; 0 lets TensorFlow Serving choose.")
    if dep.precision in hinted():
        label, base = precision(dep.precision).label, precision(baseline()).label
        notes.append(f"{label} auto mixed precision is a graph-rewrite option of the measured run with no TensorFlow "
                     f"Serving flag; export the SavedModel in {label} or serve it in {base}.")
    if dep.instances > 1:
        notes.append(f"The run used {dep.instances} instances; TensorFlow Serving runs one model, with "
                     f"num_batch_threads={requests_in_flight(dep)} batches in parallel.")
    docker = ["docker", "run", "-d", "--rm", "--name", f"{name}-tfserving"]
    if dep.cores:
        docker.append(f"--cpuset-cpus={cpu_list(dep.cores)}")
    else:
        notes.append("The run was not pinned to cores, so the docker line has no --cpuset-cpus.")
    if dep.onednn is not None:
        docker += ["-e", f"TF_ENABLE_ONEDNN_OPTS={'1' if dep.onednn else '0'}"]
    docker += ["-p", "8500:8500", "-p", "8501:8501", "-v", f"{HERE}/models:/models:ro"]
    if dep.batch_size > 1:
        docker += ["-v", f"{HERE}/batching_parameters.txt:/config/batching_parameters.txt:ro"]
    docker += ["--entrypoint", "tensorflow_model_server", IMAGE, *server_args(dep)]
    # Without docker the server reads the same folders the script fills: models/ and the batching
    # file in the current directory ($PWD, since TF Serving wants absolute paths).
    bare = (["taskset", "-c", cpu_list(dep.cores)] if dep.cores else []) + ["tensorflow_model_server", *server_args(
        dep, config_dir=HERE, models_dir=f"{HERE}/models")]
    src = dep.model.savedmodel_path or "saved_model"
    script = ("#!/bin/sh\n" + comment_block(provenance(dep)) + "set -e\n"
              + comment_block([f"Model layout: models/{name}/1/ holds the SavedModel (saved_model.pb, variables/); a "
                               "bundle already has it"])
              + shell_line(["mkdir", "-p", f"models/{name}"]) + "\n"
              + copy_unless_there(src, f"models/{name}/1", check=f"models/{name}/1/saved_model.pb", recursive=True)
              + shell_line(docker) + "\n"
              + comment_block(["Without docker (pin with taskset if the run was pinned):", shell_line(bare)]))
    result.files["run_tfserving.sh"] = script
    if dep.batch_size > 1:
        result.files["batching_parameters.txt"] = batching_parameters(dep)
    else:
        notes.append("Batch size 1 was best, so server-side batching stays off (no batching_parameters.txt).")
    result.files["NOTES.txt"] = notes_file(dep, result, [
        "sh run_tfserving.sh   (copies the SavedModel into models/ unless it is there, and starts the server; "
        "gRPC 8500, REST 8501)"])
    return result
