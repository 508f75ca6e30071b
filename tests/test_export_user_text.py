"""User text in every export is data, never code.

Studies, models, inputs, CPU names, reasons, runtime properties and paths holding line breaks,
quotes, `$(...)`, backticks, `../`, NUL and terminal escape codes are exported in every format.
The scripts are run by the real `sh` with the servers (docker) replaced on PATH by a stub that
records its arguments; the configs are read back by their own libraries (PyYAML, json, protobuf
text format into Triton's ModelConfig and TF Serving's BatchingParameters). Nothing may run, every
value must come back exactly, and comments must hold the text on one line.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_data import HARDWARE, run
from wb_core.backends.registry import names as backend_names
from wb_core.errors import ConfigError
from wb_core.export import export, render
from wb_core.export.bundle import model_files
from wb_core.export.deployment import DeploymentConfig, build, serving_name

# Each piece would run a command if a script or a config took the text as code: the markers m1..m12
# are the files those commands would create.
STUDY = "evil\n$(touch m1)\r\n`touch m2`\u2028'; touch m3 #\x1b]0;title\x07\x1b[2J\x00end"
# The same text in a comment: escape sequences and control characters gone, each line break a space.
STUDY_IN_A_COMMENT = "evil $(touch m1) `touch m2` '; touch m3 #end"
CPU = "Fake CPU\n$(touch m4)\x1b[31m"
CPU_IN_A_COMMENT = "Fake CPU $(touch m4)"
REASON = "because\n`touch m5`\n\"; touch m6; \""
# A folder name no shell reads as one word unquoted (no '/': it is one folder, in a path with '..').
FOLDER = "a b\n$(touch m7)`touch m8`'\"; touch m9 #\x1b]0;t\x07\r\\"
INPUT = "in \"put'\n$(touch m10)`touch m11`\x1b]0;t\x07 \u00e9"
INPUT_WITH_NUL = INPUT + "\x00tail"
PROPERTY = "/cache\n\"}, \"x\": {\"y\": 1\n$(touch m12)"
MARKERS = [f"m{i}" for i in range(1, 13)]
SCRIPT_COMMANDS = ("docker", "tritonserver", "tensorflow_model_server", "taskset")


def stub_dir(root: Path, commands=SCRIPT_COMMANDS) -> Path:
    """Harmless stand-ins for the commands the scripts run: each records its name and arguments
    (NUL-separated, with the count) in $WB_STUB_LOG and succeeds."""
    d = root / "stubs"
    d.mkdir(parents=True, exist_ok=True)
    for name in commands:
        p = d / name
        p.write_text('#!/bin/sh\nprintf "%s\\0" "${0##*/}" "$#" "$@" >> "$WB_STUB_LOG"\n')
        p.chmod(0o755)
    return d


def run_script(script: Path, stubs: Path) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """Run a generated script with `sh` in its folder; (the process, the stubbed calls as argv lists)."""
    log = script.parent / ".stub-log"
    log.unlink(missing_ok=True)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "WB_STUB_LOG": str(log), "HOME": str(script.parent)}
    proc = subprocess.run(["sh", script.name], cwd=script.parent, env=env, capture_output=True, text=True,
                          timeout=60)
    calls, fields = [], log.read_bytes().split(b"\0")[:-1] if log.exists() else []
    while fields:
        name, n = fields[0].decode(), int(fields[1])
        calls.append([name] + [f.decode("utf-8", "surrogateescape") for f in fields[2:2 + n]])
        fields = fields[2 + n:]
    return proc, calls


def triton_config(text: str):
    model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2",
                                          reason="tritonclient is not installed (pip install -e '.[test]')")
    from google.protobuf import text_format

    return text_format.Parse(text, model_config_pb2.ModelConfig())


def batching_parameters(text: str):
    from google.protobuf import text_format

    from test_export import _batching_parameters_class

    return text_format.Parse(text, _batching_parameters_class()())


def deployment(backend: str, study: str, model_path: str, ir_path: str, savedmodel_path: str, inputs: list,
               cpu: str = "cpu", reason: str | None = None, prop: str = "/cache", name: str | None = None,
               ) -> DeploymentConfig:
    r = run(backend=backend, batch=4, threads=2, cores=[0, 1],
            ov_properties={"INFERENCE_NUM_THREADS": "2", "CACHE_DIR": prop} if backend == "openvino" else {})
    info = {"name": study, "model_path": model_path, "model_format": "onnx" if backend == "onnxruntime" else "openvino",
            "model_fingerprint": "fp", "hardware": {**HARDWARE, "cpu_model": cpu}, "hardware_fingerprint": "hw",
            "versions": {"openvino": "2026.4.1"}, "inputs": inputs}
    return build(info, r, reason=reason, ir_path=ir_path, savedmodel_path=savedmodel_path, name=name)


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory) -> dict[str, Path]:
    """Real model files under a folder whose name is hostile (an IR whose input is named INPUT)."""
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    root = tmp_path_factory.mktemp("files")
    folder = root / FOLDER
    folder.mkdir()
    x = ops.parameter([-1, 4], np.float32, name="x")
    x.output(0).get_tensor().set_names({INPUT})
    y = ops.relu(x)
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([y], [x], "tiny"), str(folder / "model.xml"), compress_to_fp16=False)
    (folder / "model.onnx").write_bytes(b"onnx bytes")
    (folder / "saved_model" / "variables").mkdir(parents=True)
    (folder / "saved_model" / "saved_model.pb").write_bytes(b"pb bytes")
    (folder / "saved_model" / "variables" / "variables.index").write_bytes(b"index bytes")
    return {"root": root, "folder": folder}


@pytest.mark.parametrize("backend", backend_names())
def test_hostile_names_and_paths_through_every_format(hostile_files, tmp_path, backend):
    # The paths go through '..' inside the hostile folder: a path may hold it, and it must stay one word.
    via = f"{hostile_files['folder']}/../{FOLDER}"
    dep = deployment(backend, STUDY, f"{via}/model.onnx", f"{via}/model.xml", f"{via}/saved_model",
                     [{"name": INPUT_WITH_NUL, "shape": [-1, 4], "dtype": "float32"}], cpu=CPU, reason=REASON,
                     prop=PROPERTY)
    out = tmp_path / "out"
    results = export(dep, "all", out)
    stubs = stub_dir(tmp_path)
    name = dep.serving_name
    assert name == serving_name(dep.model.name) and name.replace("-", "").isalnum()

    # Every script runs through with the servers stubbed, runs nothing of the text, and copies the
    # model from the exact path it was given into the layout a bundle uses.
    for fmt, res in results.items():
        for rel in res.files:
            if not rel.endswith(".sh"):
                continue
            proc, calls = run_script(out / fmt / rel, stubs)
            assert proc.returncode == 0 and proc.stderr == "", (fmt, proc.stderr)
            assert [c[0] for c in calls] == ["docker"], (fmt, calls)
            here = str(out / fmt)
            mounts = [a for a in calls[0] if a.startswith(here)]
            assert mounts and all(":/" in a for a in mounts), calls  # "$PWD" expanded, nothing else
            for dest, src in model_files(dep, fmt, []):
                assert (out / fmt / dest).read_bytes() == src.read_bytes(), (fmt, dest)
    assert not [p for p in tmp_path.rglob("m*") if p.name in MARKERS]
    assert not [p for p in hostile_files["root"].rglob("m*") if p.name in MARKERS]

    # The deployment YAML loads back as the same deployment, NUL and escape codes included.
    text = (out / "yaml" / "deployment.yaml").read_text()
    assert DeploymentConfig.from_yaml(text) == dep
    assert DeploymentConfig.from_yaml(text).measurement.study == STUDY

    # OVMS: JSON, the property value exactly as given.
    cfg = json.loads((out / "ovms" / "config.json").read_text())
    assert cfg["model_config_list"][0]["config"]["name"] == name
    if backend == "openvino":
        assert cfg["model_config_list"][0]["config"]["plugin_config"]["CACHE_DIR"] == PROPERTY

    # Triton: the model config proto, the input named as the served file names it.
    triton = triton_config((out / "triton" / "model_repository" / name / "config.pbtxt").read_text())
    assert triton.name == name
    assert [i.name for i in triton.input] == [INPUT if backend == "openvino" else INPUT_WITH_NUL]

    # TF Serving's batching file is its protobuf message.
    assert batching_parameters((out / "tfserving" / "batching_parameters.txt").read_text()).max_batch_size.value == 4

    # KServe: the study exactly in its annotation; the OVMS plugin config argument is JSON.
    doc = yaml.safe_load((out / "kserve" / "inferenceservice.yaml").read_text())
    assert doc["metadata"]["name"] == name
    assert doc["metadata"]["annotations"]["cpu-inference-workbench/study"] == STUDY
    for arg in doc["spec"]["predictor"]["model"].get("args", []):
        if arg.startswith("--plugin_config=") and backend == "openvino":
            assert json.loads(arg.split("=", 1)[1])["CACHE_DIR"] == PROPERTY

    # Comments and notes: the text on one line, without control characters.
    key = dep.measurement.run_key
    provenance = f"Exported by CPU Inference Workbench from study '{STUDY_IN_A_COMMENT}' (run id {key})."
    for fmt, res in results.items():
        for rel in res.files:
            lines = (out / fmt / rel).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
            if rel == "NOTES.txt":
                assert provenance in lines and f"Chosen because: {REASON.replace(chr(10), ' ')}" in lines
                assert not any(ord(c) < 32 and c != "\t" for line in lines for c in line), rel
            elif rel != "config.json":
                assert f"# {provenance}" in lines, (fmt, rel)
                assert any(line.startswith("# Measured ") and f"on {CPU_IN_A_COMMENT} (" in line for line in lines)


def test_a_nul_in_a_path_is_one_sentence_and_nothing_is_written(tmp_path):
    dep = deployment("openvino", "s", "/m/model.onnx", "/m/model\x00.xml", "/m/saved_model",
                     [{"name": "x", "shape": [-1, 4], "dtype": "float32"}])
    with pytest.raises(ConfigError, match="NUL byte"):
        export(dep, "all", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ---- property tests: any name, any path, every format

# Any text but lone surrogates (which no command line or file on disk decodes to); paths without
# NUL, which no path holds.
# Names as users give them: not empty, no leading or trailing blanks (the export trims those).
texts = st.text(min_size=1, max_size=40).filter(lambda t: t == t.strip() and t.strip())
paths = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=40)
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _comment_lines_are_comments(text: str, header_end: str) -> None:
    """Every line before the first line starting with `header_end` is a comment line."""
    for line in text.splitlines():
        if line.startswith(header_end):
            return
        assert line.startswith("#"), line
    raise AssertionError(f"no line starts with {header_end!r}")


@PROPERTY_SETTINGS
@given(backend=st.sampled_from(backend_names()), study=texts, model=texts, input_name=texts, model_path=paths,
       ir=paths, savedmodel=paths, prop=texts, cpu=texts)
def test_any_names_and_paths_come_back_exactly_from_every_format(tmp_path_factory, backend, study, model, input_name,
                                                                  model_path, ir, savedmodel, prop, cpu):
    root = tmp_path_factory.mktemp("prop")
    ir = ir + ".xml"
    dep = deployment(backend, study, model_path, ir, savedmodel, [{"name": input_name, "shape": [-1, 4],
                                                                   "dtype": "float32"}],
                     cpu=cpu, reason=study, prop=prop, name=model or None)
    name = dep.serving_name
    assert name[0].isalpha() and len(name) <= 63 and all(c.isascii() and (c.isalnum() or c == "-") for c in name)
    stubs = stub_dir(root, SCRIPT_COMMANDS + ("cp", "mkdir"))
    results = {fmt: render(dep, fmt) for fmt in ("yaml", "ovms", "triton", "tfserving", "kserve")}

    for fmt, res in results.items():
        for rel, text in res.files.items():
            path = root / fmt / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", errors="surrogateescape")
            if rel == "NOTES.txt":
                assert not any(ord(c) < 32 and c not in "\t\n" for c in text)
    # Scripts: the shell passes each path as one argument, exactly; nothing else runs.
    for fmt, script in (("ovms", "run_ovms.sh"), ("triton", "run_triton.sh"), ("tfserving", "run_tfserving.sh")):
        proc, calls = run_script(root / fmt / script, stubs)
        assert proc.returncode == 0 and proc.stderr == "", (fmt, proc.stderr)
        copied = {c[-2] for c in calls if c[0] == "cp"}
        expected = {"ovms": {ir, ir[:-4] + ".bin"}, "tfserving": {savedmodel}}.get(fmt)
        if fmt == "triton":
            expected = {"openvino": {ir, ir[:-4] + ".bin"}, "tensorflow": {savedmodel}, "onnxruntime": {model_path}}[
                backend]
        assert copied == expected, (fmt, calls)
        assert {c[0] for c in calls} == {"mkdir", "cp", "docker"}, calls
        docker = next(c for c in calls if c[0] == "docker")
        assert any(a.startswith(f"{root / fmt}/") for a in docker), docker

    # Configs: each value exactly as given, read by the format's own library.
    data = results["yaml"].files["deployment.yaml"]
    _comment_lines_are_comments(data, "schema_version:")
    back = DeploymentConfig.from_yaml(data)
    assert back == dep and back.measurement.study == study and back.model.name == (model or back.model.name)
    ovms = json.loads(results["ovms"].files["config.json"])["model_config_list"][0]["config"]
    assert ovms["name"] == name
    if backend == "openvino":
        assert ovms["plugin_config"]["CACHE_DIR"] == prop
    pbtxt = results["triton"].files[f"model_repository/{name}/config.pbtxt"]
    _comment_lines_are_comments(pbtxt, "name:")
    cfg = triton_config(pbtxt)
    assert cfg.name == name and [i.name for i in cfg.input] == [input_name]
    batching = results["tfserving"].files["batching_parameters.txt"]
    _comment_lines_are_comments(batching, "max_batch_size")
    assert batching_parameters(batching).max_batch_size.value == 4
    isvc_text = results["kserve"].files["inferenceservice.yaml"]
    _comment_lines_are_comments(isvc_text, "apiVersion:")
    isvc = yaml.safe_load(isvc_text)
    assert isvc["metadata"]["name"] == name
    assert isvc["metadata"]["annotations"]["cpu-inference-workbench/study"] == study


@PROPERTY_SETTINGS
@given(backend=st.sampled_from(backend_names()), input_name=texts, prop=texts)
def test_the_triton_python_variant_carries_any_input_name_and_property(backend, input_name, prop):
    from wb_core.export.triton import render_python

    dep = deployment("openvino", "s", "/m.onnx", "/m.xml", "/sm", [{"name": input_name, "shape": [-1, 4],
                                                                    "dtype": "float32"}], prop=prop)
    res = render_python(dep, {input_name: [4, 4]})
    cfg = triton_config(res.files[f"model_repository/{dep.serving_name}/config.pbtxt"])
    assert [i.name for i in cfg.input] == [input_name]
    assert json.loads(cfg.parameters["WB_OV_PROPERTIES"].string_value)["CACHE_DIR"] == prop
    assert list(json.loads(cfg.parameters["WB_INPUT_SHAPES"].string_value)) == [input_name]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(max_size=300))
def test_a_name_that_becomes_a_path_is_one_folder_inside_the_one_asked_for(tmp_path_factory, name):
    from wb_core.paths import check_path_component

    base = tmp_path_factory.mktemp("base")
    try:
        folder = check_path_component(name, "The study name")
    except ConfigError as e:
        assert str(e).startswith("The study name '") and "\n" not in str(e)
        return
    made = base / folder
    made.mkdir()  # a name taken is one the file system takes
    assert made.parent == base and [p.name for p in base.iterdir()] == [folder]
    assert os.path.realpath(made) == os.path.join(os.path.realpath(base), folder)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_terminal_text_has_no_control_characters(text):
    from wb_core.errors import one_line, printable

    shown = printable(text)
    assert not any(c not in "\t\n" and (ord(c) < 32 or 127 <= ord(c) < 160) for c in shown)
    assert "\n" not in one_line(text) and "\r" not in one_line(text) and "\u2028" not in one_line(text)
