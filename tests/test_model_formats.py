"""Model formats and inputs that real models have, on models built here.

- a TensorFlow Lite file written by TensorFlow's own converter, profiled on OpenVINO, whose FP32
  outputs equal TensorFlow Lite's interpreter;
- an ONNX model with an `ai.onnx.ml` operator that only ONNX Runtime runs: described by the onnx
  library, profiled on ONNX Runtime, its OpenVINO points skipped with a sentence;
- a recurrent `state` input whose batch is on axis 1 (as silero-vad's), with a sample-rate scalar:
  profiled at batch 1 and 4, the state filled with zeros when the data names only the audio;
- an ONNX model quantized beforehand (QuantizeLinear/DequantizeLinear): recognised and said so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from wb_core.config import SweepSpec

# Written by TensorFlow's converter in a child process (TensorFlow stays out of the test process);
# the interpreter's own outputs on fixed inputs are saved beside the file.
_TFLITE_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, tensorflow as tf, keras
    out = sys.argv[1]
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(5)])
    open(out + "/tiny.tflite", "wb").write(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    x = np.random.default_rng(0).random((6, 8, 8, 3), dtype=np.float32)
    it = tf.lite.Interpreter(out + "/tiny.tflite")
    inp, outp = it.get_input_details()[0], it.get_output_details()[0]
    it.resize_tensor_input(inp["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(inp["index"], x)
    it.invoke()
    np.savez(out + "/expected.npz", x=x, y=it.get_tensor(outp["index"]), keras=model(x).numpy())
""")


@pytest.fixture(scope="session")
def tiny_tflite(tmp_path_factory) -> tuple[Path, dict]:
    pytest.importorskip("tensorflow")
    folder = tmp_path_factory.mktemp("tflite")
    subprocess.run([sys.executable, "-c", _TFLITE_SCRIPT, str(folder)], check=True, capture_output=True, timeout=300)
    with np.load(folder / "expected.npz") as f:
        return folder / "tiny.tflite", {k: f[k] for k in f.files}


def _ov_outputs(model_path, x: np.ndarray) -> np.ndarray:
    import openvino as ov

    compiled = ov.Core().compile_model(str(model_path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return np.asarray(compiled(x)[0])


def test_a_tflite_model_is_described_profiled_and_equals_tflite_own_interpreter(tiny_tflite, db, fast):
    from wb_core.api import inspect_model, profile

    path, expected = tiny_tflite
    assert np.allclose(expected["y"], expected["keras"], atol=1e-5)  # the file is the Keras model
    described = inspect_model(path)
    assert described.format == "tflite"
    (spec,) = described.inputs
    assert spec.shape[1:] == (8, 8, 3) and spec.dtype == "float32"

    df = profile(path, spec=SweepSpec(batch_sizes="1,4"), db=db, study="tflite", settings=fast)
    assert (df.status == "ok").all(), df.error.tolist()
    assert sorted(df.batch_size.astype(int)) == [1, 4]
    assert set(df.variant) == {"fp32-ir"} and set(df.executed_precision) == {"f32"}
    # The IR the study measured gives what TensorFlow Lite's interpreter gives, sample for sample.
    (variant,) = set(df.variant_path)
    ours = _ov_outputs(variant, expected["x"])
    assert ours.shape == expected["y"].shape
    assert np.allclose(ours, expected["y"], rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def onnx_ml_model(tmp_path_factory):
    """y = ((x - offset) * scale) @ W: the scaling is `ai.onnx.ml` Scaler, which OpenVINO does not convert."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    offset, scale = [0.5, -1.0, 0.25, 2.0], [2.0, 0.5, 4.0, 1.0]
    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml", offset=offset, scale=scale),
         helper.make_node("MatMul", ["s", "W"], ["y"])], "ml",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
                              ir_version=8)
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("onnxml") / "scaled.onnx"
    onnx.save(model, str(path))

    def expected(x):
        return ((x - np.float32(offset)) * np.float32(scale)) @ w

    return path, expected


def test_a_model_only_onnxruntime_reads_is_described_and_runs_there_with_openvino_skipped(onnx_ml_model, db, fast,
                                                                                          tmp_path):
    from wb_core.api import inspect_model, profile

    path, expected = onnx_ml_model
    described = inspect_model(path)
    assert described.only_backends == ("onnxruntime",)
    assert "ai.onnx.ml.Scaler" in described.only_reason
    assert [s.describe() for s in described.inputs] == ["x: ?x4 float32"] and described.outputs == ("y",)
    assert described.quantized is None
    assert ("Runs on", f"onnxruntime only ({described.only_reason})") in described.facts()

    x = np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x, **{"ref.y": expected(x)})
    df = profile(path, spec=SweepSpec(backends="openvino,onnxruntime", precisions="fp32,int8", batch_sizes="1,4"),
                 db=db, study="ml", settings=fast, data=str(tmp_path / "data.npz"), metric="max_abs")
    ort, ov = df[df.backend == "onnxruntime"], df[df.backend == "openvino"]
    fp32 = ort[ort.precision == "fp32"]
    assert (fp32.status == "ok").all() and sorted(fp32.batch_size.astype(int)) == [1, 4], fp32.error.tolist()
    # ONNX Runtime's outputs on the data are numpy's, to float rounding.
    assert (fp32.accuracy < 1e-5).all() and (fp32.accuracy_metric == "max_abs vs reference").all()
    assert len(ov) == 4 and (ov.status == "skipped").all()
    assert ov.error.str.contains("OpenVINO skipped").all() and ov.error.str.contains("ai.onnx.ml.Scaler").all()
    assert ov.error.str.contains("profile it with ONNX Runtime").all()
    int8 = ort[ort.precision == "int8"]
    assert (int8.status == "skipped").all() and int8.error.str.contains("OpenVINO IR made by NNCF").all()
