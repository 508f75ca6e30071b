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
