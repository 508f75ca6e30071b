"""`kserve`: a KServe InferenceService with Guaranteed QoS (whole CPUs, requests equal to limits).

Guaranteed pods with whole CPUs get cores of their own only when the kubelet runs the static CPU
manager policy; the file says so, since without it the pinning the run measured is not reproduced.
"""

from __future__ import annotations

import json

import yaml

from wb_core.export.common import ExportResult, comment_block, memory_mib, notes_file, provenance, whole_cpus
from wb_core.export.deployment import DeploymentConfig
from wb_core.export.ovms import plugin_config
from wb_core.export.tfserving import server_args

FORMAT = "kserve"
DESCRIPTION = "KServe: inferenceservice.yaml (Guaranteed QoS, runtime args from the run)"
STATIC_CPU_NOTE = ("Exclusive cores need the kubelet's static CPU manager policy (--cpu-manager-policy=static): "
                   "then this Guaranteed pod (whole CPUs, requests equal to limits) gets cores no other pod uses. "
                   "Under the default 'none' policy it shares cores, and the measured numbers may not hold.")


def inference_service(dep: DeploymentConfig, notes: list[str]) -> dict:
    name = dep.serving_name
    cpus = str(whole_cpus(dep))
    memory = f"{memory_mib(dep)}Mi"
    resources = {"requests": {"cpu": cpus, "memory": memory}, "limits": {"cpu": cpus, "memory": memory}}
    if dep.backend == "tensorflow":
        model = {"modelFormat": {"name": "tensorflow"}, "runtime": "kserve-tensorflow-serving",
                 "storageUri": f"pvc://models/{name}",
                 "args": [a for a in server_args(dep) if a.startswith("--tensorflow_")]}
        if dep.onednn is not None:
            model["env"] = [{"name": "TF_ENABLE_ONEDNN_OPTS", "value": "1" if dep.onednn else "0"}]
    else:
        props = plugin_config(dep, [])
        model = {"modelFormat": {"name": "openvino_ir"}, "runtime": "kserve-ovms",
                 "storageUri": f"pvc://models/{name}",
                 "args": [f"--plugin_config={json.dumps(props, separators=(',', ':'))}",
                          f"--nireq={max(1, dep.concurrency) * max(1, dep.instances)}",
                          f"--batch_size={dep.batch_size}"]}
    model["resources"] = resources
    replicas = 1
    if dep.capacity:
        # One instance per pod: the plan's instances become replicas, each with the cores it measured on.
        replicas = int(dep.capacity["instances"])
        notes.append(f"Replicas from the capacity plan: {replicas} pod(s) serve {dep.capacity['target_rate']:g} "
                     f"requests/s at p99 <= {dep.capacity['p99_ms']:g} ms ({dep.capacity.get('basis', '')}).")
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
    notes.append("storageUri is a placeholder (pvc://models/NAME): point it at where the model is stored.")
    if dep.instances > 1 and not dep.capacity:
        notes.append(f"The run used {dep.instances} instances inside one process; replicas would each get their own "
                     "CPUs, so they are left at 1.")
    if dep.backend == "tensorflow" and dep.batch_size > 1:
        notes.append("Batching uses KServe's batcher rather than TensorFlow Serving's own (which needs a "
                     "batching_parameters file mounted from a ConfigMap).")
    header = comment_block(provenance(dep) + [""] + [f"Note: {n}" for n in notes])
    result.files["inferenceservice.yaml"] = header + yaml.safe_dump(doc, sort_keys=False, width=120)
    result.files["NOTES.txt"] = notes_file(dep, result, ["kubectl apply -f inferenceservice.yaml"])
    return result
