"""`ovms`: OpenVINO Model Server config.json, and a script with the `docker run` line.

config.json is JSON, which has no comments, so the provenance header lives in NOTES.txt and in
the script. plugin_config values are strings, as OVMS passes them to OpenVINO's property parser.
"""

from __future__ import annotations

import json
import shlex

from wb_core.export.common import ExportResult, comment_block, cpu_list, notes_file, provenance, requests_in_flight
from wb_core.export.deployment import DeploymentConfig

FORMAT = "ovms"
DESCRIPTION = "OpenVINO Model Server: config.json (plugin_config, nireq, batch_size) and run_ovms.sh (docker run)"
IMAGE = "openvino/model_server:latest"
OV_PRECISION = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}


def plugin_config(dep: DeploymentConfig, notes: list[str]) -> dict[str, str]:
    """OpenVINO CPU properties for OVMS, as strings."""
    props = {k: str(v) for k, v in dep.runtime_properties.items()} if dep.backend == "openvino" else {}
    if dep.backend != "openvino":
        props["INFERENCE_PRECISION_HINT"] = OV_PRECISION.get(dep.precision, "f32")
        if dep.threads:
            props["INFERENCE_NUM_THREADS"] = str(dep.threads)
    props.setdefault("INFERENCE_PRECISION_HINT", OV_PRECISION.get(dep.precision, "f32"))
    if "PERFORMANCE_HINT" not in props and "NUM_STREAMS" not in props:
        # The run left streams to the runtime; pin down what it chose so the server does the same.
        reported = dep.runtime_reported.get("ov_streams") if dep.backend == "openvino" else None
        props["NUM_STREAMS"] = reported or str(max(1, dep.concurrency))
    if "INFERENCE_NUM_THREADS" not in props and dep.backend == "openvino" and dep.runtime_reported.get("ov_threads"):
        props["INFERENCE_NUM_THREADS"] = dep.runtime_reported["ov_threads"]
    if "ENABLE_CPU_PINNING" in props:
        props["ENABLE_CPU_PINNING"] = "YES" if props["ENABLE_CPU_PINNING"].lower() in ("true", "yes", "1") else "NO"
    elif dep.cpu_pinning is not None:
        props["ENABLE_CPU_PINNING"] = "YES" if dep.cpu_pinning else "NO"
    else:
        notes.append("ENABLE_CPU_PINNING was left to OpenVINO's default in the measured run, so it is not set.")
    props.pop("PERF_COUNT", None)
    return props


def config_json(dep: DeploymentConfig, notes: list[str]) -> dict:
    name = dep.serving_name
    return {"model_config_list": [{"config": {
        "name": name,
        "base_path": f"/models/{name}",
        "target_device": "CPU",
        "batch_size": str(dep.batch_size),
        "nireq": requests_in_flight(dep),
        "plugin_config": plugin_config(dep, notes),
    }}]}


def docker_command(dep: DeploymentConfig) -> list[str]:
    name = dep.serving_name
    cmd = ["docker", "run", "-d", "--rm", "--name", f"{name}-ovms"]
    if dep.cores:
        cmd.append(f"--cpuset-cpus={cpu_list(dep.cores)}")
    cmd += ["-p", "9000:9000", "-p", "8000:8000", "-v", "$PWD/models:/models:ro",
            "-v", "$PWD/config.json:/config/config.json:ro", IMAGE,
            "--config_path", "/config/config.json", "--port", "9000", "--rest_port", "8000"]
    return cmd


def render(dep: DeploymentConfig) -> ExportResult:
    result = ExportResult(FORMAT)
    notes = result.notes
    name = dep.serving_name
    cfg = config_json(dep, notes)
    if dep.backend == "tensorflow":
        notes.append("This run was measured with TensorFlow; OVMS serves the OpenVINO IR, so latency and throughput "
                     "will differ. Profile an openvino run to export measured numbers.")
        if dep.inter_op_threads:
            notes.append(f"TensorFlow inter-op threads ({dep.inter_op_threads}) have no OpenVINO equivalent.")
        if dep.onednn is not None:
            notes.append("TF_ENABLE_ONEDNN_OPTS has no OpenVINO equivalent.")
    if not dep.cores:
        notes.append("The run was not pinned to cores, so the docker line has no --cpuset-cpus.")
    if dep.instances > 1:
        notes.append(f"The run used {dep.instances} instances; OVMS serves one model with nireq="
                     f"{requests_in_flight(dep)} parallel requests instead.")
    notes.append(f"batch_size is fixed at {dep.batch_size} as measured; set it to \"auto\" to accept other batch "
                 "sizes at the cost of a reload when the size changes.")
    ir = dep.model.ir_path or "model.xml"
    binf = ir[:-4] + ".bin" if ir.endswith(".xml") else "model.bin"
    # "$PWD/..." must stay double-quoted so the shell expands it.
    docker = " ".join(f'"{a}"' if a.startswith("$PWD") else shlex.quote(a) for a in docker_command(dep))
    script = ("#!/bin/sh\n" + comment_block(provenance(dep)) + "set -e\n"
              f"# Model repository layout: models/{name}/1/model.xml + model.bin\n"
              f"mkdir -p models/{name}/1\n"
              f"cp {shlex.quote(ir)} models/{name}/1/model.xml\n"
              f"cp {shlex.quote(binf)} models/{name}/1/model.bin\n"
              f"{docker}\n")
    result.files["config.json"] = json.dumps(cfg, indent=2) + "\n"
    result.files["run_ovms.sh"] = script
    result.files["NOTES.txt"] = notes_file(dep, result, [
        "sh run_ovms.sh   (copies the IR into models/ and starts the server; gRPC on 9000, REST on 8000)",
        f"The measured OpenVINO was {dep.measurement.versions.get('openvino', 'unknown')}; pin the image tag "
        "to a release with that OpenVINO for the same kernels."])
    return result
