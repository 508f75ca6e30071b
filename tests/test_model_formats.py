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
    assert ("Runs on", f"ONNX Runtime only ({described.only_reason})") in described.facts()

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


def _vad_graph(state_dims):
    """output = input @ W + state[0] @ A + state[1] @ B + (sr == 16000), stateN = tanh(state): a
    voice-activity detector's inputs (audio, a recurrent state with its batch on axis 1, a sample rate)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w, a, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 4), (8, 4), (8, 4)))
    nodes = [helper.make_node("MatMul", ["input", "W"], ["xw"]),
             helper.make_node("Gather", ["state", "i0"], ["s0"], axis=0),
             helper.make_node("Gather", ["state", "i1"], ["s1"], axis=0),
             helper.make_node("MatMul", ["s0", "A"], ["sa"]), helper.make_node("MatMul", ["s1", "B"], ["sb"]),
             helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
             helper.make_node("Cast", ["is16k"], ["bias"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["xw", "sa"], ["t1"]), helper.make_node("Add", ["t1", "sb"], ["t2"]),
             helper.make_node("Add", ["t2", "bias"], ["output"]), helper.make_node("Tanh", ["state"], ["stateN"])]
    graph = helper.make_graph(
        nodes, "vad",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 16]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, state_dims),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, state_dims)],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(a, "A"), numpy_helper.from_array(b, "B"),
         numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array(1, np.int64), "i1"),
         numpy_helper.from_array(np.array(16000, np.int64), "sr16k")])
    return graph, (w, a, b)


@pytest.fixture(scope="module")
def vad_model(tmp_path_factory):
    onnx = pytest.importorskip("onnx")
    from onnx import helper

    graph, weights = _vad_graph([2, "N", 8])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("vad") / "vad.onnx"
    onnx.save(model, str(path))
    return path, weights


def test_a_state_input_with_its_batch_on_axis_1_is_profiled_at_batch_1_and_4(vad_model, db, fast):
    from wb_core.api import inspect_model, profile

    path, _ = vad_model
    described = inspect_model(path)
    specs = {s.name: s for s in described.inputs}
    assert specs["state"].batch_axis == 1 and specs["input"].batch_axis == 0 and specs["sr"].shape == ()
    assert specs["state"].describe() == "state: 2x?x8 float32 (batch on axis 1)"
    assert described.declared_values["sr"][0] == 16000
    summary = profile(path, spec=SweepSpec(backends="openvino,onnxruntime", batch_sizes="1,4"), db=db, study="vad",
                      settings=fast, return_frame=False)
    df = _frame(db, "vad")
    assert (df.status == "ok").all() and len(df) == 4, df.error.tolist()
    assert sorted(df[df.backend == "openvino"].batch_size.astype(int)) == [1, 4]
    notes = " ".join(map(str, summary.notes))
    assert "Input 'state' takes its batch on axis 1" in notes
    assert "Integer input 'sr' gets 16000" in notes


def _frame(db, study):
    from wb_core.store import load_results

    return load_results(db, study)


def test_data_naming_only_the_audio_fills_the_state_with_zeros_and_the_sample_rate_with_its_value(vad_model, db,
                                                                                                 fast, tmp_path):
    from wb_core.api import profile

    path, (w, _, _) = vad_model
    x = np.random.default_rng(2).standard_normal((10, 16)).astype(np.float32)
    # With the state at zeros and sr = 16000 the model gives x @ W + 1; any other state or rate differs.
    np.savez(tmp_path / "audio.npz", input=x, **{"ref.output": x @ w + 1.0})
    summary = profile(path, spec=SweepSpec(backends="openvino,onnxruntime", batch_sizes="1,4"), db=db, study="vad-data",
                      settings=fast, data=str(tmp_path / "audio.npz"), metric="max_abs", return_frame=False)
    df = _frame(db, "vad-data")
    assert (df.status == "ok").all() and len(df) == 4, df.error.tolist()
    assert (df.accuracy_metric == "max_abs vs reference").all()
    assert (df.accuracy < 1e-5).all(), df.accuracy.tolist()
    notes = " ".join(map(str, summary.notes))
    assert "no array for input 'state'" in notes and "filled with zeros" in notes
    assert "no array for input 'sr'" in notes and "filled with 16000" in notes


def test_a_layout_in_the_ir_or_given_by_the_user_places_the_batch(vad_model, tmp_path, db, fast):
    import openvino as ov

    from wb_core.api import InputOptions, inspect_model, profile

    path, _ = vad_model
    model = ov.Core().read_model(str(path))
    model.input("state").get_node().set_layout(ov.Layout("?N?"))
    ov.save_model(model, str(tmp_path / "vad.xml"), compress_to_fp16=False)
    described = inspect_model(tmp_path / "vad.xml")
    state = next(s for s in described.inputs if s.name == "state")
    assert state.batch_axis == 1 and "layout" in described.batch_axis_reasons["state"]

    assert InputOptions.parse(batch_axes=["state=CNH"]).batch_axes == {"state": 1}
    assert InputOptions.parse(batch_axes=["state=1,input=0"]).batch_axes == {"state": 1, "input": 0}
    # A state whose every dimension is dynamic shows no batch axis: the user's places it.
    onnx = pytest.importorskip("onnx")
    from onnx import helper

    graph, (w, a, b) = _vad_graph(["L", "N", "H"])
    open_path = tmp_path / "open.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(open_path))
    assert all(s.batch_axis == 0 for s in inspect_model(open_path).inputs)
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    st = np.random.default_rng(4).standard_normal((8, 2, 8)).astype(np.float32)  # one sample: [layers, hidden]
    expected = x @ w + st[:, 0] @ a + st[:, 1] @ b + 1.0
    np.savez(tmp_path / "both.npz", input=x, state=st, sr=np.full(8, 16000, np.int64), **{"ref.output": expected})
    df = profile(open_path, spec=SweepSpec(backends="onnxruntime", batch_sizes="4"), db=db, study="open",
                 settings=fast, inputs=InputOptions(batch_axes={"state": "CNH"}, shapes={"state": [2, -1, 8]}),
                 data=str(tmp_path / "both.npz"), metric="max_abs")
    assert (df.status == "ok").all(), df.error.tolist()
    assert float(df.accuracy.iloc[0]) < 1e-5


@pytest.fixture(scope="module")
def qdq_model(tmp_path_factory):
    """y = DQ(Q(x)) @ DQ(Wq): an ONNX model quantized beforehand, QuantizeLinear/DequantizeLinear pairs
    on its input and INT8 weights."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    w_scale = np.float32(np.abs(w).max() / 127)
    w_q = np.clip(np.round(w / w_scale), -127, 127).astype(np.int8)
    x_scale = np.float32(0.05)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["Wq", "ws"], ["Wd"]), helper.make_node("MatMul", ["xd", "Wd"], ["y"])]
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(np.array(x_scale), "xs"), numpy_helper.from_array(np.array(0, np.int8), "xz"),
         numpy_helper.from_array(w_q, "Wq"), numpy_helper.from_array(np.array(w_scale), "ws")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("qdq") / "qdq.onnx"
    onnx.save(model, str(path))
    return path, w_q.astype(np.float32) * w_scale, x_scale


def test_a_model_quantized_beforehand_is_said_so_and_gets_fp32_rows_from_its_float_graph(qdq_model, db, fast):
    from wb_core.api import inspect_model, profile

    path, w_float, x_scale = qdq_model
    described = inspect_model(path)
    assert described.quantized == "int8"
    assert ("Weights quantized already", "int8") in described.facts()

    summary = profile(path, spec=SweepSpec(batch_sizes="1,4"), db=db, study="qdq", settings=fast, return_frame=False)
    df = _frame(db, "qdq")
    assert (df.status == "ok").all(), df.error.tolist()
    assert sorted(zip(df.precision, df.batch_size.astype(int))) == [("fp32", 1), ("fp32", 4), ("int8", 1), ("int8", 4)]
    fp32, int8 = df[df.precision == "fp32"], df[df.precision == "int8"]
    assert (int8.variant_note == "INT8 model quantized beforehand").all()
    assert fp32.variant_note.str.contains("float graph of a model quantized beforehand: 1 quantizer").all()
    assert "holds INT8 weights already" in " ".join(map(str, summary.notes))
    # The FP32 rows ran the float graph: x @ the dequantized weights, with no rounding of x; the INT8 rows
    # ran the model as it is, whose input is rounded to steps of its scale.
    x = np.random.default_rng(5).standard_normal((6, 16)).astype(np.float32)
    (float_ir,), (as_is,) = set(fp32.variant_path), set(int8.variant_path)
    assert np.allclose(_ov_outputs(float_ir, x), x @ w_float, rtol=1e-5, atol=1e-5)
    rounded = np.clip(np.round(x / x_scale), -128, 127) * x_scale
    assert np.allclose(_ov_outputs(as_is, x), rounded @ w_float, rtol=1e-4, atol=1e-4)
    assert not np.allclose(_ov_outputs(as_is, x), x @ w_float, rtol=1e-5, atol=1e-5)


def test_the_batch_axis_flag_reaches_the_workers_and_static_state_samples_are_read(tmp_path):
    from typer.testing import CliRunner

    from wb_core.cli import app
    from wb_core.data import check_input
    from wb_core.model_inputs import InputSpec, guess_batch_axes
    from wb_core.store import load_results

    onnx = pytest.importorskip("onnx")
    from onnx import helper

    graph, _ = _vad_graph(["L", "N", "H"])  # no dimension shows the batch: the flag places it
    path = tmp_path / "open.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    db = tmp_path / "cli.db"
    res = CliRunner().invoke(app, ["profile", str(path), "--backend", "onnxruntime", "--batch", "1,4",
                                   "--batch-axis", "state=CNH", "--shape", "state=2x1x8", "--db", str(db),
                                   "--study", "cli", "--max-time", "0.3", "--warmup", "0.05", "--window", "0.1",
                                   "--tolerance", "0.5"])
    assert res.exit_code == 0, res.output
    df = load_results(db, "cli")
    assert (df.status == "ok").all() and sorted(df.batch_size.astype(int)) == [1, 4], df.error.tolist()
    bad = CliRunner().invoke(app, ["profile", str(path), "--backend", "onnxruntime", "--batch-axis", "state=HW",
                                   "--db", str(db)])
    assert bad.exit_code != 0 and "with one N for the batch" in str(bad.exception)  # `wb` prints it as one line

    # silero's OpenVINO-ready export: every shape static, the state 2x1x128 beside an input of batch 1.
    specs = [InputSpec("input", (1, 512), "float32"), InputSpec("state", (2, 1, 128), "float32")]
    assert guess_batch_axes(specs)["state"][0] == 1
    state = InputSpec("state", (2, 1, 128), "float32", batch_axis=1)
    for samples in (np.zeros((3, 2, 1, 128), np.float32), np.zeros((3, 2, 128), np.float32)):
        assert check_input(samples, state).shape == (3, 2, 128)
