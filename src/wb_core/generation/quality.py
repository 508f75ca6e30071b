"""The quality guard of a generation study, as numbers (numpy only; the logits come from a worker).

A compressed variant is compared with the uncompressed model on the same prompts:

- greedy token agreement: the share of output positions where both chose the same token, and the
  first position where they differ (one early difference changes everything after it, so this is
  reported, not gated);
- teacher-forced top-1 agreement: both models read the prompt followed by the reference's own
  continuation, and at each continuation position we check that the variant's most likely next
  token is the reference's (a difference here does not cascade);
- mean KL divergence of the variant's next-token distribution from the reference's there.

The guard (on by default) fails a variant whose teacher-forced top-1 agreement is below
`DEFAULT_MIN_TOP1` (0.90): such a variant picks another next token than the model it replaces in
more than one position in ten. A failed variant is stored with `accuracy_guard = "failed"`, the
rule every pick and recommendation already applies (`analysis.pick`).
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_MIN_TOP1 = 0.90


def percentile(values, q: float) -> float:
    """The q-th percentile (linear interpolation, as numpy's default)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def compare(prompts, ref_tokens, cand_tokens, ref_logits, cand_logits) -> dict:
    """Agreement of a candidate with the reference (see the module docstring).

    `ref_logits[i]`, `cand_logits[i]`: [sequence, vocab] over prompt i followed by the reference's
    continuation; position t predicts token t + 1."""
    same = total = 0
    first: int | None = None
    for r, c in zip(ref_tokens, cand_tokens):
        n = min(len(r), len(c))
        eq = [r[i] == c[i] for i in range(n)]
        same += sum(eq)
        total += max(len(r), len(c))
        div = next((i for i, e in enumerate(eq) if not e), None if len(r) == len(c) else n)
        if div is not None:
            first = div if first is None else min(first, div)
    top1_same = top1_total = 0
    kls = []
    for p, r, lr, lc in zip(prompts, ref_tokens, ref_logits, cand_logits):
        start = len(p) - 1
        rows = slice(start, start + len(r))
        target = np.asarray(r)
        top1_same += int((np.argmax(lc[rows], axis=-1) == target).sum())
        top1_total += len(r)
        a, b = _log_softmax(lr[rows].astype(np.float64)), _log_softmax(lc[rows].astype(np.float64))
        kls.extend((np.exp(a) * (a - b)).sum(axis=-1).tolist())
    kl = float(np.mean(kls)) if kls else math.nan
    return {"greedy_agreement": same / total if total else math.nan, "first_divergence": first,
            "top1_agreement": top1_same / top1_total if top1_total else math.nan, "mean_kl": kl}


def verdict(q: dict, min_top1: float = DEFAULT_MIN_TOP1) -> tuple[str, str]:
    """("passed" | "failed", the note a failed run carries)."""
    top1 = q.get("top1_agreement")
    if top1 is None or (isinstance(top1, float) and math.isnan(top1)) or top1 < min_top1:
        return "failed", (f"quality failed: its teacher-forced top-1 agreement with the uncompressed model is "
                          f"{top1:.3f}, below the {min_top1:.2f} limit")
    return "passed", ""
