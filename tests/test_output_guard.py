"""The accuracy guard reads what each output means: a detection head's scores apart from its boxes,
a CTC head's decoded text, a classifier's top class, and a user's own metric; and accuracy is
measured batch by batch, in bounded memory.

Each model is an ONNX graph built here and run by OpenVINO. The broken "INT8" variant is the same
graph with its weights moved (given to the study as its INT8 file, so the guard judges exactly
that); the expected figures are computed here with numpy from OpenVINO's outputs of both graphs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

from wb_core.config import SweepSpec
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.variants.planner import PrecisionOptions

N = 64


def _save_onnx(path, nodes, inputs, outputs, weights: dict):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, path.stem,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), name=k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _run(path, x: np.ndarray, output: str) -> np.ndarray:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return np.concatenate([compiled(x[i:i + 1])[output] for i in range(len(x))]).astype(np.float64)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    return float(np.mean((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))


def _profile(model, broken, data, db, study, fast, **options):
    """FP32 and the given 'INT8' file, profiled and judged; the INT8 row of the store."""
    s = run_sweep(model, SweepSpec(precisions="fp32,int8"), db, study, settings=fast,
                  precision=PrecisionOptions(data=str(data), variants={"openvino/int8": str(broken)}, **options))
    assert s.ok == 2, s.errors
    return load_results(db, study).set_index("precision").loc["int8"], s


def _outputs(row) -> dict:
    return {o["output"]: o for o in json.loads(row["accuracy_outputs"])}


# ---- a YOLO-style head: boxes in pixels and class scores in one output ----

A, C = 64, 3


def _yolo(path, score_bias: float):
    """x [n, 8] -> output0 [n, 4+C, A]: cx, cy, w, h in 0-640 pixels, then C sigmoid scores per anchor."""
    from onnx import helper

    rng = np.random.default_rng(0)
    weights = {"wb": rng.normal(size=(8, 4 * A)) / np.sqrt(8), "scale": np.array(640.0),
               "ws": rng.normal(size=(8, C * A)) / np.sqrt(8), "bs": np.full(C * A, score_bias)}
    nodes = [helper.make_node("MatMul", ["x", "wb"], ["b0"]), helper.make_node("Sigmoid", ["b0"], ["b1"]),
             helper.make_node("Mul", ["b1", "scale"], ["b2"]), helper.make_node("MatMul", ["x", "ws"], ["s0"]),
             helper.make_node("Add", ["s0", "bs"], ["s1"]), helper.make_node("Sigmoid", ["s1"], ["s2"])]
    shapes = [helper.make_tensor("box_shape_i", 7, [3], [-1, 4, A]),
              helper.make_tensor("score_shape_i", 7, [3], [-1, C, A])]
    nodes += [helper.make_node("Constant", [], ["box_shape_c"], value=shapes[0]),
              helper.make_node("Constant", [], ["score_shape_c"], value=shapes[1]),
              helper.make_node("Reshape", ["b2", "box_shape_c"], ["boxes"]),
              helper.make_node("Reshape", ["s2", "score_shape_c"], ["scores"]),
              helper.make_node("Concat", ["boxes", "scores"], ["output0"], axis=1)]
    return _save_onnx(path, nodes, [("x", ["batch", 8])], [("output0", ["batch", 4 + C, A])], weights)


def _detections(out: np.ndarray, thr=0.25):
    """Per sample and anchor: best class, its score, and the box as xyxy, from [n, 4+C, A]."""
    rows = out.transpose(0, 2, 1)
    cx, cy, w, h = (rows[..., i] for i in range(4))
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
    return rows[..., 4:].argmax(-1), rows[..., 4:].max(-1) >= thr, boxes


def _iou(a, b):
    w = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    h = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    area = lambda r: (r[..., 2] - r[..., 0]) * (r[..., 3] - r[..., 1])  # noqa: E731
    return w * h / (area(a) + area(b) - w * h)


def test_a_detection_head_whose_scores_break_fails_while_its_whole_cosine_stays_high(tmp_path, db, fast):
    model, broken = _yolo(tmp_path / "yolo.onnx", -2.0), _yolo(tmp_path / "broken.onnx", -3.5)
    x = np.random.default_rng(1).normal(size=(N, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    ref, cand = _run(model, x, "output0"), _run(broken, x, "output0")
    # what the old guard saw: the whole output's cosine, dominated by the pixel coordinates
    whole = _cosine(cand, ref)
    assert whole > 0.99
    rc, ron, rbox = _detections(ref)
    cc, con, cbox = _detections(cand)
    kept = ron & con & (cc == rc) & (_iou(cbox, rbox) >= 0.5)
    assert ron.sum() >= 100 and kept.sum() / ron.sum() < 0.5
    score_cos = _cosine(ref[:, 4:], cand[:, 4:])

    row, _ = _profile(model, broken, tmp_path / "data.npz", db, "yolo", fast)
    assert row["accuracy_guard"] == "failed"
    assert row["accuracy"] == pytest.approx(whole, abs=1e-4)  # the headline figure is still the whole cosine
    out = _outputs(row)["output0"]
    assert out["kind"] == "detection"
    fig = out["figures"]
    assert fig["detections"] == int(ron.sum()) and fig["detections_kept_count"] == int(kept.sum())
    assert fig["score_cosine"] == pytest.approx(score_cos, abs=1e-4)
    assert fig["detections_added_count"] == int((con & ~ron).sum())
    note = row["accuracy_guard_note"]
    assert note.startswith("INT8 fails the accuracy guard on output 'output0' (class scores of the detection "
                           f"head): {int(kept.sum())} of {int(ron.sum())} FP32 detections above 0.25 survive"), note
    # the same graph as its own INT8 passes every check
    same, _ = _profile(model, model, tmp_path / "data.npz", db, "yolo-same", fast)
    assert same["accuracy_guard"] == "passed", same["accuracy_guard_note"]
    assert _outputs(same)["output0"]["figures"]["detections_kept"] == 1.0


# ---- a CTC recogniser: per-step class probabilities ----

T, F, K = 12, 8, 6


def _ctc(path, delta: float):
    from onnx import helper

    w = np.random.default_rng(0).normal(size=(F, K))
    w = w + delta * np.random.default_rng(1).normal(size=w.shape)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["z"]), helper.make_node("Softmax", ["z"], ["probs"], axis=-1)]
    return _save_onnx(path, nodes, [("x", ["batch", T, F])], [("probs", ["batch", T, K])], {"w": w})


def _greedy(steps: np.ndarray) -> list[int]:
    best = steps.argmax(-1)
    out, prev = [], None
    for c in best:
        if c != prev and c != 0:
            out.append(int(c))
        prev = c
    return out


def _levenshtein(a, b) -> int:
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return int(d[-1])


def test_a_ctc_head_whose_decoded_text_changes_fails_on_its_sequences(tmp_path, db, fast):
    model, broken = _ctc(tmp_path / "rec.onnx", 0.0), _ctc(tmp_path / "rec8.onnx", 0.05)
    x = np.random.default_rng(2).normal(size=(N, T, F)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    ref, cand = _run(model, x, "probs"), _run(broken, x, "probs")
    assert _cosine(cand, ref) >= 0.99  # passes the old guard
    texts = [(_greedy(r), _greedy(c)) for r, c in zip(ref, cand)]
    same = sum(r == c for r, c in texts)
    cer = sum(_levenshtein(c, r) for r, c in texts) / sum(len(r) for r, _ in texts)
    assert same / N < 0.95

    row, _ = _profile(model, broken, tmp_path / "data.npz", db, "ctc", fast)
    out = _outputs(row)["probs"]
    assert out["kind"] == "ctc"
    assert out["figures"]["sequences_same"] == same and out["figures"]["cer"] == pytest.approx(cer)
    assert row["accuracy_guard"] == "failed"
    assert (f"on output 'probs' (a per-step class sequence (CTC)): {same} of {N} decoded sequences read as "
            f"FP32's") in row["accuracy_guard_note"]


# ---- a classifier whose logits keep their cosine while the top class moves ----

def _classifier(path, delta: float):
    from onnx import helper

    w = np.random.default_rng(0).normal(size=(8, 10))
    w = w + delta * np.random.default_rng(2).normal(size=w.shape)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["z"]), helper.make_node("Add", ["z", "offset"], ["logits"])]
    return _save_onnx(path, nodes, [("x", ["batch", 8])], [("logits", ["batch", 10])],
                      {"w": w, "offset": np.full(10, 50.0)})


def test_a_classifier_fails_on_top1_agreement_while_its_cosine_passes(tmp_path, db, fast):
    model, broken = _classifier(tmp_path / "cls.onnx", 0.0), _classifier(tmp_path / "cls8.onnx", 0.5)
    x = np.random.default_rng(3).normal(size=(N, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    ref, cand = _run(model, x, "logits"), _run(broken, x, "logits")
    cosine = _cosine(cand, ref)
    agreement = float(np.mean(ref.argmax(1) == cand.argmax(1)))
    top5 = float(np.mean([r in np.argsort(-c)[:5] for r, c in zip(ref.argmax(1), cand)]))
    assert cosine >= 0.99 and agreement < 0.9

    row, _ = _profile(model, broken, tmp_path / "data.npz", db, "cls", fast)
    assert row["accuracy_metric"] == "cosine vs fp32" and row["accuracy"] == pytest.approx(cosine, abs=1e-5)
    fig = _outputs(row)["logits"]["figures"]
    assert fig["top1_agreement"] == pytest.approx(agreement) and fig["top5_agreement"] == pytest.approx(top5)
    assert row["accuracy_guard"] == "failed"
    assert (f"INT8 fails the accuracy guard on output 'logits' (class scores): it agrees with FP32's top class on "
            f"{agreement:.1%} of samples (at least 90% must)") in row["accuracy_guard_note"]
    from wb_core.analysis.recommend import recommend
    from wb_core.report import build_report

    assert recommend(load_results(db, "cls")).best["precision"] == "fp32"
    html = build_report(db, "cls")
    assert "top-1 agreement" in html and "class scores" in html


# ---- a user's metric by import path ----

def test_a_metric_by_import_path_on_the_command_line(tmp_path, db, monkeypatch):
    from typer.testing import CliRunner

    from wb_core.cli import app
    from wb_core.errors import ConfigError

    model = _classifier(tmp_path / "cls.onnx", 0.0)
    x = np.random.default_rng(4).normal(size=(100, 8)).astype(np.float32)
    y = np.random.default_rng(5).integers(0, 10, size=100)
    np.savez(tmp_path / "data.npz", x=x, y=y)
    (tmp_path / "mymetrics.py").write_text(textwrap.dedent("""
        import numpy as np

        def hits_in_top3(outputs, labels):
            top = np.argsort(-outputs, axis=1)[:, :3]
            return float((top == labels[:, None]).any(axis=1).mean())
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    flags = ["--max-time", "0.6", "--warmup", "0.1", "--window", "0.1", "--tolerance", "0.5", "-q"]
    res = CliRunner().invoke(app, ["profile", str(model), "--data", str(tmp_path / "data.npz"), "--metric",
                                   "mymetrics:hits_in_top3", "--db", str(db), "--study", "m", *flags])
    assert res.exit_code == 0, res.output
    row = load_results(db, "m").iloc[0]
    logits = _run(model, x, "logits")
    expected = float(np.mean([label in np.argsort(-o)[:3] for o, label in zip(logits, y)]))
    assert row["accuracy_metric"] == "mymetrics:hits_in_top3" and row["accuracy"] == pytest.approx(expected)
    res = CliRunner().invoke(app, ["profile", str(model), "--data", str(tmp_path / "data.npz"), "--metric",
                                   "mymetrics:nothing_here", "--db", str(db), "--study", "m2", *flags])
    assert res.exit_code != 0 and isinstance(res.exception, ConfigError)
    assert "names nothing callable in module 'mymetrics'" in str(res.exception)


# ---- a user's decoding by import path ----

def test_a_users_decoding_fails_a_variant_whose_class_checks_pass(tmp_path, db, fast, monkeypatch):
    """The top-3 classes in order, decoded by the user's function: the variant keeps FP32's top class
    often enough for the class checks, but not the decoded items."""
    model, broken = _classifier(tmp_path / "cls.onnx", 0.0), _classifier(tmp_path / "cls8.onnx", 0.02)
    x = np.random.default_rng(3).normal(size=(N, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    (tmp_path / "mydecode.py").write_text(textwrap.dedent("""
        import numpy as np

        def top3(outputs):
            return [tuple(int(c) for c in np.argsort(-o)[:3]) for o in outputs]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    ref, cand = _run(model, x, "logits"), _run(broken, x, "logits")
    seq = lambda o: list(np.argsort(-o)[:3])  # noqa: E731
    same = sum(seq(a) == seq(b) for a, b in zip(cand, ref))
    edits = sum(_levenshtein(seq(a), seq(b)) for a, b in zip(cand, ref))
    assert np.mean(ref.argmax(1) == cand.argmax(1)) >= 0.9 and same / N < 0.95

    row, _ = _profile(model, broken, tmp_path / "data.npz", db, "dec", fast, decode="mydecode:top3")
    outs = json.loads(row["accuracy_outputs"])
    decoded = [o for o in outs if o["kind"] == "decoded"]
    assert len(decoded) == 1 and decoded[0]["output"] == "logits" and "mydecode:top3" in decoded[0]["kind_reason"]
    fig = decoded[0]["figures"]
    assert fig["decoded_agreement"] == pytest.approx(same / N) and fig["decoded_same"] == same
    assert fig["decoded_error_rate"] == pytest.approx(edits / (3 * N))
    classes = [o for o in outs if o["kind"] == "classes"][0]
    assert all(c["passed"] for c in classes["checks"])  # the class checks alone would let it through
    assert row["accuracy_guard"] == "failed"
    assert (f"INT8 fails the accuracy guard on output 'logits' (items your decoding reads): {same} of {N} samples "
            f"decode to FP32's items (at least 95% must)") in row["accuracy_guard_note"]

    # `wb results --outputs` shows the figures the report shows, per output and reading.
    from typer.testing import CliRunner

    from wb_core.cli import app
    from wb_core.report import build_report

    words = f"decoded items identical {same / N:.1%} (failed, at least 95%)".replace(".0%", "%")
    res = CliRunner().invoke(app, ["results", "--study", "dec", "--db", str(db), "--outputs"])
    assert res.exit_code == 0, res.output
    assert "accuracy guard failed" in res.output and "'logits' read as class scores" in res.output, res.output
    assert f"'logits' read as items your decoding reads (decoded by mydecode:top3): {words}" in res.output
    assert words in build_report(db, "dec")
    res = CliRunner().invoke(app, ["results", "--study", "dec", "--db", str(db), "--outputs", "--format", "json"])
    table = json.loads(res.output)
    assert [(t["output"], t["read_as"]) for t in table] == [("logits", "class scores"),
                                                            ("logits", "items your decoding reads")]
    assert table[1]["decoded_agreement"] == pytest.approx(same / N) and table[1]["failed"].startswith("decoded items")

    # The same figures with no decoding: the guard passes, and no decoded reading is stored.
    row, _ = _profile(model, broken, tmp_path / "data.npz", db, "nodec", fast)
    assert row["accuracy_guard"] == "passed" and "decoded" not in row["accuracy_outputs"]


def test_a_decoding_function_from_a_notebook_travels_by_value(tmp_path, db, fast):
    """A lambda no other process can import is sent to the evaluating worker by value: its labels
    agree with FP32's exactly as often as the top classes do."""
    model, broken = _classifier(tmp_path / "cls.onnx", 0.0), _classifier(tmp_path / "cls8.onnx", 0.05)
    x = np.random.default_rng(3).normal(size=(N, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    ref, cand = _run(model, x, "logits"), _run(broken, x, "logits")
    agreement = float(np.mean(ref.argmax(1) == cand.argmax(1)))
    row, _ = _profile(model, broken, tmp_path / "data.npz", db, "lam", fast,
                      decode=lambda out: [f"class {int(i)}" for i in out.argmax(1)])
    decoded = [o for o in json.loads(row["accuracy_outputs"]) if o["kind"] == "decoded"][0]
    assert decoded["figures"]["decoded_agreement"] == pytest.approx(agreement)
    assert "<lambda>" in decoded["kind_reason"]


def test_a_decoding_that_returns_the_wrong_count_or_fails_is_one_sentence():
    from wb_core.errors import ConfigError
    from wb_core.variants.agreement import DecodedAgreement, decode_batch

    batch = np.zeros((4, 3))
    with pytest.raises(ConfigError, match=r"returned 1 items for a batch of 4 samples of output 'y'"):
        decode_batch(lambda b: [0], batch, "y", "m:f")
    with pytest.raises(ConfigError, match=r"The decoding 'm:f' failed on output 'y' .*ZeroDivisionError"):
        decode_batch(lambda b: 1 / 0, batch, "y", "m:f")
    with pytest.raises(ConfigError, match="must return one item per sample"):
        decode_batch(lambda b: 3, batch, "y")
    agree = DecodedAgreement("y")
    agree.update(decode_batch(lambda b: [np.array([1, 2]), "ab", 3, (4,)], batch, "y"),
                 [(1, 2), "ax", 3, (5,)])
    assert agree.figures()["decoded_agreement"] == 0.5 and "decoded_error_rate" not in agree.figures()  # 3 is no sequence


def test_class_scores_tied_to_rounding_name_no_top_class_to_disagree_with():
    """A model with random weights can score every class the same (a softmax of 0.001 each, apart by
    float32 rounding): any class is FP32's top one, so a variant cannot miss it; a real difference still counts."""
    from wb_core.variants.agreement import OutputAgreement, read_kind

    rng = np.random.default_rng(0)
    flat = np.full((6, 1000), 1e-3, np.float32) + rng.normal(scale=1e-10, size=(6, 1000)).astype(np.float32)
    kind = read_kind("probabilities", flat)
    assert kind.kind == "classes"
    acc = OutputAgreement(kind)
    acc.update(np.full_like(flat, 1e-3)[:, ::-1].copy(), flat)  # ties everywhere, on both sides
    assert acc.figures()["top1_agreement"] == 1.0 and acc.figures()["top5_agreement"] == 1.0
    # A decided FP32 row: class 7 clearly first. A variant that puts class 3 first and class 7 sixth misses
    # both; one that ties class 2 with 7 reads class 2 first (argmax, as a user's code does) but keeps 7 in
    # its top 5; FP32 itself agrees on both.
    ref = np.zeros((1, 10), np.float32)
    ref[0, 7] = 0.9
    moved = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.2, 0.3, 0.4, 0.1, 0.0]], np.float32)
    tied = ref.copy()
    tied[0, 2] = 0.9
    decided = OutputAgreement(read_kind("probabilities", ref))
    for variant in (moved, tied, ref):
        decided.update(variant, ref)
    assert decided.figures()["top1_agreement"] == pytest.approx(1 / 3)
    assert decided.figures()["top5_agreement"] == pytest.approx(2 / 3)


# ---- memory ----

@pytest.mark.slow  # long; `make test-all` runs it
def test_the_accumulators_keep_one_batch_whatever_the_data_size():
    """400 batches of [8, 128, 1000] logits (400 MB in all): the running sums' peak stays near one batch."""
    from wb_core.variants.agreement import OutputAgreement, read_kind

    rng = np.random.default_rng(0)
    batch = rng.normal(size=(8, 128, 1000)).astype(np.float32)
    kind = read_kind("logits", batch)
    assert kind.kind == "tokens"
    acc = OutputAgreement(kind)
    noisy = batch + 0.01 * rng.normal(size=batch.shape).astype(np.float32)
    expected = float(np.mean(batch.argmax(-1) == noisy.argmax(-1)))
    tracemalloc.start()
    for _ in range(400):
        acc.update(noisy, batch)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * batch.nbytes  # one sample's float64 copies, not 400 batches
    assert acc.figures()["token_agreement"] == pytest.approx(expected)
    assert acc.figures()["samples"] == 3200


SCRIPT = """
import json, resource, sys
import numpy as np
from wb_core.config import MeasureSettings, SweepSpec
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.variants.planner import PrecisionOptions
model, data, db = sys.argv[1:4]
fast = MeasureSettings(warmup_s=0.1, warmup_iters=3, window_s=0.1, min_windows=3, tolerance=0.5, max_time_s=0.6)
s = run_sweep(model, SweepSpec(precisions="fp32,int8", batch_sizes="1"), db, "mem", settings=fast,
              precision=PrecisionOptions(data=data, variants={"openvino/int8": model}, memory_budget_mb=BUDGET_MB))
row = load_results(db, "mem").set_index("precision").loc["int8"]
print(json.dumps({"ok": s.ok, "errors": s.errors, "guard": row["accuracy_guard"], "accuracy": row["accuracy"],
                  "notes": s.notes,
                  # VmHWM: this process image's own peak (ru_maxrss would keep the forking pytest's)
                  "parent_kb": int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM"))),
                  "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def test_evaluating_a_large_output_model_keeps_parent_and_workers_within_the_budget(tmp_path):
    """300 samples of 2 MB of outputs each (600 MB per variant, FP32 and INT8), a memory budget of
    400 MB: the sweep's process and every worker, runtime and model included, stay under it (a batch
    of 64 samples' outputs, 128 MB, is held several times over: the runtime's tensor, the copy it
    returns, FP32's batch beside it), and a note states the budget and the batch it allowed."""
    from onnx import helper

    width = 512 * 1024
    model = _save_onnx(tmp_path / "wide.onnx", [helper.make_node("MatMul", ["x", "w"], ["hidden"])],
                       [("x", ["batch", 4])], [("hidden", ["batch", width])],
                       {"w": np.random.default_rng(0).normal(size=(4, width))})
    np.savez(tmp_path / "data.npz", x=np.random.default_rng(1).normal(size=(300, 4)).astype(np.float32))
    budget_mb = 400
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", SCRIPT.replace("BUDGET_MB", str(budget_mb)), str(model),
                          str(tmp_path / "data.npz"), str(tmp_path / "r.db")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ok"] == 2, res["errors"]
    assert res["guard"] == "passed" and res["accuracy"] == pytest.approx(1.0)
    parent_mb, worker_mb = res["parent_kb"] / 1024, res["children_kb"] / 1024
    assert parent_mb < budget_mb, parent_mb  # it never holds a variant's outputs
    assert worker_mb < budget_mb, (worker_mb, res["notes"])  # nor does any worker hold more than the budget
    assert any("at a time to keep each worker within the memory budget of 400 MB" in n for n in res["notes"]), \
        res["notes"]


def test_the_batch_fits_what_the_worker_holds_beside_its_outputs():
    """The batch leaves room for what the worker holds already, and for each output's copies."""
    from wb_core.errors import ModelError
    from wb_core.variants.tasks import OUTPUT_COPIES, fit_batch

    mb = 2 ** 20
    # 1000 MB budget, 240 MB held, 15.6 MB of logits per sample: (1000 - 240) / (copies * 15.6) samples
    per = int(15.6 * mb)
    expected = (1000 - 240) * mb // (OUTPUT_COPIES * per)
    assert fit_batch(64, False, per, 1000 * mb, 240 * mb) == expected
    assert 5 * per * expected + 240 * mb < 1000 * mb  # about five copies are held in practice
    assert fit_batch(64, False, mb, None, 240 * mb) == 64  # no budget: the batch stands
    assert fit_batch(4, False, mb, 1000 * mb, 240 * mb) == 4  # small enough already
    with pytest.raises(ModelError, match="holds 990 MB before any output.*more than the memory budget"):
        fit_batch(64, False, per, 1000 * mb, 990 * mb)
    with pytest.raises(ModelError, match="batch of 16 samples"):  # a fixed batch is not shrunk
        fit_batch(16, True, per, 1000 * mb, 240 * mb)


def test_a_batch_that_cannot_fit_the_budget_and_a_killed_worker_are_failed_verdicts(tmp_path, db, fast,
                                                                                   monkeypatch):
    """A memory budget smaller than one sample's outputs, and an evaluating worker killed by SIGKILL
    (as the kernel's OOM killer does): the INT8 variant is failed with a sentence, never passed unchecked."""
    model = _classifier(tmp_path / "cls.onnx", 0.0)
    x = np.random.default_rng(3).normal(size=(N, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x, y=np.zeros(N, np.int64))
    row, s = _profile(model, model, tmp_path / "data.npz", db, "tiny", fast, memory_budget_mb=1e-5)
    assert row["accuracy_guard"] == "failed"
    assert "INT8 could not be checked against FP32" in row["accuracy_guard_note"]
    assert "more than the memory budget" in row["accuracy_guard_note"]
    (tmp_path / "killer.py").write_text("import os, signal\n\ndef score(outputs, labels):\n"
                                        "    os.kill(os.getpid(), signal.SIGKILL)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    row, s = _profile(model, model, tmp_path / "data.npz", db, "killed", fast, metric="killer:score")
    assert row["accuracy_guard"] == "failed"
    assert "killed by signal SIGKILL (out of memory" in row["accuracy_guard_note"]
    assert any("SIGKILL" in n for n in s.notes)
