"""The accuracy guard: a reduced-precision variant that strays too far from FP32 is never recommended.

Every INT8 and BF16 variant has its accuracy measured on the study's data (or the model's own
sample data, or random inputs as a last resort) and compared with the FP32 variant of the same
backend. The guard is a limit on that drop, in the metric's own units (positive = worse):

| metric | default limit | meaning |
|---|---|---|
| top1, top5 | 0.01 | at most 1 point of accuracy lost (against labels), or 99% agreement with FP32's top class |
| cosine | 0.01 | cosine similarity to FP32 (or to the reference outputs) of at least 0.99 |
| mse, max_abs, a function | none | no scale-free default: give a limit to guard them |

That is the headline metric, read on one output (the one chosen, else the first). Beside it every
output judged (the one chosen, else all of them) is read as a kind (`wb_core.variants.agreement`)
and checked on the figures that fit its task, against FP32 on the same inputs; the strictest
decides, and the verdict names the output and the figure that failed:

| kind | figure | default limit |
|---|---|---|
| classes | top-1 agreement with FP32 | at least 0.90 (1) |
| classes (C >= 5) | FP32's top class in the variant's top 5 | at least 0.98 |
| detection | cosine of the score block alone | at least 0.99 (2) |
| detection | FP32's detections above 0.25 kept (same anchor, same class, box IoU >= 0.5) | at least 0.90 |
| detection | detections added above 0.25, as a share of FP32's count | at most 0.10 |
| detection | mean box IoU of the detections kept | at least 0.80 (3) |
| ctc | greedy-decoded sequences identical to FP32's | at least 0.95 (4) |
| ctc | character error rate against FP32's sequences | at most 0.02 |
| tokens | per-step top-1 agreement | at least 0.90 |
| embedding | cosine | at least 0.99 |
| values | cosine | at least 0.99 |
| values | worst element's error over FP32's largest magnitude | at most 0.25 (5) |
| decoded | a user's decoded items identical to FP32's | at least 0.95 (6) |
| decoded | edit distance of decoded sequences, per item of FP32's | at most 0.02 (6) |

Why these numbers: (1) a good INT8 classifier changes its top class only on near ties (93-99%
agreement on real data), while broken ones were seen at 44-78% with a cosine still >= 0.99;
(2) box coordinates (hundreds of pixels) swamp the scores (0-1) in a whole output's cosine: a head
whose scores alone had a cosine of 0.71 had a whole cosine of 0.999; (3) INT8 boxes move by a pixel
or two, not by a fifth of their size; (4) a recogniser at a cosine of 0.9902 read 9 of 64 lines
differently (0.86); (5) a quarter of the output's range is no rounding error; (6) the CTC head's
limits, for a task the user's own decoding reads (labels, sequences, strings).

A number given as the guard is the limit of the headline metric's drop; the output checks keep
their limits; "off" turns both off. A variant whose accuracy could not be measured is failed too:
it was never checked.

A variant that misses a limit is "failed": its runs stay in the store and on every plot, marked
as such, and no recommendation, export or Pareto pick ever takes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wb_core.errors import ConfigError
from wb_core.variants.agreement import KIND_WORDS

DEFAULT_LIMITS = {"top1": 0.01, "top5": 0.01, "cosine": 0.01}
# figure -> (higher is better, default limit): the output checks of the table above
OUTPUT_LIMITS = {"top1_agreement": (True, 0.90), "top5_agreement": (True, 0.98), "score_cosine": (True, 0.99),
                 "detections_kept": (True, 0.90), "detections_added": (False, 0.10), "box_iou": (True, 0.80),
                 "sequence_agreement": (True, 0.95), "cer": (False, 0.02), "token_agreement": (True, 0.90),
                 "cosine": (True, 0.99), "worst_relative_error": (False, 0.25),
                 "decoded_agreement": (True, 0.95), "decoded_error_rate": (False, 0.02)}
KIND_CHECKS = {"classes": ("top1_agreement", "top5_agreement"),
               "detection": ("detections_kept", "detections_added", "box_iou", "score_cosine"),
               "ctc": ("sequence_agreement", "cer"), "tokens": ("token_agreement",), "embedding": ("cosine",),
               "values": ("cosine", "worst_relative_error"),
               "decoded": ("decoded_agreement", "decoded_error_rate")}
BOUNDED = ("top1", "top5", "cosine")  # metrics whose drop cannot exceed 1 (or 2 for cosine)

PASSED, FAILED, OFF = "passed", "failed", "off"
FAILED_WORDS = "accuracy failed"  # how tables and plots mark a run of a variant that failed


def guard_failed_runs(df):
    """Mask of the runs of a results frame whose accuracy guard failed (none when it was not measured):
    the one reading of the verdict that recommend, pick, plots, the report and the dashboard share."""
    import pandas as pd

    if df is None or df.empty or "accuracy_guard" not in df.columns:
        return pd.Series(False, index=getattr(df, "index", None), dtype=bool)
    return df["accuracy_guard"].astype(object).map(lambda v: v == FAILED).astype(bool)


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

    def judge(self, metric: str, precision: str, reference: float, value: float, drop: float,
              label: str | None = None) -> dict:
        """The guard's columns for one variant: status and a sentence in words (`label` names it, by
        default its precision)."""
        label = label or precision.upper()
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

    def check_outputs(self, outputs: list[dict]) -> list[dict]:
        """Each output's checks, {output, figure, value, limit, passed}; none when the guard is off.

        `outputs`: [{output, kind, figures}] as `wb_core.variants.agreement` gives them."""
        if self.off:
            return []
        checks = []
        for out in outputs:
            figures = out.get("figures") or {}
            for figure in KIND_CHECKS.get(out.get("kind"), ()):
                value = figures.get(figure)
                if value is None:
                    continue  # e.g. no FP32 detection to keep: nothing to judge
                higher, limit = OUTPUT_LIMITS[figure]
                ok = math.isfinite(value) and (value >= limit if higher else value <= limit)
                checks.append({"output": out["output"], "figure": figure, "value": value, "limit": limit,
                               "passed": bool(ok), "kind": out.get("kind")})
        return checks

    def verdict(self, metric: str | None, precision: str, reference: float | None, value: float | None,
                drop: float | None, outputs: list[dict], label: str | None = None) -> dict:
        """The guard's columns for one variant from its headline metric and its outputs' checks: the
        strictest decides, and a failure names the output and the figure (`label` names the variant)."""
        cols = self.judge(metric, precision, reference, value, drop, label) \
            if metric is not None and value is not None else {}
        if self.off:
            return cols or self.judge("", precision, 0, 0, 0, label)
        checks = self.check_outputs(outputs)
        failed = [c for c in checks if not c["passed"]]
        label = label or precision.upper()
        # An output may be read twice (as its kind, and by a user's decoding): a check belongs to its own reading.
        kinds = {(o["output"], o.get("kind")): o for o in outputs}
        if failed:
            first = failed[0]
            words = f"{label} fails the accuracy guard on " + check_words(
                first, kinds.get((first["output"], first.get("kind")), {}))
            if len(failed) > 1:
                words += "; also missed: " + ", ".join(f"{short_words(c)} on '{c['output']}'" for c in failed[1:])
            if cols.get("accuracy_guard") == FAILED:
                words += ". " + cols["accuracy_guard_note"]
            else:
                words += "."
            cols.update(accuracy_guard=FAILED, accuracy_guard_note=words)
        elif checks:
            summary = "; ".join(f"'{o['output']}' ({KIND_WORDS.get(o['kind'], o['kind'])}) "
                                + ", ".join(short_words(c) for c in checks if _of(c, o))
                                for o in outputs if any(_of(c, o) for c in checks))
            if cols.get("accuracy_guard") != FAILED:
                cols["accuracy_guard"] = PASSED
            note = cols.get("accuracy_guard_note")
            if note and note.startswith("No default guard"):
                note = None  # the outputs' checks judged it after all
            cols["accuracy_guard_note"] = ((note + " ") if note else f"{label} is within the accuracy guard. ") + \
                f"Its outputs pass their checks: {summary}."
        return cols

    def unchecked(self, precision: str, why: str) -> dict:
        """A reduced precision whose accuracy could not be measured: never checked, so never recommended."""
        if self.off:
            return self.judge("", precision, 0, 0, 0)
        return {"accuracy_guard": FAILED, "accuracy_guard_note": f"{precision.upper()} could not be checked "
                                                                 f"against FP32: {why.rstrip('.')}."}

    def passes(self, metric: str, drop: float | None) -> bool:
        limit = self.limit_for(metric)
        return limit is None or (drop is not None and math.isfinite(drop) and drop <= limit)


def _of(check: dict, output: dict) -> bool:
    """Whether a check belongs to this reading of an output."""
    return check["output"] == output["output"] and check.get("kind", output.get("kind")) == output.get("kind")


def _share(x: float) -> str:
    """'51.6%', '90%'."""
    text = f"{x:.1%}"
    return text[:-3] + "%" if text.endswith(".0%") else text


def check_words(check: dict, output: dict) -> str:
    """"output 'boxes' (class scores of the detection head): 3 of 16 FP32 detections above 0.25 survive
    (at least 90% must)" for a failed check."""
    f, v, limit = check["figure"], check["value"], check["limit"]
    fig = output.get("figures") or {}
    where = f"output '{check['output']}' ({KIND_WORDS.get(output.get('kind'), output.get('kind', 'values'))})"
    if f == "top1_agreement":
        what = f"it agrees with FP32's top class on {_share(v)} of samples (at least {_share(limit)} must)"
    elif f == "top5_agreement":
        what = f"it keeps FP32's top class in its top 5 on {_share(v)} of samples (at least {_share(limit)} must)"
    elif f == "score_cosine":
        what = (f"the scores alone have a cosine similarity to FP32 of {v:.3f} (at least {limit:g}; the whole "
                f"output's is {fig.get('cosine', float('nan')):.4f})")
    elif f == "detections_kept":
        what = (f"{fig.get('detections_kept_count')} of {fig.get('detections')} FP32 detections above "
                f"{fig.get('threshold', 0.25):g} survive (at least {_share(limit)} must)")
    elif f == "detections_added":
        what = (f"{fig.get('detections_added_count')} detections above {fig.get('threshold', 0.25):g} appear that "
                f"FP32 does not have, against FP32's {fig.get('detections')} (at most {_share(limit)})")
    elif f == "box_iou":
        what = f"the boxes it keeps overlap FP32's by an IoU of {v:.2f} on average (at least {limit:g})"
    elif f == "sequence_agreement":
        what = (f"{fig.get('sequences_same')} of {fig.get('samples')} decoded sequences read as FP32's "
                f"(at least {_share(limit)} must)")
    elif f == "cer":
        what = f"its decoded sequences differ from FP32's by a character error rate of {v:.1%} (at most {limit:.0%})"
    elif f == "token_agreement":
        what = f"it agrees with FP32's top class at {_share(v)} of steps (at least {_share(limit)} must)"
    elif f == "decoded_agreement":
        what = (f"{fig.get('decoded_same')} of {fig.get('samples')} samples decode to FP32's items "
                f"(at least {_share(limit)} must)")
    elif f == "decoded_error_rate":
        what = f"its decoded sequences differ from FP32's by an edit rate of {v:.1%} (at most {limit:.0%})"
    elif f == "cosine":
        what = f"it has a cosine similarity to FP32 of {v:.3f} (at least {limit:g})"
    elif f == "worst_relative_error":
        what = f"its worst element is off by {v:.0%} of FP32's largest magnitude (at most {limit:.0%})"
    else:
        what = f"{f} is {v:.4g} (limit {limit:g})"
    return f"{where}: {what}"


SHORT = {"top1_agreement": "top-1 agreement", "top5_agreement": "top-5 agreement", "score_cosine": "score cosine",
         "detections_kept": "detections kept", "detections_added": "detections added", "box_iou": "box IoU",
         "sequence_agreement": "sequences identical", "cer": "character error rate",
         "token_agreement": "step agreement", "cosine": "cosine", "worst_relative_error": "worst relative error",
         "decoded_agreement": "decoded items identical", "decoded_error_rate": "decoded edit rate"}


def short_words(check: dict) -> str:
    """'top-1 agreement 99.2%' / 'cosine 0.998'."""
    f, v = check["figure"], check["value"]
    shares = ("top1_agreement", "top5_agreement", "detections_kept", "detections_added", "sequence_agreement",
              "cer", "token_agreement", "worst_relative_error", "decoded_agreement", "decoded_error_rate")
    return f"{SHORT.get(f, f)} {_share(v) if f in shares else format(v, '.3f')}"


def figure_words(output: dict) -> str:
    """Every figure of one output in short words, the checked ones with their verdict:
    'score cosine 0.710 (failed, at least 0.99); cosine 0.999'."""
    checks = {c["figure"]: c for c in output.get("checks") or []}
    parts = []
    for figure, value in (output.get("figures") or {}).items():
        if figure not in SHORT or not isinstance(value, (int, float)):
            continue
        text = short_words({"figure": figure, "value": value})
        if figure in checks:
            higher, limit = OUTPUT_LIMITS[figure]
            bound = _share(limit) if figure not in ("score_cosine", "box_iou", "cosine") else f"{limit:g}"
            text += f" ({'passed' if checks[figure]['passed'] else 'failed'}, {'at least' if higher else 'at most'} " \
                    f"{bound})"
        parts.append(text)
    return "; ".join(parts)


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
