"""Ties within noise in the recommendation, on hand-made runs with rounds: fast, no model needed.

Intervals and margins expected here are computed with numpy and scipy from the rounds, not by
wb_core.stats, so a wrong interval, a wrong pairing or a wrong tie rule in recommend.py shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from analysis_data import HARDWARE, frame, run
from wb_core.analysis.recommend import find_run, recommend, tied_with_best
from wb_core.errors import ConfigError, WorkbenchError

ROUNDS = [0, 1, 2, 3]


def _ci(values):
    a = np.asarray(values, dtype=float)
    return sps.t.interval(0.95, len(a) - 1, loc=a.mean(), scale=a.std(ddof=1) / math.sqrt(len(a)))


def rounded(thr_rounds, p99_rounds=None, **kw) -> dict:
    """A run measured in ROUNDS, with its median and 95% intervals as the store gives them."""
    p99_rounds = p99_rounds or [1.0, 1.1, 0.9, 1.0]
    lo, hi = _ci(thr_rounds)
    plo, phi = _ci(p99_rounds)
    return run(thr=float(np.median(thr_rounds)), p99=float(np.median(p99_rounds)), round_throughput=list(thr_rounds),
               round_p99=list(p99_rounds), round_ids=list(ROUNDS), throughput_ci_low=lo, throughput_ci_high=hi,
               latency_ms_p99_ci_low=plo, latency_ms_p99_ci_high=phi, **kw)


def _study():
    return frame([
        rounded([1000, 1060, 990, 1030], threads=2, cores=[0, 1]),  # fastest median, two cores
        # round by round within 1% of it: tied, equivalent within +-3%, and simpler (one core)
        rounded([1005, 1050, 995, 1020], threads=1, cores=[0]),
        rounded([700, 730, 690, 720], threads=1, cores=[1], batch=8),  # clearly slower
        run(threads=4, status="failed", thr=float("nan"), p99=float("nan")),
    ])


def test_tied_runs_give_way_to_the_simplest_and_the_margin_is_over_the_next_beyond_noise():
    df = _study()
    rec = recommend(df)
    assert rec.best["key"] == df.loc[1, "key"]  # one core instead of two, within noise of the fastest
    assert sorted(r["key"] for r in rec.tied) == sorted(df.loc[[0, 1], "key"])
    assert "tied within noise" in rec.reason and "the simplest of them is picked" in rec.reason
    # Margin: the pick over the slower run, paired by round: exp of the t interval of the mean log ratio.
    logs = np.log(np.asarray(df.loc[1, "round_throughput"]) / np.asarray(df.loc[2, "round_throughput"]))
    ci = sps.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    assert rec.margin.paired and rec.margin.n == 4
    assert rec.margin.ratio == pytest.approx(math.exp(logs.mean()), rel=1e-9)
    assert (rec.margin.low, rec.margin.high) == (pytest.approx(math.exp(ci.low), rel=1e-9),
                                                 pytest.approx(math.exp(ci.high), rel=1e-9))
    assert rec.margin.clear and "the next run beyond noise" in rec.reason


def test_overlap_that_is_not_shown_equivalent_keeps_the_higher_median():
    """Intervals overlap, but the paired ratio's interval reaches past +-3%: only more rounds can
    settle it, so the faster median stays picked and the note says so."""
    fast = rounded([1000, 1060, 990, 1030], threads=2, cores=[0, 1])
    slower = rounded([1010, 1040, 980, 1000], threads=1, cores=[0])
    logs = np.log(np.asarray(slower["round_throughput"]) / np.asarray(fast["round_throughput"]))
    ci = sps.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    assert math.exp(ci.high) > 1.03 or math.exp(ci.low) < 1 / 1.03  # the data: not equivalent within 3%
    df = frame([fast, slower])
    rec = recommend(df)
    assert rec.best["key"] == df.loc[0, "key"] and rec.tied == []
    assert "not shown equivalent within +-3%" in rec.reason


def test_without_intervals_the_fastest_wins_and_nothing_is_tied():
    df = frame([run(threads=2, cores=[0, 1], thr=1030.0), run(threads=1, cores=[0], thr=1010.0)])
    rec = recommend(df)
    assert rec.best["key"] == df.loc[0, "key"] and rec.tied == [] and rec.margin is None
    assert list(tied_with_best(df)) == ["best", None]


def test_tie_labels_per_run():
    df = _study()
    assert list(tied_with_best(df)) == ["best", "yes", "no", None]
    # Latency: lower p99 is better; a run whose p99 interval is far above the best's is not tied.
    lat = frame([rounded([1000, 1010, 990, 1000], [1.0, 1.1, 0.9, 1.0]),
                 rounded([1000, 1010, 990, 1000], [1.05, 1.0, 0.95, 1.1], threads=2),
                 rounded([1000, 1010, 990, 1000], [3.0, 3.2, 2.9, 3.1], threads=3)])
    assert list(tied_with_best(lat, "latency")) == ["best", "yes", "no"]


def test_latency_margin_is_the_next_runs_p99_over_the_picks():
    df = frame([rounded([1000, 1010, 990, 1000], [1.0, 1.1, 0.9, 1.0], threads=1, cores=[0]),
                rounded([1000, 1010, 990, 1000], [2.0, 2.1, 1.9, 2.2], threads=2, cores=[0, 1])])
    rec = recommend(df, objective="latency")
    assert rec.best["key"] == df.loc[0, "key"] and rec.tied == []
    logs = np.log(np.asarray([2.0, 2.1, 1.9, 2.2]) / np.asarray([1.0, 1.1, 0.9, 1.0]))
    assert rec.margin.ratio == pytest.approx(math.exp(logs.mean()), rel=1e-9) and rec.margin.clear
    assert "has a p99" in rec.reason and "higher" in rec.reason


def test_per_core_margin_scales_the_paired_ratio_by_the_cores():
    two = rounded([2000, 2040, 1980, 2020], threads=2, cores=[0, 1])  # 1,000 per core
    four = rounded([3000, 3080, 2980, 3060], threads=4, cores=[0, 1, 2, 3])  # more per run, 750 per core
    df = frame([two, four])
    rec = recommend(df, objective="throughput_per_core", hardware=HARDWARE)
    assert rec.best["key"] == df.loc[0, "key"] and rec.tied == []
    logs = np.log(np.asarray(two["round_throughput"]) / np.asarray(four["round_throughput"]))
    ci = sps.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    # Per core: the pick's throughput over its two cores against the other's over four.
    assert rec.margin.paired and rec.margin.ratio == pytest.approx(4 / 2 * math.exp(logs.mean()), rel=1e-9)
    assert (rec.margin.low, rec.margin.high) == (pytest.approx(2 * math.exp(ci.low), rel=1e-9),
                                                 pytest.approx(2 * math.exp(ci.high), rel=1e-9))
    assert "(1,005 samples/s per core)" in rec.reason  # median 2,010 over two cores
    # Latency objective: the margin is paired by round too, and the reason gives the throughput beside.
    slow = rounded([1500, 1540, 1490, 1530], [2.0, 2.3, 1.9, 2.1], threads=2, cores=[0, 1], batch=2)
    lat = recommend(frame([two, slow]), objective="latency", hardware=HARDWARE)
    assert lat.margin.paired and "it serves 2,010 samples/s" in lat.reason and "ahead of" in lat.reason
    assert "(p99 2.05 ms)" in lat.reason


def test_constraint_misses_name_the_limit_and_the_value():
    from wb_core.analysis.recommend import Constraints

    c = Constraints(max_p99_ms=2.0, max_accuracy_drop=0.01, max_memory_mb=100, max_cores=1)
    r = dict(run(threads=2, cores=[0, 1], p99=2.0, rss=100.0), accuracy_drop=0.02, cores_used=2.0)
    assert c.misses(r) == [("the accuracy drop limit: 0.02 against 0.01", pytest.approx(1.0)),
                           ("the cores limit: 2 against 1", pytest.approx(1.0))]  # p99 and memory at the limit pass
    over = dict(r, latency_ms_p99=3.0, rss_mb=150.0, accuracy_drop=None, cores_used=None)
    assert c.misses(over) == [("the p99 latency limit: 3 ms against 2 ms", pytest.approx(0.5)),
                              ("the accuracy limit: its accuracy drop was not measured", math.inf),
                              ("the memory limit: 150 MB against 100 MB", pytest.approx(0.5)),
                              ("the cores limit: its cores was not recorded", math.inf)]


def test_unmeasured_reduced_precision_is_passed_over_for_a_measured_one():
    fp32 = run(thr=1000.0)
    int8 = run(precision="int8", thr=3000.0)  # faster, accuracy never measured
    rec = recommend(frame([fp32, int8]), hardware=HARDWARE)
    assert rec.best["precision"] == "fp32" and "was never measured" in rec.reason
    measured = dict(int8, accuracy=0.98)
    assert recommend(frame([fp32, measured]), hardware=HARDWARE).best["precision"] == "int8"
    drop_only = dict(int8, accuracy_drop=0.001)
    assert recommend(frame([fp32, drop_only]), hardware=HARDWARE).best["precision"] == "int8"
    upper = dict(run(precision="FP32", thr=500.0))  # fp32 in any case is full precision
    assert "never measured" not in recommend(frame([upper]), hardware=HARDWARE).reason


def test_tie_labels_keep_the_index_and_leave_runs_without_intervals_unknown():
    df = frame([*[r.to_dict() for _, r in _study().iterrows()], run(threads=3, thr=500.0)])
    df.index = [10, 20, 30, 40, 50]
    labels = tied_with_best(df)
    assert list(labels.index) == [10, 20, 30, 40, 50]
    assert list(labels) == ["best", "yes", "no", None, None]  # the last: ok, but measured once
    # Per core without the efficiency columns: judged on throughput, as the function promises.
    assert list(tied_with_best(df, "throughput_per_core")) == list(labels)
    assert list(tied_with_best(df.iloc[[3]])) == [None]  # nothing successful


@pytest.mark.parametrize("simpler, busier", [
    ({"cores": None}, {"cores": [0]}),  # no pinning over pinning
    ({}, {"streams": 2}),  # runtime's streams over a set number
    ({}, {"hint": "LATENCY"}),  # no hint over a hint
    ({"p99_rounds": [0.5, 0.55, 0.45, 0.5]}, {}),  # then the better other metric (lower p99)
])
def test_among_tied_runs_the_runtime_defaults_win(simpler, busier):
    base = [1000, 1040, 990, 1020]
    a = rounded(base, **{"threads": 1, "batch": 1, **busier})
    # b ranks second (a slightly lower median), 0.5% below a in every round: equivalent within +-3%,
    # so only the tie-break can pick it.
    b = rounded([v - 5 for v in base], **{"threads": 1, "batch": 2, **simpler})
    df = frame([a, b])
    rec = recommend(df, hardware=HARDWARE)
    assert len(rec.tied) == 2 and rec.tied[0]["key"] == df.loc[0, "key"], rec.reason
    assert rec.best["key"] == df.loc[1, "key"], rec.reason


def test_among_runs_tied_on_latency_the_higher_throughput_wins():
    p99 = [1.0, 1.1, 0.9, 1.0]
    a = rounded([1000, 1010, 990, 1000], p99, threads=1, batch=1)
    b = rounded([2000, 2010, 1990, 2000], [v + 0.01 for v in p99], threads=1, batch=2)  # 1% slower each round
    df = frame([a, b])
    rec = recommend(df, objective="latency", hardware=HARDWARE)
    assert len(rec.tied) == 2 and rec.tied[0]["key"] == df.loc[0, "key"]
    assert rec.best["key"] == df.loc[1, "key"], rec.reason


def test_find_run_by_key_or_unique_prefix():
    df = _study()
    df["key"] = ["abc1", "abc2", "abd3", "b4"]
    key = "abd3"
    assert find_run(df, key)["key"] == key
    assert find_run(df, "abd")["key"] == key
    assert find_run(df, f"  {key}  ")["key"] == key
    with pytest.raises(ConfigError, match=r"'ab' matches 3 runs; give more characters"):
        find_run(df, "ab")
    with pytest.raises(ConfigError, match=r"No run with key 'nope' in this study; keys look like abc1, abc2, abd3, b4\."):
        find_run(df, "nope")
    with pytest.raises(ConfigError, match=r"No run with key '' in this study"):
        find_run(df, "")
    with pytest.raises(ConfigError, match=r"No run with key 'x' in this study\.$"):
        find_run(df.iloc[0:0], "x")


def test_constraints_in_words():
    from wb_core.analysis.recommend import Constraints

    c = Constraints(max_p99_ms=5, max_accuracy_drop=0.01, max_memory_mb=512, max_cores=2)
    assert c.describe() == "p99 latency ≤ 5 ms and accuracy drop ≤ 0.01 and memory ≤ 512 MB and cores ≤ 2"
    assert Constraints(max_memory_mb=1536).describe() == "memory ≤ 1,536 MB"  # three digits, thousands separated
    assert Constraints().describe() == "no constraints"
    assert Constraints().is_empty() and not Constraints(max_cores=1).is_empty()
    assert not c.is_empty()


def test_run_names_say_every_setting_that_differs_from_the_default():
    from wb_core.analysis.words import run_name

    assert run_name(run(batch=8, threads=2, cores=[0, 1])) == "OpenVINO · FP32 · batch 8 · 2 threads · cores 0+1"
    assert run_name(run(threads=None)) == "OpenVINO · FP32 · batch 1 · auto threads · not pinned"
    busy = dict(run(backend="tensorflow", precision="bf16", batch=4, threads=3), inter_op_threads=2, streams=2,
                hint="THROUGHPUT", concurrency=4, instances=2, seq_len=128)
    name = run_name(busy)
    for part in ("TensorFlow", "BF16", "batch 4", "3 threads", "2 instances", "4 in flight", "length 128"):
        assert part in name, (part, name)
    ones = dict(run(), inter_op_threads=0, streams=None, hint="", concurrency=1, instances=1, seq_len=None)
    assert run_name(ones) == "OpenVINO · FP32 · batch 1 · 1 thread · not pinned"
    assert run_name(dict(run(), untouched=True)).endswith(" · untouched")


def test_rank_orders_and_breaks_ties():
    from wb_core.analysis.recommend import rank

    df = with_cores(frame([run(thr=100.0, p99=2.0, threads=4), run(thr=100.0, p99=1.0, threads=4),
                           run(thr=100.0, p99=1.0, threads=2), run(thr=300.0, p99=5.0, threads=1),
                           run(thr=float("nan"), p99=0.5, threads=1)]))
    assert list(rank(df, "throughput").index) == [3, 2, 1, 0, 4]  # then lower p99, then fewer cores; NaN last
    assert list(rank(df, "latency").index) == [4, 2, 1, 0, 3]  # lowest p99; equal p99: higher throughput, fewer cores
    df["throughput_per_core"] = df["throughput"] / df["cores_used"]
    assert list(rank(df, "throughput_per_core").index) == [3, 2, 1, 0, 4]
    assert not any(c.startswith("_") for c in rank(df, "latency").columns)


def with_cores(df):
    df["cores_used"] = df["threads"].astype(float)
    return df


def test_effective_threads_fall_back_to_what_the_runtime_reported():
    from wb_core.analysis.recommend import effective_threads

    df = frame([run(threads=2), dict(run(threads=None), ov_threads=3), dict(run(threads=None), tf_intra_op=5),
                dict(run(threads=None), ov_threads=0)])
    got = effective_threads(df)
    assert list(got[:3]) == [2, 3, 5] and math.isnan(got[3])


def test_efficiency_columns_on_edge_inputs():
    from wb_core.analysis.recommend import with_efficiency

    empty = with_efficiency(frame([run()]).iloc[0:0], HARDWARE)
    for col in ("cores_given", "cores_used", "throughput_per_core", "gflops", "pct_peak_flops", "oversubscribed"):
        assert col in empty.columns and len(empty[col]) == 0
    assert empty["cores_used"].dtype == float and empty["oversubscribed"].dtype == bool
    # No list of usable CPUs: the logical core count stands in; unpinned runs get all of them.
    hw = {k: v for k, v in HARDWARE.items() if k != "available_cpus"}
    hw["logical_cores"] = 6
    df = frame([run(threads=None), dict(run(threads=8), n_cores=0), dict(run(threads=2), instances=4),
                dict(run(threads=2), instances=None)])
    e = with_efficiency(df, hw)
    assert list(e["cores_given"]) == [6, 6, 6, 6]
    assert list(e["cores_used"]) == [6, 6, 2, 2]  # unknown threads: everything given; else the threads
    assert list(e["oversubscribed"]) == [False, True, True, False]  # 8 threads, and 2 threads x 4 instances, on 6
    assert e.loc[0, "throughput_per_core"] == pytest.approx(1000 / 6)
    hw.pop("logical_cores")
    assert list(with_efficiency(frame([run(threads=None)]), hw)["cores_given"]) == [1]


def test_peak_share_per_precision_over_the_physical_cores():
    from wb_core.analysis.recommend import with_efficiency

    hw = dict(HARDWARE, peak_gflops={"fp32": 400.0, "bf16": 800.0, "int8": 1600.0}, physical_cores=4)
    df = frame([run(threads=2, thr=100.0), run(precision="int8", threads=1, thr=100.0),
                run(precision="fp16", threads=1, thr=100.0)])
    e = with_efficiency(df, hw, flops_per_sample=2e9)
    assert list(e["gflops"]) == pytest.approx([200.0, 200.0, 200.0])
    # fp32 on two of four cores: 200 of 400 / 4 * 2 = 200 -> 100%; int8: 200 of 1600 / 4 = 400 -> 50%;
    # a precision without its own peak is measured against fp32's: 200 of 100 -> 200%.
    assert list(e["pct_peak_flops"]) == pytest.approx([100.0, 50.0, 200.0])
    no_peak = with_efficiency(df, dict(hw, peak_gflops={}), flops_per_sample=2e9)
    assert no_peak["pct_peak_flops"].isna().all()


def test_the_recommendation_record_and_its_notes():
    from wb_core.analysis.recommend import Constraints

    close = frame([rounded([1000, 1060, 990, 1030], threads=1, cores=[0]),
                   rounded([980, 1000, 1000, 1010], threads=1, cores=[1], batch=2),
                   rounded([900, 990, 1080, 1000], threads=1, cores=[1], batch=4)])
    close.loc[1, ["throughput_ci_low", "throughput_ci_high"]] = [1200.0, 1201.0]  # not overlapping: not tied
    close.loc[2, ["throughput_ci_low", "throughput_ci_high"]] = [1202.0, 1203.0]
    c = Constraints(max_p99_ms=10)
    rec = recommend(close, c, runners_up=0, hardware=HARDWARE)
    assert rec.objective == "throughput" and rec.constraints is c and rec.candidates == 3
    assert rec.runners_up == [] and rec.notes and rec.reason.endswith(rec.notes[-1])
    assert "of the 3 successful runs that meet p99 latency ≤ 10 ms" in rec.reason
    assert rec.notes[-1].endswith(", which is within noise.")  # the paired margin over the next run overlaps 1
    assert not rec.margin.clear
    only_int8 = frame([run(precision="int8", thr=3000.0), run(precision="int8", thr=2000.0, batch=2)])
    from wb_core.axes import word_for_cli

    note = recommend(only_int8, hardware=HARDWARE).notes[-1]
    assert word_for_cli(note) == ("Accuracy not measured: the int8 variant's accuracy was never checked "
                                  "(measure it with --data before relying on it).")
    with pytest.raises(WorkbenchError, match=r"^The study has no runs yet; profile the model first"):
        recommend(frame([run()]).iloc[0:0])
    with pytest.raises(WorkbenchError, match=r"\(1 failed, 1 skipped\)"):
        recommend(frame([run(status="failed", thr=float("nan")), run(status="skipped", thr=float("nan"))]))
