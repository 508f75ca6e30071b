"""`kserve`: a KServe InferenceService with Guaranteed QoS (whole CPUs, requests equal to limits).

Guaranteed pods with whole CPUs get cores of their own only when the kubelet runs the static CPU
manager policy; the file says so, since without it the pinning the run measured is not reproduced.

The runtime and model format are names KServe itself ships (KSERVE_RUNTIMES), and the pair obeys
the controller's rule (`supports`): a predictor that names a runtime must name a model format the
runtime lists, else the InferenceService is rejected ("specified runtime ... does not support
specified framework/version").
"""

from __future__ import annotations

import dataclasses
import json

import yaml

from wb_core.analysis.words import p99_limit_words
from wb_core.backends.registry import Serving, get, serving
from wb_core.export.common import ExportResult, comment_block, memory_mib, notes_file, provenance, served_file, whole_cpus
from wb_core.export.deployment import DeploymentConfig
from wb_core.export.ovms import plugin_config
from wb_core.export.tfserving import server_args

FORMAT = "kserve"
DESCRIPTION = "KServe: inferenceservice.yaml (Guaranteed QoS, runtime args from the run)"
# ClusterServingRuntimes KServe ships: model formats (name -> versions listed; None = no version),
# protocols, and where the runtime mounts the model. Checked against KServe v0.20.0,
# config/runtimes/: kserve-tensorflow-serving.yaml (in the default install) and kserve-openvino.yaml
# (OpenVINO Model Server; in the repository since v0.17.0, but not in config/runtimes/kustomization.yaml
# nor the kserve-runtime-configs chart, so it is applied once by hand).
KSERVE_VERSION = "v0.20.0"
KSERVE_RUNTIMES = {
    "kserve-openvino": {"formats": {"openvino": ["10"], "onnx": ["1"], "tensorflow": ["1"], "huggingface": [None]},
                        "protocols": ["v1", "v2", "grpc-v2"], "default_install": False,
                        "file": "config/runtimes/kserve-openvino.yaml"},
    "kserve-tensorflow-serving": {"formats": {"tensorflow": ["1", "2"]}, "protocols": ["v1", "grpc-v1"],
                                  "default_install": True, "file": "config/runtimes/kserve-tensorflow-serving.yaml"},
    "kserve-tritonserver": {"formats": {"tensorrt": ["8"], "tensorflow": ["1", "2"], "onnx": ["1"], "pytorch": ["1"],
                                        "triton": ["2"]},
                            "protocols": ["v2", "grpc-v2"], "default_install": True,
                            "file": "config/runtimes/kserve-tritonserver.yaml"},
}


def supports(runtime: str, model_format: dict, protocol: str | None = None) -> bool:
    """KServe's RuntimeSupportsModel (pkg/apis/serving/v1beta1/predictor_model.go, v0.20.0).

    With the runtime named, its label set holds `mt:NAME` for every format it lists, plus
    `mt:NAME:VERSION` where the runtime gives a version; the model's label is `mt:NAME`, or
    `mt:NAME:VERSION` when the model gives one, and must be in the set. A protocolVersion the
    model names must be one the runtime lists.
    """
    rt = KSERVE_RUNTIMES.get(runtime)
    if rt is None:
        return False
    labels = set()
    for name, versions in rt["formats"].items():
        labels.add(f"mt:{name}")
        labels.update(f"mt:{name}:{v}" for v in versions if v is not None)
    version = model_format.get("version")
    label = f"mt:{model_format.get('name')}" + (f":{version}" if version is not None else "")
    return label in labels and (protocol is None or protocol in rt["protocols"])


# The serving runtimes this export writes predictors for (the third, kserve-tritonserver, is listed for checks).
WRITTEN = ("kserve-openvino", "kserve-tensorflow-serving")
# What serves a run whose backend names no KServe model format: its OpenVINO IR in OpenVINO Model Server.
IR_RUNTIME = Serving("openvino", server="kserve-openvino")


def served_runtime(dep: DeploymentConfig) -> Serving:
    """The KServe model format and serving runtime of the run (from the registry's serving map); a
    format declared without its serving runtime gets the first one written here that lists it."""
    declared = serving(dep.backend, FORMAT)
    if declared is None:
        return IR_RUNTIME
    if declared.server:
        return declared
    fmt = {"name": declared.runtime} | ({"version": declared.format_version} if declared.format_version else {})
    server = next((r for r in WRITTEN if supports(r, fmt)), "")
    return dataclasses.replace(declared, server=server)


STATIC_CPU_NOTE = ("Exclusive cores need the kubelet's static CPU manager policy (--cpu-manager-policy=static): "
                   "then this Guaranteed pod (whole CPUs, requests equal to limits) gets cores no other pod uses. "
                   "Under the default 'none' policy it shares cores, and the measured numbers may not hold.")


def inference_service(dep: DeploymentConfig, notes: list[str]) -> dict:
    name = dep.serving_name
    cpus = str(whole_cpus(dep))
    memory = f"{memory_mib(dep)}Mi"
    resources = {"requests": {"cpu": cpus, "memory": memory}, "limits": {"cpu": cpus, "memory": memory}}
    served = served_runtime(dep)
    model_format = {"name": served.runtime} | ({"version": served.format_version} if served.format_version else {})
    if served.server == "kserve-tensorflow-serving":
        # TF2 SavedModels; kserve-tensorflow-serving lists tensorflow versions "1" and "2".
        model = {"modelFormat": model_format, "runtime": served.server,
                 "storageUri": f"pvc://models/{name}",
                 "args": [a for a in server_args(dep) if a.startswith("--tensorflow_")]}
        env = get(dep.backend).process_env({"onednn": dep.onednn})
        if env:
            model["env"] = [{"name": k, "value": v} for k, v in env.items()]
    elif served.server == "kserve-openvino":
        props = plugin_config(dep, [])
        # OVMS flags, appended to the runtime's own (--model_name, --model_path=/mnt/models, ports).
        model = {"modelFormat": model_format, "runtime": served.server,
                 "storageUri": f"pvc://models/{name}",
                 "args": [f"--plugin_config={json.dumps(props, separators=(',', ':'))}",
                          f"--nireq={max(1, dep.concurrency) * max(1, dep.instances)}",
                          f"--batch_size={dep.batch_size}"]}
    else:
        from wb_core.errors import ConfigError

        raise ConfigError(f"The KServe export writes {' and '.join(WRITTEN)} predictors; the {dep.backend} backend's "
                          f"model format {served.runtime} is served by {served.server or 'neither'}.")
    if not supports(model["runtime"], model["modelFormat"]):  # a bug here, never a user's input
        raise AssertionError(f"{model['runtime']} does not list model format {model['modelFormat']}")
    model["resources"] = resources
    replicas = 1
    if dep.capacity:
        # One instance per pod: the plan's instances become replicas, each with the cores it measured on.
        replicas = int(dep.capacity["instances"])
        notes.append(f"Replicas from the capacity plan: {replicas} pod(s) serve {dep.capacity['target_rate']:g} "
                     f"requests/s {p99_limit_words(dep.capacity.get('p99_ms'))} ({dep.capacity.get('basis', '')}).")
    predictor: dict = {"minReplicas": replicas, "maxReplicas": replicas, "model": model}
    if dep.batch_size > 1:
        # KServe's batcher gathers single requests into batches of the size the run found best.
        p50 = dep.expected.latency_ms_p50 or 1.0
        predictor["batcher"] = {"maxBatchSize": dep.batch_size, "maxLatency": max(1, int(round(p50)))}
    m = dep.measurement
    annotations = {
        "cpu-inference-workbench/study": m.study,
        "cpu-inference-workbench/run-key": m.run_key,
        "cpu-inference-workbench/measured-at": m.measured_at,
        "cpu-inference-workbench/hardware": str(m.hardware.get("fingerprint")),
        "cpu-inference-workbench/expected-p99-ms": f"{dep.expected.latency_ms_p99:.4g}"
        if dep.expected.latency_ms_p99 is not None else "n/a",
        "cpu-inference-workbench/expected-throughput": f"{dep.expected.throughput:.4g}"
        if dep.expected.throughput is not None else "n/a",
    }
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "annotations": annotations}, "spec": {"predictor": predictor}}


def render(dep: DeploymentConfig) -> ExportResult:
    result = ExportResult(FORMAT)
    notes = result.notes
    doc = inference_service(dep, notes)
    notes.append(STATIC_CPU_NOTE)
    if dep.cores:
        notes.append(f"The run was pinned to CPUs {dep.cores}; Kubernetes cannot name CPU ids, so the pod asks for "
                     f"{len(dep.cores)} whole CPU(s) and the static CPU manager picks which.")
    else:
        notes.append(f"The run was not pinned; the pod asks for {whole_cpus(dep)} whole CPU(s), the cores it "
                     "could keep busy.")
    notes.append(f"Memory is the measured peak ({dep.expected.rss_mb or 0:.0f} MB) plus 25%, at least 256 Mi; "
                 "the serving runtime's own overhead differs from the workbench's worker.")
    name = dep.serving_name
    savedmodel = served_file(dep, FORMAT) == "savedmodel"
    layout = "NAME/1/saved_model.pb + variables/" if savedmodel else "NAME/1/model.xml + model.bin"
    notes.append(f"storageUri is a placeholder (pvc://models/{name}): point it at a folder laid out as {layout} "
                 f"(the bundle's kserve/model/{name}/ is), which KServe mounts at /mnt/models.")
    runtime = doc["spec"]["predictor"]["model"]["runtime"]
    rt = KSERVE_RUNTIMES[runtime]
    if not rt["default_install"]:
        notes.append(f"The {runtime} ClusterServingRuntime (OpenVINO Model Server) ships in KServe's repository "
                     f"({rt['file']}, since v0.17.0; checked against {KSERVE_VERSION}) but not in its default "
                     "install: apply it once with kubectl apply -f before this InferenceService.")
    if runtime == "kserve-openvino" and dep.batch_size > 1:
        notes.append(f"OVMS serves the model at a fixed batch of {dep.batch_size} (--batch_size), as measured: "
                     f"requests must carry {dep.batch_size} samples. The batcher can send fewer; to accept them set "
                     f"--batch_size=1:{dep.batch_size} (a dynamic batch dimension, which was not what was measured).")
    if dep.instances > 1 and not dep.capacity:
        notes.append(f"The run used {dep.instances} instances inside one process; replicas would each get their own "
                     "CPUs, so they are left at 1.")
    if runtime == "kserve-tensorflow-serving" and dep.batch_size > 1:
        notes.append("Batching uses KServe's batcher rather than TensorFlow Serving's own (which needs a "
                     "batching_parameters file mounted from a ConfigMap).")
    header = comment_block(provenance(dep) + [""] + [f"Note: {n}" for n in notes])
    result.files["inferenceservice.yaml"] = header + yaml.safe_dump(doc, sort_keys=False, width=120)
    result.files["NOTES.txt"] = notes_file(dep, result, ["kubectl apply -f inferenceservice.yaml"])
    return result
