"""Triton export of a model whose batch is not on axis 0 (a recurrent state [layers, batch, hidden]):
max_batch_size 0, dims with each tensor's full shape, no dynamic batching; checked against the
real tritonserver the export tests use."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from analysis_data import HARDWARE, run
from test_export_servers import (  # noqa: F401  (the triton fixture)
    _copy_ir,
    _errors_by_model,
    _run_to_exit,
    _write,
    triton,
    verdict,
)
from wb_core.export import render
from wb_core.export.deployment import build
from wb_core.export.triton import render_python
from wb_core.export.tritonserver import TritonServer

BATCH = 4


@pytest.fixture(scope="module")
def state_ir(tmp_path_factory) -> Path:
    """x [N, 4] and state [2, N, 3] -> y = relu(x @ W) + state[0] [N, 3], state_out = 2 * state."""
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([-1, 4], np.float32, name="x")
    state = ops.parameter([2, -1, 3], np.float32, name="state")
    w = ops.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0)
    first = ops.squeeze(ops.gather(state, ops.constant(np.array([0], np.int64)), ops.constant(np.int64(0))),
                        ops.constant(np.array([0], np.int64)))
    y = ops.add(ops.relu(ops.matmul(x, w, False, False)), first)
    out = ops.multiply(state, ops.constant(np.float32(2.0)))
    y.output(0).get_tensor().set_names({"y"})
    out.output(0).get_tensor().set_names({"state_out"})
    path = tmp_path_factory.mktemp("ir") / "model.xml"
    ov.save_model(ov.Model([y, out], [x, state], "stateful"), str(path), compress_to_fp16=False)
    return path


def _dep(ir: Path, name: str, batch: int = BATCH, state_axis: int = 1):
    r = run(batch=batch, cores=[0], threads=1, ov_properties={"INFERENCE_PRECISION_HINT": "f32",
                                                              "INFERENCE_NUM_THREADS": "1"})
    state = {"name": "state", "shape": [2, -1, 3], "dtype": "float32"}
    if state_axis:
        state["batch_axis"] = state_axis
    study = {"name": "t", "model_path": "/zoo/stateful/model.onnx", "model_format": "onnx", "model_fingerprint": "fp",
             "hardware": HARDWARE, "hardware_fingerprint": "hw", "versions": {"openvino": "2026.4.1"},
             "inputs": [{"name": "x", "shape": [-1, 4], "dtype": "float32"}, state]}
    dep = build(study, r, ir_path=str(ir))
    dep.model.name = name
    return dep


def _block(pbtxt: str, name: str) -> str:
    m = re.search(r'\{\s*name: "' + name + r'"[^}]*\}', pbtxt)
    assert m, pbtxt
    return m.group(0)


def test_an_off_axis_batch_gives_max_batch_size_0_and_full_dims(state_ir):
    res = render(_dep(state_ir, "stateful"), "triton")
    pbtxt = res.files["model_repository/stateful/config.pbtxt"]
    assert "max_batch_size: 0" in pbtxt
    assert "dims: [ -1, 4 ]" in _block(pbtxt, "x") and "dims: [ 2, -1, 3 ]" in _block(pbtxt, "state")
    assert "dims: [ -1, 3 ]" in _block(pbtxt, "y") and "dims: [ 2, -1, 3 ]" in _block(pbtxt, "state_out")
    assert "dynamic_batching" not in pbtxt and "ENABLE_BATCH_PADDING" not in pbtxt
    notes = " ".join(res.notes)
    assert "input 'state' carries its batch on axis 1" in notes and f"a whole batch of {BATCH}" in notes
    # The same model with its batch on axis 0 everywhere keeps Triton's batching.
    plain = render(_dep(state_ir, "plain", state_axis=0), "triton").files["model_repository/plain/config.pbtxt"]
    assert f"max_batch_size: {BATCH}" in plain and "dims: [ 4 ]" in _block(plain, "x")
    assert "dynamic_batching" in plain and "ENABLE_BATCH_PADDING" in plain


def test_tritonserver_takes_the_off_axis_export_and_answers_a_whole_batch(triton, state_ir, tmp_path):  # noqa: F811
    import openvino as ov
    import tritonclient.grpc as grpcclient

    base, repo = tmp_path / "export", tmp_path / "export" / "model_repository"
    _write(render(_dep(state_ir, "stateful"), "triton"), base)
    _copy_ir(state_ir, repo / "stateful" / "1")
    errors = _errors_by_model(_run_to_exit(TritonServer(repo, triton, [], workdir=tmp_path / "s1")))
    assert verdict(errors["stateful"]) == "backend missing", errors  # config accepted; no openvino backend here

    py = tmp_path / "py"
    dep = _dep(state_ir, "statefulpy")
    _write(render_python(dep, {"x": [BATCH, 4], "state": [2, BATCH, 3]}), py)
    _copy_ir(state_ir, py / "model_repository" / "statefulpy" / "1")
    x = np.random.default_rng(0).random((BATCH, 4), dtype=np.float32)
    s = np.random.default_rng(1).random((2, BATCH, 3), dtype=np.float32)
    with TritonServer(py / "model_repository", triton, [], workdir=tmp_path / "s2") as server:
        server.wait_ready("statefulpy", timeout_s=120)
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        inputs = []
        for name, a in (("x", x), ("state", s)):
            inputs.append(grpcclient.InferInput(name, list(a.shape), "FP32"))
            inputs[-1].set_data_from_numpy(a)
        result = client.infer("statefulpy", inputs)
    want = ov.Core().compile_model(str(state_ir), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([x, s])
    np.testing.assert_allclose(result.as_numpy("y"), want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.as_numpy("state_out"), want[1], rtol=1e-5, atol=1e-5)
    assert result.as_numpy("state_out").shape == (2, BATCH, 3)
