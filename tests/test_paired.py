"""Paired comparisons in one worker and the sequential stopping rule.

The interval of a ratio is checked against scipy (t.interval on the same log ratios); the rule against
cases whose answer is known: a configuration against itself is equivalent, and a batch of 8 takes
longer per request than a batch of 1 on any CPU (eight times the work through the same model), so
their latencies differ, in that direction. Which configurations may share a worker is read from
the configurations themselves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from wb_core.config import InputOptions, RunConfig
from wb_core.stats import DIFFERENCE, EQUIVALENT, UNDECIDED, decide, log_ratio_interval, look_times


def scipy_ratio(d, level=0.95):
    d = np.asarray(d)
    lo, hi = sps.t.interval(level, len(d) - 1, loc=d.mean(), scale=sps.sem(d))
    return math.exp(d.mean()), math.exp(lo), math.exp(hi)


@pytest.mark.parametrize("seed,n", [(0, 4), (1, 9), (2, 30), (3, 120)])
def test_the_log_ratio_interval_is_scipys_t_interval(seed, n):
    d = np.random.default_rng(seed).normal(0.05, 0.03, n)
    got = log_ratio_interval(d)
    want = scipy_ratio(d)
    assert (got.ratio, got.low, got.high) == pytest.approx(want, rel=1e-9)
    assert got.n == n and got.paired
    wide = log_ratio_interval(d, 0.99)
    assert (wide.low, wide.high) == pytest.approx(scipy_ratio(d, 0.99)[1:], rel=1e-9)
    assert log_ratio_interval([]) is None and log_ratio_interval([0.1]).n == 1


def test_the_stopping_rule_spends_its_error_over_its_looks():
    looks = look_times(3, 30)
    assert looks[0] == 3 and looks[-1] == 30 and all(b > a for a, b in zip(looks, looks[1:]))
    d = np.random.default_rng(4).normal(0.0, 0.01, 20)
    dec = decide(d, 0.03, looks=len(looks))
    # The rule reads the interval at 1 - 0.05 / looks (Bonferroni), the answer quotes the 95% one.
    assert dec.decision_level == pytest.approx(1 - 0.05 / len(looks))
    assert (dec.low, dec.high) == pytest.approx(scipy_ratio(d, 1 - 0.05 / len(looks))[1:], rel=1e-9)
    assert (dec.ratio.low, dec.ratio.high) == pytest.approx(scipy_ratio(d)[1:], rel=1e-9)
    assert dec.outcome == EQUIVALENT and dec.low >= 1 / 1.03 and dec.high <= 1.03
    assert "equivalent within +-3%" in dec.sentence()
    # 10% apart with little noise: a difference; straddling the band: undecided; too few pairs: undecided.
    assert decide(d + math.log(1.10), 0.03, len(looks)).outcome == DIFFERENCE
    assert decide(np.random.default_rng(5).normal(0.03, 0.05, 20), 0.03, len(looks)).outcome == UNDECIDED
    few = decide(d[:3] + 1.0, 0.03)
    assert few.outcome == UNDECIDED and few.low > 1.03  # wholly outside the band, yet only 3 pairs
    assert "only 3 pairs of measurements when the time was up, and the rule decides from 4." in few.sentence()
    assert "straddles" not in few.sentence()
    # A difference with a wide interval is decided, but not settled while more time could narrow it.
    loose = decide(np.random.default_rng(6).normal(math.log(1.5), 0.3, 12), 0.03, 1, precision=0.03)
    assert loose.outcome == DIFFERENCE and not loose.settled
    assert decide(d, 0.03, len(looks), precision=0.02).settled  # equivalent, within +-2%
    assert not decide(d, 0.03, len(looks), precision=0.001).settled
    with pytest.raises(ValueError):
        decide(d, 0.0)


def test_blocks_alternate_in_a_balanced_random_order():
    from wb_core.sweep.paired import block_orders

    orders = block_orders(2, 40, seed=3)
    assert all(b == list(reversed(a)) for a, b in zip(orders[::2], orders[1::2]))  # ABBA, BAAB ...
    firsts = [o[0] for o in orders]
    assert firsts.count(0) == firsts.count(1) == 20  # each first as often
    assert len({tuple(o) for o in orders[::2]}) == 2  # the order of a pair of cycles is drawn, not fixed
    three = block_orders(3, 6, seed=1)
    assert all(sorted(o) == [0, 1, 2] for o in three)


def test_which_configurations_share_one_worker():
    from wb_core.sweep.paired import worker_conflict

    a = RunConfig("openvino", batch_size=1, threads=1)
    assert worker_conflict(a, RunConfig("openvino", batch_size=8, threads=2, streams=2, concurrency=2)) is None
    assert worker_conflict(a, RunConfig("openvino", hint="throughput", untouched=True)) is None
    assert worker_conflict(a, RunConfig("openvino", precision="int8")) is None
    assert "cores" in worker_conflict(a, RunConfig("openvino", cores=(0,)))
    assert "instances" in worker_conflict(a, RunConfig("openvino", instances=2))
    assert "runs on" in worker_conflict(a, RunConfig("onnxruntime"))
    # TensorFlow reads its threads from the environment at start: two thread settings need two processes.
    tf = RunConfig("tensorflow", threads=1)
    assert "environment" in worker_conflict(tf, RunConfig("tensorflow", threads=2))
    assert worker_conflict(tf, RunConfig("tensorflow", threads=1, batch_size=8)) is None


def test_copies_that_do_not_fit_in_memory_fall_back_with_a_reason(lenet_ir):
    from wb_core.sweep.paired import memory_conflict

    cfgs = [RunConfig("openvino"), RunConfig("openvino", batch_size=8)]
    assert memory_conflict([lenet_ir, lenet_ir], cfgs) is None
    size_mb = (lenet_ir.stat().st_size + lenet_ir.with_suffix(".bin").stat().st_size) / 2**20
    why = memory_conflict([lenet_ir, lenet_ir], cfgs, available_mb=size_mb)  # less than the copies take
    assert why and "2 copies side by side" in why and "available now" in why


def test_a_configuration_against_itself_is_equivalent(lenet_ir, fast):
    from wb_core.sweep.paired import compare_paired

    a = RunConfig("openvino", batch_size=1, threads=1)
    # A band this wide is decided within seconds even on a machine others keep busy. The interval
    # reaches to within 3% of 1 whatever the band: a 95% interval misses the true ratio one time in
    # twenty by design (a low end of 1.008 was seen once beside a busy test run), while a bias between the
    # sides, such as Python's cost per request weighing on one only, is tens of per cent.
    out = compare_paired([lenet_ir, lenet_ir], [a, a], fast, InputOptions(), [(0, 1)], margin=0.5, max_s=20,
                         precision=None)
    d = out.decisions[(0, 1)]
    assert d.outcome == EQUIVALENT, d.sentence()
    assert d.ratio.low <= 1.03 and d.ratio.high >= 1 / 1.03, d.sentence()
    assert out.stopped == "decided" and len(out.cycles) >= 4
    # Each cycle ran both, in the order it says; each block has its own figures.
    for c in out.cycles:
        assert sorted(c["order"]) == [0, 1]
        assert all(b["requests"] > 0 and b["throughput"] > 0 and b["cpu_ms_per_sample"] > 0 for b in c["blocks"])
    # The words say which of the three it was.
    assert "equivalent within +-50%" in d.sentence() and "Measured side by side in one worker" in out.sentence()


def test_batch_8_against_batch_1_is_a_difference_in_latency_the_right_way(lenet_ir, fast):
    from wb_core.sweep.paired import compare_paired

    one, eight = RunConfig("openvino", batch_size=1, threads=1), RunConfig("openvino", batch_size=8, threads=1)
    out = compare_paired([lenet_ir, lenet_ir], [one, eight], fast, InputOptions(), [(0, 1)],
                         metric="latency_ms_mean", margin=0.03, precision=None, max_s=12)
    d = out.decisions[(0, 1)]
    assert d.outcome == DIFFERENCE, d.sentence()
    assert d.ratio.low > 1.03  # batch 8's request takes longer than batch 1's
    assert out.stopped == "decided"
    assert "differs beyond +-3%" in d.sentence()


@pytest.mark.slow
def test_compare_configs_picks_the_design_from_the_configurations_and_stores_what_it_measured(lenet_ir, db, fast):
    from wb_core.api import compare_configs
    from wb_core.store import Store

    one, eight = RunConfig("openvino", batch_size=1, threads=1), RunConfig("openvino", batch_size=8, threads=1)
    out = compare_configs(lenet_ir, one, eight, db=db, study="c", settings=fast, max_s=5)
    assert out["design"] == "paired" and out["outcome"] in (DIFFERENCE, EQUIVALENT, UNDECIDED)
    assert out["ratio"].low <= out["ratio"].ratio <= out["ratio"].high
    assert "Measured side by side in one worker" in out["sentence"]
    with Store(db, readonly=True) as s:
        stored = [r for r in s.rounds("c") if r["status"] == "ok"]
    assert len(stored) == 2 * out["cycles"] and {r["metrics"]["design"] for r in stored} == {"paired"}
    # The same ratio from the stored blocks, by scipy.
    by = {}
    for r in stored:
        by.setdefault(r["key"], {})[int(r["round"])] = float(r["metrics"]["throughput"])
    want = scipy_ratio([math.log(by[eight.key][i] / by[one.key][i]) for i in sorted(by[one.key])])
    if not out["busy_cycles"] or out["busy_cycles"] == out["cycles"]:  # every cycle counted
        assert (out["ratio"].ratio, out["ratio"].low, out["ratio"].high) == pytest.approx(want, rel=1e-9)
    pinned = RunConfig("openvino", batch_size=1, threads=1, cores=(0,))
    fresh = compare_configs(lenet_ir, one, pinned, db=db, study="f", settings=fast, rounds=2)
    assert fresh["design"] == "rounds" and "its cores differs" in fresh["sentence"]
    assert fresh["ratio"] is not None and fresh["cycles"] == 2


def test_a_slow_model_gets_shorter_blocks_so_the_rule_has_cycles_to_decide_from():
    from wb_core.sweep.paired import block_length

    assert block_length(0.3, 0.001, 30, 5) == 0.3  # a fast model: the block's own length
    assert block_length(0.3, 0.05, 58, 5) == pytest.approx(0.6)  # 12 requests, and 8 cycles still fit
    # ResNet50-like: 12 requests of 0.32 s in 5 configurations would give 3 cycles in 58 s.
    assert block_length(0.3, 0.32, 58, 5) == pytest.approx(6 * 0.32)  # never below 6 requests
    assert block_length(0.3, 0.2, 58, 5) == pytest.approx(58 / (8 * 5))  # 8 cycles fit at 7 requests
