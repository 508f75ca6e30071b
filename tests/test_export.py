"""Exports are read back by each format's own definition: Triton's model-config proto, TF Serving's
BatchingParameters message, the keys and types OVMS documents for config.json, and the Kubernetes
models under a KServe InferenceService. The deployment YAML round-trips and meets its JSON Schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from analysis_data import make_study_db, run
from wb_core.errors import ConfigError
from wb_core.export import FORMATS, DeploymentConfig, deployment_for_study, export, load_schema, parse_formats, render
from wb_core.export.kserve import supports
from wb_core.export.ovms import check_config, check_repository

ROOT = Path(__file__).resolve().parent.parent

RUNS = [
    run(batch=8, threads=2, cores=[0, 1], p99=2.0, thr=9000,
        ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2"}, ov_streams=1, ov_threads=2),
    run(batch=1, threads=1, p99=0.5, thr=2000, ov_properties={"INFERENCE_PRECISION_HINT": "bf16",
                                                               "INFERENCE_NUM_THREADS": "1", "NUM_STREAMS": "1",
                                                               "ENABLE_CPU_PINNING": "True"},
        precision="bf16", cpu_pinning=True),
    run(backend="tensorflow", batch=6, threads=3, inter_op_threads=1, cores=[1, 2, 3], p99=3.0, thr=4000, rss=700,
        onednn=False),
]


@pytest.fixture
def study_db(tmp_path):
    db = tmp_path / "r.db"
    make_study_db(db, RUNS)
    return db


def dep_of(db, i) -> DeploymentConfig:
    return deployment_for_study(db, "t", run_key=RUNS[i]["key"])


# ---- deployment YAML


def test_yaml_round_trip_and_schema(study_db):
    for i in range(len(RUNS)):
        dep = dep_of(study_db, i)
        text = render(dep, "yaml").files["deployment.yaml"]
        assert text.startswith("# Exported by CPU Inference Workbench from study 't'")
        data = yaml.safe_load(text)
        jsonschema.validate(data, load_schema())
        assert list(data)[0] == "schema_version" and data["schema_version"] == 1
        assert all(isinstance(v, str) for v in data["runtime_properties"].values())
        assert DeploymentConfig.from_yaml(text) == dep


def test_published_schema_matches_the_shipped_one():
    published = json.loads((ROOT / "schemas" / "deployment.schema.json").read_text())
    assert published == load_schema()
    jsonschema.Draft202012Validator.check_schema(published)


def test_invalid_deployment_files_are_refused(study_db):
    data = dep_of(study_db, 0).to_dict()
    with pytest.raises(ConfigError, match="schema_version 9"):
        DeploymentConfig.from_dict({**data, "schema_version": 9})
    with pytest.raises(ConfigError, match="batch_size"):
        DeploymentConfig.from_dict({**data, "batch_size": 0})
    with pytest.raises(ConfigError, match="mapping"):
        DeploymentConfig.from_yaml("- a list")


def test_recommended_run_carries_its_reason(study_db):
    from wb_core.analysis.recommend import Constraints

    dep = deployment_for_study(study_db, "t", constraints=Constraints(max_p99_ms=1.0), objective="throughput")
    assert dep.measurement.run_key == RUNS[1]["key"]
    assert "p99 latency ≤ 1 ms" in dep.measurement.reason


# ---- Triton


def _triton_config(text):
    model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2",
                                          reason="tritonclient is not installed (pip install -e '.[test]')")
    from google.protobuf import text_format

    return text_format.Parse(text, model_config_pb2.ModelConfig())


# The parameters Triton's openvino backend reads, as listed in its own source (openvino_backend,
# src/openvino.cc: ModelState::ParseParameters, the device ones and the boolean ones, plus
# LoadCpuExtensions). Written here from the backend, not imported from our exporter.
OPENVINO_BACKEND_READS = {"INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS", "HINT_BF16", "NUM_STREAMS",
                          "PERFORMANCE_HINT", "SKIP_OV_DYNAMIC_BATCHSIZE", "ENABLE_BATCH_PADDING", "RESHAPE_IO_LAYERS",
                          "CPU_EXTENSION_PATH"}


def test_triton_openvino_config_parses_with_triton_proto(study_db):
    res = render(dep_of(study_db, 0), "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert cfg.name == "t" and cfg.backend == "openvino" and cfg.max_batch_size == 8
    assert cfg.input[0].name == "image" and list(cfg.input[0].dims) == [8, 8, 1]
    group = cfg.instance_group[0]
    assert group.count == 1 and group.kind == group.KIND_CPU and group.host_policy == "wb_cpus_0_1"
    assert list(cfg.dynamic_batching.preferred_batch_size) == [8]
    assert cfg.parameters["INFERENCE_NUM_THREADS"].string_value == "2"
    assert cfg.parameters["NUM_STREAMS"].string_value == "1"
    # Batching: the openvino backend fails partly filled batches unless it pads them.
    assert cfg.parameters["ENABLE_BATCH_PADDING"].string_value == "YES"
    # Only keys the openvino backend reads (it ignores the others without a word).
    assert set(cfg.parameters) <= OPENVINO_BACKEND_READS
    assert any("INFERENCE_PRECISION_HINT" not in n and "f32" in n for n in res.notes)
    assert "--host-policy=wb_cpus_0_1,cpu-cores=0-1" in res.files["run_triton.sh"]
    assert "model_repository/t/1/model.xml" in res.files["run_triton.sh"]


def test_triton_tensorflow_config(study_db):
    res = render(dep_of(study_db, 2), "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert cfg.platform == "tensorflow_savedmodel"
    assert cfg.parameters["TF_NUM_INTRA_THREADS"].string_value == "3"
    assert cfg.parameters["TF_NUM_INTER_THREADS"].string_value == "1"
    assert "ENABLE_BATCH_PADDING" not in cfg.parameters  # an openvino-backend parameter only
    assert cfg.instance_group[0].host_policy == "wb_cpus_1_3"
    assert any("TF_ENABLE_ONEDNN_OPTS" in n for n in res.notes)
    assert "-e TF_ENABLE_ONEDNN_OPTS=0" in res.files["run_triton.sh"]


def test_triton_bf16_is_hint_bf16_and_unread_properties_are_notes(study_db):
    res = render(dep_of(study_db, 1), "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert not cfg.HasField("dynamic_batching")
    assert cfg.parameters["HINT_BF16"].string_value == "YES"
    assert "ENABLE_BATCH_PADDING" not in cfg.parameters  # batch 1: nothing to pad
    for unread in ("ENABLE_CPU_PINNING", "INFERENCE_PRECISION_HINT"):
        assert unread not in cfg.parameters
    assert any("ENABLE_CPU_PINNING" in n for n in res.notes)


def _dep(tmp_path, cores_per_instance=None, **kw) -> DeploymentConfig:
    """The deployment of one made-up run (with instance slices, which make_study_db does not store)."""
    from wb_core.store import Store

    db = tmp_path / f"one{len(list(tmp_path.iterdir()))}.db"
    r = run(**kw)
    make_study_db(db, [])
    cfg = {k: r.get(k) for k in ("backend", "precision", "batch_size", "threads", "inter_op_threads", "streams",
                                 "instances", "concurrency", "hint", "onednn", "cpu_pinning")}
    cfg.update(cores=kw.get("cores"), cores_per_instance=cores_per_instance)
    metrics = {k: v for k, v in r.items() if k.startswith(("latency_", "throughput", "cpu_util", "rss_mb", "ov_"))}
    with Store(db) as s:
        s.add_run("t", r["key"], cfg, "ok", metrics)
    return deployment_for_study(db, "t", run_key=r["key"])


def test_triton_host_policy_is_one_range_per_policy(tmp_path):
    single = render(_dep(tmp_path, cores=[3], threads=1), "triton")
    assert "--host-policy=wb_cpus_3_3,cpu-cores=3-3" in single.files["run_triton.sh"]
    # One instance on CPUs that are not one range: the covering range, the exact set on the process, a note.
    gap = render(_dep(tmp_path, cores=[0, 2], threads=2), "triton")
    script = gap.files["run_triton.sh"]
    assert "--host-policy=wb_cpus_0_2,cpu-cores=0-2" in script and "cpu-cores=0,2" not in script
    assert "--cpuset-cpus=0,2" in script and "taskset -c 0,2" in script
    assert any("not one range" in n and "0-2" in n for n in gap.notes)
    # Two instances, one CPU each on 0 and 2: one group and one policy per range.
    two = _dep(tmp_path, cores=[0, 2], threads=1, instances=2, cores_per_instance=1)
    assert two.instance_cores() == [[0], [2]]
    res = render(two, "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert [(g.count, g.host_policy) for g in cfg.instance_group] == [(1, "wb_cpus_0_0"), (1, "wb_cpus_2_2")]
    flags = [a for a in res.files["run_triton.sh"].split() if a.startswith("--host-policy")]
    assert sorted(set(flags)) == ["--host-policy=wb_cpus_0_0,cpu-cores=0-0", "--host-policy=wb_cpus_2_2,cpu-cores=2-2"]
    # Instances that shared a split set are spread over its ranges.
    shared = render(_dep(tmp_path, cores=[0, 1, 4, 5], threads=2, instances=4), "triton")
    cfg = _triton_config(shared.files["model_repository/t/config.pbtxt"])
    assert sorted((g.count, g.host_policy) for g in cfg.instance_group) == [(2, "wb_cpus_0_1"), (2, "wb_cpus_4_5")]


def test_triton_streams_in_flight_become_instances(tmp_path):
    dep = _dep(tmp_path, cores=[0, 1, 2, 3], threads=4, streams=2, concurrency=2,
               ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "4", "NUM_STREAMS": "2"})
    res = render(dep, "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert [(g.count, g.host_policy) for g in cfg.instance_group] == [(1, "wb_cpus_0_1"), (1, "wb_cpus_2_3")]
    assert cfg.parameters["NUM_STREAMS"].string_value == "1"
    assert cfg.parameters["INFERENCE_NUM_THREADS"].string_value == "2"
    assert any("2 OpenVINO streams" in n for n in res.notes)


def test_triton_fp32_on_an_amx_cpu_says_it_would_run_bf16(study_db):
    dep = dep_of(study_db, 0)
    dep.measurement.hardware["flags"] = ["avx512f", "amx_bf16"]
    res = render(dep, "triton")
    assert any("serve this run in BF16" in n for n in res.notes)


# ---- TensorFlow Serving


def _batching_parameters_class():
    """TF Serving's BatchingParameters (session_bundle_config.proto), built from its field definitions."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    f = descriptor_pb2.FileDescriptorProto(name="batching_test.proto", package="tensorflow.serving",
                                           syntax="proto3", dependency=["google/protobuf/wrappers.proto"])
    m = f.message_type.add(name="BatchingParameters")
    T = descriptor_pb2.FieldDescriptorProto
    for number, name, type_name in ((1, "max_batch_size", "Int64Value"), (2, "batch_timeout_micros", "Int64Value"),
                                    (3, "max_enqueued_batches", "Int64Value"), (4, "num_batch_threads", "Int64Value"),
                                    (5, "thread_pool_name", "StringValue")):
        m.field.add(name=name, number=number, label=T.LABEL_OPTIONAL, type=T.TYPE_MESSAGE,
                    type_name=f".google.protobuf.{type_name}")
    m.field.add(name="allowed_batch_sizes", number=6, label=T.LABEL_REPEATED, type=T.TYPE_INT64)
    m.field.add(name="pad_variable_length_inputs", number=7, label=T.LABEL_OPTIONAL, type=T.TYPE_BOOL)
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))


def test_tfserving_batching_parameters_follow_the_rules(study_db):
    from google.protobuf import text_format

    res = render(dep_of(study_db, 2), "tfserving")
    msg = text_format.Parse(res.files["batching_parameters.txt"], _batching_parameters_class()())
    sizes = list(msg.allowed_batch_sizes)
    assert msg.max_batch_size.value == 6
    assert sizes == sorted(set(sizes)) and sizes[-1] == msg.max_batch_size.value
    assert msg.batch_timeout_micros.value >= 100 and msg.num_batch_threads.value >= 1
    script = res.files["run_tfserving.sh"]
    assert "--tensorflow_intra_op_parallelism=3" in script and "--tensorflow_inter_op_parallelism=1" in script
    assert "--cpuset-cpus=1-3" in script and "--enable_batching=true" in script


def test_tfserving_bare_command_reads_the_folder_the_script_fills(study_db, tmp_path):
    script = render(dep_of(study_db, 2), "tfserving").files["run_tfserving.sh"]
    assert "models/t/1" in script  # where the script puts the SavedModel
    bare = next(line for line in script.splitlines()
                if "tensorflow_model_server --port" in line and "docker" not in line)
    # The shell expands it to the folder the script runs in (TF Serving wants absolute paths).
    words = _shell_words(bare.removeprefix("# "), tmp_path)
    assert f"--model_base_path={tmp_path}/models/t" in words
    assert f"--batching_parameters_file={tmp_path}/batching_parameters.txt" in words


def _shell_words(line: str, cwd) -> list[str]:
    """The arguments sh makes of a command line, run in `cwd` (printed one per line by printf)."""
    import subprocess

    out = subprocess.run(["sh", "-c", f"printf '%s\\n' {line}"], cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_tfserving_batch_one_has_no_batching_file(study_db):
    res = render(dep_of(study_db, 1), "tfserving")
    assert "batching_parameters.txt" not in res.files
    assert any("measured with OpenVINO" in n for n in res.notes)


# ---- OpenVINO Model Server


def _ovms_ok(cfg):
    """The OVMS rules (ovms.check_config, from OVMS 2026.3's documentation), and OpenVINO accepting plugin_config."""
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    core = ov.Core()
    assert check_config(cfg, set(core.get_property("CPU", "SUPPORTED_PROPERTIES"))) == []
    p = ops.parameter([1, 4], np.float32)
    for item in cfg["model_config_list"]:
        # OVMS hands plugin_config to the CPU plugin as is: the real library must compile with it.
        core.compile_model(ov.Model([ops.relu(p)], [p]), "CPU", item["config"]["plugin_config"])


def test_ovms_config_json(study_db):
    res = render(dep_of(study_db, 0), "ovms")
    cfg = json.loads(res.files["config.json"])
    _ovms_ok(cfg)
    c = cfg["model_config_list"][0]["config"]
    assert c["batch_size"] == "8" and c["nireq"] == 1 and c["target_device"] == "CPU"
    assert c["plugin_config"] == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2", "NUM_STREAMS": "1"}
    assert "--cpuset-cpus=0-1" in res.files["run_ovms.sh"]
    assert "Exported by CPU Inference Workbench" in res.files["NOTES.txt"]
    assert any("ENABLE_CPU_PINNING" in n for n in res.notes)  # not set, and the export says so
    pinned = json.loads(render(dep_of(study_db, 1), "ovms").files["config.json"])
    _ovms_ok(pinned)
    assert pinned["model_config_list"][0]["config"]["plugin_config"]["ENABLE_CPU_PINNING"] == "YES"


@pytest.mark.parametrize("bad, words", [
    ({}, "model_config_list is required"),
    ({"model_config_list": [{"config": {"name": "m", "batch": 1}}]}, "unknown key 'batch'"),
    ({"model_config_list": [{"config": {"name": "m"}, "extra": 1}]}, "single key 'config'"),
    ({"model_config_list": [{"config": {"base_path": "/m"}}]}, "name is required"),
    ({"model_config_list": [{"config": {"name": "m", "nireq": -1}}]}, "nireq must be at least 0"),
    ({"model_config_list": [{"config": {"name": "m", "nireq": "2"}}]}, "nireq has the wrong type"),
    ({"model_config_list": [{"config": {"name": "m", "batch_size": "eight"}}]}, "OVMS would ignore it"),
    ({"model_config_list": [{"config": {"name": "m", "batch_size": "8:1"}}]}, "OVMS would ignore it"),
    ({"model_config_list": [{"config": {"name": "m", "target_device": "TPU"}}]}, "target_device 'TPU'"),
    ({"model_config_list": [{"config": {"name": "m", "plugin_config": {"NUM_STREAMS": [1]}}}]}, "string, number"),
    ({"model_config_list": [{"config": {"name": "m", "model_version_policy": {"latest": {"num_versions": 0}}}}]},
     "num_versions"),
    ({"model_config_list": [{"config": {"name": "m"}}, {"config": {"name": "m"}}]}, "unique"),
])
def test_ovms_checker_rejects_what_ovms_rejects(bad, words):
    assert any(words in e for e in check_config(bad)), check_config(bad)


def test_ovms_checker_accepts_documented_forms():
    good = {"model_config_list": [{"config": {"name": "m", "base_path": "/models/m", "batch_size": "1:8",
                                              "shape": {"x": "(1,3)"}, "nireq": 0, "target_device": "CPU",
                                              "plugin_config": {"NUM_STREAMS": 2, "ENABLE_CPU_PINNING": True},
                                              "model_version_policy": {"specific": {"versions": [1, 3]}}}}],
            "monitoring": {"metrics": {"enable": True}}}
    assert check_config(good) == []
    assert check_config({"model_config_list": [{"config": {"name": "m", "batch_size": 4}}]}) == []
    assert check_config({"model_config_list": [{"config": {"name": "m", "plugin_config": {"BOGUS": "1"}}}]},
                        {"NUM_STREAMS"})


def test_ovms_from_a_tensorflow_run_says_what_it_cannot_carry(study_db):
    res = render(dep_of(study_db, 2), "ovms")
    _ovms_ok(json.loads(res.files["config.json"]))
    joined = " ".join(res.notes)
    assert "measured with TensorFlow" in joined and "inter-op threads (1)" in joined
    assert "TF_ENABLE_ONEDNN_OPTS" in joined


# ---- KServe

KSERVE_PREDICTOR_FIELDS = {"minReplicas", "maxReplicas", "model", "batcher", "logger", "scaleTarget", "scaleMetric",
                           "containerConcurrency", "timeout", "canaryTrafficPercent", "serviceAccountName",
                           "nodeSelector", "tolerations", "affinity"}
KSERVE_MODEL_FIELDS = {"modelFormat", "runtime", "storageUri", "protocolVersion"}  # the rest are V1Container's


def _check_inference_service(doc):
    client = pytest.importorskip("kubernetes.client", reason="kubernetes is not installed (pip install -e '.[test]')")
    from kubernetes.utils import parse_quantity

    assert doc["apiVersion"] == "serving.kserve.io/v1beta1" and doc["kind"] == "InferenceService"
    assert set(doc["metadata"]) <= set(client.V1ObjectMeta.attribute_map.values())
    assert all(isinstance(v, str) for v in doc["metadata"]["annotations"].values())
    pred = doc["spec"]["predictor"]
    assert set(pred) <= KSERVE_PREDICTOR_FIELDS
    model = pred["model"]
    container_fields = set(client.V1Container.attribute_map.values())
    assert set(model) - KSERVE_MODEL_FIELDS <= container_fields
    assert isinstance(model["modelFormat"]["name"], str)
    res = model["resources"]
    assert set(res) <= set(client.V1ResourceRequirements.attribute_map.values())
    # Guaranteed QoS: requests equal limits, and whole CPUs.
    assert res["requests"] == res["limits"]
    cpu = parse_quantity(res["limits"]["cpu"])
    assert cpu == int(cpu) and cpu >= 1
    assert parse_quantity(res["limits"]["memory"]) >= 256 * 2**20
    for arg in model.get("args", []):
        assert isinstance(arg, str)
    if "batcher" in pred:
        assert set(pred["batcher"]) <= {"maxBatchSize", "maxLatency", "timeout"}
        assert all(isinstance(v, int) for v in pred["batcher"].values())
    return model


def test_kserve_inference_service(study_db):
    text = render(dep_of(study_db, 0), "kserve").files["inferenceservice.yaml"]
    assert "static CPU manager" in text
    model = _check_inference_service(yaml.safe_load(text))
    # Names KServe ships (v0.20.0 config/runtimes), and a pair its controller accepts.
    assert model["runtime"] == "kserve-openvino" and model["modelFormat"] == {"name": "openvino"}
    assert supports(model["runtime"], model["modelFormat"]) and model["resources"]["limits"]["cpu"] == "2"
    plugin = json.loads(model["args"][0].split("=", 1)[1])
    assert plugin["INFERENCE_NUM_THREADS"] == "2"
    tf = yaml.safe_load(render(dep_of(study_db, 2), "kserve").files["inferenceservice.yaml"])
    tf_model = _check_inference_service(tf)
    assert tf_model["runtime"] == "kserve-tensorflow-serving" and supports(tf_model["runtime"], tf_model["modelFormat"])
    assert "--tensorflow_intra_op_parallelism=3" in tf_model["args"]
    assert tf_model["resources"]["limits"]["memory"] == "896Mi"  # 700 MB x 1.25, rounded up to 64 Mi
    assert tf["spec"]["predictor"]["batcher"]["maxBatchSize"] == 6


# ---- registry, files, CLI


def test_unknown_format_lists_the_formats():
    with pytest.raises(ConfigError) as e:
        parse_formats("onnx")
    assert "yaml, ovms, triton, tfserving, kserve or all" in str(e.value)
    assert parse_formats("all") == list(FORMATS)


def test_export_all_writes_a_folder_per_format(study_db, tmp_path):
    out = tmp_path / "deploy"
    res = export(dep_of(study_db, 0), "all", out)
    # The study's model is an OpenVINO IR: TensorFlow Serving, which runs SavedModels only, is left out
    # with its reason; asked for by name, it is refused before anything is written.
    for name in FORMATS:
        assert (out / name).is_dir() == (name != "tfserving"), name
    assert not res["tfserving"].files
    assert res["tfserving"].notes == ["TensorFlow Serving was not written: its server runs a TensorFlow SavedModel, and "
                                      "'t' is an OpenVINO IR model; export it for OpenVINO Model Server config, Triton "
                                      "model repository or KServe InferenceService."]
    with pytest.raises(ConfigError, match="TensorFlow Serving was not written"):
        export(dep_of(study_db, 0), "tfserving", tmp_path / "tfs")
    assert not (tmp_path / "tfs").exists()
    assert (out / "triton" / "model_repository" / "t" / "config.pbtxt").is_file()
    assert (out / "ovms" / "run_ovms.sh").stat().st_mode & 0o100


def test_cli_export_and_errors(study_db, tmp_path):
    from wb_core.cli import app

    runner = CliRunner()
    out = tmp_path / "x"
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(study_db), "--best", "--max-cores", "1",
                            "--format", "yaml", "--out", str(out)])
    assert r.exit_code == 0, r.output
    dep = DeploymentConfig.from_yaml((out / "deployment.yaml").read_text())
    assert dep.measurement.run_key == RUNS[1]["key"]
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(study_db), "--best", "--format", "helm",
                            "--out", str(out)])
    assert "choose from yaml, ovms, triton, tfserving, kserve or all" in str(r.exception)
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(study_db), "--format", "yaml", "--out", str(out)])
    assert "--best" in str(r.exception)
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(study_db), "--best", "--max-p99-ms", "0.01",
                            "--out", str(out)])
    assert "No run meets p99 latency ≤ 0.01 ms" in str(r.exception) and "closest" in str(r.exception)


def test_cli_recommend(study_db):
    from wb_core.cli import app

    r = CliRunner().invoke(app, ["recommend", "--study", "t", "--db", str(study_db), "--objective", "latency"])
    assert r.exit_code == 0, r.output
    assert "lowest p99 latency" in r.output


def test_empty_study_export(tmp_path):
    from wb_core.errors import WorkbenchError

    db = tmp_path / "e.db"
    make_study_db(db, [])
    with pytest.raises(WorkbenchError, match="no runs yet"):
        deployment_for_study(db, "t")


# ---- names, capacity, bundles


@pytest.mark.parametrize("path, name", [
    ("/data/models/resnet50/saved_model", "resnet50"), ("/data/resnet50", "resnet50"), ("/data/bert.onnx", "bert"),
    ("/data/mobilenet/model.xml", "mobilenet"), ("/data/m2/export/1", "m2"), ("/data/models/x.keras", "x"),
    ("saved_model", "fallback"), (None, "fallback"),
])
def test_model_names_come_from_the_model(path, name):
    from wb_core.export.deployment import model_name

    assert model_name(path, "fallback") == name


def test_a_savedmodel_study_exports_its_folder_name_and_name_overrides(tmp_path):
    db = tmp_path / "s.db"
    r = run(batch=1)
    make_study_db(db, [r], model_path=str(tmp_path / "zoo" / "resnet50" / "saved_model"))
    dep = deployment_for_study(db, "t", run_key=r["key"])
    assert dep.serving_name == "resnet50"
    assert "model_repository/resnet50/config.pbtxt" in render(dep, "triton").files
    named = deployment_for_study(db, "t", run_key=r["key"], name="My Model")
    assert named.serving_name == "my-model" and named.model.name == "My Model"
    with pytest.raises(ConfigError, match="no letters or digits"):
        deployment_for_study(db, "t", run_key=r["key"], name="--")


CAPACITY_RUNS = [
    run(batch=8, threads=1, cores=[0], p99=4.0, thr=8000),  # batch 8 on one CPU: p99 4 ms
    run(batch=1, threads=2, cores=[0, 1], p99=0.5, thr=3000),  # batch 1 on two CPUs: p99 0.5 ms
]


def test_capacity_comes_from_the_exported_run(tmp_path):
    from wb_core.cli import app

    db = tmp_path / "c.db"
    make_study_db(db, CAPACITY_RUNS)
    out = tmp_path / "x"
    runner = CliRunner()
    b8 = CAPACITY_RUNS[0]["key"]
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(db), "--run", b8, "--target-rate", "2000",
                            "--max-p99-ms", "5", "--format", "yaml", "--out", str(out)])
    assert r.exit_code == 0, r.output
    dep = DeploymentConfig.from_yaml((out / "deployment.yaml").read_text())
    assert dep.measurement.run_key == b8 and dep.capacity["source_key"] == b8
    assert dep.capacity["cores_per_instance"] == 1 and dep.batch_size == 8
    # The exported run cannot meet the target: refused, naming the run a plan would come from.
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(db), "--run", b8, "--target-rate", "2000",
                            "--max-p99-ms", "1", "--format", "yaml", "--out", str(out)])
    assert r.exit_code != 0
    msg = str(r.exception)
    assert f"Run {b8}" in msg and "above the 1 ms target" in msg and CAPACITY_RUNS[1]["key"] in msg
    # --best picks the run that meets the target, and the plan is that run's.
    r = runner.invoke(app, ["export", "--study", "t", "--db", str(db), "--best", "--target-rate", "2000",
                            "--max-p99-ms", "1", "--format", "yaml", "--out", str(out)])
    assert r.exit_code == 0, r.output
    dep = DeploymentConfig.from_yaml((out / "deployment.yaml").read_text())
    assert dep.capacity["source_key"] == dep.measurement.run_key == CAPACITY_RUNS[1]["key"]


def _fake_model_files(tmp_path, dep):
    """An IR pair and a SavedModel folder on disk, as the variant cache holds them."""
    ir = tmp_path / "cache" / "model.xml"
    ir.parent.mkdir(parents=True, exist_ok=True)
    ir.write_text("<net/>")
    ir.with_suffix(".bin").write_bytes(b"\0" * 16)
    sm = tmp_path / "cache" / "sm"
    (sm / "variables").mkdir(parents=True, exist_ok=True)
    (sm / "saved_model.pb").write_bytes(b"pb")
    (sm / "variables" / "variables.index").write_bytes(b"ix")
    dep.model.ir_path, dep.model.savedmodel_path = str(ir), str(sm)
    return dep


def test_bundle_puts_the_model_in_each_layout(study_db, tmp_path):
    import zipfile

    from wb_core.export.bundle import zip_bundle

    dep = _fake_model_files(tmp_path, dep_of(study_db, 0))
    out = tmp_path / "bundle"
    results = export(dep, "all", out, bundle=True)
    for rel in ("ovms/models/t/1/model.xml", "ovms/models/t/1/model.bin", "triton/model_repository/t/1/model.xml",
                "tfserving/models/t/1/saved_model.pb", "tfserving/models/t/1/variables/variables.index",
                "kserve/model/t/1/model.bin"):
        assert (out / rel).is_file(), rel
    assert results["triton"].model_files == ["model_repository/t/1/model.xml", "model_repository/t/1/model.bin"]
    cfg = json.loads((out / "ovms" / "config.json").read_text())
    assert check_repository(cfg, out / "ovms" / "models") == []
    # The scripts leave a bundled model where it is.
    assert "[ -f models/t/1/model.xml ] ||" in (out / "ovms" / "run_ovms.sh").read_text()
    name, data, notes = zip_bundle(dep, "triton")
    assert name == "t-triton.zip" and not notes
    with zipfile.ZipFile(__import__("io").BytesIO(data)) as zf:
        assert set(zf.namelist()) >= {"model_repository/t/config.pbtxt", "model_repository/t/1/model.xml",
                                      "model_repository/t/1/model.bin", "run_triton.sh"}
        assert zf.getinfo("run_triton.sh").external_attr >> 16 == 0o755
    tf = _fake_model_files(tmp_path, dep_of(study_db, 2))
    _, data, _ = zip_bundle(tf, "triton")
    with zipfile.ZipFile(__import__("io").BytesIO(data)) as zf:
        assert "model_repository/t/1/model.savedmodel/saved_model.pb" in zf.namelist()


def test_bundle_without_model_files_says_so(study_db, tmp_path):
    res = export(dep_of(study_db, 0), "ovms", tmp_path / "b", bundle=True)["ovms"]
    assert res.model_files == [] and any("no model files" in n for n in res.notes)
