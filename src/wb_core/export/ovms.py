"""`ovms`: OpenVINO Model Server config.json, and a script with the `docker run` line.

config.json is JSON, which has no comments, so the provenance header lives in NOTES.txt and in
the script. plugin_config values are strings, as OVMS passes them to OpenVINO's property parser.
"""

from __future__ import annotations

import json

from wb_core.backends.registry import get, title
from wb_core.export.common import (
    HERE,
    ExportResult,
    comment_block,
    copy_unless_there,
    cpu_list,
    notes_file,
    openvino_run,
    provenance,
    requests_in_flight,
    serving_note,
    shell_line,
)
from wb_core.export.deployment import DeploymentConfig
from wb_core.precisions import ov_hint

FORMAT = "ovms"
DESCRIPTION = "OpenVINO Model Server: config.json (plugin_config, nireq, batch_size) and run_ovms.sh (docker run)"
IMAGE = "openvino/model_server:latest"


def plugin_config(dep: DeploymentConfig, notes: list[str]) -> dict[str, str]:
    """OpenVINO CPU properties for OVMS, as strings."""
    ov = openvino_run(dep)
    props = {k: str(v) for k, v in dep.runtime_properties.items()} if ov else {}
    if not ov:
        props["INFERENCE_PRECISION_HINT"] = ov_hint(dep.precision)
        if dep.threads:
            props["INFERENCE_NUM_THREADS"] = str(dep.threads)
    props.setdefault("INFERENCE_PRECISION_HINT", ov_hint(dep.precision))
    if "PERFORMANCE_HINT" not in props and "NUM_STREAMS" not in props:
        # The run left streams to the runtime; pin down what it chose so the server does the same.
        reported = dep.runtime_reported.get("ov_streams") if ov else None
        props["NUM_STREAMS"] = reported or str(max(1, dep.concurrency))
    if "INFERENCE_NUM_THREADS" not in props and ov and dep.runtime_reported.get("ov_threads"):
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
    cmd += ["-p", "9000:9000", "-p", "8000:8000", "-v", f"{HERE}/models:/models:ro",
            "-v", f"{HERE}/config.json:/config/config.json:ro", IMAGE,
            "--config_path", "/config/config.json", "--port", "9000", "--rest_port", "8000"]
    return cmd


def render(dep: DeploymentConfig) -> ExportResult:
    result = ExportResult(FORMAT)
    notes = result.notes
    name = dep.serving_name
    cfg = config_json(dep, notes)
    other = serving_note(dep, FORMAT, "OVMS serves the OpenVINO IR")
    if other:
        notes.append(other)
        if dep.inter_op_threads:
            notes.append(f"{title(dep.backend)} inter-op threads ({dep.inter_op_threads}) have no OpenVINO equivalent.")
        for var in get(dep.backend).process_env({"onednn": dep.onednn}):
            notes.append(f"{var} has no OpenVINO equivalent.")
    if not dep.cores:
        notes.append("The run was not pinned to cores, so the docker line has no --cpuset-cpus.")
    if dep.instances > 1:
        notes.append(f"The run used {dep.instances} instances; OVMS serves one model with nireq="
                     f"{requests_in_flight(dep)} parallel requests instead.")
    notes.append(f"batch_size is fixed at {dep.batch_size} as measured, so requests must carry {dep.batch_size} "
                 f"samples; set it to \"1:{dep.batch_size}\" (a dynamic batch dimension, not what was measured) to "
                 "accept smaller ones (\"auto\", which reloads the model, is deprecated in OVMS 2026.3).")
    ir = dep.model.ir_path or "model.xml"
    binf = ir[:-4] + ".bin" if ir.endswith(".xml") else "model.bin"
    dest = f"models/{name}/1"
    script = ("#!/bin/sh\n" + comment_block(provenance(dep)) + "set -e\n"
              + comment_block([f"Model repository layout: {dest}/model.xml + model.bin (a bundle already has them)"])
              + shell_line(["mkdir", "-p", dest]) + "\n"
              + copy_unless_there(ir, f"{dest}/model.xml") + copy_unless_there(binf, f"{dest}/model.bin")
              + shell_line(docker_command(dep)) + "\n")
    result.files["config.json"] = json.dumps(cfg, indent=2) + "\n"
    result.files["run_ovms.sh"] = script
    result.files["NOTES.txt"] = notes_file(dep, result, [
        "sh run_ovms.sh   (copies the IR into models/ unless it is there, and starts the server; gRPC on 9000, "
        "REST on 8000)",
        f"The measured OpenVINO was {dep.measurement.versions.get('openvino', 'unknown')}; pin the image tag "
        "to a release with that OpenVINO for the same kernels."])
    return result


# ---- config.json rules, as OpenVINO Model Server documents them
#
# Written from OVMS 2026.3: docs/parameters.md ("Model Configuration Options") and the JSON
# schema the server validates config.json with (src/schema.cpp, MODELS_CONFIG_SCHEMA), plus
# the batch_size parsing of src/modelconfig.cpp and src/shape.cpp (a batch_size OVMS cannot
# parse is dropped with a warning, so the checker treats it as an error).

TOP_LEVEL_KEYS = {"model_config_list", "custom_loader_config_list", "pipeline_config_list", "mediapipe_config_list",
                  "custom_node_library_config_list", "monitoring"}
CONFIG_KEYS = {"name": str, "base_path": str, "batch_size": (int, str), "graph_path": str, "subconfig": str,
               "model_version_policy": dict, "shape": (str, dict), "layout": (str, dict), "nireq": int,
               "target_device": str, "allow_cache": bool, "plugin_config": dict, "custom_loader_options": dict}
TARGET_DEVICES = ("CPU", "GPU", "NPU", "HETERO", "AUTO", "MULTI")


def _dimension_ok(text: str) -> bool:
    """OVMS Dimension::fromString: N, -1, or a range MIN:MAX of positive numbers."""
    t = text.replace(" ", "")
    if ":" in t:
        parts = t.split(":")
        return (len(parts) == 2 and all(p.isdigit() for p in parts) and 0 < int(parts[0]) <= int(parts[1]))
    return t == "-1" or t.isdigit()


def check_config(cfg, plugin_keys: set[str] | None = None) -> list[str]:
    """Problems OVMS would have with a config.json mapping, one sentence each (empty: it is fine).

    `plugin_keys`: the device's supported properties (OpenVINO's SUPPORTED_PROPERTIES), to check
    plugin_config keys against; None skips that check.
    """
    errs: list[str] = []
    if not isinstance(cfg, dict):
        return ["config.json must hold a JSON object."]
    for k in set(cfg) - TOP_LEVEL_KEYS:
        errs.append(f"Unknown top-level key '{k}'.")
    models = cfg.get("model_config_list")
    if not isinstance(models, list):
        return errs + ["model_config_list is required and must be a list."]
    names = []
    for i, item in enumerate(models):
        where = f"model_config_list[{i}]"
        if not isinstance(item, dict) or set(item) != {"config"}:
            errs.append(f"{where} must be an object with the single key 'config'.")
            continue
        c = item["config"]
        if not isinstance(c, dict):
            errs.append(f"{where}.config must be an object.")
            continue
        for k, v in c.items():
            if k not in CONFIG_KEYS:
                errs.append(f"{where}.config has an unknown key '{k}'.")
            elif not isinstance(v, CONFIG_KEYS[k]) or (isinstance(v, bool) and CONFIG_KEYS[k] in (int, (int, str))):
                errs.append(f"{where}.config.{k} has the wrong type ({type(v).__name__}).")
        if not isinstance(c.get("name"), str) or not c.get("name"):
            errs.append(f"{where}.config.name is required (a string).")
        names.append(c.get("name"))
        b = c.get("batch_size")
        if isinstance(b, int) and not isinstance(b, bool) and b < 0:
            errs.append(f"{where}.config.batch_size must be at least 0.")
        if isinstance(b, str) and b not in ("auto", "") and not _dimension_ok(b):
            errs.append(f"{where}.config.batch_size '{b}' is not a number, -1, a range MIN:MAX or \"auto\"; OVMS "
                        "would ignore it.")
        n = c.get("nireq")
        if isinstance(n, int) and not isinstance(n, bool) and n < 0:
            errs.append(f"{where}.config.nireq must be at least 0.")
        dev = c.get("target_device")
        if isinstance(dev, str) and dev.split(":")[0].split(".")[0] not in TARGET_DEVICES:
            errs.append(f"{where}.config.target_device '{dev}' is not one of {', '.join(TARGET_DEVICES)}.")
        for key in ("shape", "layout"):
            v = c.get(key)
            if isinstance(v, dict) and not all(isinstance(x, str) for x in v.values()):
                errs.append(f"{where}.config.{key} values must be strings.")
        pc = c.get("plugin_config")
        if isinstance(pc, dict):
            for k, v in pc.items():
                if not isinstance(v, (str, bool, int, float)):
                    errs.append(f"{where}.config.plugin_config.{k} must be a string, number or boolean.")
                if plugin_keys is not None and k not in plugin_keys:
                    errs.append(f"{where}.config.plugin_config.{k} is not a property the device supports.")
        mvp = c.get("model_version_policy")
        if isinstance(mvp, dict):
            errs += _version_policy_errors(mvp, f"{where}.config.model_version_policy")
    dup = sorted({n for n in names if n and names.count(n) > 1})
    if dup:
        errs.append(f"Model names must be unique; repeated: {', '.join(dup)}.")
    return errs


def _version_policy_errors(p: dict, where: str) -> list[str]:
    if len(p) != 1 or next(iter(p)) not in ("all", "specific", "latest"):
        return [f"{where} must hold exactly one of all, specific, latest."]
    kind, body = next(iter(p.items()))
    if not isinstance(body, dict):
        return [f"{where}.{kind} must be an object."]
    if kind == "all" and body:
        return [f"{where}.all must be empty."]
    if kind == "specific" and (set(body) != {"versions"} or not isinstance(body["versions"], list)
                               or not all(isinstance(v, int) and v >= 1 for v in body["versions"])):
        return [f"{where}.specific must be {{\"versions\": [positive integers]}}."]
    if kind == "latest" and (set(body) != {"num_versions"} or not isinstance(body["num_versions"], int)
                             or body["num_versions"] < 1):
        return [f"{where}.latest must be {{\"num_versions\": a positive integer}}."]
    return []


def check_repository(cfg: dict, root) -> list[str]:
    """Model folders under `root` (the folder mounted at /models): numeric version folders holding an IR."""
    from pathlib import Path

    errs = []
    for item in cfg.get("model_config_list", []):
        c = item.get("config", {})
        base = str(c.get("base_path", ""))
        folder = Path(root) / base.removeprefix("/models/") if base.startswith("/models/") else Path(root) / base
        versions = [p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()] if folder.is_dir() else []
        if not versions:
            errs.append(f"Model '{c.get('name')}' has no numeric version folder under {folder}.")
        for v in versions:
            xml = list(v.glob("*.xml"))
            if len(xml) != 1 or not xml[0].with_suffix(".bin").is_file():
                errs.append(f"Version folder {v} must hold one .xml with its .bin.")
    return errs
