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

from wb_core.errors import counted

LEVEL = 0.95


def t_quantile(df: int, level: float = LEVEL) -> float:
    """The upper quantile of Student's t with `df` degrees of freedom for a two-sided interval at
    `level` (0.95: the 97.5% quantile)."""
    from scipy.stats import t as student_t  # here, not at the top: scipy.stats takes a while to import

    if df < 1:
        return math.inf
    return float(student_t.ppf(0.5 + level / 2, df))


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


def log_ratio_interval(log_ratios, level: float = LEVEL) -> Ratio | None:
    """B over A from paired log ratios log(B_i / A_i): the exponent of their mean, with a Student-t
    interval at `level`; None without a finite value, no interval (n 1) from one."""
    d = np.asarray([float(v) for v in log_ratios if v is not None and math.isfinite(float(v))], dtype=np.float64)
    if d.size == 0:
        return None
    m = float(d.mean())
    if d.size == 1:
        return Ratio(math.exp(m), math.exp(m), math.exp(m), 1, True)
    half = t_quantile(d.size - 1, level) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return Ratio(math.exp(m), math.exp(m - half), math.exp(m + half), int(d.size), True)


# The three answers of a sequential comparison.
DIFFERENCE, EQUIVALENT, UNDECIDED = "difference", "equivalent", "undecided"
MIN_PAIRS = 4  # pairs before the stopping rule looks at all: a t interval from fewer says little


def look_times(first_s: float, max_s: float, growth: float = 1.5) -> list[float]:
    """When a sequential comparison looks at its data, in seconds of measuring: `first_s`, then each
    look `growth` times later, and `max_s` last. Known before measuring starts, so the error can be
    spent over a fixed number of looks."""
    out, t = [], float(first_s)
    while t < max_s:
        out.append(t)
        t *= growth
    return out + [float(max_s)]


@dataclass(frozen=True)
class Decision:
    """What a sequential comparison concluded: `outcome` one of DIFFERENCE (the ratio's interval lies
    outside the band 1/(1+margin) .. 1+margin), EQUIVALENT (inside it) or UNDECIDED (neither by the
    last look). `ratio` carries the 95% interval; `low`/`high` the wider one the rule read, at
    `decision_level` (the error 1 - LEVEL spent evenly over `looks` looks, Bonferroni), so a difference
    is called where there is none, or equivalence where the true ratio is outside the band, in at
    most 5% of comparisons however often it looked."""

    outcome: str
    ratio: Ratio
    low: float
    high: float
    margin: float
    looks: int
    decision_level: float
    precise: bool = True  # the 95% interval is within the precision asked for (when one was)

    @property
    def half_width(self) -> float:
        """Half the 95% interval's width as a fraction of the ratio."""
        return (self.ratio.high - self.ratio.low) / 2 / self.ratio.ratio

    def sentence(self, what: str = "The ratio") -> str:
        m = f"+-{100 * self.margin:g}%"
        rule = f"decided at {100 * self.decision_level:.1f}% per look over {counted(self.looks, 'look')}"
        wrong = f"so each answer is wrong in at most {100 * (1 - LEVEL):g}% of comparisons"
        if self.outcome == DIFFERENCE:
            return f"{what} differs beyond {m}: {self.ratio.percent()}, {rule}, {wrong}."
        if self.outcome == EQUIVALENT:
            return f"{what} is equivalent within {m}: {self.ratio.percent()}, {rule}, {wrong}."
        if self.ratio.n < MIN_PAIRS:  # its interval may lie wholly outside the band: too few pairs to decide on
            return (f"{what} is undecided: {self.ratio.percent()}; only {counted(self.ratio.n, 'pair')} of "
                    f"measurements when the time was up, and the rule decides from {MIN_PAIRS}.")
        return (f"{what} is undecided: {self.ratio.percent()}; the interval the rule reads, "
                f"{_pct(self.low)} to {_pct(self.high)} at {100 * self.decision_level:.1f}%, still straddles {m} when "
                f"the time was up ({rule}).")

    @property
    def settled(self) -> bool:
        """Decided, and the figure said beside the answer precise enough (`precise`): measuring more
        would add nothing."""
        return self.outcome != UNDECIDED and self.precise

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "ratio": self.ratio.ratio, "low": self.ratio.low, "high": self.ratio.high,
                "n": self.ratio.n, "decision_low": self.low, "decision_high": self.high, "margin": self.margin,
                "looks": self.looks, "decision_level": self.decision_level}


def decide(log_ratios, margin: float, looks: int = 1, precision: float | None = None) -> Decision | None:
    """The stopping rule on paired log ratios: DIFFERENCE when the interval at the spent level lies
    outside +-`margin`, EQUIVALENT when inside it, else UNDECIDED. `precision` (0.02) only says
    whether the answer is `settled`: whether its 95% interval is also within that fraction of the
    ratio, so the figure said beside it is worth quoting (else measuring goes on while time allows).
    None without data."""
    if not margin > 0:
        raise ValueError(f"margin must be positive; got {margin!r}")
    r95 = log_ratio_interval(log_ratios)
    if r95 is None:
        return None
    looks = max(1, int(looks))
    level = 1 - (1 - LEVEL) / looks
    wide = log_ratio_interval(log_ratios, level)
    lo_band, hi_band = 1 / (1 + margin), 1 + margin
    outcome = UNDECIDED
    if r95.n >= MIN_PAIRS:
        if wide.low > hi_band or wide.high < lo_band:
            outcome = DIFFERENCE
        elif wide.low >= lo_band and wide.high <= hi_band:
            outcome = EQUIVALENT
    precise = precision is None or (r95.high - r95.low) / 2 / r95.ratio <= precision
    return Decision(outcome, r95, wide.low, wide.high, margin, looks, level, precise)
