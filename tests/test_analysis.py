"""Efficiency columns, the Pareto front and recommendations, on hand-made result tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_data import HARDWARE, frame, run, sample_frame
from wb_core.analysis.recommend import (
    Constraints,
    NoRunMeetsConstraints,
    find_run,
    pareto_front,
    pareto_mask,
    recommend,
    with_efficiency,
)
from wb_core.errors import ConfigError, WorkbenchError


def test_pareto_front_of_a_hand_made_table():
    df = sample_frame()
    mask = pareto_mask(df)
    assert list(mask) == [True, True, True, False, False, False]
    front = pareto_front(df)
    assert list(front["latency_ms_p99"]) == [0.5, 2.0, 8.0]


def test_pareto_ties_keep_both_and_failed_runs_never_count():
    df = frame([run(p99=1.0, thr=100, batch=1), run(p99=1.0, thr=100, batch=2),
                run(p99=0.1, thr=1e9, batch=4, status="failed")])
    assert list(pareto_mask(df)) == [True, True, False]


def test_accuracy_joins_the_front_only_when_every_run_has_it():
    runs = [run(p99=1.0, thr=1000, batch=1, accuracy=0.99), run(p99=1.0, thr=900, batch=2, accuracy=0.995)]
    df = frame(runs)
    assert list(pareto_mask(df)) == [True, True]  # the slower run is more accurate
    assert list(pareto_mask(df, with_accuracy=False)) == [True, False]
    df.loc[1, "accuracy"] = float("nan")
    assert list(pareto_mask(df)) == [True, False]


def test_efficiency_columns():
    e = with_efficiency(sample_frame(), HARDWARE, flops_per_sample=1e9)
    # Pinned to one CPU, one thread: one core.
    assert e.loc[0, "cores_used"] == 1 and e.loc[0, "throughput_per_core"] == 2000
    # Unpinned with 4 threads on 4 available CPUs: 4 cores.
    assert e.loc[2, "cores_given"] == 4 and e.loc[2, "cores_used"] == 4
    # 2000 samples/s x 1 GFLOP = 2000 GFLOP/s against 128 GFLOP/s per core: 1562.5 % (a test number).
    assert e.loc[0, "gflops"] == pytest.approx(2000)
    assert e.loc[0, "pct_peak_flops"] == pytest.approx(100 * 2000 / 128)
    # Four threads on two pinned CPUs are oversubscribed.
    assert list(e["oversubscribed"]) == [False, False, False, False, False, True]


def test_efficiency_without_flops_leaves_flop_columns_empty():
    e = with_efficiency(sample_frame(), HARDWARE)
    assert e["pct_peak_flops"].isna().all()


def test_recommend_objectives_and_reason():
    df = with_efficiency(sample_frame(), HARDWARE)
    r = recommend(df, objective="throughput")
    assert r.best["throughput"] == 15000
    assert "highest throughput" in r.reason and "15,000" in r.reason
    assert len(r.runners_up) == 3
    assert recommend(df, objective="latency").best["latency_ms_p99"] == 0.5
    # Per core: 2000/1, 9000/2=4500, 15000/4=3750, 5000/1, 7000/2=3500.
    assert recommend(df, objective="throughput_per_core").best["throughput"] == 5000


def test_recommend_respects_constraints_and_names_them():
    df = with_efficiency(sample_frame(), HARDWARE)
    r = recommend(df, Constraints(max_p99_ms=2.5, max_cores=2), "throughput")
    assert r.best["throughput"] == 9000
    assert "p99 latency ≤ 2.5 ms and cores ≤ 2" in r.reason
    r = recommend(df, Constraints(max_memory_mb=150))
    assert r.best["rss_mb"] <= 150


def test_nothing_meets_names_closest_run_and_missed_constraint():
    df = with_efficiency(sample_frame(), HARDWARE)
    with pytest.raises(NoRunMeetsConstraints) as e:
        recommend(df, Constraints(max_p99_ms=0.4))
    msg = str(e.value)
    assert "The closest is OpenVINO · FP32 · batch 1 · 1 thread · cores 0 " in msg
    assert "p99 latency limit: 0.5 ms against 0.4 ms" in msg


def test_accuracy_limit_without_accuracy_is_explained():
    with pytest.raises(NoRunMeetsConstraints, match="no accuracy measurements"):
        recommend(sample_frame(), Constraints(max_accuracy_drop=0.01), hardware=HARDWARE)


def test_accuracy_drop_constraint_when_present():
    df = frame([run(precision="int8", thr=5000, accuracy=0.95, accuracy_drop=0.04),
                run(precision="fp32", thr=1000, accuracy=0.99, accuracy_drop=0.0)])
    assert recommend(df, Constraints(max_accuracy_drop=0.01), hardware=HARDWARE).best["precision"] == "fp32"
    assert recommend(df, hardware=HARDWARE).best["precision"] == "int8"


def test_empty_and_all_failed_studies():
    with pytest.raises(WorkbenchError, match="no runs yet"):
        recommend(pd.DataFrame())
    df = frame([run(status="failed", p99=float("nan"), thr=float("nan"))])
    with pytest.raises(WorkbenchError, match=r"no successful runs .*1 failed"):
        recommend(df, hardware=HARDWARE)


@pytest.mark.parametrize("kw, words", [
    ({"max_p99_ms": -1}, "positive"), ({"max_p99_ms": 0}, "positive"), ({"max_p99_ms": float("nan")}, "positive"),
    ({"max_accuracy_drop": 1.5}, "between 0 and 1"), ({"max_accuracy_drop": -0.1}, "between 0 and 1"),
    ({"max_memory_mb": -5}, "positive"), ({"max_cores": 0}, "at least 1"), ({"max_cores": 1.5}, "whole number"),
])
def test_constraint_validation(kw, words):
    with pytest.raises(ConfigError, match=words):
        Constraints(**kw)


def test_unknown_objective():
    with pytest.raises(ConfigError, match="choose from throughput, latency, throughput_per_core"):
        recommend(sample_frame(), objective="speed", hardware=HARDWARE)


def test_find_run_by_prefix():
    df = sample_frame()
    key = df["key"].iloc[2]
    assert find_run(df, key[:8])["key"] == key
    with pytest.raises(ConfigError, match="No run with key"):
        find_run(df, "zzzz")


def test_flop_count_from_an_ir(tmp_path):
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    from wb_core.analysis.flops import flops_per_sample

    x = ops.parameter([-1, 3, 8, 8], np.float32, name="x")
    conv = ops.convolution(x, ops.constant(np.ones((4, 3, 3, 3), np.float32)), [1, 1], [0, 0], [0, 0], [1, 1])
    flat = ops.reshape(conv, ops.constant(np.array([-1, 144], np.int64)), special_zero=False)
    fc = ops.matmul(flat, ops.constant(np.ones((144, 10), np.float32)), False, False)
    path = tmp_path / "m.xml"
    ov.save_model(ov.Model([fc], [x]), path)
    # conv: 4x6x6 outputs x 27 MACs; matmul: 10 outputs x 144 MACs; 2 FLOPs per MAC.
    expected = 2 * (4 * 6 * 6 * 27 + 10 * 144)
    assert flops_per_sample(path) == expected
    assert flops_per_sample(path, batch_size=4) == expected


# ---- property: recommend never returns a run that breaks a constraint

run_strategy = st.fixed_dictionaries({
    "p99": st.floats(0.01, 100), "thr": st.floats(1, 1e5), "rss": st.floats(10, 4000),
    "threads": st.integers(1, 8), "pinned": st.integers(0, 4), "drop": st.one_of(st.none(), st.floats(0, 0.2)),
    "ok": st.booleans(),
})
limit = st.one_of(st.none(), st.floats(0.05, 120))


def _breaks(row, c: Constraints) -> bool:
    if c.max_p99_ms is not None and not row["latency_ms_p99"] <= c.max_p99_ms:
        return True
    if c.max_memory_mb is not None and not row["rss_mb"] <= c.max_memory_mb:
        return True
    if c.max_cores is not None and not row["cores_used"] <= c.max_cores:
        return True
    if c.max_accuracy_drop is not None:
        d = row.get("accuracy_drop")
        if d is None or (isinstance(d, float) and math.isnan(d)) or d > c.max_accuracy_drop:
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(run_strategy, min_size=1, max_size=12), p99=limit, mem=st.one_of(st.none(), st.floats(5, 5000)),
       cores=st.one_of(st.none(), st.integers(1, 8)), drop=st.one_of(st.none(), st.floats(0, 1)),
       objective=st.sampled_from(["throughput", "latency", "throughput_per_core"]))
def test_recommend_never_breaks_a_constraint(runs, p99, mem, cores, drop, objective):
    rows = []
    for i, r in enumerate(runs):
        pinned = list(range(r["pinned"])) or None
        rows.append(run(batch=i + 1, threads=r["threads"], cores=pinned, p99=r["p99"], thr=r["thr"], rss=r["rss"],
                        status="ok" if r["ok"] else "failed", accuracy_drop=r["drop"]))
    df = with_efficiency(frame(rows), HARDWARE)
    c = Constraints(max_p99_ms=p99, max_memory_mb=mem, max_cores=cores, max_accuracy_drop=drop)
    ok = df[df["status"] == "ok"]
    try:
        rec = recommend(df, c, objective)
    except NoRunMeetsConstraints:
        assert all(_breaks(r, c) for _, r in ok.iterrows())
        return
    except WorkbenchError:
        assert ok.empty
        return
    assert rec.best["status"] == "ok"
    assert not _breaks(rec.best, c)
    for r in rec.runners_up:
        assert not _breaks(r, c)


@given(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10), st.text(max_size=4)),
       st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-2, 3)),
       st.one_of(st.none(), st.integers(-3, 9), st.floats(allow_nan=True), st.booleans()))
def test_constraint_values_are_accepted_or_refused_clearly(p99, drop, cores):
    """Out-of-range constraint values are a ConfigError sentence, never a crash or a silent accept."""
    from wb_core.analysis.recommend import Constraints
    from wb_core.errors import ConfigError

    try:
        c = Constraints(max_p99_ms=p99, max_accuracy_drop=drop, max_cores=cores)
    except ConfigError as e:
        assert str(e).endswith(".")
        return
    assert c.max_p99_ms is None or (c.max_p99_ms > 0 and c.max_p99_ms == c.max_p99_ms)
    assert c.max_accuracy_drop is None or 0 <= c.max_accuracy_drop <= 1
    assert c.max_cores is None or (c.max_cores >= 1 and not isinstance(c.max_cores, bool))


def test_a_study_whose_only_runs_are_saturated_says_so_instead_of_no_successful_runs():
    from wb_core.errors import WorkbenchError

    df = pd.DataFrame([{"key": "k", "status": "ok", "backend": "openvino", "precision": "fp32", "batch_size": 1,
                        "throughput": 300.0, "latency_ms_p99": None, "saturated": True}])
    with pytest.raises(WorkbenchError, match=r"its 1 successful run has no p99 latency \(saturated: requests arrived "
                                             r"faster than they were served\); measure lower arrival rates"):
        recommend(df)
