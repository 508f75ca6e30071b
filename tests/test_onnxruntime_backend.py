"""ONNX Runtime measured beside OpenVINO in one study, on a tiny ONNX model built here.

The model is y = relu(x @ W + b) with a dynamic batch, written with onnx.helper. What the study
stores is checked against ONNX Runtime's own InferenceSession and against numpy, and the settings
asked for against what the session reports it holds.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from wb_core.config import SweepSpec
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    onnx.save(model, str(path))
    return path, w, b


def test_a_study_measures_onnxruntime_beside_openvino_with_its_settings(tiny_onnx, db, fast):
    from wb_core.api import profile

    path, _, _ = tiny_onnx
    spec = SweepSpec(backends="openvino,onnxruntime", threads="1,2", execution_modes="sequential,parallel",
                     inter_op_threads="2", graph_optimizations="basic", batch_sizes="2")
    df = profile(path, spec=spec, db=db, study="ort", settings=fast)

    assert (df.status == "ok").all(), df.error.tolist()
    ov, ort = df[df.backend == "openvino"], df[df.backend == "onnxruntime"]
    assert len(ov) == 2 and len(ort) == 4  # OpenVINO reads threads only; ONNX Runtime threads x modes
    assert ov.execution_mode.isna().all()  # a setting OpenVINO does not read stays unset
    assert (ort.throughput > 0).all() and (ov.throughput > 0).all()
    # What the session holds, read back from it, is what each point asked for.
    assert sorted(ort.ort_intra_op_threads.astype(int)) == [1, 1, 2, 2]
    assert (ort.ort_intra_op_threads.astype(int) == ort.threads.astype(int)).all()
    assert (ort.ort_execution_mode == ort.execution_mode).all()
    assert set(ort.ort_execution_mode) == {"sequential", "parallel"}
    assert (ort.ort_inter_op_threads.astype(int) == 2).all()
    assert (ort.ort_graph_optimization == "basic").all()
    assert (ort.ort_providers == "CPUExecutionProvider").all()
    assert (ort.variant == "onnx").all()  # the model file itself, not converted
    assert set(load_results(db, "ort").backend) == {"openvino", "onnxruntime"}


def test_outputs_equal_onnxruntime_own_session(tiny_onnx, tmp_path):
    import onnxruntime as ort

    from wb_core.proc.parent import run_task
    from wb_core.variants.tasks import ReferenceSpool

    path, w, b = tiny_onnx
    x = np.random.default_rng(1).standard_normal((20, 16)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    spool = tmp_path / "spool"
    res = run_task({"task": "wb_core.variants.tasks:task_evaluate", "backend": "onnxruntime",
                    "data": str(tmp_path / "data.npz"), "variant": {"model_path": str(path), "precision": "fp32"},
                    "judged": None, "headline": None, "metric": "auto", "spool": str(spool), "write": True},
                   timeout=120, what="evaluate")
    # FP32's pass writes its outputs to the spool, batch by batch, for the variants to be compared with
    ours = np.concatenate([ReferenceSpool(spool).read(k)[0] for k in range(len(list(spool.glob("*.npz"))))])
    assert res["samples"] == 20

    (theirs,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert ours.shape == (20, 8)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)


def test_an_onnxruntime_setting_asked_of_openvino_is_left_out_with_a_sentence(tiny_onnx, db):
    path, _, _ = tiny_onnx
    spec = SweepSpec(backends="openvino", execution_modes="parallel", batch_sizes="1")
    configs = spec.expand()
    assert [c.execution_mode for c in configs] == [None]
    assert spec.notes == ["Execution mode (ONNX Runtime) parallel left out: only onnxruntime reads it, and this sweep "
                          "measures openvino."]
    out = subprocess.run([sys.executable, "-m", "wb_core.cli", "profile", str(path), "--backend", "openvino",
                          "--execution-mode", "parallel", "--max-time", "0.3", "--window", "0.1", "--warmup", "0.05",
                          "--tolerance", "0.9", "--db", str(db), "--study", "cli", "-q"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Execution mode (ONNX Runtime) parallel left out: only onnxruntime reads it" in out.stderr
    assert load_results(db, "cli").execution_mode.isna().all()


def test_onnxruntime_refuses_unknown_settings_in_one_sentence():
    from wb_core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^Unknown execution mode 'fast'; choose from auto, sequential, parallel\.$"):
        SweepSpec(backends="onnxruntime", execution_modes="fast")
    with pytest.raises(ConfigError, match="Unknown graph optimisation level 'max'"):
        SweepSpec(backends="onnxruntime", graph_optimizations="all,max")


def test_bf16_and_int8_are_skipped_with_where_to_get_them(tiny_onnx, db, fast):
    path, _, _ = tiny_onnx
    summary = run_sweep(path, SweepSpec(backends="onnxruntime", precisions="bf16,int8"), db, "prec", settings=fast)
    assert summary.skipped == 2 and summary.ok == 0
    errors = " ".join(load_results(db, "prec").error)
    assert "no BF16 mode" in errors and "through the OpenVINO INT8 variant" in errors


@pytest.fixture(scope="module")
def qdq_onnx(tiny_onnx, tmp_path_factory):
    """The tiny model quantized to INT8 QDQ (QuantizeLinear/DequantizeLinear pairs around the MatMul) by
    ONNX Runtime's own quantization tool, calibrated on random inputs."""
    pytest.importorskip("onnxruntime.quantization")
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    path, _, _ = tiny_onnx
    rng = np.random.default_rng(2)

    class Samples(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"x": rng.standard_normal((1, 16)).astype(np.float32)} for _ in range(16)])

        def get_next(self):
            return next(self.items, None)

    out = tmp_path_factory.mktemp("qdq") / "tiny_qdq.onnx"
    quantize_static(str(path), str(out), Samples(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return out


def _optimized_ops(path, level: str, tmp_path) -> set[str]:
    """The operators ONNX Runtime's session runs for `path` at a graph optimisation level, read here from
    the optimized graph the session itself writes (independently of the workbench)."""
    import onnx
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                     "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    opts.optimized_model_filepath = str(tmp_path / f"opt-{level}.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return {n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node}


def test_a_qdq_model_reports_the_precision_its_session_ran(qdq_onnx, tiny_onnx, db, fast, tmp_path):
    import onnx

    assert {"QuantizeLinear", "DequantizeLinear", "MatMul"} <= {n.op_type for n in onnx.load(str(qdq_onnx)).graph.node}
    fused, unfused = _optimized_ops(qdq_onnx, "all", tmp_path), _optimized_ops(qdq_onnx, "basic", tmp_path)
    # What this ONNX Runtime does with the QDQ pairs: fused into integer MatMuls at full optimisation,
    # left as a float MatMul between Q/DQ at the basic level.
    expect = {"all": "i8" if {"QLinearMatMul", "MatMulInteger"} & fused and "MatMul" not in fused else "f32",
              "basic": "i8" if {"QLinearMatMul", "MatMulInteger"} & unfused and "MatMul" not in unfused else "f32"}
    assert expect == {"all": "i8", "basic": "f32"}, (fused, unfused)

    summary = run_sweep(qdq_onnx, SweepSpec(backends="onnxruntime", graph_optimizations="all,basic"), db, "qdq",
                        settings=fast)
    assert summary.ok == 2, summary.errors
    df = load_results(db, "qdq")
    stored = dict(zip(df.ort_graph_optimization, df.executed_precision))
    assert stored == expect
    # The float model runs in f32 at every level.
    run_sweep(tiny_onnx[0], SweepSpec(backends="onnxruntime", graph_optimizations="all"), db, "float", settings=fast)
    assert load_results(db, "float").executed_precision.tolist() == ["f32"]
