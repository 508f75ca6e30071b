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
    model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")
    from google.protobuf import text_format

    return text_format.Parse(text, model_config_pb2.ModelConfig())


def test_triton_openvino_config_parses_with_triton_proto(study_db):
    res = render(dep_of(study_db, 0), "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert cfg.name == "t" and cfg.backend == "openvino" and cfg.max_batch_size == 8
    assert cfg.input[0].name == "image" and list(cfg.input[0].dims) == [8, 8, 1]
    group = cfg.instance_group[0]
    assert group.count == 1 and group.kind == group.KIND_CPU and group.host_policy == "wb_pinned"
    assert list(cfg.dynamic_batching.preferred_batch_size) == [8]
    assert cfg.parameters["INFERENCE_NUM_THREADS"].string_value == "2"
    assert cfg.parameters["NUM_STREAMS"].string_value == "1"
    assert "--host-policy=wb_pinned,cpu-cores=0-1" in res.files["run_triton.sh"]
    assert "model_repository/t/1/model.xml" in res.files["run_triton.sh"]


def test_triton_tensorflow_config(study_db):
    res = render(dep_of(study_db, 2), "triton")
    cfg = _triton_config(res.files["model_repository/t/config.pbtxt"])
    assert cfg.platform == "tensorflow_savedmodel"
    assert cfg.parameters["TF_NUM_INTRA_THREADS"].string_value == "3"
    assert cfg.parameters["TF_NUM_INTER_THREADS"].string_value == "1"
    assert any("TF_ENABLE_ONEDNN_OPTS" in n for n in res.notes)
    assert "-e TF_ENABLE_ONEDNN_OPTS=0" in res.files["run_triton.sh"]


def test_triton_batch_one_has_no_dynamic_batching(study_db):
    cfg = _triton_config(render(dep_of(study_db, 1), "triton").files["model_repository/t/config.pbtxt"])
    assert not cfg.HasField("dynamic_batching")
    assert cfg.parameters["ENABLE_CPU_PINNING"].string_value == "YES"


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


def test_tfserving_batch_one_has_no_batching_file(study_db):
    res = render(dep_of(study_db, 1), "tfserving")
    assert "batching_parameters.txt" not in res.files
    assert any("measured with OpenVINO" in n for n in res.notes)


# ---- OpenVINO Model Server

# The keys and types OVMS documents for config.json (model server parameters, "config" objects).
OVMS_SCHEMA = {
    "type": "object", "required": ["model_config_list"], "additionalProperties": False,
    "properties": {"model_config_list": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["config"], "additionalProperties": False,
        "properties": {"config": {
            "type": "object", "required": ["name", "base_path"], "additionalProperties": False,
            "properties": {
                "name": {"type": "string"}, "base_path": {"type": "string"}, "target_device": {"type": "string"},
                "batch_size": {"type": ["string", "integer"]}, "nireq": {"type": "integer", "minimum": 0},
                "shape": {"type": ["string", "object"]}, "layout": {"type": ["string", "object"]},
                "model_version_policy": {"type": "object"}, "allow_cache": {"type": "boolean"},
                "plugin_config": {"type": "object", "additionalProperties": {"type": ["string", "number",
                                                                                      "boolean"]}}}}}}},
        "custom_node_library_config_list": {"type": "array"}, "pipeline_config_list": {"type": "array"},
        "mediapipe_config_list": {"type": "array"}, "monitoring": {"type": "object"}},
}


def test_ovms_config_json(study_db):
    res = render(dep_of(study_db, 0), "ovms")
    cfg = json.loads(res.files["config.json"])
    jsonschema.validate(cfg, OVMS_SCHEMA)
    c = cfg["model_config_list"][0]["config"]
    assert c["batch_size"] == "8" and c["nireq"] == 1 and c["target_device"] == "CPU"
    assert c["plugin_config"] == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2", "NUM_STREAMS": "1"}
    assert "--cpuset-cpus=0-1" in res.files["run_ovms.sh"]
    assert "Exported by CPU Inference Workbench" in res.files["NOTES.txt"]
    assert any("ENABLE_CPU_PINNING" in n for n in res.notes)  # not set, and the export says so
    pinned = json.loads(render(dep_of(study_db, 1), "ovms").files["config.json"])
    assert pinned["model_config_list"][0]["config"]["plugin_config"]["ENABLE_CPU_PINNING"] == "YES"


def test_ovms_from_a_tensorflow_run_says_what_it_cannot_carry(study_db):
    res = render(dep_of(study_db, 2), "ovms")
    jsonschema.validate(json.loads(res.files["config.json"]), OVMS_SCHEMA)
    joined = " ".join(res.notes)
    assert "measured with TensorFlow" in joined and "inter-op threads (1)" in joined and "TF_ENABLE_ONEDNN_OPTS" in joined


# ---- KServe

KSERVE_PREDICTOR_FIELDS = {"minReplicas", "maxReplicas", "model", "batcher", "logger", "scaleTarget", "scaleMetric",
                           "containerConcurrency", "timeout", "canaryTrafficPercent", "serviceAccountName",
                           "nodeSelector", "tolerations", "affinity"}
KSERVE_MODEL_FIELDS = {"modelFormat", "runtime", "storageUri", "protocolVersion"}  # the rest are V1Container's


def _check_inference_service(doc):
    client = pytest.importorskip("kubernetes.client")
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
    assert model["runtime"] == "kserve-ovms" and model["resources"]["limits"]["cpu"] == "2"
    plugin = json.loads(model["args"][0].split("=", 1)[1])
    assert plugin["INFERENCE_NUM_THREADS"] == "2"
    tf = yaml.safe_load(render(dep_of(study_db, 2), "kserve").files["inferenceservice.yaml"])
    tf_model = _check_inference_service(tf)
    assert tf_model["runtime"] == "kserve-tensorflow-serving"
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
    export(dep_of(study_db, 0), "all", out)
    for name in FORMATS:
        assert (out / name).is_dir()
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
