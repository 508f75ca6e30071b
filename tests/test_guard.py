"""The accuracy guard's rules on numbers worked out by hand: limits per metric, the boundary, the
verdict and the sentence users read. Fast (no model), so `make mutation` can run it per mutant;
tests/test_accuracy_guard.py checks the guard on real quantized models.
"""

from __future__ import annotations

import math

import pytest

from wb_core.errors import ConfigError
from wb_core.variants.guard import Guard, describe


@pytest.mark.parametrize("metric, limit", [
    ("top1", 0.01), ("top5", 0.01), ("cosine", 0.01),
    ("top1 vs fp32", 0.01), ("cosine vs fp32", 0.01),
    ("mse", None), ("max_abs", None), ("my_metric", None),
])
def test_auto_limits_per_metric(metric, limit):
    assert Guard().limit_for(metric) == limit
    assert Guard("auto").limit_for(metric) == limit
    assert Guard(" AUTO ").limit_for(metric) == limit


def test_a_number_is_the_limit_for_every_metric_and_off_has_none():
    for metric in ("top1", "cosine vs fp32", "mse", "f"):
        assert Guard(0.05).limit_for(metric) == 0.05
        assert Guard("0.05").limit_for(metric) == 0.05
        assert Guard(1).limit_for(metric) == 1.0 and isinstance(Guard(1).limit, float)
        assert Guard("off").limit_for(metric) is None
        assert Guard(" Off ").off and not Guard().off and not Guard(0.05).off


@pytest.mark.parametrize("bad", [0, -0.01, "0", "-1", float("nan"), float("inf"), "inf", True, False, "one",
                                 "", None, [0.01]])
def test_limits_that_mean_nothing_are_refused_in_one_sentence(bad):
    with pytest.raises(ConfigError) as err:
        Guard(bad)
    text = str(err.value)
    assert "accuracy guard" in text and "\n" not in text


@pytest.mark.parametrize("limit, metric, refused", [
    (1.0, "top1", True), (1.5, "cosine vs fp32", True), (2, "top5", True),
    (0.999, "top1", False), (0.5, "cosine", False),
    (5.0, "mse", False), (1.0, "max_abs", False),
])
def test_a_limit_that_lets_a_bounded_metric_always_pass_is_refused(limit, metric, refused):
    guard = Guard(limit)
    if refused:
        with pytest.raises(ConfigError, match="lets any .* pass"):
            guard.check_metric(metric)
    else:
        guard.check_metric(metric)  # accepted: no exception
    Guard("auto").check_metric(metric)  # the defaults are always accepted


@pytest.mark.parametrize("drop, passes", [
    (0.0, True), (0.0099, True), (0.01, True),  # the limit itself passes: "at most"
    (0.0101, False), (0.5, False), (-0.02, True),  # a variant better than FP32 passes
    (float("nan"), False), (float("inf"), False), (None, False),
])
def test_the_boundary_is_at_most_the_limit(drop, passes):
    guard = Guard()
    assert guard.passes("top1", drop) is passes
    verdict = guard.judge("top1", "int8", 0.962, 0.962 - (drop if drop is not None and math.isfinite(drop) else 0.5),
                          drop)
    assert verdict["accuracy_guard"] == ("passed" if passes else "failed")
    assert verdict["accuracy_guard_limit"] == 0.01


def test_metrics_without_a_default_pass_unjudged_and_say_so():
    guard = Guard()
    assert guard.passes("mse", 123.0) and guard.passes("mse", None)
    verdict = guard.judge("mse", "bf16", 0.0, 123.0, 123.0)
    assert "accuracy_guard" not in verdict and "accuracy_guard_limit" not in verdict
    assert verdict["accuracy_guard_note"] == ("No default guard for mse: BF16 was measured but not judged; set an "
                                              "accuracy guard limit to judge it.")
    assert not Guard(100).passes("mse", 123.0) and Guard(200).passes("mse", 123.0)


def test_off_judges_nothing():
    guard = Guard("off")
    assert guard.passes("top1", 0.9) and guard.passes("cosine", None)
    assert guard.judge("cosine", "int8", 1.0, 0.0, 1.0) == {
        "accuracy_guard": "off", "accuracy_guard_note": "The accuracy guard is off: INT8 was not checked against FP32."}


def test_the_sentences_users_read():
    g = Guard()
    assert g.judge("cosine vs fp32", "int8", 1.0, 0.081, 0.919)["accuracy_guard_note"] == (
        "INT8 has a cosine similarity to FP32 of 0.081, which misses the accuracy guard (at least 0.99).")
    assert g.judge("cosine vs fp32", "bf16", 1.0, 0.9995, 0.0005)["accuracy_guard_note"] == (
        "BF16 has a cosine similarity to FP32 of 1.000, within the accuracy guard (at least 0.99).")
    assert g.judge("top1", "int8", 0.962, 0.955, 0.007)["accuracy_guard_note"] == (
        "INT8 has top-1 accuracy 95.5% (FP32 96.2%), within the accuracy guard (at most 1 point below FP32).")
    assert Guard(0.02).judge("top5", "int8", 0.99, 0.95, 0.04)["accuracy_guard_note"] == (
        "INT8 has top-5 accuracy 95.0% (FP32 99.0%), which misses the accuracy guard (at most 2 points below FP32).")
    assert g.judge("top1 vs fp32", "int8", 1.0, 0.985, 0.015)["accuracy_guard_note"] == (
        "INT8 agrees with FP32's top class on 98.5% of samples, which misses the accuracy guard (at least 99.0%).")
    assert Guard(0.5).judge("mse", "int8", 0.0, 0.25, 0.25)["accuracy_guard_note"] == (
        "INT8 has mse 0.25 (FP32 0), within the accuracy guard (a drop of at most 0.5).")


def test_describe_each_metric():
    assert describe("top5 vs fp32", 0.97, 1.0) == "keeps FP32's top class in its top 5 on 97.0% of samples"
    assert describe("mse vs fp32", 0.00123456, 0.0) == "has mse 0.00123 against FP32"
    assert describe("top1", 0.5, 0.75) == "has top-1 accuracy 50.0% (FP32 75.0%)"
    assert describe("max_abs", 0.123456, 0.0) == "has max_abs 0.1235 (FP32 0)"


def test_the_refusal_names_the_metric_and_the_agreement_threshold_for_top5():
    with pytest.raises(ConfigError) as err:
        Guard(1.5).check_metric("cosine vs fp32")
    assert str(err.value) == ("An accuracy guard of 1.5 lets any cosine pass (cosine drops are at most 1): give a "
                              "limit below 1, such as 0.01.")
    assert Guard().judge("top5 vs fp32", "int8", 1.0, 0.995, 0.005)["accuracy_guard_note"] == (
        "INT8 keeps FP32's top class in its top 5 on 99.5% of samples, within the accuracy guard (at least 99.0%).")
