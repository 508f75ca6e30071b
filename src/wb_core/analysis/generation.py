"""Recommending a generation study's run under time-to-first-token, time-per-token and latency limits.

The runs a pick may choose from are those `pick.pickable` keeps (succeeded, not quality-failed:
a weight-compressed variant below the quality guard carries `accuracy_guard = "failed"`, the rule
every recommendation applies); among those within the limits, the most output tokens/s.
"""

from __future__ import annotations

import pandas as pd

from wb_core.analysis.pick import pickable
from wb_core.analysis.recommend import NoRunMeetsConstraints
from wb_core.naming import run_name

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
    text = (f"{run_name(best)}: {best['output_tokens_per_s']:,.0f} output tokens/s, p99 TTFT "
            f"{best['ttft_p99_ms']:.3g} ms, p99 TPOT {best['tpot_p99_ms']:.3g} ms.")
    return {"best": best.to_dict(), "text": text, "notes": notes, "runners_up": ranked.iloc[1:4].to_dict("records")}


def is_generation_study(df: pd.DataFrame | None, record: dict | None = None) -> bool:
    """Whether a study measured text generation: its record says so, or its rows do."""
    spec = (record or {}).get("spec") or {}
    if isinstance(spec, dict) and spec.get("kind") == "generation":
        return True
    return df is not None and "study_kind" in df.columns and bool((df["study_kind"] == "generation").any())


def generation_run(df: pd.DataFrame, key: str) -> dict:
    """Run `key` (or a unique prefix) of a generation study, to export; a quality-failed run is refused,
    as a recommendation leaves it out."""
    from wb_core.errors import ConfigError
    from wb_core.variants.guard import guard_failed_runs

    ok = df[df["status"] == "ok"] if df is not None and not df.empty else pd.DataFrame()
    found = ok[ok["key"].astype(str).str.startswith(str(key))] if not ok.empty else ok
    if len(found) != 1:
        raise ConfigError(f"Run '{key}' names {'no' if found.empty else 'more than one'} successful run of the study; "
                          "the study's results list every run's key.")
    if bool(guard_failed_runs(found).iloc[0]):
        raise ConfigError(f"Run '{found.iloc[0]['key']}' failed the quality guard against the uncompressed model "
                          "and is not exported; choose another run, or the recommended one.")
    return found.iloc[0].to_dict()
