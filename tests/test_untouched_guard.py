"""The runtime's untouched default is judged by the accuracy guard like any variant: on a BF16 CPU
OpenVINO runs an FP32 model in BF16 unless told otherwise, and a model BF16 breaks must not be
recommended through its untouched default (the pick `wb tune` may take as it is)."""

from __future__ import annotations

import numpy as np
import pytest

from test_confirm import BF16_CPU


def near_tie_model(folder):
    """A 10-class softmax whose columns differ by 0.3% of their size: FP32 tells the classes apart,
    BF16's 8-bit mantissa (0.4% steps) does not (top-1 agreement about 0.4, checked with openvino below)."""
    import openvino as ov
    import openvino.opset13 as op

    rng = np.random.default_rng(0)
    base = rng.normal(size=(16, 1)).astype(np.float32)
    weights = (np.repeat(base, 10, 1) + 3e-3 * rng.normal(size=(16, 10))).astype(np.float32)
    x = op.parameter([-1, 16], np.float32, name="x")
    probs = op.softmax(op.matmul(x, op.constant(weights), False, False), 1)
    probs.output(0).set_names({"probabilities"})
    path = folder / "near_ties.xml"
    ov.save_model(ov.Model([probs], [x], "near-ties"), path)
    data = folder / "data.npz"
    np.savez(data, x=rng.normal(size=(200, 16)).astype(np.float32))
    return path, data


def test_an_untouched_default_that_runs_bf16_is_judged_and_never_recommended(tmp_path, db, fast):
    import openvino as ov

    from wb_core.analysis.confirm import default_configs
    from wb_core.api import recommend, results
    from wb_core.config import SweepSpec
    from wb_core.sweep.local import run_sweep
    from wb_core.variants.planner import PrecisionOptions

    model, data = near_tie_model(tmp_path)
    core = ov.Core()
    x = np.load(data)["x"]
    f32 = core.compile_model(str(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(x)[0].argmax(1)
    untouched = core.compile_model(str(model), "CPU")(x)[0].argmax(1)
    agreement = float(np.mean(f32 == untouched))  # the independent reference: openvino itself
    assert (agreement < 0.9) == BF16_CPU, agreement

    configs = [default_configs(["openvino"], batch_size=8)["OpenVINO THROUGHPUT hint"]]
    run_sweep(model, SweepSpec(precisions="fp32", batch_sizes="8", threads="1"), db, "t", settings=fast,
              configs=None, precision=PrecisionOptions(data=str(data)))
    run_sweep(model, SweepSpec(), db, "t", settings=fast, configs=configs, precision=PrecisionOptions(data=str(data)))
    df = results("t", db, "stored")
    hint = df[df["untouched"].astype(bool)].iloc[0]
    explicit = df[~df["untouched"].astype(bool)].iloc[0]
    outputs = __import__("json").loads(hint["accuracy_outputs"])
    top1 = next(c["value"] for o in outputs for c in o.get("checks", []) if c["figure"] == "top1_agreement")
    assert top1 == pytest.approx(agreement, abs=0.02)
    if BF16_CPU:
        assert hint["accuracy_guard"] == "failed"
        assert "as the runtime runs it untouched" in hint["accuracy_guard_note"]
        # Faster or not, the untouched default is no pick: the FP32 run given its precision is.
        assert recommend(df).best["key"] == explicit["key"]
    else:
        assert hint["accuracy_guard"] == "passed"
