"""Recommending a generation study's run under time-to-first-token, time-per-token and latency limits.

The runs a pick may choose from are those `pick.pickable` keeps (succeeded, not quality-failed:
a weight-compressed variant below the quality guard carries `accuracy_guard = "failed"`, the rule
every recommendation applies); among those within the limits, the most output tokens/s.
"""

from __future__ import annotations

import pandas as pd

from wb_core.analysis.pick import pickable
from wb_core.analysis.recommend import NoRunMeetsConstraints

LIMITS = {"max_ttft_ms": ("ttft_p99_ms", "p99 time to first token"), "max_tpot_ms": ("tpot_p99_ms", "p99 time per output token"),
          "max_latency_ms": ("e2e_p99_ms", "p99 request latency")}


def recommend_generation(df: pd.DataFrame, *, max_ttft_ms: float | None = None, max_tpot_ms: float | None = None,
                         max_latency_ms: float | None = None) -> dict:
    """The run with the most output tokens/s within the limits: {"best", "text", "notes", "runners_up"}."""
    ok = df[df["status"] == "ok"] if df is not None and not df.empty else pd.DataFrame()
    if ok.empty:
        raise NoRunMeetsConstraints("The study has no successful text-generation runs.")
    ok, notes = pickable(ok)
    if ok.empty:
        raise NoRunMeetsConstraints(" ".join(notes) + " No other run succeeded.")
    limits = {"max_ttft_ms": max_ttft_ms, "max_tpot_ms": max_tpot_ms, "max_latency_ms": max_latency_ms}
    within = ok
    for name, limit in limits.items():
        if limit is not None:
            col, words = LIMITS[name]
            within = within[pd.to_numeric(within[col], errors="coerce") <= float(limit)]
            if within.empty:
                best = pd.to_numeric(ok[col], errors="coerce").min()
                raise NoRunMeetsConstraints(f"No run keeps the {words} within {limit:g} ms (the lowest is {best:.3g} ms).")
    ranked = within.sort_values("output_tokens_per_s", ascending=False)
    best = ranked.iloc[0]
    text = (f"{best['variant']} weights, {best.get('inference_precision')} activations, KV cache "
            f"{best.get('kv_cache_precision') or 'default'}, {int(best['concurrency'])} request(s) in flight: "
            f"{best['output_tokens_per_s']:,.0f} output tokens/s, p99 TTFT {best['ttft_p99_ms']:.3g} ms, "
            f"p99 TPOT {best['tpot_p99_ms']:.3g} ms.")
    return {"best": best.to_dict(), "text": text, "notes": notes, "runners_up": ranked.iloc[1:4].to_dict("records")}
