"""The accuracy guard: a reduced-precision variant that strays too far from FP32 is never recommended.

Every INT8 and BF16 variant has its accuracy measured on the study's data (or the model's own
sample data, or random inputs as a last resort) and compared with the FP32 variant of the same
backend. The guard is a limit on that drop, in the metric's own units (positive = worse):

| metric | default limit | meaning |
|---|---|---|
| top1, top5 | 0.01 | at most 1 point of accuracy lost (against labels), or 99% agreement with FP32's top class |
| cosine | 0.01 | cosine similarity to FP32 (or to the reference outputs) of at least 0.99 |
| mse, max_abs, a function | none | no scale-free default: give a limit to guard them |

A variant that misses the limit is "failed": its runs stay in the store and on every plot, marked
as such, and no recommendation, export or Pareto pick ever takes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wb_core.errors import ConfigError

DEFAULT_LIMITS = {"top1": 0.01, "top5": 0.01, "cosine": 0.01}
BOUNDED = ("top1", "top5", "cosine")  # metrics whose drop cannot exceed 1 (or 2 for cosine)

PASSED, FAILED, OFF = "passed", "failed", "off"


@dataclass(frozen=True)
class Guard:
    """The limit on a variant's accuracy drop against FP32: "auto" (per metric), a number, or "off"."""

    limit: float | str = "auto"

    def __post_init__(self):
        value = self.limit
        if isinstance(value, str):
            text = value.strip().lower()
            if text in ("auto", "off"):
                object.__setattr__(self, "limit", text)
                return
            try:
                value = float(text)
            except ValueError:
                raise ConfigError(f"The accuracy guard takes a number (the largest accuracy drop allowed, e.g. "
                                  f"0.01), 'auto' or 'off'; got '{self.limit}'.") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"The accuracy guard's limit must be a number above 0 (the largest accuracy drop "
                              f"allowed, e.g. 0.01); got {self.limit!r}.")
        object.__setattr__(self, "limit", float(value))

    @property
    def off(self) -> bool:
        return self.limit == "off"

    def limit_for(self, metric: str) -> float | None:
        """The limit for this metric's drop; None when the guard has none (off, or no default)."""
        if self.off:
            return None
        if self.limit == "auto":
            return DEFAULT_LIMITS.get(_base(metric))
        return float(self.limit)

    def check_metric(self, metric: str, picked: str = "") -> None:
        """A number too large for a bounded metric would guard nothing: refuse it before any work, whether
        the metric was named or picked (`picked`: why it was, in words)."""
        if isinstance(self.limit, float) and _base(metric) in BOUNDED and self.limit >= 1:
            raise ConfigError(f"An accuracy guard of {self.limit:g} lets any {_base(metric)} pass ({_base(metric)} "
                              f"drops are at most 1{'; ' + picked if picked else ''}): give a limit below 1, such "
                              f"as 0.01.")

    def judge(self, metric: str, precision: str, reference: float, value: float, drop: float) -> dict:
        """The guard's columns for one variant: status and a sentence in words."""
        label = precision.upper()
        if self.off:
            return {"accuracy_guard": OFF, "accuracy_guard_note": f"The accuracy guard is off: {label} was not "
                                                                   f"checked against FP32."}
        limit = self.limit_for(metric)
        if limit is None:
            return {"accuracy_guard_note": f"No default guard for {metric}: {label} was measured but not judged; "
                                           f"set an accuracy guard limit to judge it."}
        what = describe(metric, value, reference)
        if drop is None or not math.isfinite(drop) or drop > limit:
            return {"accuracy_guard": FAILED, "accuracy_guard_limit": limit,
                    "accuracy_guard_note": f"{label} {what}, which misses the accuracy guard "
                                           f"({_threshold(metric, reference, limit)})."}
        return {"accuracy_guard": PASSED, "accuracy_guard_limit": limit,
                "accuracy_guard_note": f"{label} {what}, within the accuracy guard "
                                       f"({_threshold(metric, reference, limit)})."}

    def passes(self, metric: str, drop: float | None) -> bool:
        limit = self.limit_for(metric)
        return limit is None or (drop is not None and math.isfinite(drop) and drop <= limit)


def _base(metric: str) -> str:
    return str(metric).split(" ")[0]


def describe(metric: str, value: float, reference: float) -> str:
    """'cosine to FP32 0.081' / 'top-1 accuracy 95.1% (FP32 96.2%)' in words."""
    base = _base(metric)
    if metric.endswith("vs fp32"):
        if base == "cosine":
            return f"has a cosine similarity to FP32 of {value:.3f}"
        if base in ("top1", "top5"):
            return f"agrees with FP32's top class on {value:.1%} of samples" if base == "top1" else \
                f"keeps FP32's top class in its top 5 on {value:.1%} of samples"
        return f"has {base} {value:.3g} against FP32"
    if base in ("top1", "top5"):
        return f"has {base.replace('top', 'top-')} accuracy {value:.1%} (FP32 {reference:.1%})"
    return f"has {metric} {value:.4g} (FP32 {reference:.4g})"


def _threshold(metric: str, reference: float, limit: float) -> str:
    base = _base(metric)
    if metric.endswith("vs fp32") and base in ("cosine", "top1", "top5"):
        return f"at least {reference - limit:.3g}" if base == "cosine" else f"at least {reference - limit:.1%}"
    if base in ("top1", "top5"):
        return f"at most {limit * 100:.3g} point{'s' if limit * 100 != 1 else ''} below FP32"
    return f"a drop of at most {limit:g}"
