"""Intervals for repeated measurements: how sure a median is, and how sure a gain is.

Measurements of one configuration in fresh processes vary far more than the windows of one
run, so a study that repeats each configuration summarises its rounds here: the median, a 95%
Student-t interval of the mean, and the coefficient of variation. Two configurations measured
in the same interleaved rounds are compared round by round (paired log ratios), which cancels
the drift both of them saw.

numpy and scipy's Student t: used by the sweeps (noise-aware search) and the analysis alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95


def t_quantile(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom (a 95% two-sided interval)."""
    from scipy.stats import t as student_t  # here, not at the top: scipy.stats takes a while to import

    if df < 1:
        return math.inf
    return float(student_t.ppf(0.5 + LEVEL / 2, df))


@dataclass(frozen=True)
class Summary:
    """Repeated values of one metric: their median and a 95% interval of their mean."""

    n: int
    median: float
    mean: float
    low: float
    high: float
    cv: float  # standard deviation / mean

    @property
    def half_width(self) -> float:
        """Half the interval's width as a fraction of the mean (0.03: ±3%)."""
        return (self.high - self.low) / 2 / abs(self.mean) if self.mean else math.inf

    def overlaps(self, other: Summary) -> bool:
        return self.low <= other.high and other.low <= self.high


def summarize(values) -> Summary | None:
    """Median, mean, 95% t interval of the mean and CV of finite values; None when there are none.

    One value gives an interval of zero width around it: nothing is known about its noise, and
    callers treat n == 1 as "no interval".
    """
    a = np.asarray([v for v in values if v is not None and math.isfinite(float(v))], dtype=np.float64)
    if a.size == 0:
        return None
    mean = float(a.mean())
    if a.size == 1:
        return Summary(1, mean, mean, mean, mean, 0.0)
    sd = float(a.std(ddof=1))
    half = t_quantile(a.size - 1) * sd / math.sqrt(a.size)
    return Summary(int(a.size), float(np.median(a)), mean, mean - half, mean + half, sd / mean if mean else math.inf)


@dataclass(frozen=True)
class Ratio:
    """How many times B's value is A's, with a 95% interval (1.12, 1.07-1.17: B is 12% higher)."""

    ratio: float
    low: float
    high: float
    n: int
    paired: bool

    @property
    def clear(self) -> bool:
        """The interval leaves out 1: the difference is beyond noise."""
        return self.low > 1 or self.high < 1

    def percent(self) -> str:
        """'12% (95% CI 7-17%)', or with a minus for a loss."""
        return (f"{_pct(self.ratio)} (95% CI {_pct(self.low)} to {_pct(self.high)})" if self.n > 1
                else f"{_pct(self.ratio)} (one measurement each: no interval)")


def ratio(a_values, b_values, a_rounds=None, b_rounds=None) -> Ratio | None:
    """B over A from repeated measurements; paired by round when both name the same rounds.

    Paired: the mean of log(B_r / A_r) over the rounds both have, with a t interval. Unpaired:
    the difference of the mean logs with a Welch interval (conservative degrees of freedom).
    """
    a = [float(v) for v in a_values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    b = [float(v) for v in b_values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not a or not b:
        return None
    if a_rounds is not None and b_rounds is not None and len(a_rounds) == len(a_values) \
            and len(b_rounds) == len(b_values):
        pa = {r: float(v) for r, v in zip(a_rounds, a_values) if v is not None and float(v) > 0}
        pb = {r: float(v) for r, v in zip(b_rounds, b_values) if v is not None and float(v) > 0}
        common = sorted(set(pa) & set(pb))
        if len(common) >= 2:
            d = np.log([pb[r] / pa[r] for r in common])
            half = t_quantile(len(d) - 1) * float(d.std(ddof=1)) / math.sqrt(len(d))
            m = float(d.mean())
            return Ratio(math.exp(m), math.exp(m - half), math.exp(m + half), len(d), True)
    la, lb = np.log(a), np.log(b)
    m = float(lb.mean() - la.mean())
    if len(a) < 2 or len(b) < 2:
        return Ratio(math.exp(m), math.exp(m), math.exp(m), 1, False)
    se = math.sqrt(float(la.var(ddof=1)) / len(a) + float(lb.var(ddof=1)) / len(b))
    half = t_quantile(min(len(a), len(b)) - 1) * se
    return Ratio(math.exp(m), math.exp(m - half), math.exp(m + half), min(len(a), len(b)), False)


def _pct(r: float) -> str:
    v = (r - 1) * 100
    return f"{v:+.0f}%" if abs(v) >= 1 else f"{v:+.1f}%"
