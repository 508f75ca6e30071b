"""The accuracy guard, model families and INT8 recipes, on models built here.

The expected accuracies are computed in the tests themselves: OpenVINO runs the FP32 and the
stored INT8 IRs on the same inputs and numpy takes the cosine, or NNCF is called directly with
the plain recipe. The workbench's own numbers are checked against those.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from wb_core.cli import app
from wb_core.config import InputOptions, SweepSpec
from wb_core.errors import ConfigError
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.variants.guard import Guard
from wb_core.variants.planner import PrecisionOptions

SEQ, N, VOCAB = 32, 96, 1000
OUT = "sentence_embedding"
TEXT = InputOptions(dynamic_size=SEQ)


@pytest.fixture(scope="module")
def outlier_encoder(tmp_path_factory):
    """A 2-layer encoder whose normalised activations have two channels 30x the others, as trained
    transformers have, and padded token data for it (lengths 4..32)."""
    from wb_core.demo import build_text_encoder

    d = tmp_path_factory.mktemp("outliers")
    model = build_text_encoder(d / "enc.xml", vocab=VOCAB, hidden=64, layers=2, ffn=256, outlier_scale=30.0)
    rng = np.random.default_rng(0)
    lengths = rng.integers(4, SEQ + 1, size=N)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int64)
    feeds = {"input_ids": rng.integers(1, VOCAB, size=(N, SEQ)) * mask, "attention_mask": mask,
             "token_type_ids": np.zeros((N, SEQ), np.int64)}
    np.savez(d / "data.npz", **feeds)
    return model, d / "data.npz", feeds


def _outputs(xml, feeds) -> np.ndarray:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return np.concatenate([compiled({k: v[i:i + 1] for k, v in feeds.items()})[OUT] for i in range(N)])


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).mean())


def _plain_nncf_cosine(xml, feeds) -> float:
    """The cosine to FP32 of NNCF's plain (default) quantization, called here directly."""
    import nncf
    import openvino as ov

    core = ov.Core()
    items = [{k: v[i:i + 1] for k, v in feeds.items()} for i in range(N)]
    quantized = nncf.quantize(core.read_model(str(xml)), nncf.Dataset(items), subset_size=N)
    compiled = core.compile_model(quantized, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    plain = np.concatenate([compiled(it)[OUT] for it in items])
    return _cosine(plain, _outputs(xml, feeds))


# ---- model families ----

def test_family_of_a_cnn_a_transformer_and_an_mlp(lenet_ir, outlier_encoder, tmp_path):
    import openvino as ov
    import openvino.opset13 as ops

    from wb_core.variants.family import detect_family

    core = ov.Core()
    cnn = detect_family(core.read_model(str(lenet_ir)))
    assert cnn.name == "cnn" and cnn.convolutions >= 2 and cnn.attention == 0
    enc = detect_family(core.read_model(str(outlier_encoder[0])))
    # two layers: two MatMul -> Softmax -> MatMul blocks, five MVNs, two embedding tables
    assert (enc.name, enc.attention, enc.norms, enc.embeddings) == ("transformer", 2, 5, 2)
    assert "2 attention blocks" in enc.reason
    x = ops.parameter([-1, 16], ov.Type.f32, name="x")
    h = ops.relu(ops.matmul(x, ops.constant(np.ones((16, 8), np.float32)), False, False))
    mlp = detect_family(ov.Model([ops.result(ops.softmax(h, -1))], [x], "mlp"))
    assert mlp.name == "other" and mlp.attention == 0  # a Softmax with no MatMul after it is no attention
    # attention with a LayerNorm written out in ops (as exporters often leave it), float inputs, no embedding
    axis = ops.constant(np.array([-1], np.int64))
    x = ops.parameter([-1, 8, 16], ov.Type.f32, name="x")
    centred = ops.subtract(x, ops.reduce_mean(x, axis, True))
    var = ops.reduce_mean(ops.power(centred, ops.constant(np.float32(2.0))), axis, True)
    h = ops.divide(centred, ops.sqrt(ops.add(var, ops.constant(np.float32(1e-5)))))
    w = ops.constant(np.ones((16, 16), np.float32))
    scores = ops.softmax(ops.matmul(ops.matmul(h, w, False, False), h, False, True), -1)
    attn = detect_family(ov.Model([ops.result(ops.matmul(scores, h, False, False))], [x], "attn"))
    assert (attn.name, attn.attention, attn.norms) == ("transformer", 1, 1)


# ---- the guard's rules ----

def test_guard_limits_and_words():
    g = Guard()
    assert g.limit_for("cosine vs fp32") == 0.01 and g.limit_for("top1") == 0.01 and g.limit_for("mse") is None
    failed = g.judge("cosine vs fp32", "int8", 1.0, 0.081, 0.919)
    assert failed["accuracy_guard"] == "failed"
    assert "INT8 has a cosine similarity to FP32 of 0.081" in failed["accuracy_guard_note"]
    assert "at least 0.99" in failed["accuracy_guard_note"]
    passed = g.judge("top1", "bf16", 0.962, 0.955, 0.007)
    assert passed["accuracy_guard"] == "passed" and "top-1 accuracy 95.5% (FP32 96.2%)" in passed["accuracy_guard_note"]
    assert g.judge("top1", "int8", 0.962, 0.950, 0.012)["accuracy_guard"] == "failed"  # 1.2 points > 1 point
    assert Guard("0.05").limit_for("mse") == 0.05
    assert Guard("off").judge("cosine", "int8", 1, 0, 1)["accuracy_guard"] == "off"


@pytest.mark.parametrize("limit, words", [(0, "above 0"), (-1, "above 0"), ("nan", "above 0"),
                                          ("strict", "takes a number"), (float("inf"), "above 0")])
def test_bad_guard_limits_are_one_sentence(limit, words):
    with pytest.raises(ConfigError, match=words):
        PrecisionOptions(guard=limit)


def test_a_guard_that_guards_nothing_and_unknown_recipes_are_refused(db, lenet_ir_copy):
    with pytest.raises(ConfigError, match="lets any cosine pass"):
        PrecisionOptions(metric="cosine", guard=1.5)
    with pytest.raises(ConfigError, match="Unknown INT8 recipe 'fast'"):
        PrecisionOptions(int8_recipe="fast")
    with pytest.raises(ConfigError, match="time budget"):
        PrecisionOptions(fallback_budget_s=-5)
    res = CliRunner().invoke(app, ["profile", str(lenet_ir_copy), "--accuracy-guard", "0", "--db", str(db), "-q"])
    assert res.exit_code != 0 and isinstance(res.exception, ConfigError) and "above 0" in str(res.exception)
    assert not db.exists() or load_results(db, "lenet").empty  # nothing stored


# ---- recipes and fallbacks end to end ----

@pytest.mark.slow  # long; `make test-all` runs it
def test_plain_int8_fails_the_guard_and_the_transformer_recipe_passes(outlier_encoder, db, fast):
    model, data, feeds = outlier_encoder
    plain = _plain_nncf_cosine(model, feeds)
    assert plain < 0.995  # NNCF's plain recipe loses the small channels beside the outliers
    s = run_sweep(model, SweepSpec(precisions="fp32,int8"), db, "enc", settings=fast, inputs=TEXT,
                  precision=PrecisionOptions(data=str(data), output=OUT, guard=0.005, int8_recipe="default",
                                             subset_size=N))
    assert s.ok == 2, s.errors
    row = load_results(db, "enc").set_index("precision").loc["int8"]
    attempts = json.loads(row["quant_attempts"])
    assert [a["recipe"] for a in attempts] == ["default", "transformer"]
    assert attempts[0]["passed"] is False and attempts[1]["passed"] is True
    assert attempts[0]["accuracy"] == pytest.approx(plain, abs=2e-3)  # the workbench measured what NNCF gives
    assert row["quant_recipe"] == "transformer" and row["model_family"] == "transformer"
    assert "default failed" in row["quant_recipe_reason"]
    # the chosen IR, run here: its cosine to FP32 is what the store says, and within the guard
    independent = _cosine(_outputs(row["variant_path"], feeds), _outputs(model, feeds))
    assert independent >= 0.995
    assert row["accuracy"] == pytest.approx(independent, abs=1e-3)
    assert row["accuracy_guard"] == "passed" and row["accuracy_metric"] == "cosine vs fp32"


def test_the_text_demo_gets_the_transformer_recipe_and_keeps_its_embeddings(db, fast):
    """The text demo on its own sample text: INT8 by the transformer recipe, cosine to FP32 at least
    0.99, recomputed here with the tokenizer library and OpenVINO on the stored IRs."""
    import openvino as ov
    from tokenizers import Tokenizer

    from wb_core.api import profile
    from wb_core.demo_catalog import demo_sample_text

    summary = profile("text-encoder", db=db, study="demo", precisions="fp32,int8", seq_lens="32", settings=fast,
                      output=OUT, return_frame=False)
    assert summary.ok == 2, summary.errors
    rows = load_results(db, "demo").set_index("precision")
    assert rows.loc["int8", "quant_recipe"] == "transformer"
    assert "Read as a transformer model (2 attention blocks" in rows.loc["int8", "quant_recipe_reason"]
    sample, tokenizer = demo_sample_text("text-encoder")
    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(32)
    tok.enable_padding(length=32)
    enc = tok.encode_batch([line for line in sample.read_text().splitlines() if line.strip()])
    feeds = {"input_ids": np.array([e.ids for e in enc], np.int64),
             "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
             "token_type_ids": np.array([e.type_ids for e in enc], np.int64)}
    core = ov.Core()
    outs = {}
    for prec in ("fp32", "int8"):
        compiled = core.compile_model(core.read_model(rows.loc[prec, "variant_path"]), "CPU",
                                      {"INFERENCE_PRECISION_HINT": "f32"})
        outs[prec] = compiled(feeds)[OUT]
    independent = _cosine(outs["int8"], outs["fp32"])
    assert independent >= 0.99
    assert rows.loc["int8", "accuracy"] == pytest.approx(independent, abs=1e-3)
    assert rows.loc["int8", "accuracy_guard"] == "passed"


def test_a_variant_below_the_guard_is_marked_and_the_summary_says_why(outlier_encoder, db, fast):
    """A guard no recipe can meet and no time for fallbacks: INT8 stays measured, marked failed."""
    model, data, _ = outlier_encoder
    s = run_sweep(model, SweepSpec(precisions="fp32,int8"), db, "strict", settings=fast, inputs=TEXT,
                  precision=PrecisionOptions(data=str(data), output=OUT, guard=1e-7, fallback_budget_s=0,
                                             subset_size=N))
    assert s.ok == 2, s.errors
    rows = load_results(db, "strict").set_index("precision")
    assert rows.loc["int8", "accuracy_guard"] == "failed"
    assert "misses the accuracy guard" in rows.loc["int8", "accuracy_guard_note"]
    assert rows.loc["int8", "throughput"] > 0  # measured all the same: nothing is lost
    notes = " ".join(s.notes)
    assert "stopped at their time budget (0 s)" in notes and "never recommended" in notes
    from wb_core.report import build_report

    html = build_report(db, "strict")
    assert "1 variant failed the accuracy guard" in html and "INT8 has a cosine similarity to FP32" in html
    from wb_core.analysis.recommend import recommend

    frame = load_results(db, "strict")
    assert frame.set_index("precision").loc["int8", "throughput"] > 0
    rec = recommend(frame)
    assert rec.best["precision"] == "fp32"  # INT8 is left out whatever its speed
    assert any("INT8" in n and "accuracy guard" in n for n in rec.notes), rec.notes
    res = CliRunner().invoke(app, ["recommend", "--db", str(db), "--study", "strict"])
    assert res.exit_code == 0 and "INT8" in res.output and "accuracy guard" in res.output, res.output


def test_the_cnn_demo_int8_keeps_top1_within_one_point(lenet_dir, lenet_ir_copy, db, fast):
    """LeNet on digits: INT8 top-1 against the labels, recomputed here from the stored IR."""
    import openvino as ov

    s = run_sweep(lenet_ir_copy, SweepSpec(precisions="fp32,int8"), db, "cnn", settings=fast,
                  precision=PrecisionOptions(data=str(lenet_dir / "data.npz")))
    assert s.ok == 2, s.errors
    rows = load_results(db, "cnn").set_index("precision")
    assert rows.loc["int8", "quant_recipe"] == "cnn" and rows.loc["int8", "accuracy_guard"] == "passed"
    with np.load(lenet_dir / "data.npz") as f:
        x, y = f["x"], f["y"]
    core = ov.Core()
    top1 = {}
    for prec in ("fp32", "int8"):
        path = rows.loc[prec, "variant_path"]
        compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        top1[prec] = float(np.mean(np.concatenate([compiled(x[i:i + 1])[0].argmax(1) for i in range(len(x))]) == y))
    assert top1["fp32"] - top1["int8"] <= 0.01
    assert rows.loc["int8", "accuracy"] == pytest.approx(top1["int8"], abs=0.006)


@pytest.mark.slow
def test_mixed_precision_keeps_the_most_sensitive_layers_in_fp32(outlier_encoder, db, fast):
    model, data, feeds = outlier_encoder
    s = run_sweep(model, SweepSpec(precisions="int8"), db, "mixed", settings=fast, inputs=TEXT,
                  precision=PrecisionOptions(data=str(data), output=OUT, guard=0.0015, int8_recipe="mixed-precision",
                                             subset_size=N))
    assert s.ok == 1, s.errors
    row = load_results(db, "mixed").iloc[0]
    assert row["variant"] == "int8-mixed" and row["quant_fp32_layers"]
    independent = _cosine(_outputs(row["variant_path"], feeds), _outputs(model, feeds))
    assert independent >= 1 - 0.0015
    assert row["accuracy_guard"] == "passed"
