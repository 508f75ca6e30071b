"""The 95% intervals, ratios and ties of wb_core.stats against closed forms and scipy, plus their invariants.

The references are computed here from first principles (closed forms of Student's t, numpy) or through
other scipy routes than the one stats.py uses (t.interval, ttest_1samp, ttest_rel), so a wrong level, a
wrong degree of freedom or a wrong scale factor in stats.py shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from wb_core.stats import Ratio, Summary, ratio, summarize, t_quantile

# Positive, finite measurements of a plausible size (throughputs, latencies).
values = st.floats(min_value=0.5, max_value=5000, allow_nan=False, allow_infinity=False)
samples = st.lists(values, min_size=2, max_size=30)


def test_t_quantile_matches_closed_forms():
    # df=1 is Cauchy: tan(pi (p - 1/2)); df=2: (2p-1) / sqrt(2 p (1-p)); p = 0.975.
    p = 0.975
    assert t_quantile(1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)  # 12.7062
    assert t_quantile(2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)  # 4.3027
    # Large df tends to the normal's 1.959964 (not the 1.96 cut-off of a table), from above.
    assert 1.959964 < t_quantile(1000) < 1.9624
    assert t_quantile(0) == math.inf


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 29, 30, 31, 40, 60, 120])
def test_t_quantile_is_scipys(df):
    # Through the interval scipy gives for a standard t, not through ppf.
    low, high = sps.t.interval(0.95, df)
    assert t_quantile(df) == pytest.approx(high, rel=1e-9) and -low == pytest.approx(high, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(samples)
def test_summary_interval_is_the_t_interval_of_the_mean(xs):
    a = np.asarray(xs)
    assume(a.std(ddof=1) > 1e-6 * a.mean())  # scipy warns of cancellation on near-identical values
    s = summarize(xs)
    ci = sps.ttest_1samp(a, 0.0).confidence_interval(0.95)
    assert s.n == len(xs)
    assert s.mean == pytest.approx(a.mean(), rel=1e-12)
    assert s.median == pytest.approx(float(np.median(a)), rel=1e-12)
    assert (s.low, s.high) == (pytest.approx(ci.low, rel=1e-9, abs=1e-9), pytest.approx(ci.high, rel=1e-9, abs=1e-9))
    assert s.cv == pytest.approx(a.std(ddof=1) / a.mean(), rel=1e-9)
    assert s.half_width == pytest.approx((ci.high - ci.low) / 2 / a.mean(), rel=1e-9)


def test_summary_of_known_numbers():
    # 10, 12, 14: mean 12, sd 2, half width t(2) * 2 / sqrt(3) = 4.3027 * 1.1547 = 4.968
    s = summarize([10, 12, 14])
    assert (s.mean, s.median) == (12, 12)
    assert s.high - 12 == pytest.approx(4.302653 * 2 / math.sqrt(3), rel=1e-6)
    assert s.cv == pytest.approx(2 / 12)
    # Non-finite and missing values are left out; one value has no interval; none gives None.
    assert summarize([10, None, float("nan"), 14, float("inf"), 12]) == s
    assert summarize([5.0]) == Summary(1, 5.0, 5.0, 5.0, 5.0, 0.0)
    assert summarize([]) is None and summarize([None, float("nan")]) is None


@settings(max_examples=60, deadline=None)
@given(samples, st.floats(min_value=-100, max_value=100), st.floats(min_value=0.01, max_value=100))
def test_summary_follows_shifts_and_scales(xs, shift, scale):
    s = summarize(xs)
    moved = summarize([x * scale + shift for x in xs])
    tol = 1e-6 * (1 + abs(shift) + scale * max(xs))
    assert s.low <= s.mean <= s.high
    assert moved.mean == pytest.approx(s.mean * scale + shift, abs=tol)
    assert moved.high - moved.low == pytest.approx((s.high - s.low) * scale, abs=tol)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(values, values), min_size=2, max_size=20))
def test_paired_ratio_is_the_t_interval_of_log_ratios(pairs):
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    rounds = list(range(len(pairs)))
    r = ratio(a, b, rounds, rounds)
    d = np.log(np.asarray(b) / np.asarray(a))
    assert r.paired and r.n == len(pairs)
    assert r.ratio == pytest.approx(math.exp(d.mean()), rel=1e-9)
    if d.std(ddof=1) > 1e-6:
        # scipy's paired t-test on the logs gives the same interval of the mean log ratio.
        ci = sps.ttest_rel(np.log(b), np.log(a)).confidence_interval(0.95)
        assert r.low == pytest.approx(math.exp(ci.low), rel=1e-7)
        assert r.high == pytest.approx(math.exp(ci.high), rel=1e-7)
        assert r.clear == (ci.low > 0 or ci.high < 0)


def test_unpaired_ratio_uses_the_smaller_sample_for_its_degrees_of_freedom():
    a, b = [100.0, 104.0, 98.0, 101.0], [110.0, 115.0, 108.0]
    la, lb = np.log(a), np.log(b)
    m = lb.mean() - la.mean()
    se = math.sqrt(la.var(ddof=1) / 4 + lb.var(ddof=1) / 3)
    half = sps.t.interval(0.95, 2)[1] * se  # min(4, 3) - 1 degrees of freedom: conservative
    r = ratio(a, b)
    assert not r.paired and r.n == 3
    assert (r.ratio, r.low, r.high) == (pytest.approx(math.exp(m)), pytest.approx(math.exp(m - half)),
                                        pytest.approx(math.exp(m + half)))
    # Never narrower than Welch's interval with the Welch-Satterthwaite degrees of freedom.
    welch = sps.ttest_ind(lb, la, equal_var=False).confidence_interval(0.95)
    assert r.low <= math.exp(welch.low) and r.high >= math.exp(welch.high)


def test_rounds_that_do_not_match_fall_back_to_unpaired():
    a, b = [100.0, 104.0, 98.0], [110.0, 115.0, 108.0]
    assert ratio(a, b, [0, 1, 2], [3, 4, 5]).paired is False  # no common round
    assert ratio(a, b, [0, 1], [0, 1, 2]).paired is False  # rounds do not name every value
    one = ratio([100.0], [110.0])
    assert (one.ratio, one.low, one.high, one.n) == (pytest.approx(1.1), pytest.approx(1.1), pytest.approx(1.1), 1)
    assert ratio([], [1.0]) is None and ratio([0.0, -1.0], [1.0]) is None


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.floats(min_value=0.01, max_value=100))
def test_ratio_invariants(a, b, c):
    r = ratio(a, b)
    back = ratio(b, a)
    # B over A is the inverse of A over B, interval included; scaling both leaves it unchanged.
    assert back.ratio == pytest.approx(1 / r.ratio, rel=1e-9)
    assert back.low == pytest.approx(1 / r.high, rel=1e-9) and back.high == pytest.approx(1 / r.low, rel=1e-9)
    scaled = ratio([x * c for x in a], [x * c for x in b])
    assert scaled.ratio == pytest.approx(r.ratio, rel=1e-9) and scaled.low == pytest.approx(r.low, rel=1e-9)
    assert r.low <= r.ratio <= r.high
    assert r.clear == (r.low > 1 or r.high < 1)
    assert ratio(a, a, list(range(len(a))), list(range(len(a)))) == Ratio(1.0, 1.0, 1.0, len(a), True)


@settings(max_examples=60, deadline=None)
@given(samples, samples)
def test_ties_are_overlapping_intervals(a, b):
    sa, sb = summarize(a), summarize(b)
    expected = not (sa.high < sb.low or sb.high < sa.low)  # intervals [low, high] intersect
    assert sa.overlaps(sb) == sb.overlaps(sa) == expected
    assert sa.overlaps(sa)


def test_a_clear_gain_and_a_tie_in_words():
    gain = Ratio(1.12, 1.07, 1.17, 5, True)
    assert gain.clear and gain.percent() == "+12% (95% CI +7% to +17%)"
    tie = Ratio(1.004, 0.98, 1.03, 5, True)
    assert not tie.clear and tie.percent() == "+0.4% (95% CI -2% to +3%)"
    loss = Ratio(0.9, 0.85, 0.95, 3, False)
    assert loss.clear and loss.percent().startswith("-10%")
    assert Ratio(1.1, 1.1, 1.1, 1, False).percent() == "+10% (one measurement each: no interval)"


def test_edges_of_the_filters_and_the_wording():
    # Intervals far apart do not tie; a mean of zero has no CV.
    assert not summarize([1.0, 1.1, 1.2]).overlaps(summarize([100.0, 101.0, 102.0]))
    assert summarize([-1.0, 1.0]).cv == math.inf
    # Values that cannot be in a ratio (missing, zero, negative, not finite) are left out on either side.
    clean = ratio([100.0, 110.0], [120.0, 130.0])
    assert ratio([100.0, 110.0, 0.0, None], [None, 0.0, -5.0, float("nan"), 120.0, 130.0]) == clean
    # Paired: a round where one side is zero or missing drops out of the pairing.
    a, b, rounds = [100.0, 0.0, 104.0, None], [110.0, 120.0, 115.0, 108.0], [0, 1, 2, 3]
    assert ratio(a, b, rounds, rounds).n == 2 and ratio(b, a, rounds, rounds).n == 2
    # One value on either side: no interval, and not paired.
    one = ratio([100.0], [110.0, 120.0, 130.0])
    assert one.n == 1 and one.low == one.high == one.ratio and one.paired is False
    assert ratio([100.0, 120.0], [110.0]).n == 1
    # Two rounds do give an interval; percentages are of the ratio minus one.
    assert "95% CI" in Ratio(1.1, 1.0, 1.2, 2, True).percent()
    assert Ratio(3.0, 3.0, 3.0, 1, False).percent().startswith("+200%")
    assert Ratio(1.015, 1.015, 1.015, 1, False).percent().startswith("+1% ")  # 1.4999...: whole percent from 1% up
    assert Ratio(1.009, 1.009, 1.009, 1, False).percent().startswith("+0.9% ")


def test_two_values_on_each_side_give_an_unpaired_interval():
    a, b = [100.0, 104.0], [110.0, 112.0]
    r = ratio(a, b)
    la, lb = np.log(a), np.log(b)
    half = sps.t.interval(0.95, 1)[1] * math.sqrt(la.var(ddof=1) / 2 + lb.var(ddof=1) / 2)
    assert r.n == 2 and not r.paired
    assert r.low == pytest.approx(math.exp(lb.mean() - la.mean() - half))
    assert r.high == pytest.approx(math.exp(lb.mean() - la.mean() + half))
