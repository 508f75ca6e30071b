"""A real (short) OpenVINO study of LeNet: histogram stored, FLOPs counted, layers profiled, exported, reported."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lenet_study(lenet_ir, tmp_path_factory):
    from wb_core.api import profile
    from wb_core.config import MeasureSettings

    db = tmp_path_factory.mktemp("e2e") / "r.db"
    fast = MeasureSettings(warmup_s=0.1, window_s=0.1, max_time_s=0.6, min_windows=3, tolerance=0.5)
    df = profile(lenet_ir, db=db, study="lenet", backends="openvino", threads="1", batch_sizes="1,4",
                 cores="none,0", settings=fast)
    assert (df["status"] == "ok").all(), df[["status", "error"]]
    return db, df


def test_runs_store_a_latency_histogram(lenet_study):
    _, df = lenet_study
    hist = df["latency_hist"].iloc[0]
    assert sum(hist["counts"]) > 0 and len(hist["edges_ms"]) == len(hist["counts"]) + 1


def test_layer_profile_of_a_stored_run(lenet_study):
    from wb_core.analysis.layers import study_layer_profile

    db, df = lenet_study
    key = df[(df["cores"] == "0") & (df["batch_size"] == 4)]["key"].iloc[0]
    p = study_layer_profile(db, "lenet", key[:10], iterations=20)
    assert p.batch_size == 4 and p.total_ms > 0
    types = p.by_type()
    assert "Convolution" in set(types["type"])
    assert set(p.layers["precision"]) <= {"f32", "bf16", "i32", "i8", "u8", "f16", "unknown"}
    assert p.properties["INFERENCE_NUM_THREADS"] == "1"


def test_export_and_report_of_a_real_study(lenet_study, tmp_path):
    import yaml

    from wb_core.export import DeploymentConfig, deployment_for_study, export
    from wb_core.report import build_report

    db, _ = lenet_study
    dep = deployment_for_study(db, "lenet")
    assert dep.model.flops_per_sample == 2 * (117_600 + 240_000 + 48_000 + 10_080 + 840)
    assert dep.model.ir_path and dep.measurement.hardware["cpu_model"]
    export(dep, "all", tmp_path)
    data = yaml.safe_load((tmp_path / "yaml" / "deployment.yaml").read_text())
    assert DeploymentConfig.from_dict(data) == dep
    text = build_report(db, "lenet")
    assert "FLOPs per sample" in text and "Latency distribution" in text
