"""Precision variants end to end on the LeNet demo: INT8 (NNCF), BF16, accuracy columns, skips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cpu_flags import bf16_native as cpu_flags_bf16
from wb_core.cli import app
from wb_core.config import SweepSpec
from wb_core.errors import ConfigError
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.variants.planner import PrecisionOptions

FAST_FLAGS = ["--max-time", "0.6", "--warmup", "0.1", "--window", "0.1", "--tolerance", "0.5", "-q"]


def _by_precision(df):
    return {row["precision"]: row for _, row in df.iterrows()}


def test_cli_fp32_bf16_int8_with_demo_data(lenet_dir, db):
    res = CliRunner().invoke(app, ["profile", "lenet-digits", "--precision", "fp32,bf16,int8",
                                   "--data", str(lenet_dir / "data.npz"), "--db", str(db), "--study", "p",
                                   *FAST_FLAGS])
    assert res.exit_code == 0, res.output
    rows = _by_precision(load_results(db, "p"))
    assert set(rows) == {"fp32", "bf16", "int8"}
    # INT8 runs on every x86-64 CPU (VNNI and AMX only make it faster); BF16 needs AVX512_BF16 or AMX-BF16.
    bf16_native = cpu_flags_bf16()  # from /proc/cpuinfo, not from the rule under test
    measured = ["fp32", "int8"] + (["bf16"] if bf16_native else [])
    for prec in measured:
        row = rows[prec]
        assert row["status"] == "ok", row["error"]
        assert row["accuracy"] >= 0.9, prec
        assert row["accuracy_metric"] == "top1"
    assert rows["fp32"]["accuracy_drop"] == 0.0
    assert rows["int8"]["accuracy_drop"] <= 0.01
    assert rows["int8"]["executed_precision"] in ("u8", "i8")
    if bf16_native:
        assert rows["bf16"]["executed_precision"] == "bf16"
    else:
        assert rows["bf16"]["status"] == "skipped"
        assert "AVX512_BF16" in rows["bf16"]["error"] and "emulated" in rows["bf16"]["error"]
    assert rows["fp32"]["executed_precision"] == "f32"
    assert rows["int8"]["variant"] == "int8-ptq" and rows["int8"]["calibration_size"] == 300
    assert "TensorFlow models reach INT8 through this OpenVINO variant" in rows["int8"]["variant_note"]
    assert rows["fp32"]["variant"] == "fp32-ir"


def test_accuracy_aware_int8_stays_within_bound(lenet_savedmodel, db, fast):
    s = run_sweep(lenet_savedmodel, SweepSpec(precisions="fp32,int8"), db, "aac", settings=fast,
                  precision=PrecisionOptions(max_accuracy_drop=0.005))
    assert s.ok == 2, s.errors
    rows = _by_precision(load_results(db, "aac"))
    assert rows["int8"]["variant"] == "int8-aac"
    assert rows["int8"]["accuracy_drop"] <= 0.005
    assert rows["int8"]["max_accuracy_drop"] == 0.005
    assert rows["int8"]["executed_precision"] in ("u8", "i8")


def test_int8_variant_is_cached_by_data_and_settings(lenet_savedmodel):
    from wb_core.data import demo_dataset
    from wb_core.models import fingerprint
    from wb_core.variants.quantize import QuantizeSettings, ensure_int8_ir

    data_path, data_fp = demo_dataset("lenet-digits").save()
    fp = fingerprint(lenet_savedmodel)
    a, info = ensure_int8_ir(lenet_savedmodel, "savedmodel", fp, data_path, data_fp, QuantizeSettings())
    b, _ = ensure_int8_ir(lenet_savedmodel, "savedmodel", fp, data_path, data_fp, QuantizeSettings())
    c, info_c = ensure_int8_ir(lenet_savedmodel, "savedmodel", fp, data_path, data_fp, QuantizeSettings(subset_size=50))
    assert a == b and a != c
    assert info["calibration_size"] == 300 and info_c["calibration_size"] == 50


def test_tensorflow_int8_is_skipped_with_the_openvino_route(lenet_savedmodel, db, fast):
    s = run_sweep(lenet_savedmodel, SweepSpec(backends="tensorflow", precisions="int8"), db, "tf8", settings=fast)
    assert s.skipped == 1
    err = load_results(db, "tf8").iloc[0]["error"]
    # stored with the point and read by every face: the backend in words, no flag
    assert "OpenVINO INT8 variant" in err and "with the OpenVINO backend" in err and "--" not in err


def test_int8_without_data_is_skipped(lenet_ir_copy, db, fast):
    s = run_sweep(lenet_ir_copy, SweepSpec(precisions="fp32,int8"), db, "nodata", settings=fast)
    assert (s.ok, s.skipped) == (1, 1)
    rows = _by_precision(load_results(db, "nodata"))
    assert "calibration data" in rows["int8"]["error"]
    assert "accuracy" not in rows["fp32"].index or pd.isna(rows["fp32"]["accuracy"])


def test_without_labels_accuracy_compares_with_the_fp32_outputs(lenet_dir, lenet_ir_copy, db, fast, tmp_path):
    x = np.load(lenet_dir / "data.npz")["x"]
    path = tmp_path / "nolabels.npz"
    np.savez(path, x=x)
    s = run_sweep(lenet_ir_copy, SweepSpec(precisions="fp32,int8"), db, "nolab", settings=fast,
                  precision=PrecisionOptions(data=str(path)))
    assert s.ok == 2, s.errors
    assert sum("no labels" in n for n in s.notes) == 1
    rows = _by_precision(load_results(db, "nolab"))
    assert rows["int8"]["executed_precision"] in ("u8", "i8")
    assert rows["int8"]["accuracy_metric"] == "cosine vs fp32"
    assert rows["fp32"]["accuracy"] == pytest.approx(1.0)
    # INT8 outputs stay close to FP32, but not identical.
    assert 0.9 < rows["int8"]["accuracy"] < 1.0
    assert rows["int8"]["accuracy_drop"] == pytest.approx(1.0 - rows["int8"]["accuracy"])


def test_image_folder_end_to_end(lenet_dir, lenet_ir_copy, db, fast, tmp_path):
    from PIL import Image

    d = np.load(lenet_dir / "data.npz")
    for i, (img, label) in enumerate(zip(d["x"][:120], d["y"][:120])):
        folder = tmp_path / "imgs" / f"digit{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((img[..., 0] * 255).round().astype(np.uint8), mode="L").save(folder / f"{i}.png")
    s = run_sweep(lenet_ir_copy, SweepSpec(precisions="fp32,int8"), db, "imgs", settings=fast,
                  precision=PrecisionOptions(data=str(tmp_path / "imgs")))
    assert s.ok == 2, s.errors
    rows = _by_precision(load_results(db, "imgs"))
    assert rows["fp32"]["accuracy"] >= 0.9 and rows["fp32"]["accuracy_samples"] == 120
    assert rows["int8"]["calibration_size"] == 120


# ---- bad input ----

@pytest.mark.parametrize("x, words", [
    (np.zeros((20, 9, 9, 1), np.float32), "image: ?x8x8x1 float32"),
    (np.zeros((20, 8, 8), np.float32), "image: ?x8x8x1 float32"),
    (np.zeros((20, 8, 8, 1), np.uint8), "image: ?x8x8x1 float32"),
])
def test_calibration_data_of_wrong_shape_or_dtype(lenet_savedmodel, db, fast, tmp_path, x, words):
    path = tmp_path / "bad.npz"
    np.savez(path, x=x)
    with pytest.raises(ConfigError, match=words.replace("?", r"\?")):
        run_sweep(lenet_savedmodel, SweepSpec(precisions="int8"), db, "bad", settings=fast,
                  precision=PrecisionOptions(data=str(path)))


def test_cli_bad_data_is_one_sentence(db, tmp_path):
    path = tmp_path / "corrupt.npz"
    path.write_bytes(b"this is not a zip archive")
    res = CliRunner().invoke(app, ["profile", "lenet-digits", "--precision", "int8", "--data", str(path),
                                   "--db", str(db), *FAST_FLAGS])
    assert res.exit_code != 0
    assert isinstance(res.exception, ConfigError)
    assert "not a readable .npz archive" in str(res.exception)


def test_bad_precision_options():
    with pytest.raises(ConfigError, match="metric"):
        PrecisionOptions(metric="f1")
    with pytest.raises(ConfigError, match="accuracy drop"):
        PrecisionOptions(max_accuracy_drop=-1)
    with pytest.raises(ConfigError, match="built-in metric"):
        PrecisionOptions(max_accuracy_drop=0.01, metric=lambda o, y: 0.0)
    with pytest.raises(ConfigError, match="subset"):
        PrecisionOptions(subset_size=0)


RECORDED_CPUS = {  # tests/cpuinfo block -> (BF16 native, INT8 runs); synthetic-*: hand-made (rules only)
    "synthetic-amd-epyc-7763-zen3": (False, True),           # AVX2 only
    "synthetic-intel-xeon-platinum-8259cl-cascade-lake": (False, True),  # AVX-512 and VNNI, no BF16
    "amd-epyc-zen4-kvm": (True, True),            # verbatim: AVX512_BF16, no AMX
    "intel-xeon-emerald-rapids-kvm": (True, True),  # verbatim: AMX
}


@pytest.mark.parametrize("cpu", sorted(RECORDED_CPUS))
def test_precision_feasibility_on_recorded_cpus(cpu):
    """The rules the sweep applies before any worker starts, on CPUs this machine may not be."""
    from pathlib import Path

    from wb_core.config import RunConfig
    from wb_core.hardware import hardware_from_cpuinfo
    from wb_core.sweep.context import infeasible_reason

    hw = hardware_from_cpuinfo((Path(__file__).parent / "cpuinfo" / f"{cpu}.cpuinfo").read_text())
    bf16_native, int8_runs = RECORDED_CPUS[cpu]
    assert infeasible_reason(RunConfig(backend="openvino", precision="fp32"), "savedmodel", hw) is None
    bf16 = infeasible_reason(RunConfig(backend="openvino", precision="bf16"), "savedmodel", hw)
    if bf16_native:
        assert bf16 is None
    else:
        assert bf16 and "bf16 skipped" in bf16 and "AVX512_BF16" in bf16
    int8 = infeasible_reason(RunConfig(backend="openvino", precision="int8"), "savedmodel", hw)
    assert (int8 is None) == int8_runs


@pytest.mark.slow
def test_tensorflow_bf16_accuracy(lenet_savedmodel, db, fast):
    s = run_sweep(lenet_savedmodel, SweepSpec(backends="tensorflow", precisions="fp32,bf16"), db, "tfbf",
                  settings=fast)
    rows = _by_precision(load_results(db, "tfbf"))
    assert rows["fp32"]["accuracy"] >= 0.9
    if rows["bf16"]["status"] == "skipped":  # a CPU where oneDNN's bfloat16 rewrite changes nothing
        assert "changes nothing" in rows["bf16"]["error"]
    else:
        assert s.ok == 2, s.errors
        assert rows["bf16"]["executed_precision"] == "bf16-amp"
        assert abs(rows["bf16"]["accuracy_drop"]) <= 0.02


def test_api_arrays_and_user_metric(lenet_dir, lenet_ir_copy, db, fast):
    """A function defined here (not importable by another process) runs in the evaluating worker, once
    per batch, averaged by samples: for a share of correct samples that is the share over all of them."""
    import openvino as ov

    from wb_core.api import profile

    d = np.load(lenet_dir / "data.npz")

    def error_rate_complement(outputs, labels):
        return float((outputs.argmax(1) == labels).mean())

    df = profile(lenet_ir_copy, db=db, study="api", precisions="fp32,int8", settings=fast,
                 data=(d["x"][:200], d["y"][:200]), metric=error_rate_complement, calib_size=100)
    rows = _by_precision(df)
    assert rows["fp32"]["accuracy_metric"] == "error_rate_complement"
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(lenet_ir_copy)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    expected = float(np.mean([compiled(d["x"][i:i + 1])[0].argmax() == d["y"][i] for i in range(200)]))
    assert rows["fp32"]["accuracy"] == pytest.approx(expected, abs=1e-9)
    assert rows["int8"]["calibration_size"] == 100 and rows["int8"]["accuracy_drop"] <= 0.02


@pytest.mark.slow
def test_mobilenet_int8_runs_in_u8(db, fast):
    from wb_core.demo import demo_model_path

    s = run_sweep(demo_model_path("mobilenet-v2"), SweepSpec(precisions="int8", batch_sizes="8"), db, "mn",
                  settings=fast)
    assert s.ok == 1, s.errors
    row = load_results(db, "mn").iloc[0]
    assert row["executed_precision"] in ("u8", "i8") and row["variant"] == "int8-ptq"
    assert "accuracy" not in row.index or pd.isna(row["accuracy"])  # random weights: no labels


def test_layer_profile_of_an_int8_run_uses_the_int8_ir(lenet_savedmodel, db, fast):
    from wb_core.analysis.layers import study_layer_profile

    run_sweep(lenet_savedmodel, SweepSpec(precisions="int8"), db, "lay", settings=fast)
    row = load_results(db, "lay").iloc[0]
    assert row["variant_path"].endswith("model.xml") and "/int8/" in row["variant_path"]
    prof = study_layer_profile(db, "lay", row["key"], iterations=5)
    assert {"u8", "i8"} & set(prof.layers["precision"].astype(str))


def test_export_of_an_int8_run_ships_the_int8_ir(lenet_savedmodel, db, fast):
    from wb_core.export import deployment_for_study

    run_sweep(lenet_savedmodel, SweepSpec(precisions="fp32,int8"), db, "exp", settings=fast)
    rows = _by_precision(load_results(db, "exp"))
    dep8 = deployment_for_study(db, "exp", run_key=rows["int8"]["key"])
    dep32 = deployment_for_study(db, "exp", run_key=rows["fp32"]["key"])
    assert dep8.model.ir_path == rows["int8"]["variant_path"] and "/int8/" in dep8.model.ir_path
    assert "/int8/" not in dep32.model.ir_path
