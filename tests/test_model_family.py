"""One reading of a model's family, in every face: the description (`wb inspect`), the profile's
stored rows and the INT8 recipe the planner starts with.

The graphs are built here: an IR holding OpenVINO's fused ScaledDotProductAttention (what the
converter makes of an exported attention block), an ONNX block written out as MatMul -> Softmax ->
MatMul with a LayerNormalization (the converted IR holds a ScaledDotProductAttention instead: the
reading before conversion and the IR NNCF quantizes must agree), a hybrid convolution + attention
model (MobileViT-like), and a plain CNN.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from wb_core.cli.app import app
from wb_core.variants import quantize as quantize_module
from wb_core.variants.description import _DESCRIBED, describe_model

S, D = 8, 16
RNG = np.random.default_rng(0)


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.2).astype(np.float32)


def sdpa_ir(folder):
    """x [1, S, D] -> MVN -> q, k, v projections -> ScaledDotProductAttention -> + x."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, S, D], ov.Type.f32, name="x")
    n = ops.mvn(x, ops.constant(np.array([-1], np.int64)), True, 1e-5, "inside_sqrt")
    q, k, v = (ops.matmul(n, ops.constant(_w(D, D)), False, False) for _ in range(3))
    y = ops.add(ops.scaled_dot_product_attention(q, k, v, causal=False), x)
    y.output(0).get_tensor().set_names({"y"})
    path = folder / "sdpa.xml"
    ov.save_model(ov.Model([ops.result(y)], [x], "sdpa"), path, compress_to_fp16=False)
    return path


def _attention_nodes(h, src: str, prefix: str = "") -> list:
    """LayerNormalization, q/k/v MatMuls, MatMul -> Mul -> Softmax -> MatMul, residual Add: `src` -> `{p}y`."""
    p = prefix
    return [h.make_node("LayerNormalization", [src, f"{p}g", f"{p}b"], [f"{p}n"], axis=-1),
            *[h.make_node("MatMul", [f"{p}n", f"{p}W{c}"], [f"{p}{c}"]) for c in "qkv"],
            h.make_node("Transpose", [f"{p}k"], [f"{p}kt"], perm=[0, 2, 1]),
            h.make_node("MatMul", [f"{p}q", f"{p}kt"], [f"{p}s"]),
            h.make_node("Mul", [f"{p}s", f"{p}scale"], [f"{p}ss"]),
            h.make_node("Softmax", [f"{p}ss"], [f"{p}p"], axis=-1),
            h.make_node("MatMul", [f"{p}p", f"{p}v"], [f"{p}o"]),
            h.make_node("Add", [f"{p}o", src], [f"{p}y"])]


def _attention_weights(nh, prefix: str = "") -> list:
    p = prefix
    return [*[nh.from_array(_w(D, D), f"{p}W{c}") for c in "qkv"],
            nh.from_array(np.ones(D, np.float32), f"{p}g"), nh.from_array(np.zeros(D, np.float32), f"{p}b"),
            nh.from_array(np.array(1 / np.sqrt(D), np.float32), f"{p}scale")]


def _save_onnx(path, nodes, inputs, outputs, inits):
    import onnx
    from onnx import helper as h

    model = h.make_model(h.make_graph(nodes, path.stem, inputs, outputs, inits),
                         opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def attention_onnx(folder):
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    return _save_onnx(folder / "attention.onnx", _attention_nodes(h, "x"),
                      [h.make_tensor_value_info("x", T.FLOAT, [1, S, D])],
                      [h.make_tensor_value_info("y", T.FLOAT, [1, S, D])], _attention_weights(nh))


def hybrid_onnx(folder):
    """Image [1, 3, 8, 8] -> Conv (D channels) -> Relu -> Conv -> tokens [1, 16, D] -> attention."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("Conv", ["image", "C1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "C2"], ["c2"], strides=[2, 2]),
             h.make_node("Reshape", ["c2", "flat"], ["f"]), h.make_node("Transpose", ["f"], ["tokens"], perm=[0, 2, 1]),
             *_attention_nodes(h, "tokens", "a_")]
    inits = [nh.from_array(_w(D, 3, 3, 3), "C1"), nh.from_array(_w(D, D, 2, 2), "C2"),
             nh.from_array(np.array([1, D, 16], np.int64), "flat"), *_attention_weights(nh, "a_")]
    return _save_onnx(folder / "hybrid.onnx", nodes, [h.make_tensor_value_info("image", T.FLOAT, [1, 3, 8, 8])],
                      [h.make_tensor_value_info("a_y", T.FLOAT, [1, 16, D])], inits)


def cnn_onnx(folder):
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("Conv", ["image", "C1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "C2"], ["out"], pads=[1, 1, 1, 1])]
    return _save_onnx(folder / "cnn.onnx", nodes, [h.make_tensor_value_info("image", T.FLOAT, [1, 3, 8, 8])],
                      [h.make_tensor_value_info("out", T.FLOAT, [1, 4, 8, 8])],
                      [nh.from_array(_w(8, 3, 3, 3), "C1"), nh.from_array(_w(4, 8, 3, 3), "C2")])


# model builder, family, first recipe, words the reason must hold
CASES = {
    "sdpa-ir": (sdpa_ir, "transformer", "transformer", ("1 attention block (ScaledDotProductAttention)",
                                                        "1 layer normalisation")),
    "attention-onnx": (attention_onnx, "transformer", "transformer", ("1 attention block (MatMul, Softmax, MatMul)",
                                                                      "1 layer normalisation")),
    "hybrid-onnx": (hybrid_onnx, "transformer", "transformer", ("hybrid CNN-transformer", "2 convolutions")),
    "cnn-onnx": (cnn_onnx, "cnn", "cnn", ("2 convolutions, no attention blocks",)),
}


def _ov_op_types(path) -> set[str]:
    import openvino as ov

    return {op.get_type_name() for op in ov.Core().read_model(str(path)).get_ops()}


@pytest.mark.parametrize("case", list(CASES))
def test_the_description_and_wb_inspect_read_the_family(case, tmp_path):
    build, family, _, words = CASES[case]
    path = build(tmp_path)
    ops = _ov_op_types(path)  # the test's own look at the graph, as OpenVINO reads it
    assert ("ScaledDotProductAttention" in ops) == (case == "sdpa-ir")
    assert ("Convolution" in ops) == (case in ("hybrid-onnx", "cnn-onnx"))
    d = describe_model(path)
    assert d.family == family, d.family_reason
    for w in words:
        assert w in d.family_reason
    res = CliRunner().invoke(app, ["inspect", str(path)])
    assert res.exit_code == 0, res.output
    assert f"Family:      {family} ({d.family_reason})" in res.output


def test_a_converted_attention_block_is_fused_and_still_read_as_a_transformer(tmp_path):
    """OpenVINO's converter fuses MatMul -> Softmax -> MatMul into ScaledDotProductAttention: the IR NNCF
    quantizes has no Softmax left, and its family is the ONNX file's."""
    from wb_core.variants.convert import ensure_ir, ir_facts
    from wb_core.variants.family import detect_family

    path = attention_onnx(tmp_path)
    ir = ensure_ir(path)
    ops = _ov_op_types(ir)
    assert "ScaledDotProductAttention" in ops and "Softmax" not in ops
    import openvino as ov

    assert detect_family(ov.Core().read_model(str(ir))).name == "transformer"
    assert ir_facts(ir)["family"] == describe_model(path).family == "transformer"


@pytest.mark.parametrize("case", [c if c == "attention-onnx" else pytest.param(c, marks=pytest.mark.slow)
                                  for c in CASES])
def test_the_profile_and_the_int8_recipe_follow_the_description(case, tmp_path, db, fast, monkeypatch):
    """INT8 starts with the family's recipe, and the stored rows say the description's words; the
    quantizing worker is told the family (it does not read the model again)."""
    from wb_core.api import profile
    from wb_core.store import load_results

    build, family, recipe, _ = CASES[case]
    path = build(tmp_path)
    d = describe_model(path)
    shape = tuple(d.inputs[0].shape)
    data = tmp_path / "data.npz"
    np.savez(data, x=RNG.standard_normal((16,) + shape[1:]).astype(np.float32))
    tasks = []
    real = quantize_module.run_task

    def recording(task, **kw):
        tasks.append(task)
        return real(task, **kw)

    monkeypatch.setattr(quantize_module, "run_task", recording)
    monkeypatch.setenv("WB_CACHE_DIR", str(tmp_path / "cache"))  # INT8 is built here, not found from an earlier run
    profile(path, db=db, study="fam", precisions="int8", batch_sizes="1", threads="1", settings=fast,
            data=str(data), subset_size=16, guard="off")
    row = load_results(db, "fam").iloc[0]
    assert row["status"] == "ok", row.get("error")
    quantizing = [t for t in tasks if t["task"].endswith(":task_quantize")]
    assert quantizing and quantizing[0]["recipe"] == recipe and quantizing[0]["family"] == family
    assert row["model_family"] == family and row["quant_recipe"] == recipe
    assert row["quant_recipe_reason"].startswith(f"Read as a {family} model ({d.family_reason})")
    assert json.loads(row["quant_attempts"])[0]["recipe"] == recipe


def test_a_description_is_read_again_only_when_the_content_changes(tmp_path):
    _DESCRIBED.clear()
    path = cnn_onnx(tmp_path)
    first = describe_model(path)
    assert describe_model(path) is first
    attention_onnx(tmp_path).replace(path)  # another model under the same name
    assert describe_model(path).family == "transformer"
